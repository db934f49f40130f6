// Ring allreduce, reducescatter and allgather (proxy/collectives/coll_comm.h) with n
// ranks in one process, over the fake and the TCP loopback transports: every type x op
// against the double reference, 1 element, counts not divisible by nranks, uneven and
// empty blocks (NCCL's byte windows), large counts with many chunks in flight, ops in
// sequence, and a rank that dies mid-collective.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "proxy/collectives/reference.h"
#include "tests/collectives/ring_harness.h"

namespace railyard::collectives {
namespace {
using namespace testing;

CollOptions SmallChunks() {
  CollOptions o;
  o.chunkBytes = 4096;  // many chunks per block: pipelining and credits get exercised
  o.slots = 3;
  o.timeoutMs = 20000;
  return o;
}

/// Runs an allreduce of `count` elements on `n` ranks and checks every element of
/// every rank against the reference, and that all ranks hold the same bytes.
void CheckAllReduce(const std::string& transport, int n, DataType t, RedOp op, uint64_t count,
                    const CollOptions& options, bool inPlace = false) {
  std::vector<RankSide> ranks;
  { Status s = MakeRing(transport, n, options, &ranks); ASSERT_TRUE(s.ok()) << s.message(); }
  const size_t tb = TypeBytes(t);
  std::vector<std::vector<uint8_t>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<Status> st(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    send[static_cast<size_t>(r)].resize(count * tb + 1);
    recv[static_cast<size_t>(r)].assign(count * tb + 1, 0xEE);
    for (uint64_t i = 0; i < count; ++i) Set(t, send[static_cast<size_t>(r)].data(), i, InputValue(t, op, r, i));
    if (inPlace) recv[static_cast<size_t>(r)] = send[static_cast<size_t>(r)];
  }
  OnEveryRank(n, [&](int r) {
    CollOp c;
    c.kind = CollKind::kAllReduce;
    c.type = t;
    c.op = op;
    c.blockElems = EvenBlocks(count, n);
    c.send = inPlace ? recv[static_cast<size_t>(r)].data() : send[static_cast<size_t>(r)].data();
    c.recv = recv[static_cast<size_t>(r)].data();
    st[static_cast<size_t>(r)] = RunOp(*ranks[static_cast<size_t>(r)].comm, c);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].message();
  for (uint64_t i = 0; i < count; ++i) {
    const double ref = Reference(t, op, n, i);
    ASSERT_NEAR(Get(t, recv[0].data(), i), ref, Tolerance(t, ref))
        << TypeName(t) << " " << OpName(op) << " n " << n << " count " << count << " element " << i;
  }
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(std::memcmp(recv[0].data(), recv[static_cast<size_t>(r)].data(), count * tb), 0)
        << "rank " << r << " differs from rank 0";
  }
  EXPECT_EQ(recv[0][count * tb], inPlace ? send[0][count * tb] : 0xEE) << "byte past the result written";
  Destroy(&ranks);
}

class RingEveryTypeOp : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RingEveryTypeOp, AllReduceOnFakeRingOf3) {
  const DataType t = static_cast<DataType>(std::get<0>(GetParam()));
  const RedOp op = static_cast<RedOp>(std::get<1>(GetParam()));
  for (uint64_t count : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{3001}}) {
    CheckAllReduce("fake", 3, t, op, count, SmallChunks());
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, RingEveryTypeOp,
                         ::testing::Combine(::testing::Range(0, kNumDataTypes),
                                            ::testing::Range(0, kNumRedOps)),
                         [](const auto& p) {
                           return std::string(TypeName(static_cast<DataType>(std::get<0>(p.param)))) +
                                  "_" + OpName(static_cast<RedOp>(std::get<1>(p.param)));
                         });

TEST(Ring, AllReduceRankCountsOnFake) {
  for (int n : {1, 2, 4, 5}) {
    CheckAllReduce("fake", n, DataType::kFloat32, RedOp::kSum, 10007, SmallChunks());
    CheckAllReduce("fake", n, DataType::kBfloat16, RedOp::kAvg, 333, SmallChunks());
    CheckAllReduce("fake", n, DataType::kInt64, RedOp::kMax, 3, SmallChunks());
    if (HasFatalFailure()) return;
  }
}

TEST(Ring, AllReduceInPlace) {
  CheckAllReduce("fake", 4, DataType::kFloat32, RedOp::kSum, 5000, SmallChunks(), true);
  CheckAllReduce("fake", 3, DataType::kFloat16, RedOp::kSum, 5000, SmallChunks(), true);
}

TEST(Ring, AllReduceOverTcpLoopback) {
  CheckAllReduce("tcp", 4, DataType::kFloat32, RedOp::kSum, 1, SmallChunks());
  CheckAllReduce("tcp", 4, DataType::kFloat32, RedOp::kSum, 1000003, SmallChunks());
  CheckAllReduce("tcp", 3, DataType::kFloat16, RedOp::kProd, 77777, SmallChunks());
  CollOptions big;  // the default chunk and slots
  CheckAllReduce("tcp", 4, DataType::kFloat64, RedOp::kMin, 2000001, big);
}

/// Reducescatter then allgather with uneven (and empty) blocks, as NCCL's byte
/// windows produce, checking each rank's block and the gathered whole.
void CheckScatterGather(const std::string& transport, int n, DataType t, RedOp op,
                        const std::vector<uint64_t>& blocks) {
  std::vector<RankSide> ranks;
  ASSERT_TRUE(MakeRing(transport, n, SmallChunks(), &ranks).ok());
  CollOp shape;
  shape.blockElems = blocks;
  const uint64_t total = shape.TotalElems();
  const size_t tb = TypeBytes(t);
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n)), mine(static_cast<size_t>(n)),
      all(static_cast<size_t>(n));
  std::vector<Status> st(static_cast<size_t>(n), Status::Ok());
  for (int r = 0; r < n; ++r) {
    in[static_cast<size_t>(r)].resize(total * tb + 1);
    for (uint64_t i = 0; i < total; ++i) Set(t, in[static_cast<size_t>(r)].data(), i, InputValue(t, op, r, i));
    mine[static_cast<size_t>(r)].assign(blocks[static_cast<size_t>(r)] * tb + 1, 0xEE);
    all[static_cast<size_t>(r)].assign(total * tb + 1, 0xEE);
  }
  OnEveryRank(n, [&](int r) {
    const size_t R = static_cast<size_t>(r);
    CollOp rs = shape;
    rs.kind = CollKind::kReduceScatter;
    rs.type = t;
    rs.op = op;
    rs.send = in[R].data();
    rs.recv = mine[R].data();
    st[R] = RunOp(*ranks[R].comm, rs);
    if (!st[R].ok()) return;
    CollOp ag;
    ag.kind = CollKind::kAllGather;
    ag.type = DataType::kUint8;
    for (uint64_t b : blocks) ag.blockElems.push_back(b * tb);
    ag.send = mine[R].data();
    ag.recv = all[R].data();
    st[R] = RunOp(*ranks[R].comm, ag);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)].message();
  for (int r = 0; r < n; ++r) {
    const uint64_t first = shape.BlockOffset(r);
    for (uint64_t i = 0; i < blocks[static_cast<size_t>(r)]; ++i) {
      const double ref = Reference(t, op, n, first + i);
      ASSERT_NEAR(Get(t, mine[static_cast<size_t>(r)].data(), i), ref, Tolerance(t, ref))
          << "reducescatter rank " << r << " element " << i;
    }
    EXPECT_EQ(mine[static_cast<size_t>(r)].back(), 0xEE);
    ASSERT_EQ(std::memcmp(all[static_cast<size_t>(r)].data(), all[0].data(), total * tb), 0);
  }
  for (uint64_t i = 0; i < total; ++i) {
    const double ref = Reference(t, op, n, i);
    ASSERT_NEAR(Get(t, all[0].data(), i), ref, Tolerance(t, ref)) << "allgather element " << i;
  }
  EXPECT_EQ(all[0].back(), 0xEE);
  Destroy(&ranks);
}

TEST(Ring, ReduceScatterAllGatherUnevenBlocks) {
  CheckScatterGather("fake", 3, DataType::kFloat32, RedOp::kSum, {5000, 1, 2999});
  CheckScatterGather("fake", 4, DataType::kInt32, RedOp::kMax, {0, 17, 0, 4096});
  CheckScatterGather("fake", 2, DataType::kFloat8e4m3, RedOp::kSum, {1, 1});
  CheckScatterGather("fake", 5, DataType::kBfloat16, RedOp::kAvg, {100, 200, 300, 400, 500});
  CheckScatterGather("tcp", 4, DataType::kFloat32, RedOp::kSum, {100000, 99999, 100001, 3});
}

TEST(Ring, ManyOpsInSequenceReuseStaging) {
  std::vector<RankSide> ranks;
  ASSERT_TRUE(MakeRing("tcp", 3, SmallChunks(), &ranks).ok());
  const uint64_t before = ranks[0].cache->stats().registrations;
  std::vector<Status> st(3, Status::Ok());
  std::vector<std::vector<float>> out(3);
  OnEveryRank(3, [&](int r) {
    std::vector<float> in(9999);
    out[static_cast<size_t>(r)].resize(in.size());
    for (int iter = 0; iter < 20 && st[static_cast<size_t>(r)].ok(); ++iter) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r + iter + (i % 7));
      CollOp c;
      c.blockElems = EvenBlocks(in.size(), 3);
      c.send = in.data();
      c.recv = out[static_cast<size_t>(r)].data();
      st[static_cast<size_t>(r)] = RunOp(*ranks[static_cast<size_t>(r)].comm, c);
    }
  });
  for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < out[0].size(); ++i) ASSERT_EQ(out[0][i], 3.f * (19 + (i % 7)) + 3.f) << i;
  // One registration per op for the user's receive buffer, one for the work buffer
  // (registered on the first op, reused after), nothing for staging.
  EXPECT_LE(ranks[0].cache->stats().registrations - before, 21u);
  Destroy(&ranks);
}

TEST(Ring, RankDyingMidCollectiveFailsEveryOtherRankWithANamedError) {
  // Rank 2 of 4 posts a 4 MiB allreduce and goes away before it finishes (its comm
  // and Worker are destroyed, closing its sockets as when the process dies): every other rank must fail within the timeout with a
  // named error, and none may hang.
  CollOptions o = SmallChunks();
  o.timeoutMs = 3000;
  std::vector<RankSide> ranks;
  ASSERT_TRUE(MakeRing("tcp", 4, o, &ranks).ok());
  std::vector<Status> st(4, Status::Ok());
  std::vector<double> seconds(4, 0);
  OnEveryRank(4, [&](int r) {
    const size_t R = static_cast<size_t>(r);
    std::vector<float> in(1 << 20, 1.f), out(1 << 20);
    CollOp c;
    c.blockElems = EvenBlocks(in.size(), 4);
    c.send = in.data();
    c.recv = out.data();
    if (r == 2) {  // posts its part, then goes away with the collective under way
      CollRequest* req = nullptr;
      ASSERT_TRUE(ranks[R].comm->Post(c, &req).ok());
      bool done = false;
      uint64_t bytes = 0;
      (void)ranks[R].comm->Test(req, &done, &bytes);
      EXPECT_FALSE(done);
      ranks[R].comm.reset();
      ranks[R].worker.reset();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    st[R] = RunOp(*ranks[R].comm, c);
    seconds[R] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(st[static_cast<size_t>(r)].ok()) << "rank " << r;
    EXPECT_NE(st[static_cast<size_t>(r)].message().find("collnet rank " + std::to_string(r) + "/4"), std::string::npos)
        << st[static_cast<size_t>(r)].message();
    EXPECT_LT(seconds[static_cast<size_t>(r)], 3.0 * o.timeoutMs / 1000 + 5) << "rank " << r;
    std::printf("rank %d failed after %.2f s: %s\n", r, seconds[static_cast<size_t>(r)],
                st[static_cast<size_t>(r)].message().c_str());
  }
  Destroy(&ranks);
}

TEST(Ring, ARankThatNeverPostsTimesOutItsNeighboursWithANamedError) {
  // Rank 2 of 3 stays connected and polling but never posts its part (a frozen or
  // diverged rank): ranks 0 and 1 must fail after the comm timeout with TIMEOUT (no
  // transport error happens: nothing is broken), and rank 2 learns of it by the abort.
  CollOptions o = SmallChunks();
  o.timeoutMs = 500;
  std::vector<RankSide> ranks;
  { Status s = MakeRing("fake", 3, o, &ranks); ASSERT_TRUE(s.ok()) << s.message(); }
  std::vector<Status> st(3, Status::Ok());
  OnEveryRank(2, [&](int r) {
    std::vector<float> in(100000, 1.f), out(in.size());
    CollOp c;
    c.blockElems = EvenBlocks(in.size(), 3);
    c.send = in.data();
    c.recv = out.data();
    st[static_cast<size_t>(r)] = RunOp(*ranks[static_cast<size_t>(r)].comm, c);
  });
  int timedOut = 0;
  for (int r : {0, 1}) {
    const std::string& m = st[static_cast<size_t>(r)].message();
    EXPECT_FALSE(st[static_cast<size_t>(r)].ok());
    EXPECT_NE(m.find("collnet rank " + std::to_string(r) + "/3"), std::string::npos) << m;
    if (m.find("TIMEOUT") != std::string::npos) ++timedOut;
    else EXPECT_NE(m.find("aborted"), std::string::npos) << m;  // its neighbour timed out first
  }
  EXPECT_GE(timedOut, 1);
  // Rank 2's comm has failed too (the abort reached it): a post now reports it.
  std::vector<float> in(3, 1.f), out(3);
  CollOp c;
  c.blockElems = EvenBlocks(3, 3);
  c.send = in.data();
  c.recv = out.data();
  CollRequest* req = nullptr;
  Status late = ranks[2].comm->Post(c, &req);
  bool done = false;
  // Bounded: the abort is already on its way (or arrived); the op can never finish.
  for (int i = 0; i < 1000000 && late.ok() && !done; ++i) {
    uint64_t bytes = 0;
    late = ranks[2].comm->Test(req, &done, &bytes);
    std::this_thread::yield();
  }
  EXPECT_FALSE(done);
  EXPECT_FALSE(late.ok());
  EXPECT_NE(late.message().find("aborted"), std::string::npos) << late.message();
  Destroy(&ranks);
}

TEST(Ring, AReceiveHandleThatIsNoRegistrationFailsNamedWithoutBeingRead) {
  // NCCL's recvMhandle reaches CollOp::recvRegion as it is: a pointer that is no live
  // registration of the comm's cache (garbage, or deregistered) must fail the op with
  // a named error before anything reads through it (it would crash here otherwise).
  std::vector<RankSide> ranks;
  ASSERT_TRUE(MakeRing("fake", 2, SmallChunks(), &ranks).ok());
  std::vector<Status> st(2, Status::Ok());
  OnEveryRank(2, [&](int r) {
    std::vector<float> in(64, 1.f), out(64);
    CollOp c;
    c.blockElems = EvenBlocks(in.size(), 2);
    c.send = in.data();
    c.recv = out.data();
    c.recvRegion = reinterpret_cast<const fabric::Region*>(0x10);
    st[static_cast<size_t>(r)] = RunOp(*ranks[static_cast<size_t>(r)].comm, c);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(st[static_cast<size_t>(r)].ok()) << "rank " << r;
  }
  // At least one rank names the handle; the other may learn of it from the abort.
  const bool named = st[0].message().find("receive buffer's handle") != std::string::npos ||
                     st[1].message().find("receive buffer's handle") != std::string::npos;
  EXPECT_TRUE(named) << st[0].message() << " / " << st[1].message();
  Destroy(&ranks);
}

TEST(Ring, ConnectRejectsBadArguments) {
  std::vector<RankSide> ranks;
  ASSERT_TRUE(MakeRing("fake", 1, SmallChunks(), &ranks).ok());
  std::unique_ptr<CollComm> c;
  std::vector<std::vector<uint8_t>> addrs = {ranks[0].worker->Address()};
  EXPECT_EQ(CollComm::Connect(*ranks[0].worker, *ranks[0].cache, 1, 1, addrs, SmallChunks(), &c).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(CollComm::Connect(*ranks[0].worker, *ranks[0].cache, 0, 2, addrs, SmallChunks(), &c).code(),
            Code::kInvalidArgument);
  CollOptions bad = SmallChunks();
  bad.slots = 1;
  EXPECT_EQ(CollComm::Connect(*ranks[0].worker, *ranks[0].cache, 0, 1, addrs, bad, &c).code(),
            Code::kInvalidArgument);
  // A peer address that is garbage: a clean error, no comm.
  std::vector<RankSide> two;
  std::vector<std::vector<uint8_t>> garbage = {ranks[0].worker->Address(), {1, 2, 3}};
  Status s = CollComm::Connect(*ranks[0].worker, *ranks[0].cache, 0, 2, garbage, SmallChunks(), &c);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(c, nullptr);
  Destroy(&ranks);
}

}  // namespace
}  // namespace railyard::collectives
