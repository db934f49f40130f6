// See gin_proxy_driver.h.
#include "tests/conformance/gin_proxy_driver.h"

#include <sched.h>

namespace railyard::conformance {

void EncodeGfd(const GfdFields& f, uint64_t q[8]) {
  q[0] = 1 | (uint64_t(f.op & 0x3f) << 1) | (f.size << 7);
  q[1] = 1 | (f.srcOff << 1);
  q[2] = 1 | (f.srcHandle << 1);
  q[3] = 1 | (f.dstOff << 1);
  q[4] = 1 | (f.dstHandle << 1);
  q[5] = 1 | (uint64_t(f.counterId) << 1) | (uint64_t(f.signalId) << 17) | ((f.signalValue & 0xffff) << 33);
  q[6] = 1 | ((f.signalValue >> 16) << 1);
  q[7] = 1;
}

GfdFields DecodeGfd(const uint64_t q[8]) {
  GfdFields f;
  f.op = uint32_t(q[0] >> 1) & 0x3f;
  f.size = q[0] >> 7;
  f.srcOff = q[1] >> 1;
  f.srcHandle = q[2] >> 1;
  f.dstOff = q[3] >> 1;
  f.dstHandle = q[4] >> 1;
  f.counterId = uint16_t(q[5] >> 1);
  f.signalId = uint16_t(q[5] >> 17);
  f.signalValue = ((q[5] >> 33) & 0xffff) | ((q[6] >> 1) << 16);
  return f;
}

ProxyQueues::ProxyQueues(int nranks, int queueSize)
    : nranks_(nranks), queueSize_(queueSize), slots_(new Gfd[size_t(nranks) * size_t(queueSize)]),
      producer_(new std::atomic<uint64_t>[size_t(nranks)]), consumer_(new std::atomic<uint64_t>[size_t(nranks)]) {
  for (size_t i = 0; i < size_t(nranks) * size_t(queueSize); ++i) {
    for (auto& w : slots_[i].q) w.store(0, std::memory_order_relaxed);
  }
  for (int p = 0; p < nranks; ++p) {
    producer_[size_t(p)].store(0);
    consumer_[size_t(p)].store(0);
  }
}

bool ProxyQueues::Post(int peer, const GfdFields& f, std::chrono::steady_clock::time_point deadline) {
  const uint64_t slot = producer_[size_t(peer)].fetch_add(1, std::memory_order_acq_rel);
  while (slot - consumer_[size_t(peer)].load(std::memory_order_acquire) >= uint64_t(queueSize_)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::sched_yield();
  }
  uint64_t q[8];
  EncodeGfd(f, q);
  Gfd& g = Slot(peer, slot);
  for (int i = 7; i >= 0; --i) g.q[i].store(q[i], std::memory_order_release);
  return true;
}

bool ProxyQueues::Drained() const {
  for (int p = 0; p < nranks_; ++p) {
    if (consumer_[size_t(p)].load(std::memory_order_acquire) != producer_[size_t(p)].load(std::memory_order_acquire)) {
      return false;
    }
  }
  return true;
}

ncclResult_t ProxyConsumer::Pass() {
  for (int peer = 0; peer < q_.nranks(); ++peer) {
    // Dispatch every valid descriptor at the head.
    while (dispatched_[size_t(peer)] - q_.consumer_[size_t(peer)].load() < uint64_t(q_.queueSize())) {
      Gfd& g = q_.Slot(peer, dispatched_[size_t(peer)]);
      if ((g.q[0].load(std::memory_order_acquire) & 1) == 0) break;
      uint64_t q[8];
      for (int i = 0; i < 8; ++i) {
        while (((q[i] = g.q[i].load(std::memory_order_acquire)) & 1) == 0) ::sched_yield();
      }
      for (auto& w : g.q) w.store(0, std::memory_order_relaxed);
      GfdFields f = DecodeGfd(q);
      const uint64_t slot = dispatched_[size_t(peer)] % uint64_t(q_.queueSize());
      void* srcMh = reinterpret_cast<void*>(uintptr_t(f.srcHandle));
      uint64_t srcOff = f.srcOff;
      if (f.op & kGfdInline) {
        // NCCL copies the inline value into its scratch and puts from there (§4.4).
        const uint64_t index = uint64_t(peer) * uint64_t(q_.queueSize()) + slot;
        w_.inlineScratch[index] = (f.srcOff & ((1ull << 48) - 1)) | (f.srcHandle << 48);
        srcMh = w_.inlineMh;
        srcOff = index * 8;
      }
      void* dstMh = reinterpret_cast<void*>(uintptr_t(f.dstHandle));
      void* req = nullptr;
      ncclResult_t rc;
      if (f.op & (kGfdSignalInc | kGfdSignalAdd)) {
        const uint32_t sop = (f.op & kGfdSignalInc) ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD;
        rc = table_.IputSignal(srcOff, srcMh, f.size, f.dstOff, dstMh, uint32_t(peer), uint64_t(f.signalId) * 8,
                               w_.signalsMh, f.signalValue, sop, strong_, &req);
      } else {
        rc = table_.Iput(srcOff, srcMh, f.size, f.dstOff, dstMh, uint32_t(peer), &req);
      }
      if (rc != ncclSuccess) {
        error_ = "dispatch to peer " + std::to_string(peer) + " returned " + std::to_string(rc);
        return rc;
      }
      if (req == nullptr) {
        error_ = "dispatch to peer " + std::to_string(peer) + " returned a NULL request";
        return ncclInternalError;
      }
      inflight_[size_t(peer)].push_back({req, (f.op & kGfdCounter) != 0, f.counterId});
      ++dispatched_[size_t(peer)];
      ++total_;
    }
    // Poll every unfinished request; advance the consumer index in order.
    auto& fl = inflight_[size_t(peer)];
    for (auto& e : fl) {
      if (e.request == nullptr) continue;
      int done = 0;
      ncclResult_t rc = table_.Test(e.request, &done);
      if (rc != ncclSuccess) {
        error_ = "test of a request to peer " + std::to_string(peer) + " returned " + std::to_string(rc);
        return rc;
      }
      if (done) {
        e.request = nullptr;
        if (e.counter) w_.counters[e.counterId].fetch_add(1, std::memory_order_release);
      }
    }
    while (!fl.empty() && fl.front().request == nullptr) {
      fl.pop_front();
      q_.consumer_[size_t(peer)].fetch_add(1, std::memory_order_acq_rel);
    }
    ncclResult_t rc = table_.Progress();
    if (rc != ncclSuccess) {
      error_ = "progress returned " + std::to_string(rc);
      return rc;
    }
  }
  return ncclSuccess;
}

}  // namespace railyard::conformance
