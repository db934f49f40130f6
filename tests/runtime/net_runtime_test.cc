// runtime::NetRuntime (proxy/runtime/net_runtime.h) without the NCCL ABI: the one
// transport choice (UsesFabricComms) over hand-made states, and the process's runtime
// over loopback (RAILYARD_SOCKET_IFNAME==lo, TCP, fabric mode off): contexts per
// communicator, the device list, refusals with named errors, and each communicator's
// rank learned from its own comms' sends (two communicators in one process).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "proxy/handle.h"
#include "proxy/nccl/nccl_records.h"
#include "proxy/runtime/net_runtime.h"
#include "proxy/runtime/comms_choice.h"
#include "proxy/runtime/net_state.h"
#include "tests/runtime/net_runtime_pairs.h"
#include "tests/unit/log_capture.h"

namespace railyard::runtime {
namespace {

topology::NetDevice DeviceOfFamily(int family) {
  topology::NetDevice d;
  d.name = family == AF_INET ? "eth0" : "eth6";
  d.addr.ss_family = static_cast<sa_family_t>(family);
  return d;
}

TEST(NetRuntimeTransport, FabricCommsServePlainTcpOnIpv4DevicesOnly) {
  env::Config cfg;
  cfg.comms = "auto";
  NetState g;
  g.config = &cfg;
  EXPECT_FALSE(detail::UsesFabricComms(g)) << "no device";
  g.devices = {DeviceOfFamily(AF_INET), DeviceOfFamily(AF_INET)};
  EXPECT_TRUE(detail::UsesFabricComms(g));
  g.devices.push_back(DeviceOfFamily(AF_INET6));
  EXPECT_FALSE(detail::UsesFabricComms(g)) << "the fabric's TCP transport binds IPv4 rails";
  g.devices.pop_back();
  cfg.comms = "legacy";
  EXPECT_FALSE(detail::UsesFabricComms(g));
}

// The rule itself, over every combination that matters (railyard-info shares it): the
// RDMA branch of fabric mode keeps the older comms unless RAILYARD_COMMS=fabric.
TEST(NetRuntimeTransport, TheCommsRuleOverItsFacts) {
  CommsFacts f;
  f.fabricMode = true;
  f.rdma = true;
  EXPECT_FALSE(ChoosesFabricComms(f)) << "fabric mode with RDMA ports, auto: the older comms";
  f.comms = "fabric";
  EXPECT_TRUE(ChoosesFabricComms(f)) << "fabric mode with RDMA ports, fabric";
  f.comms = "legacy";
  EXPECT_FALSE(ChoosesFabricComms(f));
  f = CommsFacts{};
  f.fabricMode = true;
  EXPECT_TRUE(ChoosesFabricComms(f)) << "fabric mode over TCP rails, auto";
  f = CommsFacts{};
  f.verbsMode = true;
  f.rdma = true;
  EXPECT_TRUE(ChoosesFabricComms(f)) << "verbs mode, auto";
  f = CommsFacts{};
  EXPECT_FALSE(ChoosesFabricComms(f)) << "plain TCP mode, no IPv4-only device list";
  f.ipv4Devices = true;
  EXPECT_TRUE(ChoosesFabricComms(f)) << "plain TCP mode on IPv4 devices";
  f.comms = "legacy";
  EXPECT_FALSE(ChoosesFabricComms(f));
}

// The reason init logs and railyard-info prints follows the same facts, and an
// explicit RAILYARD_COMMS=fabric the rule cannot honour is told apart (new-user trial:
// it ran the older comms on an IPv6 device without a word).
TEST(NetRuntimeTransport, TheCommsReasonNamesWhatDecided) {
  CommsFacts f;
  f.fabricMode = true;
  f.rdma = true;
  EXPECT_NE(CommsChoiceReason(f).find("auto keeps the older comms"), std::string::npos) << CommsChoiceReason(f);
  f.rdma = false;
  EXPECT_EQ(CommsChoiceReason(f), "fabric mode over TCP rails");
  f.comms = "legacy";
  EXPECT_EQ(CommsChoiceReason(f), "RAILYARD_COMMS=legacy");
  f = CommsFacts{};
  f.comms = "fabric";
  EXPECT_TRUE(FabricCommsRefused(f)) << "plain TCP, a device that is not IPv4";
  EXPECT_NE(CommsChoiceReason(f).find("not IPv4"), std::string::npos) << CommsChoiceReason(f);
  f.ipv4Devices = true;
  EXPECT_FALSE(FabricCommsRefused(f));
  EXPECT_EQ(CommsChoiceReason(f), "plain TCP over IPv4 devices");
  f.comms = "auto";
  f.ipv4Devices = false;
  EXPECT_FALSE(FabricCommsRefused(f)) << "auto asked for nothing";
}

TEST(NetRuntimeTransport, InitLogsTheCommsAndWarnsWhenFabricIsRefused) {
  env::Config cfg;
  cfg.comms = "fabric";
  NetState g;
  g.config = &cfg;
  g.devices = {DeviceOfFamily(AF_INET), DeviceOfFamily(AF_INET6)};
  test_support::LogCapture logs;
  EXPECT_FALSE(detail::UsesFabricComms(g)) << "the fabric's TCP transport binds IPv4 only";
  const auto warns = logs.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_NE(warns[0].find("RAILYARD_COMMS=fabric is not honoured: plain TCP with a device that is not IPv4"),
            std::string::npos)
      << warns[0];
  const auto infos = logs.At(log::Level::kInfo);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_NE(infos[0].find("Railyard NCCL comms: the older per-transport comms"), std::string::npos) << infos[0];
}

// Verbs mode and fabric mode over TCP rails take the fabric comms unless
// RAILYARD_COMMS=legacy (fabric mode with RDMA ports keeps the older comms unless
// RAILYARD_COMMS=fabric: not checked here, a host has no RDMA port to open).
TEST(NetRuntimeTransport, VerbsModeAndFabricModeOverTcpTakeTheFabricCommsUnlessLegacy) {
  env::Config cfg;
  cfg.comms = "auto";
  NetState g;
  g.config = &cfg;
  g.devices = {DeviceOfFamily(AF_INET)};
  g.verbsMode = true;
  EXPECT_TRUE(detail::UsesFabricComms(g)) << "verbs mode, RAILYARD_COMMS=auto";
  cfg.comms = "legacy";
  EXPECT_FALSE(detail::UsesFabricComms(g));
  cfg.comms = "fabric";
  EXPECT_TRUE(detail::UsesFabricComms(g));
  g.verbsMode = false;
  g.fabricMode = true;
  EXPECT_TRUE(detail::UsesFabricComms(g)) << "fabric mode over TCP rails with RAILYARD_COMMS=fabric";
  cfg.comms = "auto";
  EXPECT_TRUE(detail::UsesFabricComms(g)) << "fabric mode over TCP rails, RAILYARD_COMMS=auto: the fabric comms";
  cfg.comms = "legacy";
  EXPECT_FALSE(detail::UsesFabricComms(g)) << "fabric mode, RAILYARD_COMMS=legacy: the older comms";
}

TEST(NetRuntimeTransport, DeviceCountFollowsTheMode) {
  NetState g;
  g.devices = {DeviceOfFamily(AF_INET), DeviceOfFamily(AF_INET), DeviceOfFamily(AF_INET)};
  EXPECT_EQ(detail::DeviceCount(g), 3);
  g.fabricMode = true;
  EXPECT_EQ(detail::DeviceCount(g), 1) << "fabric mode: one device over every rail";
  g.verbsMode = true;
  g.verbsDevs.push_back({{0}, "mlx5_0"});
  g.verbsDevs.push_back({{1}, "mlx5_1"});
  EXPECT_EQ(detail::DeviceCount(g), 2) << "verbs mode: one device per RDMA port (or fused set)";
}

TEST(NetRuntimeFabricMode, ANoRouteConnectIsRetriedUntilTheTimeoutAndThenNamesTheWait) {
  env::Config cfg;
  cfg.timeoutMs = 60000;
  NetState g;
  g.config = &cfg;
  alignas(8) unsigned char handle[128] = {};
  Status other = InvalidArgument("handle of another plugin");
  EXPECT_FALSE(detail::FabricModeRouteMayCome(g, handle, other)) << "only a missing route is retried";
  Status noRoute = InvalidUsage("host 0x2 is not reachable from 0x1");
  EXPECT_TRUE(detail::FabricModeRouteMayCome(g, handle, noRoute)) << "the cabling graph may still converge";
  auto* wire = reinterpret_cast<proxy::nccl::FabricHandleWire*>(handle);
  EXPECT_EQ(wire->stageMagic, proxy::kStageMagic) << "the first try is stamped in the handle";
  wire->stageState -= 120000;  // the first try was two minutes ago
  EXPECT_FALSE(detail::FabricModeRouteMayCome(g, handle, noRoute));
  EXPECT_EQ(noRoute.code(), Code::kInvalidUsage);
  EXPECT_NE(noRoute.message().find("no route after 12"), std::string::npos) << noRoute.message();
  EXPECT_NE(noRoute.message().find("not cabled to this host"), std::string::npos) << noRoute.message();
}

TEST(NetRuntimeDevices, OlderCommsNameTheInterfaceOrTheFabricDevice) {
  env::Config cfg;
  cfg.nsocks = 3;
  cfg.timeoutMs = 1234;
  NetState g;
  g.config = &cfg;
  g.devices = {DeviceOfFamily(AF_INET), DeviceOfFamily(AF_INET6)};
  proxy::TcpOptions o = detail::OptionsFor(g, 1);
  EXPECT_EQ(o.device, "eth6");
  EXPECT_EQ(o.nsocks, 3);
  EXPECT_EQ(o.timeoutMs, 1234);
  g.fabricMode = true;
  g.fabricName = "railyard[p0r0+p0r1]";
  EXPECT_EQ(detail::OptionsFor(g, 0).device, "railyard[p0r0+p0r1]");
}

TEST(NetRuntimeProcess, ContextsDevicesRefusalsAndTheRankOfEachCommunicator) {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "off", 1);
  NetRuntime& rt = NetRuntime::Process();
  int ndev = -1;
  EXPECT_EQ(rt.DeviceCount(&ndev).code(), Code::kInvalidUsage) << "before any Open";
  EXPECT_FALSE(rt.Running());

  CommContext *a = nullptr, *b = nullptr;
  ASSERT_TRUE(rt.Open(1, -1, &a).ok());
  ASSERT_TRUE(rt.Open(2, 5, &b).ok());
  ASSERT_NE(a, b);
  EXPECT_EQ(b->commId, 2u);
  EXPECT_EQ(b->trafficClass, 5);
  EXPECT_NE(a->rank.get(), b->rank.get()) << "each communicator has its own rank";
  EXPECT_TRUE(rt.Running());
  EXPECT_TRUE(rt.UsesFabricComms()) << "plain TCP on an IPv4 device";

  ASSERT_TRUE(rt.DeviceCount(&ndev).ok());
  ASSERT_EQ(ndev, 1);
  DeviceInfo d;
  ASSERT_TRUE(rt.Device(0, &d).ok());
  EXPECT_STREQ(d.name, "lo");
  EXPECT_FALSE(d.routes.everyRouteRdma) << "TCP routes cannot read device memory";
  EXPECT_TRUE(d.fusedFrom.empty());
  Status s = rt.Device(1, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("device 1 does not exist (1 devices)"), std::string::npos) << s.message();
  const int devs[2] = {0, 0};
  int vdev = -1;
  s = rt.AddVirtualDevice(2, devs, &vdev);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("not supported by the TCP transport"), std::string::npos) << s.message();
  int bogus = 0;
  EXPECT_EQ(rt.Deregister(&bogus).code(), Code::kInvalidArgument);
  EXPECT_EQ(rt.CloseComm(reinterpret_cast<proxy::Comm*>(&bogus)).code(), Code::kInvalidArgument);

  // Two communicators in one process: each learns its rank from its own sends.
  proxy::ListenComm *la = nullptr, *lb = nullptr;
  proxy::SendComm *sa = nullptr, *sb = nullptr;
  proxy::RecvComm *ra = nullptr, *rb = nullptr;
  Pair(a, &la, &sa, &ra);
  Pair(b, &lb, &sb, &rb);
  SendOnce(sa, ra, 3);
  SendOnce(sb, rb, 7);
  EXPECT_EQ(a->rank->Get(), 3);
  EXPECT_EQ(b->rank->Get(), 7);
  EXPECT_TRUE(rt.CloseComm(sa).ok());
  EXPECT_EQ(rt.CloseComm(sa).code(), Code::kInvalidArgument) << "closed twice";
  EXPECT_TRUE(rt.CloseComm(ra).ok());
  EXPECT_TRUE(rt.CloseListen(la).ok());
  // b's comms stay open: the last Close closes them.

  EXPECT_FALSE(rt.Close(nullptr));
  EXPECT_TRUE(rt.Close(a));
  EXPECT_FALSE(rt.Close(a)) << "closed twice";
  EXPECT_TRUE(rt.Running());
  EXPECT_TRUE(rt.Close(b));
  EXPECT_FALSE(rt.Running());
  EXPECT_EQ(rt.DeviceCount(&ndev).code(), Code::kInvalidUsage) << "after the last Close";
  EXPECT_EQ(rt.CloseListen(lb).code(), Code::kInvalidArgument) << "the last Close closed it";
}

}  // namespace
}  // namespace railyard::runtime
