// What NCCL's GIN proxy thread does (nccl-net-abi.md §4.4, gin_host_proxy.cc; the 2.30
// proxy over RMA, nccl-2.30-abi.md §4.7), for tests: per-peer queues of 64-byte
// descriptors in host memory, each qword with a valid bit; a producer (the GPU's
// part: claim a slot with a fetch-add on the peer's producer index, wait for room,
// write the qwords) and a consumer (spin until all 8 qwords are valid, copy, zero
// the slot, dispatch iput / iputSignal, poll test, bump the local counter of a
// WithCounter descriptor when done, advance the consumer index in order, call the
// progress entry after each peer).
//
// The descriptor has the shape of ncclGinProxyGfd_t (8 qwords; op 6 bits and size 57
// bits in qword 0; src/dst offsets and handles in qwords 1-4; counterId, signalId
// and 16 bits of the signal value in qword 5; 48 more bits in qword 6); the bit
// positions are this driver's (NCCL's descriptor is internal to NCCL).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tools/railyard-perf/one_sided_table.h"

namespace railyard::conformance {

/// Op bits (NCCL: Put 1, WithInline 2, WithCounter 4, WithSignalInc 8, WithSignalAdd 16).
enum GfdOp : uint32_t { kGfdPut = 1, kGfdInline = 2, kGfdCounter = 4, kGfdSignalInc = 8, kGfdSignalAdd = 16 };

/// A descriptor's contents.
struct GfdFields {
  uint32_t op = kGfdPut;
  uint64_t size = 0;         ///< bytes (57 bits); 0 = a signal alone
  uint64_t srcOff = 0;       ///< or, with kGfdInline, the low 48 bits of the value
  uint64_t srcHandle = 0;    ///< or, with kGfdInline, the high 16 bits of the value
  uint64_t dstOff = 0;
  uint64_t dstHandle = 0;
  uint16_t counterId = 0;
  uint16_t signalId = 0;
  uint64_t signalValue = 0;  ///< 64 bits: 16 in qword 5, 48 in qword 6
};

/// 64 bytes, bit 0 of each qword = valid.
struct alignas(64) Gfd {
  std::atomic<uint64_t> q[8];
};
static_assert(sizeof(Gfd) == 64);

/// Packs `f` into 8 qwords with the valid bit set. Fields must fit their widths.
void EncodeGfd(const GfdFields& f, uint64_t out[8]);
/// Unpacks 8 valid qwords.
GfdFields DecodeGfd(const uint64_t q[8]);

/// The host-memory queues and indices of one comm, shared by producer and consumer.
class ProxyQueues {
 public:
  ProxyQueues(int nranks, int queueSize);
  int nranks() const { return nranks_; }
  int queueSize() const { return queueSize_; }
  /// Producer: claims the next slot of `peer`, waits (bounded) until it is free,
  /// then writes the qwords (7 down to 0, as separate stores). False on timeout.
  bool Post(int peer, const GfdFields& f, std::chrono::steady_clock::time_point deadline);
  /// Producer: true once every posted descriptor of every peer has been completed.
  bool Drained() const;

 private:
  friend class ProxyConsumer;
  Gfd& Slot(int peer, uint64_t index) { return slots_[size_t(peer) * size_t(queueSize_) + (index % queueSize_)]; }
  int nranks_;
  int queueSize_;
  std::unique_ptr<Gfd[]> slots_;
  std::unique_ptr<std::atomic<uint64_t>[]> producer_;  ///< per peer: slots claimed
  std::unique_ptr<std::atomic<uint64_t>[]> consumer_;  ///< per peer: slots completed (in order)
};

/// The windows the consumer dispatches with (registered by the caller).
struct ProxyWindows {
  void* signalsMh = nullptr;    ///< signals buffer (FORCE_SO), signalOff = signalId × 8
  void* inlineMh = nullptr;     ///< inline scratch: one uint64_t per (peer, slot)
  uint64_t* inlineScratch = nullptr;
  std::atomic<uint64_t>* counters = nullptr;  ///< local completion counters
};

/// The proxy thread's loop body.
class ProxyConsumer {
 public:
  ProxyConsumer(perf::OneSidedTable& table, ProxyQueues& queues, const ProxyWindows& windows, bool strongSignals)
      : table_(table), q_(queues), w_(windows), strong_(strongSignals), inflight_(size_t(queues.nranks())),
        dispatched_(size_t(queues.nranks()), 0) {}
  /// One pass over every peer: dispatch what is valid, test what is in flight, advance
  /// consumer indices, progress. Returns the first plugin error (and `error()` says
  /// where), or ncclSuccess.
  ncclResult_t Pass();
  /// Descriptors dispatched so far.
  uint64_t dispatched() const { return total_; }
  const std::string& error() const { return error_; }

 private:
  struct InFlight {
    void* request = nullptr;
    bool counter = false;
    uint16_t counterId = 0;
  };
  perf::OneSidedTable& table_;
  ProxyQueues& q_;
  ProxyWindows w_;
  bool strong_;
  std::vector<std::deque<InFlight>> inflight_;
  std::vector<uint64_t> dispatched_;
  uint64_t total_ = 0;
  std::string error_;
};

}  // namespace railyard::conformance
