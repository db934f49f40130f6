#include "proxy/collectives/ring_schedule.h"

#include <algorithm>

namespace railyard::collectives {

const char* CollKindName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "allreduce";
    case CollKind::kAllGather: return "allgather";
    case CollKind::kReduceScatter: return "reducescatter";
  }
  return "unknown";
}

std::vector<uint64_t> EvenBlocks(uint64_t count, int nranks) {
  std::vector<uint64_t> b(static_cast<size_t>(nranks), count / static_cast<uint64_t>(nranks));
  for (uint64_t r = 0; r < count % static_cast<uint64_t>(nranks); ++r) b[r] += 1;
  return b;
}

RingSchedule::RingSchedule(const CollOp& op, std::vector<int> order, int rank, int half,
                           uint64_t chunkElems)
    : order_(std::move(order)), n_(static_cast<int>(order_.size())), chunkElems_(chunkElems) {
  pos_ = static_cast<int>(std::find(order_.begin(), order_.end(), rank) - order_.begin());
  switch (op.kind) {
    case CollKind::kAllReduce: first_ = 0; end_ = 2 * n_ - 2; break;
    case CollKind::kReduceScatter: first_ = 0; end_ = n_ - 1; break;
    case CollKind::kAllGather: first_ = n_ - 1; end_ = 2 * n_ - 2; break;
  }
  halfFirst_.resize(static_cast<size_t>(n_));
  halfElems_.resize(static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) {
    const uint64_t len = op.blockElems[static_cast<size_t>(r)];
    const uint64_t lo = len / 2;
    halfFirst_[static_cast<size_t>(r)] = op.BlockOffset(r) + (half ? lo : 0);
    halfElems_[static_cast<size_t>(r)] = half ? len - lo : lo;
  }
  sendBase_.push_back(0);
  recvBase_.push_back(0);
  for (int t = first_; t < end_; ++t) {
    sendBase_.push_back(sendBase_.back() + Chunks(SendBlockRank(t)));
    recvBase_.push_back(recvBase_.back() + Chunks(RecvBlockRank(t)));
  }
}

uint64_t RingSchedule::Chunks(int blockRank) const {
  const uint64_t e = halfElems_[static_cast<size_t>(blockRank)];
  return (e + chunkElems_ - 1) / chunkElems_;
}

uint64_t RingSchedule::ChunkFirst(int blockRank, uint64_t k) const {
  return halfFirst_[static_cast<size_t>(blockRank)] + k * chunkElems_;
}

uint64_t RingSchedule::ChunkElems(int blockRank, uint64_t k) const {
  const uint64_t e = halfElems_[static_cast<size_t>(blockRank)];
  return std::min(chunkElems_, e - k * chunkElems_);
}

}  // namespace railyard::collectives
