// Conformance: connection setup through the exported v11 table, across processes.
// Each rank loads the plugin with dlopen and exchanges its 128-byte listen handle
// through the harness, as NCCL does through bootstrap (nccl-net-abi.md §2.5
// "listen", "connect / accept").
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "tests/conformance/harness.h"

namespace railyard::conformance {
namespace {

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;

/// Posts one receive of `cap` bytes (tag `rtag`) and one send of `size` bytes
/// (tag `stag`), then waits for both. Returns the sizes test() reported.
void Exchange(Net& net, void* sendComm, void* recvComm, char* src, size_t size, int stag,
              char* dst, size_t cap, int rtag, Clock::time_point deadline, int* sent,
              int* received) {
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net.RegMr(sendComm, src, size == 0 ? 1 : size, &smh), ncclSuccess);
  ASSERT_EQ(net.RegMr(recvComm, dst, cap, &rmh), ncclSuccess);
  void* rreq = nullptr;
  void* data = dst;
  size_t capacity = cap;
  ASSERT_EQ(net.Irecv(recvComm, 1, &data, &capacity, &rtag, &rmh, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  void* sreq = nullptr;
  ASSERT_EQ(net.PostSend(sendComm, src, size, stag, smh, &sreq, deadline), ncclSuccess);
  ASSERT_EQ(net.Wait(sreq, sent, deadline), ncclSuccess);
  ASSERT_EQ(net.Wait(rreq, received, deadline), ncclSuccess);
  EXPECT_EQ(net.DeregMr(sendComm, smh), ncclSuccess);
  EXPECT_EQ(net.DeregMr(recvComm, rmh), ncclSuccess);
}

// Proves that connect and accept never block: two ranks each listen, swap
// handles, and then each interleaves connect (to the other) and accept (from the
// other) on one thread, starting at the same moment. A blocking handshake on
// either side deadlocks here and the harness reports the hung rank. Data then
// flows both ways at once over the two connections, with the right sizes.
TEST(ConformanceConnect, BothSidesConnectAndAcceptAtOnce) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = 15000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    const int peer = 1 - r.rank();
    char mine[kHandle] = {}, theirs[kHandle] = {};
    void* listen = nullptr;
    ASSERT_EQ(net.Listen(0, mine, &listen), ncclSuccess);
    ASSERT_NE(listen, nullptr) << "listen succeeded without a listen comm";
    ASSERT_TRUE(r.Send(peer, mine, kHandle));
    ASSERT_TRUE(r.Recv(peer, theirs, kHandle));
    ASSERT_TRUE(r.Barrier());  // both start connecting together
    r.Note("interleaving connect and accept");
    void *send = nullptr, *recv = nullptr;
    ASSERT_EQ(net.ConnectAccept(0, theirs, &send, listen, &recv, r.deadline()), ncclSuccess)
        << CapturedWarnings();
    ASSERT_NE(send, nullptr);
    ASSERT_NE(recv, nullptr);
    EXPECT_EQ(net.CloseListen(listen), ncclSuccess);  // NCCL closes it right after accept

    const size_t size = (1 << 20) + 5;
    Buffer src(size), dst(size + 4096);
    FillPattern(src.data(), size, 700 + static_cast<uint64_t>(r.rank()));
    std::memset(dst.data(), 0xEE, dst.size());
    r.Note("exchanging data");
    int sent = -1, received = -1;
    Exchange(net, send, recv, src.data(), size, r.rank(), dst.data(), dst.size(), peer,
             r.deadline(), &sent, &received);
    EXPECT_EQ(sent, static_cast<int>(size));
    EXPECT_EQ(received, static_cast<int>(size));
    EXPECT_EQ(FirstMismatch(dst.data(), size, 700 + static_cast<uint64_t>(peer)), SIZE_MAX)
        << "data from rank " << peer << " is corrupt";
    EXPECT_EQ(FirstNotEqual(dst.data() + size, 4096, 0xEE), SIZE_MAX)
        << "bytes past the message were written";
    ASSERT_TRUE(r.Barrier());  // nobody closes while the other still tests
    EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that one listen comm serves several connections: three ranks connect
// with copies of rank 0's single handle; each accept on that listen comm returns
// a distinct recvComm, a fourth accept finds nothing, and every recvComm keeps
// delivering the messages of the one rank it was connected to (two rounds,
// identified by size and content).
TEST(ConformanceConnect, OneListenCommAcceptsThreeConnectors) {
  RunRanks({.nranks = 4, .timeout = Ms(30000), .pluginTimeoutMs = 15000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    constexpr int kTag = 42;
    auto sizeOf = [](int rank, int round) { return static_cast<size_t>(1000 * rank + rank + 7 * round); };
    auto seedOf = [](int rank, int round) { return static_cast<uint64_t>(rank * 100 + round); };

    if (r.rank() == 0) {
      char handle[kHandle] = {};
      void* listen = nullptr;
      ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess);
      for (int p = 1; p < 4; ++p) ASSERT_TRUE(r.Send(p, handle, kHandle));
      r.Note("accepting three connections on one listen comm");
      std::vector<void*> comms;
      while (comms.size() < 3) {
        void* c = nullptr;
        ASSERT_EQ(net.Accept(listen, &c), ncclSuccess) << CapturedWarnings();
        if (c != nullptr) comms.push_back(c);
        ASSERT_LT(Clock::now(), r.deadline()) << "only " << comms.size() << " of 3 accepted";
      }
      EXPECT_EQ(std::set<void*>(comms.begin(), comms.end()).size(), 3u)
          << "accept returned the same recvComm twice";
      void* extra = nullptr;
      EXPECT_EQ(net.Accept(listen, &extra), ncclSuccess);
      EXPECT_EQ(extra, nullptr) << "a fourth accept returned a comm with no fourth connector";

      const size_t cap = 8192;
      Buffer dst(cap * 3);
      std::vector<void*> mh(3);
      for (size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(net.RegMr(comms[i], dst.data() + i * cap, cap, &mh[i]), ncclSuccess);
      }
      std::vector<int> owner(3, -1);
      for (int round = 0; round < 2; ++round) {
        std::vector<void*> reqs(3);
        for (size_t i = 0; i < 3; ++i) {
          void* data = dst.data() + i * cap;
          size_t c = cap;
          int tag = kTag;
          std::memset(data, 0xEE, cap);
          ASSERT_EQ(net.Irecv(comms[i], 1, &data, &c, &tag, &mh[i], &reqs[i]), ncclSuccess);
        }
        for (int p = 1; p < 4; ++p) ASSERT_TRUE(r.SendU64(p, 100 + round));  // "posted"
        std::set<int> seen;
        for (size_t i = 0; i < 3; ++i) {
          int got = -1;
          ASSERT_EQ(net.Wait(reqs[i], &got, r.deadline()), ncclSuccess) << CapturedWarnings();
          int from = -1;
          for (int p = 1; p < 4; ++p) {
            if (got == static_cast<int>(sizeOf(p, round))) from = p;
          }
          ASSERT_NE(from, -1) << "comm " << i << " received " << got << " bytes, no rank sent that";
          EXPECT_EQ(FirstMismatch(dst.data() + i * cap, static_cast<size_t>(got), seedOf(from, round)),
                    SIZE_MAX)
              << "comm " << i << " round " << round;
          EXPECT_EQ(FirstNotEqual(dst.data() + i * cap + got, cap - static_cast<size_t>(got), 0xEE),
                    SIZE_MAX);
          if (round == 0) owner[i] = from;
          EXPECT_EQ(owner[i], from) << "comm " << i << " carried rank " << owner[i]
                                    << " in round 0 but rank " << from << " in round 1";
          seen.insert(from);
        }
        EXPECT_EQ(seen, (std::set<int>{1, 2, 3}));
      }
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(net.DeregMr(comms[i], mh[i]), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      for (void* c : comms) EXPECT_EQ(net.CloseRecv(c), ncclSuccess);
      EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
    } else {
      char handle[kHandle] = {};
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      r.Note("connecting to rank 0's shared listen comm");
      void* send = nullptr;
      ASSERT_EQ(net.ConnectAccept(0, handle, &send, nullptr, nullptr, r.deadline()), ncclSuccess)
          << CapturedWarnings();
      Buffer src(8192);
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(send, src.data(), src.size(), &mh), ncclSuccess);
      for (int round = 0; round < 2; ++round) {
        ASSERT_TRUE(r.Expect(0, 100 + static_cast<uint64_t>(round)));
        const size_t size = sizeOf(r.rank(), round);
        FillPattern(src.data(), size, seedOf(r.rank(), round));
        void* req = nullptr;
        ASSERT_EQ(net.PostSend(send, src.data(), size, kTag, mh, &req, r.deadline()), ncclSuccess);
        int sent = -1;
        ASSERT_EQ(net.Wait(req, &sent, r.deadline()), ncclSuccess);
        EXPECT_EQ(sent, static_cast<int>(size));
      }
      EXPECT_EQ(net.DeregMr(send, mh), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that connect validates the handle before touching the network: garbage
// handles (all 0x00, 0x42, 0xFF, pseudo-random) make connect return
// ncclInvalidUsage (5) at once, leave *sendComm NULL, log a WARN, and do not crash.
TEST(ConformanceConnect, GarbageHandleIsInvalidUsage) {
  RunRanks({.nranks = 1, .timeout = Ms(20000), .pluginTimeoutMs = 3000}, [](Rank&) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    for (int kind = 0; kind < 4; ++kind) {
      char handle[kHandle];
      if (kind == 3) {
        FillPattern(handle, kHandle, 12345);
      } else {
        std::memset(handle, kind == 0 ? 0x00 : kind == 1 ? 0x42 : 0xFF, kHandle);
      }
      void* send = reinterpret_cast<void*>(0x1);  // must be overwritten
      const auto t0 = Clock::now();
      EXPECT_EQ(net.Connect(0, handle, &send), ncclInvalidUsage) << "garbage kind " << kind;
      EXPECT_LT(Clock::now() - t0, Ms(1000)) << "connect with a garbage handle was slow";
      EXPECT_EQ(send, nullptr) << "garbage kind " << kind;
      // A second call with the same bytes (NCCL retries) is just as quick and safe.
      EXPECT_EQ(net.Connect(0, handle, &send), ncclInvalidUsage);
    }
    EXPECT_NE(FindWarning({"connect"}), "") << "no WARN explained the refused handle";
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that a handle from a Railyard of another protocol version is refused
// with ncclInvalidUsage before any connection is made (version field at bytes
// 4-5 of a real handle, changed two ways), with a WARN naming the version, and
// that the untouched handle still connects and carries data afterwards.
TEST(ConformanceConnect, WrongVersionHandleIsInvalidUsage) {
  RunRanks({.nranks = 2, .timeout = Ms(20000), .pluginTimeoutMs = 3000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    if (r.rank() == 0) {
      char handle[kHandle] = {};
      void* listen = nullptr;
      ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      void* recv = nullptr;
      ASSERT_EQ(net.ConnectAccept(0, nullptr, nullptr, listen, &recv, r.deadline()), ncclSuccess)
          << CapturedWarnings();
      char dst[64] = {};
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(recv, dst, sizeof dst, &mh), ncclSuccess);
      void* data = dst;
      size_t cap = sizeof dst;
      int tag = 1;
      void* req = nullptr;
      ASSERT_EQ(net.Irecv(recv, 1, &data, &cap, &tag, &mh, &req), ncclSuccess);
      int got = -1;
      ASSERT_EQ(net.Wait(req, &got, r.deadline()), ncclSuccess);
      EXPECT_EQ(got, 6);
      EXPECT_STREQ(dst, "hello");
      EXPECT_EQ(net.DeregMr(recv, mh), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
      EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
    } else {
      char good[kHandle] = {};
      ASSERT_TRUE(r.Recv(0, good, kHandle));
      uint16_t version = 0;
      std::memcpy(&version, good + 4, sizeof version);
      for (uint16_t bad : {static_cast<uint16_t>(version + 1), static_cast<uint16_t>(~version)}) {
        char handle[kHandle];
        std::memcpy(handle, good, kHandle);
        std::memcpy(handle + 4, &bad, sizeof bad);
        void* send = nullptr;
        const auto t0 = Clock::now();
        EXPECT_EQ(net.Connect(0, handle, &send), ncclInvalidUsage) << "version " << bad;
        EXPECT_LT(Clock::now() - t0, Ms(1000));
        EXPECT_EQ(send, nullptr);
        EXPECT_NE(FindWarning({"version", std::to_string(bad)}), "")
            << "no WARN names the foreign version " << bad << "\n" << CapturedWarnings();
      }
      void* send = nullptr;
      ASSERT_EQ(net.ConnectAccept(0, good, &send, nullptr, nullptr, r.deadline()), ncclSuccess)
          << CapturedWarnings();
      char src[6] = "hello";
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(send, src, sizeof src, &mh), ncclSuccess);
      void* req = nullptr;
      ASSERT_EQ(net.PostSend(send, src, sizeof src, 1, mh, &req, r.deadline()), ncclSuccess);
      int sent = -1;
      ASSERT_EQ(net.Wait(req, &sent, r.deadline()), ncclSuccess);
      EXPECT_EQ(sent, 6);
      EXPECT_EQ(net.DeregMr(send, mh), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves that a handle whose listener has been closed fails instead of hanging:
// rank 0 listens, hands out the handle and closes the listen comm; rank 1's
// connect (or, should connect still produce a comm, its first isend) returns an
// error within RAILYARD_TIMEOUT_MS.
TEST(ConformanceConnect, HandleOfAClosedListenerFails) {
  RunRanks({.nranks = 2, .timeout = Ms(20000), .pluginTimeoutMs = 3000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    if (r.rank() == 0) {
      char handle[kHandle] = {};
      void* listen = nullptr;
      ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess);
      ASSERT_EQ(net.CloseListen(listen), ncclSuccess);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      ASSERT_TRUE(r.Barrier());  // stay alive (and initialised) until rank 1 is done
    } else {
      char handle[kHandle] = {};
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      r.Note("connecting to a closed listener");
      const auto t0 = Clock::now();
      const auto bound = t0 + Ms(r.pluginTimeoutMs() + 1000);
      void* send = nullptr;
      ncclResult_t rc = net.ConnectAccept(0, handle, &send, nullptr, nullptr, bound);
      if (rc == ncclSuccess) {
        char byte = 1;
        void* mh = nullptr;
        ASSERT_EQ(net.RegMr(send, &byte, 1, &mh), ncclSuccess);
        void* req = nullptr;
        rc = net.PostSend(send, &byte, 1, 0, mh, &req, bound);
        if (rc == ncclSuccess) rc = net.Wait(req, nullptr, bound);
        EXPECT_EQ(net.DeregMr(send, mh), ncclSuccess);
        EXPECT_EQ(net.CloseSend(send), ncclSuccess);
      }
      const auto took = std::chrono::duration_cast<Ms>(Clock::now() - t0).count();
      EXPECT_NE(rc, ncclSuccess) << "a connection to a closed listener worked";
      EXPECT_NE(rc, kTimedOut) << "no error within RAILYARD_TIMEOUT_MS + 1 s (" << took << " ms)";
      EXPECT_TRUE(rc == ncclSystemError || rc == ncclRemoteError || rc == ncclInvalidUsage)
          << "rc " << rc;
      EXPECT_LE(took, r.pluginTimeoutMs() + 1000);
      EXPECT_NE(FindWarning({"connect"}), "") << CapturedWarnings();
      ASSERT_TRUE(r.Barrier());
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

}  // namespace
}  // namespace railyard::conformance
