// -p reducescatter: ireducescatter of an S-byte input (one SGE part, the whole
// window) into this rank's S / n bytes; busbw factor (n-1)/n.
#include <cmath>

#include "proxy/collectives/reference.h"
#include "tools/railyard-perf/coll_pattern.h"

namespace railyard::perf {
namespace {
namespace ct = collectives::testing;

CollShape Shape(std::size_t requested, int nranks, std::size_t tb) {
  CollShape s;
  s.perRank = requested / tb / std::size_t(nranks);
  s.count = s.perRank * std::size_t(nranks);
  s.totalBytes = s.sendBytes = s.count * tb;
  s.recvBytes = s.perRank * tb;
  return s;
}
ncclResult_t Post(const CollArgs& a, const CollShape& s, void** request) {
  ncclNetSGE_v11_t part{a.sendMh, a.send, s.sendBytes};
  const std::size_t tb = collectives::TypeBytes(a.type);
  return a.table->ireducescatter(a.comm, 1, &part, a.recv, s.perRank * tb, 0, s.sendBytes,
                                 static_cast<ncclDataType_t>(a.type), static_cast<ncclRedOp_t>(a.op),
                                 a.recvMh, request);
}
void Fill(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  for (std::size_t i = 0; i < s.count; ++i) ct::Set(a.type, a.send, i, ct::InputValue(a.type, a.op, a.rank, i, salt));
}
std::size_t Check(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  std::size_t wrong = 0;
  const std::size_t first = std::size_t(a.rank) * s.perRank;
  for (std::size_t j = 0; j < s.perRank; ++j) {
    const double ref = ct::Reference(a.type, a.op, a.nranks, first + j, salt);
    if (!(std::fabs(ct::Get(a.type, a.recv, j) - ref) <= ct::Tolerance(a.type, ref))) ++wrong;
  }
  return wrong;
}
}  // namespace

const CollPattern& ReduceScatterPattern() {
  static const CollPattern p{Pattern::kReduceScatter, &Shape, &Post, &Fill, &Check};
  return p;
}

}  // namespace railyard::perf
