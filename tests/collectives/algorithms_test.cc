// Every algorithm of plan.h (ring, chain, direct, one-shot on ring, chain and mesh)
// through CollComm with n ranks in one process over the fake transport (every rank
// reaches every other, so any topology can be declared): every type x op at 1
// element, counts not divisible by nranks and a count of many chunks; reducescatter
// and allgather with uneven and empty blocks (NCCL's byte windows); the same bits on
// every rank and on a second run; the algorithm the comm reports is the one asked for;
// how much each direction of a ring and a chain carries, from the plans.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

#include "proxy/collectives/plan.h"
#include "proxy/collectives/reference.h"
#include "tests/collectives/ring_harness.h"

namespace railyard::collectives {
namespace {
using namespace testing;

struct Case {
  Shape shape;
  bool small;  ///< one-shot (smallBytes huge) or the shape's own algorithm (smallBytes 0)
  Algorithm expect;
  const char* name;
};
const Case kCases[] = {
    {Shape::kRing, false, Algorithm::kRing, "ring"},
    {Shape::kChain, false, Algorithm::kChain, "chain"},
    {Shape::kMesh, false, Algorithm::kDirect, "direct"},
    {Shape::kRing, true, Algorithm::kOneShot, "oneshot_ring"},
    {Shape::kChain, true, Algorithm::kOneShot, "oneshot_chain"},
    {Shape::kMesh, true, Algorithm::kOneShot, "oneshot_mesh"},
};

CollOptions OptionsFor(const Case& c, std::vector<int> order = {}) {
  CollOptions o;
  o.chunkBytes = 4096;  // many chunks: pipelining and credits get exercised
  o.slots = 3;
  o.timeoutMs = 20000;
  o.topology.shape = c.shape;
  if (c.shape != Shape::kMesh) o.topology.order = std::move(order);
  o.smallBytes = c.small ? (1ull << 40) : 0;
  return o;
}

/// Allreduce of `count` elements, twice; checks every element against the double
/// reference, identical bytes on every rank and between the runs.
void RunAllReduce(std::vector<RankSide>& ranks, const Case& c, int n, DataType t, RedOp op, uint64_t count) {
  const size_t tb = TypeBytes(t);
  const size_t N = static_cast<size_t>(n);
  std::vector<std::vector<uint8_t>> send(N), recv(N), again(N);
  std::vector<Status> st(N);
  for (size_t r = 0; r < N; ++r) {
    send[r].resize(count * tb + 1);
    recv[r].assign(count * tb + 1, 0xEE);
    again[r].assign(count * tb + 1, 0xDD);
    for (uint64_t i = 0; i < count; ++i) Set(t, send[r].data(), i, InputValue(t, op, static_cast<int>(r), i));
  }
  OnEveryRank(n, [&](int r) {
    const size_t R = static_cast<size_t>(r);
    for (auto* out : {&recv[R], &again[R]}) {
      CollOp op_;
      op_.kind = CollKind::kAllReduce;
      op_.type = t;
      op_.op = op;
      op_.blockElems = EvenBlocks(count, n);
      op_.send = send[R].data();
      op_.recv = out->data();
      st[R] = RunOp(*ranks[R].comm, op_);
      if (!st[R].ok()) return;
    }
  });
  for (size_t r = 0; r < N; ++r) ASSERT_TRUE(st[r].ok()) << c.name << ": " << st[r].message();
  EXPECT_EQ(ranks[0].comm->lastAlgorithm(), c.expect) << c.name;
  for (uint64_t i = 0; i < count; ++i) {
    const double ref = Reference(t, op, n, i);
    ASSERT_NEAR(Get(t, recv[0].data(), i), ref, Tolerance(t, ref))
        << c.name << " " << TypeName(t) << " " << OpName(op) << " n " << n << " count " << count << " element " << i;
  }
  for (size_t r = 0; r < N; ++r) {
    ASSERT_EQ(std::memcmp(recv[0].data(), recv[r].data(), count * tb), 0) << c.name << ": rank " << r << " differs";
    ASSERT_EQ(std::memcmp(recv[r].data(), again[r].data(), count * tb), 0) << c.name << ": rank " << r << " run 2 differs";
    EXPECT_EQ(recv[r][count * tb], 0xEE) << c.name << ": byte past the result written";
  }
}

void CheckAllReduce(const Case& c, int n, DataType t, RedOp op, uint64_t count, std::vector<int> order = {}) {
  std::vector<RankSide> ranks;
  { Status s = MakeRing("fake", n, OptionsFor(c, order), &ranks); ASSERT_TRUE(s.ok()) << s.message(); }
  RunAllReduce(ranks, c, n, t, op, count);
  Destroy(&ranks);
}

class EveryTypeOp : public ::testing::TestWithParam<int> {};

// One comm per algorithm; every type x op at 1 element, 7 (not divisible by 4) and 1003
// (several 4 KiB chunks) on it, one after another.
TEST_P(EveryTypeOp, AllReduceOn4Ranks) {
  const Case& c = kCases[GetParam()];
  std::vector<RankSide> ranks;
  { Status s = MakeRing("fake", 4, OptionsFor(c), &ranks); ASSERT_TRUE(s.ok()) << s.message(); }
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int op = 0; op < kNumRedOps; ++op) {
      for (uint64_t count : {uint64_t{1}, uint64_t{7}, uint64_t{1003}}) {
        RunAllReduce(ranks, c, 4, static_cast<DataType>(t), static_cast<RedOp>(op), count);
        if (HasFatalFailure()) return;
      }
    }
  }
  Destroy(&ranks);
}

INSTANTIATE_TEST_SUITE_P(All, EveryTypeOp, ::testing::Range(0, 6),
                         [](const auto& p) { return std::string(kCases[p.param].name); });

TEST(Algorithms, RankCountsOrdersAndLargeCounts) {
  for (const Case& c : kCases) {
    for (int n : {2, 3, 5}) {
      CheckAllReduce(c, n, DataType::kFloat32, RedOp::kSum, 1001);
      if (HasFatalFailure()) return;
    }
    // A cable order that is not rank order (ring and chain follow it).
    CheckAllReduce(c, 4, DataType::kInt32, RedOp::kSum, 999, {2, 0, 3, 1});
    if (HasFatalFailure()) return;
    // Many chunks per block in flight (4 KiB chunks, 3 slots).
    CheckAllReduce(c, 4, DataType::kBfloat16, RedOp::kSum, 200003);
    if (HasFatalFailure()) return;
  }
}

/// Reducescatter then allgather with the given blocks (elements; bytes for allgather).
void CheckScatterGather(const Case& c, DataType t, RedOp op, std::vector<uint64_t> blocks) {
  const int n = static_cast<int>(blocks.size());
  const size_t N = blocks.size();
  std::vector<RankSide> ranks;
  { Status s = MakeRing("fake", n, OptionsFor(c), &ranks); ASSERT_TRUE(s.ok()) << s.message(); }
  CollOp layout;
  layout.blockElems = blocks;
  const uint64_t total = layout.TotalElems();
  const size_t tb = TypeBytes(t);
  std::vector<std::vector<uint8_t>> in(N), mine(N), all(N);
  std::vector<Status> st(N);
  for (size_t r = 0; r < N; ++r) {
    in[r].resize(total * tb + 1);
    for (uint64_t i = 0; i < total; ++i) Set(t, in[r].data(), i, InputValue(t, op, static_cast<int>(r), i));
    mine[r].assign(blocks[r] * tb + 1, 0xEE);
    all[r].assign(total * tb + 1, 0xEE);
  }
  OnEveryRank(n, [&](int r) {
    const size_t R = static_cast<size_t>(r);
    CollOp rs = layout;
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
  for (size_t r = 0; r < N; ++r) ASSERT_TRUE(st[r].ok()) << c.name << ": " << st[r].message();
  for (size_t r = 0; r < N; ++r) {
    const uint64_t first = layout.BlockOffset(static_cast<int>(r));
    for (uint64_t i = 0; i < blocks[r]; ++i) {
      const double ref = Reference(t, op, n, first + i);
      ASSERT_NEAR(Get(t, mine[r].data(), i), ref, Tolerance(t, ref)) << c.name << " reducescatter rank " << r << " element " << i;
    }
    EXPECT_EQ(mine[r].back(), 0xEE) << c.name;
    ASSERT_EQ(std::memcmp(all[r].data(), all[0].data(), total * tb), 0) << c.name << " allgather rank " << r;
    EXPECT_EQ(all[r].back(), 0xEE) << c.name;
  }
  for (uint64_t i = 0; i < total; ++i) {
    const double ref = Reference(t, op, n, i);
    ASSERT_NEAR(Get(t, all[0].data(), i), ref, Tolerance(t, ref)) << c.name << " allgather element " << i;
  }
  Destroy(&ranks);
}

TEST(Algorithms, ReduceScatterAllGatherUnevenAndEmptyBlocks) {
  for (const Case& c : kCases) {
    CheckScatterGather(c, DataType::kFloat32, RedOp::kSum, {5000, 1, 2999});
    CheckScatterGather(c, DataType::kInt32, RedOp::kMax, {0, 17, 0, 4096});
    CheckScatterGather(c, DataType::kFloat8e4m3, RedOp::kSum, {1, 1});
    CheckScatterGather(c, DataType::kBfloat16, RedOp::kAvg, {100, 200, 0, 300, 7});
    if (HasFatalFailure()) return;
  }
}

// What each direction carries, from the plans every rank builds (plan.h): summed over
// the ranks, ring stream d sends every block's half d 2(n-1) times (n-1 hops of the
// reduce-scatter, n-1 of the all-gather), so the two directions carry the two halves;
// a chain's streams each send (n-1) x count elements (half A reduced one way and half
// B broadcast the same way, and the reverse), so both directions of every cable work
// all the time. Counts of 1, odd and many chunks of 64 elements.
TEST(Algorithms, RingAndChainCarryHalfTheDataEachWay) {
  for (int n : {3, 4, 5}) {
    for (uint64_t count : {uint64_t{1}, uint64_t{7}, uint64_t{64 * 37 + 3}}) {
      CollOp op;
      op.kind = CollKind::kAllReduce;
      op.type = DataType::kFloat32;
      op.blockElems = EvenBlocks(count, n);
      uint64_t halves[2] = {0, 0};
      for (uint64_t b : op.blockElems) {
        halves[0] += b / 2;
        halves[1] += b - b / 2;
      }
      uint64_t ring[2] = {0, 0}, chain[2] = {0, 0};
      for (int r = 0; r < n; ++r) {
        const Plan rp = BuildPlan(op, Algorithm::kRing, Topology{Shape::kRing, {}}, r, 64);
        const Plan cp = BuildPlan(op, Algorithm::kChain, Topology{Shape::kChain, {}}, r, 64);
        ASSERT_EQ(rp.streams.size(), 2u);
        ASSERT_EQ(cp.streams.size(), 2u);
        for (size_t d = 0; d < 2; ++d) {
          for (const SendItem& s : rp.streams[d].send) ring[d] += s.elems;
          for (const SendItem& s : cp.streams[d].send) chain[d] += s.elems;
        }
      }
      const uint64_t hops = static_cast<uint64_t>(n - 1);
      EXPECT_EQ(ring[0], 2 * hops * halves[0]) << "n " << n << " count " << count;
      EXPECT_EQ(ring[1], 2 * hops * halves[1]) << "n " << n << " count " << count;
      EXPECT_EQ(chain[0], hops * count) << "n " << n << " count " << count;
      EXPECT_EQ(chain[1], hops * count) << "n " << n << " count " << count;
    }
  }
}

TEST(Algorithms, RingAndChainChunksAreAtMostAQuarterOfAStep) {
  const uint64_t slot = (512 * 1024) / 4;  // a 512 KiB staging slot of floats
  CollOp op;
  op.type = DataType::kFloat32;
  op.blockElems = EvenBlocks(1 << 18, 4);  // 1 MiB of floats on 4 ranks
  // A step's half-block is 32 Ki elements: chunks of a quarter of it, four per step.
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kRing, slot), 8192u);
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kChain, slot), 8192u);
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kDirect, slot), slot);
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kOneShot, slot), slot);
  const Plan p = BuildPlan(op, Algorithm::kRing, Topology{Shape::kRing, {}}, 0, ChunkElemsFor(op, Algorithm::kRing, slot));
  EXPECT_EQ(p.streams[0].send.size(), 4u * 6);  // 4 chunks x 2(n-1) steps
  op.blockElems = EvenBlocks(1 << 22, 4);       // 16 MiB: the slot bounds it
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kRing, slot), slot);
  op.blockElems = EvenBlocks(100, 4);  // tiny: at least 16 KiB worth, never above the slot
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kRing, slot), kMinChunkBytes / 4);
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kRing, 1000), 1000u);
  op.type = DataType::kBfloat16;  // reduced in float: the floor counts float elements
  EXPECT_EQ(ChunkElemsFor(op, Algorithm::kRing, slot), kMinChunkBytes / 4);
}

TEST(Algorithms, ChooseAlgorithmFollowsShapeAndSmallBytes) {
  CollOp op;
  op.type = DataType::kFloat32;
  op.blockElems = EvenBlocks(16384, 4);  // 64 KiB
  EXPECT_EQ(ChooseAlgorithm(op, Shape::kRing, 64 * 1024), Algorithm::kOneShot);
  EXPECT_EQ(ChooseAlgorithm(op, Shape::kRing, 64 * 1024 - 1), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(op, Shape::kChain, 0), Algorithm::kChain);
  EXPECT_EQ(ChooseAlgorithm(op, Shape::kMesh, 0), Algorithm::kDirect);
  op.kind = CollKind::kReduceScatter;  // one-shot is for allreduce only
  EXPECT_EQ(ChooseAlgorithm(op, Shape::kMesh, 1 << 30), Algorithm::kDirect);
}

TEST(Algorithms, ShapeFromAdjacency) {
  auto adj = [](int n, std::vector<std::pair<int, int>> edges) {
    std::vector<std::vector<bool>> a(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), false));
    for (auto [x, y] : edges) a[static_cast<size_t>(x)][static_cast<size_t>(y)] = a[static_cast<size_t>(y)][static_cast<size_t>(x)] = true;
    return a;
  };
  Topology t;
  ASSERT_TRUE(ShapeFromAdjacency(adj(3, {{0, 1}, {1, 2}, {0, 2}}), &t).ok());
  EXPECT_EQ(t.shape, Shape::kMesh);
  ASSERT_TRUE(ShapeFromAdjacency(adj(4, {{0, 2}, {2, 1}, {1, 3}, {3, 0}}), &t).ok());
  EXPECT_EQ(t.shape, Shape::kRing);
  EXPECT_EQ(t.order, (std::vector<int>{0, 2, 1, 3}));
  ASSERT_TRUE(ShapeFromAdjacency(adj(4, {{3, 1}, {1, 0}, {0, 2}}), &t).ok());
  EXPECT_EQ(t.shape, Shape::kChain);
  EXPECT_EQ(t.order, (std::vector<int>{2, 0, 1, 3}));
  EXPECT_FALSE(ShapeFromAdjacency(adj(4, {{0, 1}, {2, 3}}), &t).ok());  // two islands
  EXPECT_FALSE(ShapeFromAdjacency(adj(3, {{0, 1}}), &t).ok());          // rank 2 reaches nobody
}

/// Connects 3 ranks whose options come from `options(rank)`; returns each rank's status.
std::vector<Status> ConnectThree(const std::function<CollOptions(int)>& options) {
  std::vector<RankSide> ranks(3);
  std::vector<std::vector<uint8_t>> addresses;
  for (RankSide& r : ranks) {
    Status made = MakeDomain("fake", 2000, &r.domain);
    if (made.ok()) {
      r.cache = std::make_unique<fabric::RegistrationCache>(*r.domain);
      made = r.domain->CreateWorker(&r.worker);
    }
    if (!made.ok()) return std::vector<Status>(3, made);
    addresses.push_back(r.worker->Address());
  }
  std::vector<Status> st(3);
  OnEveryRank(3, [&](int i) {
    CollOptions o = options(i);
    o.timeoutMs = 2000;
    std::unique_ptr<CollComm> comm;
    st[static_cast<size_t>(i)] = CollComm::Connect(*ranks[static_cast<size_t>(i)].worker, *ranks[static_cast<size_t>(i)].cache,
                                                   i, 3, addresses, o, &comm);
  });
  Destroy(&ranks);
  return st;
}

TEST(Algorithms, ConnectRejectsAShapeMismatch) {
  // Rank 1 believes in a chain, the others in a ring: connect fails with a named error.
  const std::vector<Status> st = ConnectThree([](int i) { return OptionsFor(kCases[i == 1 ? 1 : 0]); });
  EXPECT_FALSE(st[0].ok());
  EXPECT_NE(st[0].message().find("shape"), std::string::npos) << st[0].message();
}

TEST(Algorithms, ConnectRejectsAOneShotSizeMismatch) {
  // Rank 1 runs allreduces up to 1 MiB one-shot, the others none: they would pick different
  // algorithms for the same op (new-user trial: wrong results or a timeout). Connect fails
  // naming the setting.
  const std::vector<Status> st = ConnectThree([](int i) {
    CollOptions o = OptionsFor(kCases[0]);
    o.smallBytes = i == 1 ? (1u << 20) : 0;
    return o;
  });
  for (int i : {0, 2}) {
    EXPECT_FALSE(st[static_cast<size_t>(i)].ok()) << "rank " << i;
    EXPECT_NE(st[static_cast<size_t>(i)].message().find("RAILYARD_COLLNET_SMALL_BYTES"), std::string::npos)
        << st[static_cast<size_t>(i)].message();
  }
}

}  // namespace
}  // namespace railyard::collectives
