// One collective as the engine runs it: kind, datatype, op and how the elements are
// cut into the ranks' blocks. The CollNet adapters turn NCCL's iallreduce /
// iallgather / ireducescatter (counts, byte windows, SGE parts) into this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "proxy/collectives/datatype.h"
#include "proxy/fabric/region.h"

namespace railyard::collectives {

/// What a collective computes (NCCL's ncclFunc names).
enum class CollKind : uint8_t { kAllReduce = 0, kAllGather = 1, kReduceScatter = 2 };
/// "allreduce", "allgather", "reducescatter".
const char* CollKindName(CollKind k);

/// A collective over `blockElems.size()` ranks. The global element space is the
/// ranks' blocks in rank order: rank r owns [BlockOffset(r), + blockElems[r]).
///  - kAllReduce: `send` and `recv` hold the whole space (may be the same pointer).
///  - kReduceScatter: `send` holds the whole space, `recv` this rank's block.
///  - kAllGather: `send` holds this rank's block, `recv` the whole space.
/// Blocks may differ in size and be empty (NCCL's byte windows). For kAllGather the
/// type is kUint8 and elements are bytes. `recvRegion`, when set, is a Region of the
/// engine's Domain covering recv (NCCL's recvMhandle); otherwise the engine acquires
/// one from the RegistrationCache for the duration of the op.
struct CollOp {
  CollKind kind = CollKind::kAllReduce;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  std::vector<uint64_t> blockElems;
  const void* send = nullptr;
  void* recv = nullptr;
  const fabric::Region* recvRegion = nullptr;

  /// First element of rank r's block.
  uint64_t BlockOffset(int r) const {
    uint64_t o = 0;
    for (int i = 0; i < r; ++i) o += blockElems[static_cast<size_t>(i)];
    return o;
  }
  /// Elements of the whole space.
  uint64_t TotalElems() const { return BlockOffset(static_cast<int>(blockElems.size())); }
};

/// `count` elements cut into `nranks` blocks as evenly as possible (the first
/// count % nranks blocks one longer): the allreduce layout.
std::vector<uint64_t> EvenBlocks(uint64_t count, int nranks);

}  // namespace railyard::collectives
