// A failed init of the process's NetRuntime (proxy/runtime/net_runtime.h) undoes what
// it started: after Open fails, at whichever stage, no thread of ours runs (counted in
// /proc/self/task), no descriptor is left open (/proc/self/fd), finalize of the NULL
// context NCCL then passes is a no-op, 20 failed init/finalize cycles leave nothing
// behind, and a later init with a good setting succeeds. Each TEST runs in a process
// of its own (gtest_discover_tests), so each reads its own configuration.
//   - Discover fails: a RAILYARD_CLUSTER_KEY_FILE that does not exist (written later);
//   - StartThreads fails after the FabricRuntime's CommWorkers started (loopback, TCP;
//     the stage forced by FailStartThreadsAfterForTesting, as a real failure would);
//   - fabric mode (RAILYARD_FABRIC=on, RAILYARD_COMMS=fabric) on a lone rail in a
//     network namespace of the test's own (root only; skipped otherwise): the cabling
//     agent, relay and fabric relay run and init fails at the forced stage after
//     StartFabric; with no fault, init succeeds with no neighbour (its Worker on the
//     host-local rail: a listen succeeds) and finalize stops every thread.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "proxy/runtime/net_runtime.h"
#include "proxy/runtime/net_state.h"

namespace railyard::runtime {
namespace {

/// Entries of a /proc/self directory (threads or descriptors), '.' and '..' left out.
int CountEntries(const char* dir) {
  DIR* d = ::opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - (std::string(dir) == "/proc/self/fd" ? 1 : 0);  // the DIR's own descriptor
}
int Threads() { return CountEntries("/proc/self/task"); }
/// Threads(), read until it equals `want` or 2 s pass: a joined thread leaves
/// /proc/self/task a moment after its joiner wakes, which a loaded CI host showed
/// ("cycle 10", 2 against 1). A thread still running is still counted at the end.
int ThreadsSettled(int want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int n = Threads();
  while (n != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    n = Threads();
  }
  return n;
}
int Fds() { return CountEntries("/proc/self/fd"); }

/// What NCCL does after a failed init: finalize of the NULL context init left.
void FinalizeAfterFailedInit(NetRuntime& rt) {
  EXPECT_FALSE(rt.Close(nullptr)) << "nothing to close after a failed init";
  EXPECT_FALSE(rt.Running());
  int ndev = -1;
  EXPECT_EQ(rt.DeviceCount(&ndev).code(), Code::kInvalidUsage) << "devices() after a failed init";
}

void UseLoopbackTcp() {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "off", 1);
}

TEST(NetRuntimeInitFail, DiscoverFailureLeavesNothingAndALaterInitSucceeds) {
  UseLoopbackTcp();
  const std::string key = "/tmp/railyard-initfail-key-" + std::to_string(::getpid());
  ::unlink(key.c_str());
  ::setenv("RAILYARD_CLUSTER_KEY_FILE", key.c_str(), 1);
  NetRuntime& rt = NetRuntime::Process();
  const int threads = Threads(), fds = Fds();
  for (int i = 0; i < 20; ++i) {
    CommContext* c = nullptr;
    Status s = rt.Open(1, -1, &c);
    ASSERT_FALSE(s.ok()) << "cycle " << i;
    EXPECT_NE(s.message().find(key), std::string::npos) << "the error names the key file: " << s.message();
    FinalizeAfterFailedInit(rt);
    EXPECT_EQ(ThreadsSettled(threads), threads) << "cycle " << i;
    EXPECT_EQ(Fds(), fds) << "cycle " << i;
  }
  // The good setting: the key written (owner-only), the same process inits.
  const int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const std::string secret = "0123456789abcdef0123456789abcdef0123456789abcdef\n";
  ASSERT_EQ(::write(fd, secret.data(), secret.size()), static_cast<ssize_t>(secret.size()));
  ::close(fd);
  CommContext* c = nullptr;
  Status s = rt.Open(1, -1, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  int ndev = 0;
  ASSERT_TRUE(rt.DeviceCount(&ndev).ok());
  EXPECT_EQ(ndev, 1) << "one loopback device, discovered once";
  EXPECT_GT(Threads(), threads) << "the CommWorker runs while a context is open";
  EXPECT_TRUE(rt.Close(c));
  EXPECT_EQ(ThreadsSettled(threads), threads) << "the last finalize stops every thread";
  ::unlink(key.c_str());
}

TEST(NetRuntimeInitFail, StartThreadsFailureStopsTheCommWorkersAndALaterInitSucceeds) {
  UseLoopbackTcp();
  NetRuntime& rt = NetRuntime::Process();
  const int threads = Threads();
  detail::FailStartThreadsAfterForTesting(detail::StartStage::kFabricRuntime);
  CommContext* c = nullptr;
  Status s = rt.Open(1, -1, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("start stage 2"), std::string::npos) << s.message();
  EXPECT_EQ(c, nullptr);
  FinalizeAfterFailedInit(rt);
  EXPECT_EQ(ThreadsSettled(threads), threads) << "the CommWorkers started, then stopped and joined";
  // The devices and the FabricRuntime stay for the process (as across finalize and
  // init): descriptors counted from here.
  const int fds = Fds();
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(rt.Open(1, -1, &c).ok()) << "cycle " << i;
    FinalizeAfterFailedInit(rt);
    EXPECT_EQ(ThreadsSettled(threads), threads) << "cycle " << i;
    EXPECT_EQ(Fds(), fds) << "cycle " << i;
  }
  detail::FailStartThreadsAfterForTesting(detail::StartStage::kNone);
  s = rt.Open(1, -1, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(rt.Running());
  EXPECT_GT(Threads(), threads);
  EXPECT_TRUE(rt.Close(c));
  EXPECT_EQ(ThreadsSettled(threads), threads);
  EXPECT_EQ(Fds(), fds);
}

/// Puts the calling thread (and every thread and child it starts) in a network
/// namespace of its own with one rail `ry0` (10.231.0.1/24, no default route): a veth
/// whose other end ry1 has no address and no agent, so no neighbour ever answers.
/// False (the test skips) without root, veth or the `ip` tool.
bool OwnNamespaceWithALoneRail() {
  if (::geteuid() != 0 || ::unshare(CLONE_NEWNET) != 0) return false;
  return std::system("ip link set lo up && ip link add ry0 type veth peer name ry1 && ip link set ry1 up && "
                     "ip addr add 10.231.0.1/24 dev ry0 && ip link set ry0 up") == 0;
}

void UseFabricModeOnTheDummyRail() {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=ry0", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "on", 1);
  ::setenv("RAILYARD_COMMS", "fabric", 1);
  ::setenv("RAILYARD_TIMEOUT_MS", "100", 1);  // the wait for a first neighbour
  ::setenv("RAILYARD_DISCOVERY_INTERVAL_MS", "10", 1);
  ::setenv("RAILYARD_DISCOVERY_DEAD_MS", "30", 1);
}

TEST(NetRuntimeInitFail, FabricModeWithNoNeighbourStartsOnItsHostLocalRail) {
  if (!OwnNamespaceWithALoneRail()) GTEST_SKIP() << "needs root and ip(8) for a namespace with a lone rail";
  UseFabricModeOnTheDummyRail();
  NetRuntime& rt = NetRuntime::Process();
  const int threads = Threads();
  CommContext* c = nullptr;
  Status s = rt.Open(1, -1, &c);
  ASSERT_TRUE(s.ok()) << "a host with no neighbour yet still starts (a one-rank job needs none): " << s.message();
  int ndev = 0;
  ASSERT_TRUE(rt.DeviceCount(&ndev).ok());
  EXPECT_EQ(ndev, 1);
  // Its Worker listens on the host-local rail: a listen succeeds at once.
  std::array<char, 128> handle{};
  proxy::ListenComm* listen = nullptr;
  s = rt.Listen(c, 0, handle.data(), &listen);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_NE(listen, nullptr);
  EXPECT_TRUE(rt.CloseListen(listen).ok());
  EXPECT_TRUE(rt.Close(c));
  EXPECT_EQ(ThreadsSettled(threads), threads) << "cabling agent, relay, fabric relay, CommWorker: stopped and joined";
  const int fds = Fds();  // the FabricRuntime over the CableSetDomain stays for the process
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(rt.Open(1, -1, &c).ok()) << "cycle " << i;
    EXPECT_TRUE(rt.Close(c));
    EXPECT_EQ(ThreadsSettled(threads), threads) << "cycle " << i;
    EXPECT_EQ(Fds(), fds) << "cycle " << i;
  }
}

TEST(NetRuntimeInitFail, FabricModeFailureAfterStartFabricStopsTheAgentAndTheRelays) {
  if (!OwnNamespaceWithALoneRail()) GTEST_SKIP() << "needs root and ip(8) for a namespace with a lone rail";
  UseFabricModeOnTheDummyRail();
  NetRuntime& rt = NetRuntime::Process();
  const int threads = Threads(), fds = Fds();
  detail::FailStartThreadsAfterForTesting(detail::StartStage::kFabric);
  for (int i = 0; i < 20; ++i) {
    CommContext* c = nullptr;
    Status s = rt.Open(1, -1, &c);
    ASSERT_FALSE(s.ok()) << "cycle " << i;
    EXPECT_NE(s.message().find("start stage 3"), std::string::npos) << s.message();
    FinalizeAfterFailedInit(rt);
    EXPECT_EQ(ThreadsSettled(threads), threads) << "cycle " << i;
    EXPECT_EQ(Fds(), fds) << "cycle " << i << ": nothing of fabric mode is kept before its comms start";
  }
  detail::FailStartThreadsAfterForTesting(detail::StartStage::kNone);
}

}  // namespace
}  // namespace railyard::runtime
