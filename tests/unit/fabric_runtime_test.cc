// FabricRuntime's argument checks on any host: a verbs device added to a TCP runtime,
// a verbs device without ports, and verbs devices on a host with no such RDMA port
// (every error names the device; nothing is kept); every verbs Domain is built on the
// ports the runtime was given (opened once per process, never per device), and
// CreateVerbsDomainOn refuses names outside them. The verbs runtime itself runs in
// the soft-RoCE lane (tests/verbs/verbs_fabric_runtime_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "env/config.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/runtime/fabric_runtime.h"
#include "proxy/verbs/ib_ports.h"
#include "topology/netdev.h"

namespace railyard::runtime {
namespace {

const env::Config& Config() {
  const env::Config* cfg = nullptr;
  Status s = env::Load(&cfg);
  EXPECT_TRUE(s.ok()) << s.message();
  return *cfg;
}

TEST(FabricRuntime, AVerbsDeviceCannotJoinATcpRuntime) {
  std::unique_ptr<FabricRuntime> rt;
  ASSERT_TRUE(FabricRuntime::Create(Config(), {}, &rt).ok());
  size_t index = 99;
  Status s = rt->AddVerbsDevice({"mlx5_0", {"mlx5_0:1"}}, &index);
  EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
  EXPECT_EQ(index, 99u);
  EXPECT_EQ(rt->devices(), 0u);
}

TEST(FabricRuntime, AVerbsDeviceWithoutPortsIsRefused) {
  std::unique_ptr<FabricRuntime> rt;
  Status s = FabricRuntime::CreateVerbs(Config(), {{"empty", {}}}, "", &rt);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s.message();
  EXPECT_EQ(rt, nullptr);
}

TEST(FabricRuntime, APortThisHostLacksFailsNamingTheDevice) {
  std::unique_ptr<FabricRuntime> rt;
  Status s = FabricRuntime::CreateVerbs(Config(), {{"ghost0", {"railyard_no_such_hca:1"}}}, "127.0.0.1", &rt);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("verbs device ghost0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("=railyard_no_such_hca:1"), std::string::npos) << s.message();
  EXPECT_EQ(rt, nullptr);
}

/// This host's RDMA ports as the plugin opens them (none on most CI hosts).
std::shared_ptr<proxy::verbs::IbPorts> OpenPorts() {
  std::unique_ptr<proxy::verbs::IbPorts> p;
  Status s = proxy::verbs::IbPorts::Open(Config(), &p, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::shared_ptr<proxy::verbs::IbPorts>(std::move(p));
}

// Issue 10: the Domains of every device are built on the ports the plugin opened
// once; a device whose port is not among them fails naming it, and the runtime does
// not open (rediscover) ports of its own.
TEST(FabricRuntime, VerbsDevicesAreBuiltOnTheGivenPortsNeverReopened) {
  std::shared_ptr<proxy::verbs::IbPorts> ports = OpenPorts();
  ASSERT_NE(ports, nullptr);
  std::unique_ptr<FabricRuntime> rt;
  ASSERT_TRUE(FabricRuntime::CreateVerbs(Config(), {}, "", &rt, ports).ok());
  EXPECT_EQ(rt->verbsPorts(), ports);
  size_t index = 99;
  Status s = rt->AddVerbsDevice({"ghost1", {"railyard_no_such_hca:1"}}, &index);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("verbs device ghost1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("railyard_no_such_hca:1 is not among this process's opened RDMA ports"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(index, 99u);
  EXPECT_EQ(rt->devices(), 0u);
  EXPECT_EQ(rt->verbsPorts(), ports) << "the runtime replaced the ports it was given";
}

TEST(FabricRuntime, AVerbsRuntimeWithoutPortsOpensThemOnceAtItsFirstDevice) {
  std::unique_ptr<FabricRuntime> rt;
  ASSERT_TRUE(FabricRuntime::CreateVerbs(Config(), {}, "", &rt).ok());
  EXPECT_EQ(rt->verbsPorts(), nullptr) << "nothing opened before a device needs it";
  size_t index = 0;
  EXPECT_FALSE(rt->AddVerbsDevice({"ghost2", {"railyard_no_such_hca:1"}}, &index).ok());
  std::shared_ptr<proxy::verbs::IbPorts> first = rt->verbsPorts();
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(rt->AddVerbsDevice({"ghost3", {"railyard_no_such_hca:2"}}, &index).ok());
  EXPECT_EQ(rt->verbsPorts(), first) << "the second device opened the ports again";
}

TEST(VerbsDomainOn, RefusesNoPortsNoNamesAndNamesNotOpened) {
  using fabric::verbs::CreateVerbsDomainOn;
  const fabric::verbs::VerbsOptions o = fabric::verbs::VerbsOptions::FromConfig(Config());
  std::unique_ptr<fabric::Domain> d;
  Status s = CreateVerbsDomainOn(o, nullptr, {"x:1"}, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  std::shared_ptr<proxy::verbs::IbPorts> ports = OpenPorts();
  s = CreateVerbsDomainOn(o, ports, {}, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("no ports"), std::string::npos) << s.message();
  s = CreateVerbsDomainOn(o, ports, {"railyard_no_such_hca:7"}, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("port railyard_no_such_hca:7"), std::string::npos) << s.message();
  std::vector<std::string> many(fabric::RemoteKey::kMaxRails + 1, "x:1");
  s = CreateVerbsDomainOn(o, ports, many, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  fabric::verbs::VerbsOptions bad = o;
  bad.timeoutMs = 0;
  s = CreateVerbsDomainOn(bad, ports, {"x:1"}, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_EQ(d, nullptr);
  if (ports->size() > 0) {
    const std::string name = ports->at(0).Name();
    s = CreateVerbsDomainOn(o, ports, {name, name}, &d);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
    EXPECT_NE(s.message().find("named twice"), std::string::npos) << s.message();
  }
}

TEST(FabricRuntime, AnEmptyVerbsRuntimeStartsAndStops) {
  std::unique_ptr<FabricRuntime> rt;
  ASSERT_TRUE(FabricRuntime::CreateVerbs(Config(), {}, "", &rt).ok());
  EXPECT_EQ(rt->devices(), 0u);
  EXPECT_TRUE(rt->Start().ok());
  rt->Stop();
  rt->Stop();  // idempotent
}

}  // namespace
}  // namespace railyard::runtime
