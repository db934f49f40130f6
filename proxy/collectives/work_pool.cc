#include "proxy/collectives/work_pool.h"

#include <cstdlib>
#include <string>

namespace railyard::collectives {

WorkPool::~WorkPool() {
  for (Slot& s : slots_) Free(s);
}

void WorkPool::Free(Slot& slot) {
  if (slot.buffer.region) (void)cache_.Release(slot.buffer.region);
  std::free(slot.buffer.mem);
  slot = Slot{};
}

uint64_t WorkPool::bytesHeld() const {
  uint64_t b = 0;
  for (const Slot& s : slots_) b += s.buffer.bytes;
  return b;
}

Status WorkPool::Take(uint64_t bytes, WorkBuffer* out) {
  if (bytes == 0) bytes = 1;
  Slot* best = nullptr;
  Slot* smallIdle = nullptr;
  for (Slot& s : slots_) {
    if (s.busy) continue;
    if (s.buffer.bytes >= bytes) {
      if (!best || s.buffer.bytes < best->buffer.bytes) best = &s;
    } else {
      smallIdle = &s;
    }
  }
  if (!best) {
    if (smallIdle) {
      Free(*smallIdle);
      best = smallIdle;
    } else {
      slots_.emplace_back();
      best = &slots_.back();
    }
    const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
    auto* mem = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
    if (!mem) return SystemError("collnet: cannot allocate " + std::to_string(rounded) + " work bytes");
    const fabric::Region* region = nullptr;
    Status s = cache_.Acquire(mem, rounded, fabric::kAccessLocal, fabric::MemoryKind::kHost, &region);
    if (!s.ok()) {
      std::free(mem);
      return s;
    }
    best->buffer = {mem, rounded, region};
  }
  best->busy = true;
  *out = best->buffer;
  return Status::Ok();
}

void WorkPool::Give(const WorkBuffer& buffer) {
  for (Slot& s : slots_) {
    if (s.buffer.mem == buffer.mem) s.busy = false;
  }
}

}  // namespace railyard::collectives
