// gin-alltoall: the MoE dispatch shape. Every rank puts bytes/N (a multiple of 16)
// from its send area (chunk q at q × chunk) to every other rank q (into q's receive
// area at me × chunk) with a signal (ADD 1, strong), and waits for the signals of
// all of them; time = one iteration.
#include <chrono>

#include "tools/railyard-perf/gin_runner.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {
namespace {

Status Iterations(GinBench& b, std::size_t chunk, int count) {
  std::vector<void*> reqs;
  std::vector<bool> from(size_t(b.n), true);
  from[size_t(b.me)] = false;
  for (int k = 0; k < count; ++k) {
    for (int i = 1; i < b.n; ++i) {
      const int q = (b.me + i) % b.n;  // staggered, so not every rank hits rank 0 first
      void* req = nullptr;
      ncclResult_t rc = b.table->IputSignal(uint64_t(q) * chunk, b.dataMh, chunk, b.areaBytes + uint64_t(b.me) * chunk,
                                            b.dataMh, uint32_t(q), 8 * uint64_t(b.me), b.sigMh, 1,
                                            NCCL_NET_SIGNAL_OP_ADD, true, &req);
      if (rc != ncclSuccess) return b.CallFailed("iputSignal", q, rc);
      reqs.push_back(req);
      ++b.expected[size_t(q)];  // symmetric: q sends us as many as we send it
    }
    RY_RETURN_IF_ERROR(b.WaitFor(&reqs, from));
  }
  return Status::Ok();
}

}  // namespace

Status GinAllToAllSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                       long long* wrong) {
  const std::size_t chunk = bytes / std::size_t(b.n);
  FillPattern(reinterpret_cast<Elem*>(b.data), bytes / kElemSize, b.me, 0, 0);
  Poison(b.data + b.areaBytes, bytes);
  if (warmup > 0) RY_RETURN_IF_ERROR(Iterations(b, chunk, warmup));
  RY_RETURN_IF_ERROR(b.Barrier());
  const auto t0 = std::chrono::steady_clock::now();
  RY_RETURN_IF_ERROR(Iterations(b, chunk, iters));
  *usPerIter = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  *wrong = 0;
  if (check) {
    for (int q = 0; q < b.n; ++q) {
      if (q == b.me) continue;
      const auto* got = reinterpret_cast<const Elem*>(b.data + b.areaBytes + std::size_t(q) * chunk);
      *wrong += (long long)CountWrong(got, chunk / kElemSize, q, 0, std::size_t(b.me) * chunk / kElemSize);
    }
  }
  return Status::Ok();
}

}  // namespace railyard::perf
