// The plugin's FabricRuntime in verbs mode, in the soft-RoCE lane: one verbs Domain
// per NCCL device over exactly that device's ports (a fused device = several rails,
// striped), CommWorkers that start only in Start(), and a device added by
// makeVDevice while the runtime runs (its CommWorker starts at once); every Domain on
// the ports the runtime opened once (one ibv context per port, shared).
// Exits 77 outside the lane (RXE_LANE_DEVS_H0 unset).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/runtime/fabric_runtime.h"
#include "proxy/verbs/ib_ports.h"

namespace railyard::runtime {
namespace {

/// Host h0's rxe devices as "device:1" port names (RXE_LANE_DEVS_H0, e.g. "rxe_h0r0 rxe_h0r1").
std::vector<std::string> HostPorts() {
  std::vector<std::string> ports;
  std::istringstream in(std::getenv("RXE_LANE_DEVS_H0"));
  for (std::string d; in >> d;) ports.push_back(d + ":1");
  return ports;
}

const env::Config& Config() {
  const env::Config* cfg = nullptr;
  Status s = env::Load(&cfg);
  EXPECT_TRUE(s.ok()) << s.message();
  return *cfg;
}

TEST(VerbsFabricRuntime, EachDeviceGetsADomainOverExactlyItsPorts) {
  const std::vector<std::string> ports = HostPorts();
  ASSERT_GE(ports.size(), 2u) << "the lane's host h0 needs two rails (topology 2x2)";
  std::unique_ptr<FabricRuntime> rt;
  Status s = FabricRuntime::CreateVerbs(Config(), {{"one", {ports[0]}}, {"fused", {ports[0], ports[1]}}}, "127.0.0.1",
                                        &rt);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(rt->devices(), 2u);
  EXPECT_STREQ(rt->domain(0).TransportName(), "verbs");
  ASSERT_EQ(rt->domain(0).rails().size(), 1u);
  EXPECT_EQ(rt->domain(0).rails()[0].device, ports[0]);
  ASSERT_EQ(rt->domain(1).rails().size(), 2u);
  EXPECT_EQ(rt->domain(1).rails()[0].device, ports[0]);
  EXPECT_EQ(rt->domain(1).rails()[1].device, ports[1]);
  EXPECT_FALSE(rt->domain(0).capabilities().Has(fabric::kCapStriping));
  EXPECT_TRUE(rt->domain(1).capabilities().Has(fabric::kCapStriping));
  // Issue 10: discovered and opened once; both Domains on the same opened ports.
  auto& d0 = static_cast<fabric::verbs::VerbsDomain&>(rt->domain(0));
  auto& d1 = static_cast<fabric::verbs::VerbsDomain&>(rt->domain(1));
  ASSERT_NE(rt->verbsPorts(), nullptr);
  EXPECT_EQ(&d0.ports(), rt->verbsPorts().get());
  EXPECT_EQ(&d1.ports(), &d0.ports());
  EXPECT_EQ(d0.RailPort(0).ctx, d1.RailPort(0).ctx) << "port " << ports[0] << " opened twice";
  EXPECT_EQ(d1.RailPort(1).Name(), ports[1]);
  // No thread before Start.
  EXPECT_FALSE(rt->comms(0).running());
  EXPECT_FALSE(rt->comms(1).running());
  ASSERT_TRUE(rt->Start().ok());
  EXPECT_TRUE(rt->comms(0).running());
  EXPECT_TRUE(rt->comms(1).running());
  // makeVDevice while running: the new device's CommWorker runs at once.
  size_t index = 0;
  s = rt->AddVerbsDevice({"second", {ports[1]}}, &index);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(index, 2u);
  EXPECT_EQ(rt->devices(), 3u);
  EXPECT_EQ(rt->domain(2).rails()[0].device, ports[1]);
  EXPECT_EQ(static_cast<fabric::verbs::VerbsDomain&>(rt->domain(2)).RailPort(0).ctx, d1.RailPort(1).ctx);
  EXPECT_TRUE(rt->comms(2).running());
  // A registration through a device's cache is one MR per rail of that device only.
  std::vector<char> buf(1 << 16);
  const fabric::Region* r = nullptr;
  ASSERT_TRUE(rt->registrations(1).Acquire(buf.data(), buf.size(), fabric::kAccessLocal | fabric::kAccessRemoteWrite,
                                           fabric::MemoryKind::kHost, &r).ok());
  EXPECT_EQ(r->railRkeys.size(), 2u);
  EXPECT_TRUE(rt->registrations(1).Release(r).ok());
  rt->Stop();
  for (size_t i = 0; i < rt->devices(); ++i) EXPECT_FALSE(rt->comms(i).running()) << i;
}

TEST(VerbsFabricRuntime, APortThatIsNotThereFailsNamingTheDevice) {
  std::unique_ptr<FabricRuntime> rt;
  Status s = FabricRuntime::CreateVerbs(Config(), {{"ghost", {"rxe_nonexistent:1"}}}, "127.0.0.1", &rt);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("verbs device ghost"), std::string::npos) << s.message();
  EXPECT_EQ(rt, nullptr);
}

}  // namespace
}  // namespace railyard::runtime

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (std::getenv("RXE_LANE_DEVS_H0") == nullptr) {
    std::fprintf(stderr, "verbs_fabric_runtime_test: no soft-RoCE lane here (RXE_LANE_DEVS_H0 unset); skipped "
                         "(run it in the lane: tests/lanes/run-verbs.sh BUILD_DIR)\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
