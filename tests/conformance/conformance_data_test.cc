// Conformance: moving data through the exported tables across processes — rings
// over every table version (the v10/v9/v8 adapters end to end), message sizes
// from 0 B to 256 MiB, grouped tagged receives and a full request window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tests/conformance/harness.h"

namespace railyard::conformance {
namespace {

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;

/// Connection pair of a ring position: sendComm to `next`, recvComm from `prev`.
struct RingComms {
  void* send = nullptr;
  void* recv = nullptr;
};

/// Every rank listens, hands its handle to the rank that will send to it (prev),
/// and interleaves connect(next) with accept(own listen), as NCCL's ring setup does.
void ConnectRing(Rank& r, Net& net, RingComms* out) {
  const int n = r.nranks();
  const int next = (r.rank() + 1) % n;
  const int prev = (r.rank() + n - 1) % n;
  char mine[kHandle] = {}, nexts[kHandle] = {};
  void* listen = nullptr;
  ASSERT_EQ(net.Listen(0, mine, &listen), ncclSuccess);
  ASSERT_TRUE(r.Send(prev, mine, kHandle));
  ASSERT_TRUE(r.Recv(next, nexts, kHandle));
  r.Note("ring connect/accept");
  ASSERT_EQ(net.ConnectAccept(0, nexts, &out->send, listen, &out->recv, r.deadline()), ncclSuccess)
      << CapturedWarnings();
  EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
}

uint64_t BlockSeed(int owner, size_t blockBytes) { return owner * 1000003ull + blockBytes; }

/// Ring allgather: each rank starts with its own block and, over n-1 steps, sends
/// the block it got last to next while receiving a new one from prev. At the end
/// every rank must hold every rank's block, and every test() size must match.
void RingAllgather(Rank& r, Net& net, const RingComms& c, size_t blockBytes) {
  const int n = r.nranks();
  const int me = r.rank();
  const int prev = (me + n - 1) % n;
  const size_t stride = std::max<size_t>(blockBytes, 1) + 64;  // 64 canary bytes per block
  Buffer buf(stride * static_cast<size_t>(n));
  std::memset(buf.data(), 0xEE, buf.size());
  FillPattern(buf.data() + stride * static_cast<size_t>(me), blockBytes, BlockSeed(me, blockBytes));
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_EQ(net.RegMr(c.send, buf.data(), buf.size(), &smh), ncclSuccess);
  ASSERT_EQ(net.RegMr(c.recv, buf.data(), buf.size(), &rmh), ncclSuccess);
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (me - step + n) % n;
    const int recvBlock = (me - step - 1 + n) % n;
    void* data = buf.data() + stride * static_cast<size_t>(recvBlock);
    size_t cap = blockBytes;
    int tag = prev;
    void* rreq = nullptr;
    ASSERT_EQ(net.Irecv(c.recv, 1, &data, &cap, &tag, &rmh, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
    void* sreq = nullptr;
    ASSERT_EQ(net.PostSend(c.send, buf.data() + stride * static_cast<size_t>(sendBlock), blockBytes,
                           me, smh, &sreq, r.deadline()),
              ncclSuccess)
        << CapturedWarnings();
    int sent = -1, got = -1;
    ASSERT_EQ(net.Wait(sreq, &sent, r.deadline()), ncclSuccess) << CapturedWarnings();
    ASSERT_EQ(net.Wait(rreq, &got, r.deadline()), ncclSuccess) << CapturedWarnings();
    EXPECT_EQ(sent, static_cast<int>(blockBytes)) << "step " << step;
    EXPECT_EQ(got, static_cast<int>(blockBytes)) << "step " << step;
  }
  for (int b = 0; b < n; ++b) {
    const char* block = buf.data() + stride * static_cast<size_t>(b);
    EXPECT_EQ(FirstMismatch(block, blockBytes, BlockSeed(b, blockBytes)), SIZE_MAX)
        << "block of rank " << b << " (" << blockBytes << " B) is wrong";
    EXPECT_EQ(FirstNotEqual(block + blockBytes, stride - blockBytes, 0xEE), SIZE_MAX)
        << "bytes after block " << b << " (" << blockBytes << " B) were written";
  }
  EXPECT_EQ(net.DeregMr(c.send, smh), ncclSuccess);
  EXPECT_EQ(net.DeregMr(c.recv, rmh), ncclSuccess);
}

struct RingCase {
  int nranks;
  int version;
};

class ConformanceRing : public ::testing::TestWithParam<RingCase> {};

// Proves a ring (send to next, receive from previous) works across 2 and 4
// processes through each exported table: v12 and v11 directly, and v10, v9 and v8 through
// their adapters (v8 with int sizes). Blocks of 0 B, 1 B, 4097 B and 1 MiB+3 are
// allgathered around the ring and every rank checks every block, the bytes
// around it, and the sizes test() reported.
TEST_P(ConformanceRing, AllgatherAroundTheRing) {
  const RingCase rc = GetParam();
  RunRanks({.nranks = rc.nranks, .timeout = Ms(40000), .pluginTimeoutMs = 15000}, [rc](Rank& r) {
    Session s(rc.version);
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    EXPECT_STREQ(net.name(), "Railyard");
    RingComms c;
    ConnectRing(r, net, &c);
    ASSERT_NE(c.send, nullptr);
    ASSERT_NE(c.recv, nullptr);
    for (size_t block : {size_t{0}, size_t{1}, size_t{4097}, size_t{(1 << 20) + 3}}) {
      r.Note("allgather of " + std::to_string(block) + " B blocks");
      RingAllgather(r, net, c, block);
      if (::testing::Test::HasFailure()) break;
    }
    ASSERT_TRUE(r.Barrier());  // nobody closes while a peer still tests
    EXPECT_EQ(net.CloseSend(c.send), ncclSuccess);
    EXPECT_EQ(net.CloseRecv(c.recv), ncclSuccess);
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Tables, ConformanceRing,
                         ::testing::Values(RingCase{2, 12}, RingCase{4, 12}, RingCase{2, 11}, RingCase{4, 11}, RingCase{2, 10},
                                           RingCase{2, 9}, RingCase{4, 9}, RingCase{2, 8},
                                           RingCase{4, 8}),
                         [](const ::testing::TestParamInfo<RingCase>& i) {
                           return std::to_string(i.param.nranks) + "Ranks_v" +
                                  std::to_string(i.param.version);
                         });

/// Rank 1 listens and rank 0 connects: one sendComm on rank 0, one recvComm on rank 1.
void ConnectOneWay(Rank& r, Net& net, void** send, void** recv) {
  if (r.rank() == 1) {
    char handle[kHandle] = {};
    void* listen = nullptr;
    ASSERT_EQ(net.Listen(0, handle, &listen), ncclSuccess);
    ASSERT_TRUE(r.Send(0, handle, kHandle));
    ASSERT_EQ(net.ConnectAccept(0, nullptr, nullptr, listen, recv, r.deadline()), ncclSuccess)
        << CapturedWarnings();
    EXPECT_EQ(net.CloseListen(listen), ncclSuccess);
  } else {
    char handle[kHandle] = {};
    ASSERT_TRUE(r.Recv(1, handle, kHandle));
    ASSERT_EQ(net.ConnectAccept(0, handle, send, nullptr, nullptr, r.deadline()), ncclSuccess)
        << CapturedWarnings();
  }
}

// Proves every message size arrives intact with its exact size: 0, 1, 3, 4095,
// 4097, 1 MiB+1, 64 MiB-3 and 256 MiB go from rank 0 to rank 1 into one posted
// buffer larger than any of them (the receive may be larger than the send).
// test() must report the message size on both sides, the content must match,
// and no byte of the posted buffer past the message, nor of the guard areas
// around the buffer inside the same registration, may change.
TEST(ConformanceData, MessageSizesFromZeroTo256MiB) {
  RunRanks({.nranks = 2, .timeout = Ms(90000), .pluginTimeoutMs = 20000}, [](Rank& r) {
    const std::vector<size_t> sizes = {0, 1, 3, 4095, 4097, (1u << 20) + 1, (64u << 20) - 3,
                                       256u << 20};
    const size_t kMax = sizes.back();
    const size_t kCap = kMax + 4096;  // posted buffer
    const size_t kGuard = 4096;       // registered, never posted
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    if (r.rank() == 0) {
      Buffer src(kMax);
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(send, src.data(), src.size(), &mh), ncclSuccess);
      for (size_t i = 0; i < sizes.size(); ++i) {
        FillPattern(src.data(), sizes[i], 5000 + i);
        r.Note("sending " + std::to_string(sizes[i]) + " B");
        void* req = nullptr;
        ASSERT_EQ(net.PostSend(send, src.data(), sizes[i], 0, mh, &req, r.deadline()), ncclSuccess)
            << CapturedWarnings();
        int sent = -1;
        ASSERT_EQ(net.Wait(req, &sent, r.deadline()), ncclSuccess) << CapturedWarnings();
        EXPECT_EQ(sent, static_cast<int>(sizes[i])) << "send test() size";
      }
      EXPECT_EQ(net.DeregMr(send, mh), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    } else {
      Buffer dst(kGuard + kCap + kGuard);
      std::memset(dst.data(), 0xEE, dst.size());
      char* posted = dst.data() + kGuard;
      void* mh = nullptr;
      ASSERT_EQ(net.RegMr(recv, dst.data(), dst.size(), &mh), ncclSuccess);
      // Ascending sizes: after each check the whole tail past the message is known
      // to hold the canary, so only the message area changes between iterations.
      for (size_t i = 0; i < sizes.size(); ++i) {
        r.Note("receiving " + std::to_string(sizes[i]) + " B");
        void* data = posted;
        size_t cap = kCap;
        int tag = 0;
        void* req = nullptr;
        ASSERT_EQ(net.Irecv(recv, 1, &data, &cap, &tag, &mh, &req), ncclSuccess);
        int got = -1;
        ASSERT_EQ(net.Wait(req, &got, r.deadline()), ncclSuccess) << CapturedWarnings();
        EXPECT_EQ(got, static_cast<int>(sizes[i])) << "receive test() size";
        EXPECT_EQ(FirstMismatch(posted, sizes[i], 5000 + i), SIZE_MAX)
            << "content of the " << sizes[i] << " B message";
        EXPECT_EQ(FirstNotEqual(posted + sizes[i], kCap - sizes[i] + kGuard, 0xEE), SIZE_MAX)
            << "bytes past the " << sizes[i] << " B message were written";
        EXPECT_EQ(FirstNotEqual(dst.data(), kGuard, 0xEE), SIZE_MAX)
            << "bytes before the posted buffer were written";
        if (::testing::Test::HasFailure()) break;
      }
      EXPECT_EQ(net.DeregMr(recv, mh), ncclSuccess);
      ASSERT_TRUE(r.Barrier());
      EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    }
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

/// Order in which the sender issues the n sends of group `g`: reversed for even
/// groups, rotated by g for odd ones — never the order the tags were posted in.
std::vector<int> SendOrder(int n, int g) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (g % 2 == 0) {
    std::reverse(order.begin(), order.end());
  } else {
    std::rotate(order.begin(), order.begin() + (g % n == 0 ? 1 : g % n), order.end());
  }
  return order;
}

/// One grouped-receive scenario: `ns[g]` buffers in receive g, all posted before
/// anything is tested; tags 20 + i; message g/i has size `sizeOf(g, i)`.
void GroupedScenario(Rank& r, Net& net, void* send, void* recv, const std::vector<int>& ns,
                     size_t (*sizeOf)(int g, int i), size_t slotCap) {
  const int groups = static_cast<int>(ns.size());
  const int total = std::accumulate(ns.begin(), ns.end(), 0);
  auto seed = [](int g, int i) { return static_cast<uint64_t>(90000 + g * 16 + i); };
  if (r.rank() == 0) {
    Buffer src(slotCap * static_cast<size_t>(total));
    void* mh = nullptr;
    ASSERT_EQ(net.RegMr(send, src.data(), src.size(), &mh), ncclSuccess);
    std::vector<void*> reqs;
    std::vector<size_t> reqSize;
    size_t slot = 0;
    for (int g = 0; g < groups; ++g) {
      for (int i : SendOrder(ns[static_cast<size_t>(g)], g)) {
        char* p = src.data() + slotCap * slot++;
        FillPattern(p, sizeOf(g, i), seed(g, i));
        void* req = nullptr;
        ASSERT_EQ(net.PostSend(send, p, sizeOf(g, i), 20 + i, mh, &req, r.deadline()), ncclSuccess)
            << "group " << g << " tag " << 20 + i << "\n" << CapturedWarnings();
        reqs.push_back(req);
        reqSize.push_back(sizeOf(g, i));
      }
    }
    r.Note(std::to_string(reqs.size()) + " sends in flight");
    for (size_t k = 0; k < reqs.size(); ++k) {
      int sent = -1;
      ASSERT_EQ(net.Wait(reqs[k], &sent, r.deadline()), ncclSuccess) << CapturedWarnings();
      EXPECT_EQ(sent, static_cast<int>(reqSize[k]));
    }
    EXPECT_EQ(net.DeregMr(send, mh), ncclSuccess);
  } else {
    Buffer dst(slotCap * static_cast<size_t>(total));
    std::memset(dst.data(), 0xEE, dst.size());
    void* mh = nullptr;
    ASSERT_EQ(net.RegMr(recv, dst.data(), dst.size(), &mh), ncclSuccess);
    std::vector<void*> reqs(static_cast<size_t>(groups));
    size_t slot = 0;
    for (int g = 0; g < groups; ++g) {
      const int n = ns[static_cast<size_t>(g)];
      std::vector<void*> data(static_cast<size_t>(n)), mhs(static_cast<size_t>(n), mh);
      std::vector<size_t> caps(static_cast<size_t>(n), slotCap);
      std::vector<int> tags(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        data[static_cast<size_t>(i)] = dst.data() + slotCap * (slot + static_cast<size_t>(i));
        tags[static_cast<size_t>(i)] = 20 + i;
      }
      slot += static_cast<size_t>(n);
      ASSERT_EQ(net.Irecv(recv, n, data.data(), caps.data(), tags.data(), mhs.data(),
                          &reqs[static_cast<size_t>(g)]),
                ncclSuccess)
          << "group " << g << " of " << n << " buffers\n" << CapturedWarnings();
      ASSERT_NE(reqs[static_cast<size_t>(g)], nullptr);
    }
    r.Note(std::to_string(groups) + " grouped receives in flight");
    slot = 0;
    for (int g = 0; g < groups; ++g) {
      const int n = ns[static_cast<size_t>(g)];
      int got[64];
      std::fill(std::begin(got), std::end(got), -1);
      ASSERT_EQ(net.Wait(reqs[static_cast<size_t>(g)], got, r.deadline()), ncclSuccess)
          << "group " << g << "\n" << CapturedWarnings();
      for (int i = 0; i < n; ++i) {
        const char* p = dst.data() + slotCap * (slot + static_cast<size_t>(i));
        EXPECT_EQ(got[i], static_cast<int>(sizeOf(g, i))) << "group " << g << " buffer " << i;
        EXPECT_EQ(FirstMismatch(p, sizeOf(g, i), seed(g, i)), SIZE_MAX)
            << "group " << g << " buffer " << i << " (tag " << 20 + i << ") got the wrong data";
        EXPECT_EQ(FirstNotEqual(p + sizeOf(g, i), slotCap - sizeOf(g, i), 0xEE), SIZE_MAX)
            << "group " << g << " buffer " << i << ": bytes past the message were written";
      }
      EXPECT_EQ(got[n], -1) << "test() wrote sizes[" << n << "] of a " << n << "-buffer receive";
      slot += static_cast<size_t>(n);
    }
    EXPECT_EQ(net.DeregMr(recv, mh), ncclSuccess);
  }
}

// Proves grouped receives route by tag: for n = 2..8, one irecv of n buffers
// tagged 20..20+n-1 is posted and the sender issues the n sends in another order
// (reversed or rotated). Each buffer must get the message carrying its tag, test()
// must report each buffer's own size (one of them 0 B) and nothing else, and no
// byte past a message may change.
TEST(ConformanceData, GroupedReceivesMatchByTagNotOrder) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = 15000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    for (int n = 2; n <= 8; ++n) {
      r.Note("grouped receive of " + std::to_string(n));
      GroupedScenario(r, net, send, recv, {n},
                      [](int, int i) -> size_t { return i == 1 ? 0 : 333u * static_cast<size_t>(i) + 17; },
                      4096);
      if (::testing::Test::HasFailure()) break;
    }
    ASSERT_TRUE(r.Barrier());
    EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

// Proves one comm holds NCCL_NET_MAX_REQUESTS (32) receives in flight: 32 irecvs
// of 1..8 buffers (144 buffers, tags per group) are posted before any is tested,
// the sender issues all 144 matching sends (out of tag order inside each group)
// before testing any, and then every request completes with the right data and
// sizes.
TEST(ConformanceData, ThirtyTwoGroupedReceivesInFlight) {
  RunRanks({.nranks = 2, .timeout = Ms(30000), .pluginTimeoutMs = 15000}, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    Net& net = s.net();
    void *send = nullptr, *recv = nullptr;
    ConnectOneWay(r, net, &send, &recv);
    if (::testing::Test::HasFailure()) return;
    std::vector<int> ns;
    for (int g = 0; g < NCCL_NET_MAX_REQUESTS; ++g) ns.push_back(1 + g % 8);
    GroupedScenario(r, net, send, recv, ns,
                    [](int g, int i) -> size_t { return static_cast<size_t>((g * 8 + i) * 97 % 8000) + 1; },
                    8192);
    ASSERT_TRUE(r.Barrier());
    EXPECT_EQ(net.CloseSend(send), ncclSuccess);
    EXPECT_EQ(net.CloseRecv(recv), ncclSuccess);
    EXPECT_EQ(net.Finalize(), ncclSuccess);
  });
}

}  // namespace
}  // namespace railyard::conformance
