// The schedule of a pipelined ring collective in one direction (pure arithmetic,
// no I/O). The ranks sit on a ring in `order`; this rank at position i sends to
// position i+1 and receives from i-1. Each rank's block is cut in two halves, one per
// direction, and each half into chunks of at most `chunkElems` elements.
//
// Steps t = 0 .. 2n-3 (n ranks): at step t position i sends block (i-1-t) mod n and
// receives block (i-2-t) mod n. Steps 0..n-2 are the reduce-scatter (the received
// chunk is reduced into the working buffer; after step n-2 position i holds block i
// fully reduced), steps n-1..2n-3 the all-gather (the received chunk is copied into
// the result). Chunk k of step t may be sent once chunk k of step t-1 was received
// (the same block), which is what pipelines the ring. Allreduce runs every step,
// reduce-scatter steps 0..n-2, all-gather steps n-1..2n-3.
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/collectives/coll_op.h"

namespace railyard::collectives {

/// One direction's schedule.
class RingSchedule {
 public:
  /// `order`: ranks in ring order for this direction; `rank` must be in it.
  /// `half`: 0 = the first half of every block, 1 = the second. `chunkElems` > 0.
  RingSchedule(const CollOp& op, std::vector<int> order, int rank, int half, uint64_t chunkElems);

  int nranks() const { return n_; }
  /// The ranks this rank sends to and receives from.
  int RightRank() const { return order_[static_cast<size_t>((pos_ + 1) % n_)]; }
  int LeftRank() const { return order_[static_cast<size_t>((pos_ + n_ - 1) % n_)]; }
  /// Steps of the op: [FirstStep(), EndStep()).
  int FirstStep() const { return first_; }
  int EndStep() const { return end_; }
  /// True for reduce-scatter steps (reduce on receipt), false for all-gather (copy).
  bool Reduces(int t) const { return t < n_ - 1; }
  /// Rank whose block is sent / received at step t.
  int SendBlockRank(int t) const { return BlockRankAt(pos_ - 1 - t); }
  int RecvBlockRank(int t) const { return BlockRankAt(pos_ - 2 - t); }
  /// Chunks of a rank's half-block, and chunk k's first element (global element
  /// space) and length.
  uint64_t Chunks(int blockRank) const;
  uint64_t ChunkFirst(int blockRank, uint64_t k) const;
  uint64_t ChunkElems(int blockRank, uint64_t k) const;
  /// Chunks sent / received over all steps, and the flat index of chunk k of step t
  /// among them in stream order (step-major). The left neighbour's send stream is
  /// this rank's receive stream, chunk for chunk.
  uint64_t TotalSendChunks() const { return sendBase_.back(); }
  uint64_t TotalRecvChunks() const { return recvBase_.back(); }
  uint64_t SendFlat(int t, uint64_t k) const { return sendBase_[static_cast<size_t>(t - first_)] + k; }
  uint64_t RecvFlat(int t, uint64_t k) const { return recvBase_[static_cast<size_t>(t - first_)] + k; }

 private:
  int BlockRankAt(int p) const { return order_[static_cast<size_t>(((p % n_) + n_) % n_)]; }

  std::vector<int> order_;
  int n_ = 0;
  int pos_ = 0;
  int first_ = 0, end_ = 0;
  uint64_t chunkElems_ = 1;
  std::vector<uint64_t> halfFirst_, halfElems_;  ///< per rank
  std::vector<uint64_t> sendBase_, recvBase_;    ///< flat index of each step's chunk 0, + end
};

}  // namespace railyard::collectives
