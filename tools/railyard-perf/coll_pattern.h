// The CollNet patterns of railyard-perf (-p allreduce | allgather | reducescatter):
// for each, how a requested size maps onto buffers (as nccl-tests sizes them), how
// one operation is posted through the CollNet table, and how -c 1 fills the inputs
// and checks every element against the double reference (proxy/collectives/reference.h).
// One file per pattern: coll_allreduce.cc, coll_allgather.cc, coll_reducescatter.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/collnet_v11.h"
#include "proxy/collectives/datatype.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {

/// Buffers of one size on one rank.
struct CollShape {
  std::size_t totalBytes = 0;  ///< the "size" column (nccl-tests: the whole result or input)
  std::size_t count = 0;       ///< the "count" column: totalBytes / element size
  std::size_t sendBytes = 0;   ///< this rank's input
  std::size_t recvBytes = 0;   ///< this rank's output
  std::size_t perRank = 0;     ///< elements of one rank's block (allgather, reducescatter)
};

/// What an operation needs from the run.
struct CollArgs {
  const ncclCollNet_v11_t* table = nullptr;  ///< v11 slots (v12 has the same order and SGE)
  void* comm = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* sendMh = nullptr;
  void* recvMh = nullptr;
  int rank = 0, nranks = 1;
  collectives::DataType type = collectives::DataType::kFloat32;
  collectives::RedOp op = collectives::RedOp::kSum;
};

/// One CollNet pattern.
struct CollPattern {
  Pattern pattern;
  /// The shape of a requested size (rounded down to whole elements per rank).
  CollShape (*shape)(std::size_t requestedBytes, int nranks, std::size_t typeBytes);
  /// Posts one operation; *request as the table returns it.
  ncclResult_t (*post)(const CollArgs& a, const CollShape& s, void** request);
  /// Writes this rank's input of iteration `salt`.
  void (*fill)(const CollArgs& a, const CollShape& s, std::uint64_t salt);
  /// Elements of the output that differ from the reference (beyond the type's tolerance).
  std::size_t (*check)(const CollArgs& a, const CollShape& s, std::uint64_t salt);
};

const CollPattern& AllReducePattern();
const CollPattern& AllGatherPattern();
const CollPattern& ReduceScatterPattern();

/// The CollNet pattern of `p`: AllGatherPattern() for kAllGather, ReduceScatterPattern()
/// for kReduceScatter, AllReducePattern() otherwise (callers pass a pattern for which
/// IsCollective(p) holds).
const CollPattern& PatternOps(Pattern p);

}  // namespace railyard::perf
