// gin-put: put bandwidth per size. Pairs (0<->1, 2<->3, ...) put `bytes` from their
// send area into each other's receive area, up to kInFlight puts outstanding; the
// last put of a phase carries a strong signal (INC) so the target knows every put of
// the phase landed. Time = phase time / iterations.
#include <chrono>

#include "tools/railyard-perf/gin_runner.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {
namespace {

constexpr std::size_t kInFlight = 8;

Status Phase(GinBench& b, int partner, std::size_t bytes, int count, bool put = true, bool receive = true) {
  std::vector<void*> reqs;
  for (int k = 0; k < count && put; ++k) {
    while (reqs.size() >= kInFlight) RY_RETURN_IF_ERROR(b.Poll(&reqs));
    void* req = nullptr;
    ncclResult_t rc = k + 1 < count
                          ? b.table->Iput(0, b.dataMh, bytes, b.areaBytes, b.dataMh, uint32_t(partner), &req)
                          : b.table->IputSignal(0, b.dataMh, bytes, b.areaBytes, b.dataMh, uint32_t(partner),
                                                8 * uint64_t(b.me), b.sigMh, 1, NCCL_NET_SIGNAL_OP_INC, true, &req);
    if (rc != ncclSuccess) return b.CallFailed("iput", partner, rc);
    reqs.push_back(req);
  }
  std::vector<bool> from(size_t(b.n), false);
  if (receive) {
    ++b.expected[size_t(partner)];
    from[size_t(partner)] = true;
  }
  return b.WaitFor(&reqs, from);
}

}  // namespace

Status GinPutSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                  long long* wrong) {
  const int partner = b.me ^ 1;
  const std::size_t count = bytes / kElemSize;
  FillPattern(reinterpret_cast<Elem*>(b.data), count, b.me, 0, 0);
  Poison(b.data + b.areaBytes, bytes);
  if (warmup > 0) RY_RETURN_IF_ERROR(Phase(b, partner, bytes, warmup));
  RY_RETURN_IF_ERROR(b.Barrier());
  const auto t0 = std::chrono::steady_clock::now();
  RY_RETURN_IF_ERROR(Phase(b, partner, bytes, iters));
  *usPerIter = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  *wrong = check ? (long long)CountWrong(reinterpret_cast<const Elem*>(b.data + b.areaBytes), count, partner, 0, 0) : 0;
  return Status::Ok();
}

Status GinPutOneWaySize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                        long long* wrong) {
  const int partner = b.me ^ 1;
  const bool sender = (b.me & 1) == 0;
  const std::size_t count = bytes / kElemSize;
  FillPattern(reinterpret_cast<Elem*>(b.data), count, b.me, 0, 0);
  if (!sender) Poison(b.data + b.areaBytes, bytes);
  if (warmup > 0) RY_RETURN_IF_ERROR(Phase(b, partner, bytes, warmup, sender, !sender));
  RY_RETURN_IF_ERROR(b.Barrier());
  const auto t0 = std::chrono::steady_clock::now();
  RY_RETURN_IF_ERROR(Phase(b, partner, bytes, iters, sender, !sender));
  *usPerIter = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  *wrong = check && !sender
               ? (long long)CountWrong(reinterpret_cast<const Elem*>(b.data + b.areaBytes), count, partner, 0, 0)
               : 0;
  return Status::Ok();
}

}  // namespace railyard::perf
