#include "proxy/collectives/work_pool.h"

#include <cstdlib>
#include <string>

#include "env/log.h"

namespace railyard::collectives {

WorkPool::~WorkPool() {
  for (Slot& s : slots_) Free(s);
}

void WorkPool::Free(Slot& slot) {
  // A buffer whose deregistration failed may still be written by a peer: kept (leaked)
  // until exit rather than freed for reuse.
  if (slot.buffer.region && !cache_.Release(slot.buffer.region).ok()) {
    RY_WARN("collectives: a work buffer's deregistration failed; it stays allocated until the process exits");
    slot = Slot{};
    return;
  }
  std::free(slot.buffer.mem);
  slot = Slot{};
}

size_t WorkPool::buffers() const {
  size_t n = 0;
  for (const Slot& s : slots_) n += s.buffer.mem != nullptr;
  return n;
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

uint64_t WorkPool::TakeSize(uint64_t bytes) const {
  if (bytes == 0) bytes = 1;
  uint64_t best = 0;
  for (const Slot& s : slots_) {
    if (!s.busy && s.buffer.bytes >= bytes && (best == 0 || s.buffer.bytes < best)) best = s.buffer.bytes;
  }
  return best ? best : (bytes + 4095) / 4096 * 4096;
}

void WorkPool::TrimIdle(uint64_t maxBytes) {
  Slot* largest = nullptr;
  for (Slot& s : slots_) {
    if (!s.busy && s.buffer.mem && (!largest || s.buffer.bytes > largest->buffer.bytes)) largest = &s;
  }
  while (bytesHeld() > maxBytes) {
    Slot* smallest = nullptr;
    for (Slot& s : slots_) {
      if (s.busy || !s.buffer.mem || &s == largest) continue;
      if (!smallest || s.buffer.bytes < smallest->buffer.bytes) smallest = &s;
    }
    if (!smallest) return;
    Free(*smallest);
  }
}

void WorkPool::Give(const WorkBuffer& buffer) {
  for (Slot& s : slots_) {
    if (s.buffer.mem == buffer.mem) s.busy = false;
  }
}

}  // namespace railyard::collectives
