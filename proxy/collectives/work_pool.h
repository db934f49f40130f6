// WorkPool: the registered work buffers of one CollComm (the accumulator, one-shot's
// scratch and the gather buffer of an op), kept across ops and handed to each begun op
// whole. Several ops may run at once on a comm (consecutive collectives overlap: the
// next one starts sending while the last chunks of the previous one drain), so each
// running op holds its own buffer; a finished op gives it back for the next one.
// Single-threaded, like its CollComm.
#pragma once

#include <cstdint>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/registration_cache.h"

namespace railyard::collectives {

/// One buffer of the pool: `bytes` bytes at `mem` (4 KiB aligned), registered for
/// local access as `region`.
struct WorkBuffer {
  uint8_t* mem = nullptr;
  uint64_t bytes = 0;
  const fabric::Region* region = nullptr;
};

class WorkPool {
 public:
  /// `cache` registers the buffers; it must outlive the pool.
  explicit WorkPool(fabric::RegistrationCache& cache) : cache_(cache) {}
  /// Frees every buffer (none may be in use by a pending fabric operation).
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// A buffer of at least `bytes` bytes (>= 1) for one op: the smallest idle one that
  /// is large enough, else a new one (an idle buffer too small for it is freed first,
  /// so the pool holds at most as many buffers as ops ever ran at once). *out stays
  /// valid until Give. SystemError when the memory cannot be allocated; the
  /// registration cache's error when it cannot be registered.
  Status Take(uint64_t bytes, WorkBuffer* out);
  /// The size of the buffer Take(bytes) would hand out now (an idle one may be larger).
  uint64_t TakeSize(uint64_t bytes) const;
  /// Returns the buffer Take handed out (its contents are not kept).
  void Give(const WorkBuffer& buffer);
  /// Frees idle buffers, smallest first, while the pool holds more than `maxBytes`;
  /// the largest idle buffer is always kept (the next op of that size reuses it
  /// instead of registering again).
  void TrimIdle(uint64_t maxBytes);
  /// Buffers held (idle and in use), and bytes held.
  size_t buffers() const;
  uint64_t bytesHeld() const;

 private:
  struct Slot {
    WorkBuffer buffer;
    bool busy = false;
  };
  void Free(Slot& slot);

  fabric::RegistrationCache& cache_;
  std::vector<Slot> slots_;
};

}  // namespace railyard::collectives
