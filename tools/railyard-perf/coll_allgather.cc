// -p allgather: iallgather of S / n bytes per rank into an S-byte result (one SGE
// part, the whole window, as NCCL passes it); busbw factor (n-1)/n.
#include "proxy/collectives/reference.h"
#include "tools/railyard-perf/coll_pattern.h"

namespace railyard::perf {
namespace {
namespace ct = collectives::testing;

CollShape Shape(std::size_t requested, int nranks, std::size_t tb) {
  CollShape s;
  s.perRank = requested / tb / std::size_t(nranks);
  s.count = s.perRank * std::size_t(nranks);
  s.totalBytes = s.recvBytes = s.count * tb;
  s.sendBytes = s.perRank * tb;
  return s;
}
ncclResult_t Post(const CollArgs& a, const CollShape& s, void** request) {
  ncclNetSGE_v11_t part{a.recvMh, a.recv, s.recvBytes};
  const std::size_t tb = collectives::TypeBytes(a.type);
  return a.table->iallgather(a.comm, a.send, 1, &part, s.perRank * tb, 0, s.recvBytes, a.sendMh, request);
}
void Fill(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  const std::size_t first = std::size_t(a.rank) * s.perRank;
  for (std::size_t j = 0; j < s.perRank; ++j) {
    ct::Set(a.type, a.send, j, ct::InputValue(a.type, collectives::RedOp::kSum, a.rank, first + j, salt));
  }
}
std::size_t Check(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < s.count; ++i) {
    const int owner = int(i / s.perRank);
    const double want = ct::StoredInput(a.type, collectives::RedOp::kSum, owner, i, salt);
    if (!(ct::Get(a.type, a.recv, i) == want)) ++wrong;  // a copy: exact
  }
  return wrong;
}
}  // namespace

const CollPattern& AllGatherPattern() {
  static const CollPattern p{Pattern::kAllGather, &Shape, &Post, &Fill, &Check};
  return p;
}

}  // namespace railyard::perf
