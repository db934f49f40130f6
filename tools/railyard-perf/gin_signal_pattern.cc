// gin-signal: latency of a put+signal round trip. Pairs; the even rank puts `bytes`
// with a strong signal (INC) to the odd one, which answers with the same as soon as
// the signal arrives; time = one round trip.
#include <chrono>

#include "tools/railyard-perf/gin_runner.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {
namespace {

Status PutSignal(GinBench& b, int partner, std::size_t bytes, std::vector<void*>* reqs) {
  void* req = nullptr;
  ncclResult_t rc = b.table->IputSignal(0, b.dataMh, bytes, b.areaBytes, b.dataMh, uint32_t(partner),
                                        8 * uint64_t(b.me), b.sigMh, 1, NCCL_NET_SIGNAL_OP_INC, true, &req);
  if (rc != ncclSuccess) return b.CallFailed("iputSignal", partner, rc);
  reqs->push_back(req);
  return Status::Ok();
}

Status RoundTrips(GinBench& b, int partner, std::size_t bytes, int count) {
  const bool initiator = (b.me & 1) == 0;
  std::vector<void*> reqs;
  std::vector<bool> from(size_t(b.n), false);
  from[size_t(partner)] = true;
  std::vector<void*> none;
  for (int k = 0; k < count; ++k) {
    if (initiator) RY_RETURN_IF_ERROR(PutSignal(b, partner, bytes, &reqs));
    ++b.expected[size_t(partner)];
    // Wait for the partner's signal only (our own requests complete in the background).
    while (b.Signal(partner) < b.expected[size_t(partner)]) {
      if (std::chrono::steady_clock::now() > b.deadline) return SystemError("gin-signal: no signal from the partner");
      RY_RETURN_IF_ERROR(b.Poll(&reqs));
    }
    if (!initiator) RY_RETURN_IF_ERROR(PutSignal(b, partner, bytes, &reqs));
  }
  std::vector<bool> nobody(size_t(b.n), false);
  return b.WaitFor(&reqs, nobody);
}

}  // namespace

Status GinSignalSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                     long long* wrong) {
  const int partner = b.me ^ 1;
  const std::size_t count = bytes / kElemSize;
  FillPattern(reinterpret_cast<Elem*>(b.data), count, b.me, 0, 0);
  Poison(b.data + b.areaBytes, bytes);
  if (warmup > 0) RY_RETURN_IF_ERROR(RoundTrips(b, partner, bytes, warmup));
  RY_RETURN_IF_ERROR(b.Barrier());
  const auto t0 = std::chrono::steady_clock::now();
  RY_RETURN_IF_ERROR(RoundTrips(b, partner, bytes, iters));
  *usPerIter = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  *wrong = check ? (long long)CountWrong(reinterpret_cast<const Elem*>(b.data + b.areaBytes), count, partner, 0, 0) : 0;
  return Status::Ok();
}

}  // namespace railyard::perf
