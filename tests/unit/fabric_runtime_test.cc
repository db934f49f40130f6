// FabricRuntime's argument checks on any host: a verbs device added to a TCP runtime,
// a verbs device without ports, and verbs devices on a host with no such RDMA port
// (every error names the device; nothing is kept). The verbs runtime itself runs in
// the soft-RoCE lane (tests/verbs/verbs_fabric_runtime_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "env/config.h"
#include "proxy/runtime/fabric_runtime.h"
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
