// Collectives posted together (CollComm runs up to kMaxOpsInFlight of them at once,
// each stream carrying one op's chunks after the previous op's): on every algorithm,
// each rank posts a batch of different collectives on their own buffers before
// testing any, then tests them last to first; every result must equal the double
// reference and be the same bits on every rank, and no byte past a result may be
// written. Also the WorkPool the running ops take their buffers from.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "proxy/collectives/reference.h"
#include "proxy/collectives/work_pool.h"
#include "tests/collectives/ring_harness.h"

namespace railyard::collectives {
namespace {
using namespace testing;

struct Case {
  Shape shape;
  bool small;
  const char* name;
};
const Case kCases[] = {
    {Shape::kRing, false, "ring"},        {Shape::kChain, false, "chain"},
    {Shape::kMesh, false, "direct"},      {Shape::kRing, true, "oneshot_ring"},
    {Shape::kChain, true, "oneshot_chain"}, {Shape::kMesh, true, "oneshot_mesh"},
};

/// One collective of the batch: kind, type, op and blocks (elements).
struct Spec {
  CollKind kind;
  DataType type;
  RedOp op;
  std::vector<uint64_t> blocks;
};

/// More ops than kMaxOpsInFlight, of every kind, sizes from empty to many chunks.
std::vector<Spec> Batch() {
  return {
      {CollKind::kAllReduce, DataType::kFloat32, RedOp::kSum, {1251, 1250, 1250, 1250}},
      {CollKind::kAllReduce, DataType::kInt32, RedOp::kMax, {2, 2, 2, 1}},
      {CollKind::kReduceScatter, DataType::kFloat32, RedOp::kSum, {3000, 0, 17, 999}},
      {CollKind::kAllGather, DataType::kUint8, RedOp::kSum, {4096, 1, 0, 5000}},
      {CollKind::kAllReduce, DataType::kFloat16, RedOp::kAvg, {700, 700, 700, 703}},
      {CollKind::kAllReduce, DataType::kFloat32, RedOp::kSum, {0, 0, 0, 0}},
      {CollKind::kAllReduce, DataType::kInt64, RedOp::kProd, {3, 3, 3, 3}},
      {CollKind::kAllReduce, DataType::kBfloat16, RedOp::kMin, {9000, 9001, 9002, 9003}},
  };
}

struct Buffers {
  std::vector<uint8_t> in, out;
};

uint64_t Total(const Spec& s) {
  uint64_t t = 0;
  for (uint64_t b : s.blocks) t += b;
  return t;
}

/// Rank r's input and (guarded) output of one spec.
Buffers MakeBuffers(const Spec& s, int r) {
  const size_t tb = TypeBytes(s.type);
  const uint64_t total = Total(s);
  const uint64_t inElems = s.kind == CollKind::kAllGather ? s.blocks[static_cast<size_t>(r)] : total;
  const uint64_t outElems = s.kind == CollKind::kReduceScatter ? s.blocks[static_cast<size_t>(r)] : total;
  Buffers b;
  b.in.resize(inElems * tb + 1);
  if (s.kind == CollKind::kAllGather) {
    uint64_t first = 0;
    for (int q = 0; q < r; ++q) first += s.blocks[static_cast<size_t>(q)];
    for (uint64_t i = 0; i < inElems; ++i) b.in[i] = static_cast<uint8_t>((first + i) * 7 + 3);
  } else {
    for (uint64_t i = 0; i < inElems; ++i) Set(s.type, b.in.data(), i, InputValue(s.type, s.op, r, i));
  }
  b.out.assign(outElems * tb + 1, 0xEE);
  return b;
}

void CheckBatch(const std::string& transport, const Case& c) {
  constexpr int n = 4;
  CollOptions o;
  o.chunkBytes = 4096;
  o.slots = 3;
  o.timeoutMs = 20000;
  o.topology.shape = c.shape;
  o.smallBytes = c.small ? (1ull << 40) : 0;
  std::vector<RankSide> ranks;
  { Status s = MakeRing(transport, n, o, &ranks); ASSERT_TRUE(s.ok()) << c.name << ": " << s.message(); }
  const std::vector<Spec> specs = Batch();
  ASSERT_GT(specs.size(), static_cast<size_t>(CollComm::kMaxOpsInFlight));
  std::vector<std::vector<Buffers>> bufs(n);
  for (int r = 0; r < n; ++r) {
    for (const Spec& s : specs) bufs[static_cast<size_t>(r)].push_back(MakeBuffers(s, r));
  }
  std::vector<Status> st(n);
  OnEveryRank(n, [&](int r) {
    const size_t R = static_cast<size_t>(r);
    std::vector<CollRequest*> reqs;
    for (size_t k = 0; k < specs.size(); ++k) {
      CollOp op;
      op.kind = specs[k].kind;
      op.type = specs[k].type;
      op.op = specs[k].op;
      op.blockElems = specs[k].blocks;
      op.send = bufs[R][k].in.data();
      op.recv = bufs[R][k].out.data();
      CollRequest* req = nullptr;
      st[R] = ranks[R].comm->Post(std::move(op), &req);
      if (!st[R].ok()) return;
      reqs.push_back(req);
    }
    // Last to first: a later op's test must not wait on, or finish, an earlier one.
    for (size_t k = reqs.size(); k-- > 0;) {
      for (bool done = false; !done;) {
        uint64_t bytes = 0;
        st[R] = ranks[R].comm->Test(reqs[k], &done, &bytes);
        if (!st[R].ok()) return;
        if (done) {
          EXPECT_EQ(bytes, bufs[R][k].out.size() - 1) << c.name << " op " << k;
        }
        std::this_thread::yield();
      }
    }
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << c.name << ": " << st[static_cast<size_t>(r)].message();
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    const size_t tb = TypeBytes(s.type);
    CollOp layout;
    layout.blockElems = s.blocks;
    for (int r = 0; r < n; ++r) {
      const Buffers& b = bufs[static_cast<size_t>(r)][k];
      EXPECT_EQ(b.out.back(), 0xEE) << c.name << " op " << k << " rank " << r << ": byte past the result written";
      if (s.kind == CollKind::kAllGather) {
        for (uint64_t i = 0; i + 1 < b.out.size(); ++i) {
          ASSERT_EQ(b.out[i], static_cast<uint8_t>(i * 7 + 3)) << c.name << " allgather op " << k << " rank " << r << " byte " << i;
        }
        continue;
      }
      const uint64_t first = s.kind == CollKind::kReduceScatter ? layout.BlockOffset(r) : 0;
      for (uint64_t i = 0; (i + 1) * tb < b.out.size(); ++i) {
        const double ref = Reference(s.type, s.op, n, first + i);
        ASSERT_NEAR(Get(s.type, b.out.data(), i), ref, Tolerance(s.type, ref))
            << c.name << " op " << k << " (" << TypeName(s.type) << " " << OpName(s.op) << ") rank " << r << " element " << i;
      }
      if (s.kind == CollKind::kAllReduce) {
        ASSERT_EQ(std::memcmp(b.out.data(), bufs[0][k].out.data(), b.out.size()), 0)
            << c.name << " op " << k << ": rank " << r << " differs from rank 0";
      }
    }
  }
  Destroy(&ranks);
}

TEST(Overlap, OpsPostedTogetherEachGetTheirOwnResultOnEveryAlgorithm) {
  for (const Case& c : kCases) {
    CheckBatch("fake", c);
    if (HasFatalFailure()) return;
  }
}

TEST(Overlap, OpsPostedTogetherOverTcpLoopback) {
  CheckBatch("tcp", kCases[0]);
}

TEST(WorkPool, ReusesTheSmallestIdleBufferThatFitsReplacesOneTooSmallAndTrims) {
  std::unique_ptr<fabric::Domain> domain;
  ASSERT_TRUE(MakeDomain("fake", 1000, &domain).ok());
  fabric::RegistrationCache cache(*domain);
  {
    WorkPool pool(cache);
    WorkBuffer a, b, c;
    ASSERT_TRUE(pool.Take(10000, &a).ok());
    ASSERT_TRUE(pool.Take(100000, &b).ok());
    EXPECT_NE(a.mem, b.mem);
    EXPECT_GE(a.bytes, 10000u);
    EXPECT_EQ(a.bytes % 4096, 0u);
    ASSERT_NE(a.region, nullptr);
    EXPECT_TRUE(a.region->Contains(reinterpret_cast<uint64_t>(a.mem), a.bytes));
    pool.Give(a);
    pool.Give(b);
    ASSERT_TRUE(pool.Take(5000, &c).ok());  // both fit: the smaller one
    EXPECT_EQ(c.mem, a.mem);
    WorkBuffer d;
    ASSERT_TRUE(pool.Take(5000, &d).ok());  // a is busy: b
    EXPECT_EQ(d.mem, b.mem);
    pool.Give(c);
    WorkBuffer e;
    ASSERT_TRUE(pool.Take(1 << 20, &e).ok());  // a is too small: freed and replaced
    EXPECT_EQ(pool.buffers(), 2u);
    EXPECT_GE(e.bytes, 1u << 20);
    EXPECT_EQ(pool.bytesHeld(), e.bytes + d.bytes);
    EXPECT_EQ(cache.stats().live, 2u);
    // What Take would hand out: the smallest idle buffer that fits, else a new rounded one.
    EXPECT_EQ(pool.TakeSize(4097), 8192u);
    pool.Give(e);
    EXPECT_EQ(pool.TakeSize(4097), e.bytes);
    pool.Give(d);
    EXPECT_EQ(pool.TakeSize(4097), d.bytes);  // d (b's buffer) is the smaller idle one
    // Trimming frees idle buffers, smallest first, and always keeps the largest.
    pool.TrimIdle(0);
    EXPECT_EQ(pool.buffers(), 1u);
    EXPECT_EQ(pool.bytesHeld(), e.bytes);
    EXPECT_EQ(cache.stats().live, 1u);
    WorkBuffer f;
    ASSERT_TRUE(pool.Take(100, &f).ok());  // the one kept is reused
    EXPECT_EQ(f.mem, e.mem);
  }
  EXPECT_EQ(cache.stats().live, 0u);  // the pool deregisters what it held
}

}  // namespace
}  // namespace railyard::collectives
