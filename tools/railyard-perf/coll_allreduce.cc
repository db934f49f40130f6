// -p allreduce: iallreduce of `count` elements, in and out of place buffers of S bytes;
// busbw factor 2(n-1)/n (patterns.cc).
#include <cmath>

#include "proxy/collectives/reference.h"
#include "tools/railyard-perf/coll_pattern.h"

namespace railyard::perf {
namespace {
namespace ct = collectives::testing;

CollShape Shape(std::size_t requested, int /*nranks*/, std::size_t tb) {
  CollShape s;
  s.count = requested / tb;
  s.totalBytes = s.sendBytes = s.recvBytes = s.count * tb;
  return s;
}
ncclResult_t Post(const CollArgs& a, const CollShape& s, void** request) {
  return a.table->iallreduce(a.comm, a.send, a.recv, s.count, static_cast<ncclDataType_t>(a.type),
                             static_cast<ncclRedOp_t>(a.op), a.sendMh, a.recvMh, request);
}
void Fill(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  for (std::size_t i = 0; i < s.count; ++i) ct::Set(a.type, a.send, i, ct::InputValue(a.type, a.op, a.rank, i, salt));
}
std::size_t Check(const CollArgs& a, const CollShape& s, std::uint64_t salt) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < s.count; ++i) {
    const double ref = ct::Reference(a.type, a.op, a.nranks, i, salt);
    const double got = ct::Get(a.type, a.recv, i);
    if (!(std::fabs(got - ref) <= ct::Tolerance(a.type, ref))) ++wrong;
  }
  return wrong;
}
}  // namespace

const CollPattern& AllReducePattern() {
  static const CollPattern p{Pattern::kAllReduce, &Shape, &Post, &Fill, &Check};
  return p;
}

}  // namespace railyard::perf
