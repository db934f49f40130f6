// Security: the listener under strays, floods and half-open connections, driven
// through ncclNetPlugin_v11 (dlopen) as NCCL does. A stray must never make
// accept() fail (NCCL treats that as fatal); idle sockets and half-open
// connections are closed on RAILYARD_ACCEPT_TIMEOUT_MS; at most
// RAILYARD_ACCEPT_MAX_PENDING sockets are held; running out of descriptors is
// survived, and a real peer is still accepted afterwards.
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/harness.h"
#include "tests/security/wire_peer.h"

namespace railyard::security {
namespace {

using conformance::Buffer;
using conformance::CapturedLog;
using conformance::CapturedWarnings;
using conformance::Rank;
using conformance::RunOptions;
using conformance::RunRanks;
using conformance::Session;

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;
enum : uint64_t { kGo = 1, kFlooded = 2, kClosed = 3, kDone = 4 };

RunOptions Options(int nranks) {
  RunOptions o;
  o.nranks = nranks;
  o.timeout = Ms(60000);
  o.pluginTimeoutMs = 10000;
  return o;
}

/// Captured log lines (any level) containing `text`.
int LogLinesWith(const std::string& text) {
  int n = 0;
  for (const auto& l : CapturedLog()) n += l.text.find(text) != std::string::npos;
  return n;
}

/// Calls accept() until it returns a comm, `each` (called after every call) returns
/// true, or `deadline` passes (kTimedOut). Returns the first failing call's rc.
ncclResult_t AcceptLoop(Session& s, void* listen, void** recv, Clock::time_point deadline,
                        const std::function<bool()>& each = nullptr) {
  *recv = nullptr;
  while (Clock::now() < deadline) {
    const ncclResult_t rc = s.net().Accept(listen, recv);
    if (rc != ncclSuccess || *recv != nullptr) return rc;
    if (each && each()) return ncclSuccess;
    std::this_thread::sleep_for(Ms(1));  // NCCL's proxy polls accept in a loop too
  }
  return conformance::kTimedOut;
}

/// One 64 KiB message from the connecting rank to the accepting rank, checked byte
/// for byte: the accepted connection really works.
void ReceiveOne(Rank& r, Session& s, void* recv) {
  Buffer buf(65536);
  std::memset(buf.data(), 0, buf.size());
  void* mh = nullptr;
  ASSERT_EQ(s.net().RegMr(recv, buf.data(), buf.size(), &mh), ncclSuccess);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 7;
  void* req = nullptr;
  ASSERT_EQ(s.net().Irecv(recv, 1, &data, &size, &tag, &mh, &req), ncclSuccess);
  int got = 0;
  ASSERT_EQ(s.net().Wait(req, &got, r.deadline()), ncclSuccess) << CapturedWarnings();
  EXPECT_EQ(got, 65536);
  EXPECT_EQ(conformance::FirstMismatch(buf.data(), buf.size(), 99), SIZE_MAX);
  EXPECT_EQ(s.net().DeregMr(recv, mh), ncclSuccess);
}
void SendOne(Rank& r, Session& s, const char* handle) {
  void* send = nullptr;
  char h[kHandle];
  std::memcpy(h, handle, kHandle);
  ASSERT_EQ(s.net().ConnectAccept(0, h, &send, nullptr, nullptr, r.deadline()), ncclSuccess) << CapturedWarnings();
  Buffer buf(65536);
  conformance::FillPattern(buf.data(), buf.size(), 99);
  void* mh = nullptr;
  ASSERT_EQ(s.net().RegMr(send, buf.data(), buf.size(), &mh), ncclSuccess);
  void* req = nullptr;
  ASSERT_EQ(s.net().PostSend(send, buf.data(), buf.size(), 7, mh, &req, r.deadline()), ncclSuccess);
  ASSERT_EQ(s.net().Wait(req, nullptr, r.deadline()), ncclSuccess) << CapturedWarnings();
  EXPECT_EQ(s.net().DeregMr(send, mh), ncclSuccess);
  EXPECT_EQ(s.net().CloseSend(send), ncclSuccess);
}

TEST(SecurityListener, StrayConnectionsAreDroppedAndTheRealPeerIsAccepted) {
  RunRanks(Options(2), [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    char handle[kHandle] = {};
    if (r.rank() == 0) {
      void* listen = nullptr;
      ASSERT_EQ(s.net().Listen(0, handle, &listen), ncclSuccess);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      bool told = false;
      void* recv = nullptr;
      const ncclResult_t rc = AcceptLoop(s, listen, &recv, r.deadline(), [&] {
        if (!told && LogLinesWith("dropped a connection") >= 3) told = r.SendU64(1, kGo);
        return false;
      });
      ASSERT_EQ(rc, ncclSuccess) << "a stray connection failed accept():\n" << CapturedWarnings();
      ASSERT_NE(recv, nullptr);
      EXPECT_TRUE(told);
      EXPECT_EQ(LogLinesWith("dropped a connection"), 3) << CapturedWarnings();
      EXPECT_GE(LogLinesWith("another listener"), 1) << CapturedWarnings();
      ReceiveOne(r, s, recv);
      EXPECT_EQ(s.net().CloseRecv(recv), ncclSuccess);
      EXPECT_EQ(s.net().CloseListen(listen), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      proxy::ListenAddress to;
      ASSERT_TRUE(DecodeListenHandle(handle, &to));
      // 64 random bytes; a hello of another protocol version; a hello for another listener.
      std::vector<RawSocket> strays;
      std::mt19937_64 rng(9);
      std::vector<uint64_t> noise(8);
      for (uint64_t& w : noise) w = rng();
      proxy::HelloRecord v2 = Hello(to, 1, 0, 1);
      v2.header.version = proxy::kProtocolVersion + 1;
      proxy::HelloRecord other = Hello(to, 2, 0, 1);
      other.listenId ^= 1;
      for (const void* bytes : {static_cast<const void*>(noise.data()), static_cast<const void*>(&v2),
                                static_cast<const void*>(&other)}) {
        strays.push_back(Dial(to));
        ASSERT_GE(strays.back().fd, 0);
        ASSERT_TRUE(SendAll(strays.back().fd, bytes, 64, r.deadline()));
      }
      static_assert(sizeof(proxy::HelloRecord) == 64);
      ASSERT_TRUE(r.Expect(0, kGo));
      SendOne(r, s, handle);
      ASSERT_TRUE(r.Expect(0, kDone));
      for (RawSocket& st : strays) CloseSocket(&st);
    }
  });
}

TEST(SecurityListener, PendingSocketsAreCapped) {
  RunRanks(Options(2), [](Rank& r) {
    constexpr int kCap = 100, kFlood = 300;
    if (r.rank() == 0) {
      ::setenv("RAILYARD_ACCEPT_MAX_PENDING", std::to_string(kCap).c_str(), 1);
      Session s;
      ASSERT_TRUE(s.ok());
      char handle[kHandle] = {};
      void* listen = nullptr;
      ASSERT_EQ(s.net().Listen(0, handle, &listen), ncclSuccess);
      const int before = OpenFds();
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      ASSERT_TRUE(r.Expect(1, kFlooded));
      int most = 0;
      void* recv = nullptr;
      const auto until = Clock::now() + Ms(500);  // bounded look for the violation
      const ncclResult_t rc = AcceptLoop(s, listen, &recv, until, [&] {
        most = std::max(most, OpenFds() - before);
        return false;
      });
      EXPECT_EQ(rc, conformance::kTimedOut) << CapturedWarnings();
      EXPECT_GE(most, kCap) << "the listener should have taken sockets up to its cap";
      EXPECT_LE(most, kCap) << "the listener held more idle sockets than RAILYARD_ACCEPT_MAX_PENDING";
      EXPECT_EQ(s.net().CloseListen(listen), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      char handle[kHandle] = {};
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      proxy::ListenAddress to;
      ASSERT_TRUE(DecodeListenHandle(handle, &to));
      std::vector<RawSocket> flood;
      for (int i = 0; i < kFlood; ++i) {
        flood.push_back(Dial(to));
        ASSERT_GE(flood.back().fd, 0) << i;
      }
      ASSERT_TRUE(r.SendU64(0, kFlooded));
      ASSERT_TRUE(r.Expect(0, kDone));
      for (RawSocket& f : flood) CloseSocket(&f);
    }
  });
}

/// Not for sanitizer builds: with every descriptor in use, UBSan's vptr check cannot
/// probe memory (it needs a pipe) and reports a false "invalid vptr".
///
/// Rank 0 listens with its descriptor limit `headroom` above what it uses; rank 1
/// floods it with `flood` idle connections; once rank 0 has run out of descriptors,
/// rank 1 closes the flood if `closeFlood`; then rank 2 connects for real and must be
/// accepted, with every accept() call succeeding.
void FloodThenRealPeer(int acceptTimeoutMs, bool closeFlood) {
  RunRanks(Options(3), [&](Rank& r) {
    constexpr int kFlood = 200, kHeadroom = 40;
    char handle[kHandle] = {};
    if (r.rank() == 0) {
      ::setenv("RAILYARD_ACCEPT_TIMEOUT_MS", std::to_string(acceptTimeoutMs).c_str(), 1);
      Session s;
      ASSERT_TRUE(s.ok());
      void* listen = nullptr;
      ASSERT_EQ(s.net().Listen(0, handle, &listen), ncclSuccess);
      rlimit lim{};
      ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
      lim.rlim_cur = static_cast<rlim_t>(OpenFds() + kHeadroom);
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      ASSERT_TRUE(r.Send(2, handle, kHandle));
      ASSERT_TRUE(r.Expect(1, kFlooded));
      bool exhausted = false, told = false;
      void* recv = nullptr;
      const ncclResult_t rc = AcceptLoop(s, listen, &recv, r.deadline(), [&] {
        if (!exhausted && LogLinesWith("Too many open files") > 0) {
          exhausted = true;
          if (closeFlood) {
            EXPECT_TRUE(r.SendU64(1, kGo));
            EXPECT_TRUE(r.Expect(1, kClosed));
          }
          told = r.SendU64(2, kGo);
        }
        return false;
      });
      ASSERT_EQ(rc, ncclSuccess) << "accept() failed during the flood:\n" << CapturedWarnings();
      ASSERT_NE(recv, nullptr);
      EXPECT_TRUE(exhausted) << "the flood never exhausted the descriptors (test setup)";
      EXPECT_TRUE(told);
      ReceiveOne(r, s, recv);
      EXPECT_EQ(s.net().CloseRecv(recv), ncclSuccess);
      EXPECT_EQ(s.net().CloseListen(listen), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kDone));
      ASSERT_TRUE(r.SendU64(2, kDone));
    } else if (r.rank() == 1) {
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      proxy::ListenAddress to;
      ASSERT_TRUE(DecodeListenHandle(handle, &to));
      std::vector<RawSocket> flood;
      for (int i = 0; i < kFlood; ++i) {
        flood.push_back(Dial(to));
        ASSERT_GE(flood.back().fd, 0) << i;
      }
      ASSERT_TRUE(r.SendU64(0, kFlooded));
      if (closeFlood) {
        ASSERT_TRUE(r.Expect(0, kGo));
        for (RawSocket& f : flood) CloseSocket(&f);
        ASSERT_TRUE(r.SendU64(0, kClosed));
      }
      ASSERT_TRUE(r.Expect(0, kDone));
      for (RawSocket& f : flood) CloseSocket(&f);
    } else {
      Session s;
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      ASSERT_TRUE(r.Expect(0, kGo));
      SendOne(r, s, handle);
      ASSERT_TRUE(r.Expect(0, kDone));
    }
  });
}

TEST(SecurityListener, IdleFloodAtALowDescriptorLimitTimesOutAndARealPeerIsAccepted) {
  FloodThenRealPeer(/*acceptTimeoutMs=*/300, /*closeFlood=*/false);
}

TEST(SecurityListener, ClosedFloodFreesItsDescriptorsAndARealPeerIsAccepted) {
  // The deadline is far off: only the flood's own close can free the descriptors.
  FloodThenRealPeer(/*acceptTimeoutMs=*/600000, /*closeFlood=*/true);
}

TEST(SecurityListener, SilentAndHalfOpenSocketsAreClosedOnTheirDeadline) {
  RunRanks(Options(2), [](Rank& r) {
    char handle[kHandle] = {};
    if (r.rank() == 0) {
      ::setenv("RAILYARD_ACCEPT_TIMEOUT_MS", "300", 1);
      Session s;
      ASSERT_TRUE(s.ok());
      void* listen = nullptr;
      ASSERT_EQ(s.net().Listen(0, handle, &listen), ncclSuccess);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      std::atomic<bool> stop{false};
      void* recv = nullptr;
      // accept() goes on until the peer has seen both its sockets closed.
      std::thread watch([&] {
        EXPECT_TRUE(r.Expect(1, kClosed));
        stop = true;
      });
      const ncclResult_t rc = AcceptLoop(s, listen, &recv, r.deadline(), [&] { return stop.load(); });
      watch.join();
      EXPECT_EQ(rc, ncclSuccess) << CapturedWarnings();
      EXPECT_GE(LogLinesWith("half-open"), 1) << CapturedWarnings();
      EXPECT_GE(LogLinesWith("no complete connection record"), 1) << CapturedWarnings();
      EXPECT_EQ(s.net().CloseListen(listen), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      proxy::ListenAddress to;
      ASSERT_TRUE(DecodeListenHandle(handle, &to));
      RawSocket silent = Dial(to);
      RawSocket control = Dial(to);
      ASSERT_GE(silent.fd, 0);
      ASSERT_GE(control.fd, 0);
      const proxy::HelloRecord h = Hello(to, 77, 0, 64);  // socket 0 of 64; the rest never come
      ASSERT_TRUE(SendAll(control.fd, &h, sizeof h, r.deadline()));
      const auto bound = Clock::now() + Ms(10000);
      EXPECT_TRUE(WaitClosed(silent.fd, bound)) << "a socket that never sent a hello was kept";
      EXPECT_TRUE(WaitClosed(control.fd, bound)) << "a half-open connection was kept";
      ASSERT_TRUE(r.SendU64(0, kClosed));
      ASSERT_TRUE(r.Expect(0, kDone));
      CloseSocket(&silent);
      CloseSocket(&control);
    }
  });
}

}  // namespace
}  // namespace railyard::security
