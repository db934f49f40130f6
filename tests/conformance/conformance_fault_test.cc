// Conformance: faults across processes — a comm closed with requests in flight,
// and a peer SIGKILLed mid-stream. The surviving side must see an error (not a
// hang) within RAILYARD_TIMEOUT_MS, its close calls must return, and the error
// text handed to NCCL's logger must name the peer.
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/harness.h"

namespace railyard::conformance {
namespace {

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;
constexpr size_t kMsg = 64u << 20;  // per message
constexpr int kMsgs = 4;            // 256 MiB in flight: far more than socket buffers hold
constexpr int kFaultTimeoutMs = 3000;

/// Tokens on the harness channels.
enum : uint64_t { kPosted = 1, kStarted = 2, kClosed = 3 };

std::string HostName() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

/// True when `text` contains "pid <pid>" with <pid> as a whole number.
bool NamesPid(const std::string& text, pid_t pid) {
  const std::string needle = "pid " + std::to_string(pid);
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == text.size() || text[end] < '0' || text[end] > '9') return true;
  }
  return false;
}

/// Rank 1 listens, rank 0 connects: rank 0 sends, rank 1 receives.
void ConnectOneWay(Rank& r, Net& net, void** send, void** recv) {
  char handle[kHandle] = {};
  if (r.rank() == 1) {
    void* listen = nullptr;
    ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess);
    ASSERT_TRUE(r.Send(0, handle, kHandle));
    ASSERT_EQ(net.ConnectAccept(0, nullptr, nullptr, listen, recv, r.deadline()), ncclSuccess)
        << CapturedWarnings();
    EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
  } else {
    ASSERT_TRUE(r.Recv(1, handle, kHandle));
    ASSERT_EQ(net.ConnectAccept(0, handle, send, nullptr, nullptr, r.deadline()), ncclSuccess)
        << CapturedWarnings();
  }
}

/// The receiving side of a stream: kMsgs receives of kMsg bytes posted at once.
/// Deregisters its buffer before unmapping it, as NCCL does (a registration outlives
/// the comm it was made on: bytes of the closed comm's sender may still be landing).
struct Receiver {
  Buffer dst{kMsg * kMsgs};
  void* mh = nullptr;
  Net* net = nullptr;
  std::vector<void*> reqs;

  ~Receiver() {
    if (net != nullptr && mh != nullptr) {
      EXPECT_EQ(net->DeregMr(nullptr, mh), ncclSuccess);
    }
  }

  void Post(Net& n, void* recv) {
    net = &n;
    ASSERT_EQ(n.RegMr(recv, dst.data(), dst.size(), &mh), ncclSuccess);
    for (int k = 0; k < kMsgs; ++k) {
      void* data = dst.data() + kMsg * static_cast<size_t>(k);
      size_t cap = kMsg;
      int tag = 0;
      void* req = nullptr;
      ASSERT_EQ(n.Irecv(recv, 1, &data, &cap, &tag, &mh, &req), ncclSuccess);
      reqs.push_back(req);
    }
  }
};

/// The sending side: kMsgs sends of kMsg bytes issued back to back.
struct Sender {
  Buffer src{kMsg};
  void* mh = nullptr;
  std::vector<void*> reqs;

  void Start(Net& net, void* send, Clock::time_point deadline) {
    std::memset(src.data(), 0x3C, src.size());
    ASSERT_EQ(net.RegMr(send, src.data(), src.size(), &mh), ncclSuccess);
    for (int k = 0; k < kMsgs; ++k) {
      void* req = nullptr;
      ASSERT_EQ(net.PostSend(send, src.data(), kMsg, 0, mh, &req, deadline), ncclSuccess)
          << CapturedWarnings();
      reqs.push_back(req);
    }
  }
};

/// Tests `reqs` in order until one fails, all complete, or `bound` passes.
/// Returns the failing result, ncclSuccess if all completed, or kTimedOut.
ncclResult_t WaitForError(Net& net, const std::vector<void*>& reqs, Clock::time_point bound,
                          int* completed) {
  *completed = 0;
  for (void* req : reqs) {
    int size = -1;
    const ncclResult_t rc = net.Wait(req, &size, bound);
    if (rc != ncclSuccess) return rc;
    ++*completed;
  }
  return ncclSuccess;
}

/// Waits for `reqs` (bounded by RAILYARD_TIMEOUT_MS + 1 s) and checks that one
/// fails, promptly, with a fault class (system or remote error). `completedAnyway`
/// words the failure when every request completed although the peer was gone.
void ExpectPromptFault(Net& net, const std::vector<void*>& reqs, const std::string& completedAnyway) {
  const auto t0 = Clock::now();
  int completed = 0;
  const ncclResult_t rc = WaitForError(net, reqs, t0 + Ms(kFaultTimeoutMs + 1000), &completed);
  const auto took = std::chrono::duration_cast<Ms>(Clock::now() - t0).count();
  EXPECT_NE(rc, ncclSuccess) << completedAnyway;
  EXPECT_NE(rc, kTimedOut) << "test() gave no error within RAILYARD_TIMEOUT_MS + 1 s";
  EXPECT_TRUE(rc == ncclSystemError || rc == ncclRemoteError) << "rc " << rc;
  EXPECT_LE(took, kFaultTimeoutMs) << "error came after " << took << " ms";
}

// Proves that closing a recvComm with receives in flight, while the sender is
// mid-stream, makes the sender's test() fail with a system/remote error (not
// hang) within RAILYARD_TIMEOUT_MS, and that closeRecv and closeSend both return.
TEST(ConformanceFault, ReceiverClosesWithReceivesInFlight) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = kFaultTimeoutMs}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 1) {
      Receiver rx;
      rx.Post(net, recv);
      ASSERT_TRUE(r.SendU64(0, kPosted));
      ASSERT_TRUE(r.Expect(0, kStarted));
      r.Note("closing the recvComm with receives in flight");
      const auto t0 = Clock::now();
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
      EXPECT_LT(Clock::now() - t0, Ms(kFaultTimeoutMs)) << "closeRecv took long";
      ASSERT_TRUE(r.SendU64(0, kClosed));
      ASSERT_TRUE(r.Barrier());
    } else {
      ASSERT_TRUE(r.Expect(1, kPosted));
      Sender tx;
      tx.Start(net, send, r.deadline());
      ASSERT_TRUE(r.SendU64(1, kStarted));
      ASSERT_TRUE(r.Expect(1, kClosed));
      r.Note("testing sends after the receiver closed");
      ExpectPromptFault(net, tx.reqs, "all " + std::to_string(kMsgs) + " sends of " + std::to_string(kMsg) +
                                          " B completed although the receiver closed mid-stream");
      r.Note("closeSend after the error");
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that closing a sendComm with isends in flight makes the receiver's
// test() fail (not hang) within RAILYARD_TIMEOUT_MS, and that closeSend returns
// promptly while its helper threads are mid-write.
TEST(ConformanceFault, SenderClosesWithSendsInFlight) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = kFaultTimeoutMs}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 0) {
      ASSERT_TRUE(r.Expect(1, kPosted));
      Sender tx;
      tx.Start(net, send, r.deadline());
      r.Note("closing the sendComm with sends in flight");
      const auto t0 = Clock::now();
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
      EXPECT_LT(Clock::now() - t0, Ms(kFaultTimeoutMs)) << "closeSend took long";
      ASSERT_TRUE(r.SendU64(1, kClosed));
      ASSERT_TRUE(r.Barrier());
    } else {
      Receiver rx;
      rx.Post(net, recv);
      ASSERT_TRUE(r.SendU64(0, kPosted));
      ASSERT_TRUE(r.Expect(0, kClosed));
      r.Note("testing receives after the sender closed");
      const auto t0 = Clock::now();
      int completed = 0;
      const ncclResult_t rc =
          WaitForError(net, rx.reqs, t0 + Ms(kFaultTimeoutMs + 1000), &completed);
      const auto took = std::chrono::duration_cast<Ms>(Clock::now() - t0).count();
      EXPECT_NE(rc, ncclSuccess) << "all receives completed although the sender closed mid-stream";
      EXPECT_NE(rc, kTimedOut) << "test() gave no error within RAILYARD_TIMEOUT_MS + 1 s";
      EXPECT_TRUE(rc == ncclSystemError || rc == ncclRemoteError) << "rc " << rc;
      EXPECT_LE(took, kFaultTimeoutMs) << "error came after " << took << " ms";
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

/// Checks the logger got a WARN naming `peer` (its pid, and the host on the same line).
void ExpectWarningNamesPeer(pid_t peer, const char* role) {
  const std::string host = HostName();
  // The helper thread that hit the error may log it just after test() returned it.
  const std::string line = WaitForWarning([peer](const std::string& t) { return NamesPid(t, peer); },
                                          Clock::now() + Ms(1000));
  EXPECT_NE(line, "") << "no WARN handed to NCCL's logger names the dead " << role << " (pid "
                      << peer << ", host " << host << "); captured:\n"
                      << CapturedWarnings();
  if (!line.empty()) {
    EXPECT_NE(line.find(host), std::string::npos) << "the WARN names pid " << peer
                                                  << " but not host " << host << ": " << line;
  }
}

/// Waits until `req` completes (the stream is then demonstrably under way).
void WaitFirst(Rank& r, Net& net, void* req) {
  int size = -1;
  ASSERT_EQ(net.Wait(req, &size, r.deadline()), ncclSuccess) << CapturedWarnings();
  ASSERT_EQ(size, static_cast<int>(kMsg));
}

// Proves that when the receiving process is SIGKILLed during a 256 MiB stream
// (after its first 64 MiB message has arrived), the sender's test() returns an
// error within RAILYARD_TIMEOUT_MS, and that the error text the plugin hands to
// NCCL's logger names the dead peer by pid and host, so a user can tell which
// rank died. closeSend still returns.
TEST(ConformanceFault, ReceiverKilledMidStream) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = kFaultTimeoutMs}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 1) {
      Receiver rx;
      rx.Post(net, recv);
      ASSERT_TRUE(r.SendU64(0, kPosted));
      WaitFirst(r, net, rx.reqs[0]);
      ASSERT_TRUE(r.SendU64(0, kStarted));
      r.Note("receiving until killed");
      uint64_t never = 0;
      (void)r.RecvU64(0, &never);  // rank 0 has this rank killed while it waits here
      ADD_FAILURE() << "rank 1 outlived its SIGKILL";
    } else {
      ASSERT_TRUE(r.Expect(1, kPosted));
      Sender tx;
      tx.Start(net, send, r.deadline());
      ASSERT_TRUE(r.Expect(1, kStarted));
      ASSERT_TRUE(r.Kill(1));
      r.Note("testing sends after the receiver died");
      ExpectPromptFault(net, tx.reqs, "all sends completed although the receiver was killed");
      ExpectWarningNamesPeer(r.pid(1), "receiver");
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that when the sending process is SIGKILLed mid-stream (after the first
// 64 MiB of 256 MiB arrived), the receiver's test() returns an error within
// RAILYARD_TIMEOUT_MS and the logged error names the dead sender by pid and host.
// closeRecv still returns.
TEST(ConformanceFault, SenderKilledMidStream) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = kFaultTimeoutMs}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 0) {
      ASSERT_TRUE(r.Expect(1, kPosted));
      Sender tx;
      tx.Start(net, send, r.deadline());
      r.Note("sending until killed");
      uint64_t never = 0;
      (void)r.RecvU64(1, &never);  // rank 1 has this rank killed while it waits here
      ADD_FAILURE() << "rank 0 outlived its SIGKILL";
    } else {
      Receiver rx;
      rx.Post(net, recv);
      ASSERT_TRUE(r.SendU64(0, kPosted));
      WaitFirst(r, net, rx.reqs[0]);
      ASSERT_TRUE(r.Kill(0));
      r.Note("testing receives after the sender died");
      const std::vector<void*> rest(rx.reqs.begin() + 1, rx.reqs.end());
      ExpectPromptFault(net, rest, "all receives completed although the sender was killed");
      ExpectWarningNamesPeer(r.pid(0), "sender");
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that a sender SIGKILLed while the receiver has receives posted but no
// data is in flight (the peer crashed before sending) makes the receiver's test()
// fail within RAILYARD_TIMEOUT_MS, with a logged error naming the dead sender —
// NCCL only sees the result code, so the log line is the user's only clue.
TEST(ConformanceFault, SenderKilledBeforeSending) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = kFaultTimeoutMs}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 0) {
      ASSERT_TRUE(r.SendU64(1, kStarted));  // connected; never sends
      r.Note("idle until killed");
      uint64_t never = 0;
      (void)r.RecvU64(1, &never);
      ADD_FAILURE() << "rank 0 outlived its SIGKILL";
    } else {
      char dst[4096];
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(recv, dst, sizeof dst, &mh), ncclSuccess);
      void* data = dst;
      size_t cap = sizeof dst;
      int tag = 0;
      void* req = nullptr;
      ASSERT_EQ(net.Irecv(recv, 1, &data, &cap, &tag, &mh, &req), ncclSuccess);
      ASSERT_TRUE(r.Expect(0, kStarted));
      ASSERT_TRUE(r.Kill(0));
      r.Note("testing a posted receive after the sender died");
      ExpectPromptFault(net, {req}, "a receive completed from a dead sender");
      ExpectWarningNamesPeer(r.pid(0), "sender");
      EXPECT_EQ(net.DeregMr(recv, mh), ncclSuccess);
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

/// Threads of this process (/proc/self/task entries).
int ThreadCount() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

/// ThreadCount() once it is `want` or `withinMs` passed. A joined thread wakes its joiner
/// when it clears its tid (mm_release), before the kernel drops it from /proc/self/task
/// (release_task), so right after a join the old count can still show for a moment on a
/// loaded host (CI: "init 4 left threads running", 2 against 1). A thread still running
/// is still counted when the time is up.
int ThreadCountSettled(int want, int withinMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(withinMs);
  int n = ThreadCount();
  while (n != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    n = ThreadCount();
  }
  return n;
}

// Fabric mode (RAILYARD_FABRIC=on, RAILYARD_COMMS=fabric) on a host with no neighbour
// (a rank alone on a veth rail whose other end has no agent, in a network namespace
// of its own): init succeeds (after RAILYARD_DISCOVERY_DEAD_MS at most), the rank
// reaches itself over its host-local rail (listen, connect + accept, 64 KiB sent and
// checked byte for byte), and finalize stops every thread init started (cabling
// agent, relay, fabric relay, CommWorker): NCCL may dlclose the plugin after
// finalize, and a thread left running in the unmapped code crashes (SIGSEGV) at its
// next wake-up. Root only (the namespace).
TEST(ConformanceFault, FabricModeWithNoNeighbourReachesItselfAndLeavesNoThreadBeforeTheUnload) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace with a lone rail";
  if (TransportName() != "tcp") GTEST_SKIP() << "fabric mode over TCP rails";
  RunRanks({.nranks = 1, .timeout = Ms(60000), .pluginTimeoutMs = 3000}, [](Rank& r) {
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0);
    ASSERT_EQ(std::system("ip link set lo up && ip link add ry0 type veth peer name ry1 && ip link set ry1 up && "
                          "ip addr add 10.231.0.1/24 dev ry0 && ip link set ry0 up"),
              0);
    ::setenv("RAILYARD_SOCKET_IFNAME", "=ry0", 1);
    ::setenv("RAILYARD_FABRIC", "on", 1);
    ::setenv("RAILYARD_COMMS", "fabric", 1);
    ::setenv("RAILYARD_DISCOVERY_INTERVAL_MS", "10", 1);
    ::setenv("RAILYARD_DISCOVERY_DEAD_MS", "100", 1);
    const int threads = ThreadCount();
    Plugin p = OpenPlugin();
    ASSERT_NE(p.lib, nullptr);
    Net net(p, 11);
    constexpr size_t kBytes = 64 << 10;
    for (int i = 0; i < 3; ++i) {
      r.Note("init " + std::to_string(i));
      ASSERT_EQ(net.Init(), ncclSuccess) << "alone on its rail, init " << i << " still succeeds";
      int ndev = 0;
      EXPECT_EQ(net.Devices(&ndev), ncclSuccess);
      EXPECT_EQ(ndev, 1);
      char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
      void *listen = nullptr, *send = nullptr, *recv = nullptr;
      ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess) << "init " << i;
      const auto deadline = Clock::now() + Ms(20000);
      ASSERT_EQ(net.ConnectAccept(0, handle, &send, listen, &recv, deadline), ncclSuccess) << "init " << i;
      std::vector<uint8_t> out(kBytes), in(kBytes);
      FillPattern(out.data(), kBytes, 100 + i);
      void *smr = nullptr, *rmr = nullptr;
      ASSERT_EQ(net.RegMr(send, out.data(), kBytes, &smr), ncclSuccess);
      ASSERT_EQ(net.RegMr(recv, in.data(), kBytes, &rmr), ncclSuccess);
      void* data[1] = {in.data()};
      size_t sizes[1] = {kBytes};
      int tags[1] = {7};
      void* mhs[1] = {rmr};
      void *rreq = nullptr, *sreq = nullptr;
      ASSERT_EQ(net.Irecv(recv, 1, data, sizes, tags, mhs, &rreq), ncclSuccess);
      ASSERT_EQ(net.PostSend(send, out.data(), kBytes, 7, smr, &sreq, deadline), ncclSuccess);
      int got[1] = {-1};
      ASSERT_EQ(net.Wait(sreq, nullptr, deadline), ncclSuccess);
      ASSERT_EQ(net.Wait(rreq, got, deadline), ncclSuccess);
      EXPECT_EQ(got[0], static_cast<int>(kBytes));
      EXPECT_EQ(in, out) << "init " << i << ": the bytes over the host-local rail";
      EXPECT_EQ(net.DeregMr(send, smr), ncclSuccess);
      EXPECT_EQ(net.DeregMr(recv, rmr), ncclSuccess);
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
      EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
      EXPECT_EQ(net.Finalize(), ncclSuccess);
      EXPECT_EQ(ThreadCountSettled(threads, 2000), threads) << "init " << i << " left threads running";
    }
    r.Note("unloading the plugin");
    EXPECT_EQ(::dlclose(p.lib), 0);  // as NCCL does after finalize
    EXPECT_EQ(ThreadCountSettled(threads, 2000), threads);
  });
}

}  // namespace
}  // namespace railyard::conformance
