// A ring of fixed-size slots in page-aligned memory, registered on one or more
// Domains (the relay registers its rings on the Domain of each leg: remote write on
// the upstream one, local on the downstream one).
#pragma once

#include <cstdint>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/domain.h"

namespace railyard::fabric::relay {

/// See file comment. Deregisters and frees on destruction.
class SlotRing {
 public:
  SlotRing() = default;
  ~SlotRing();
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  /// Allocates slots * slotBytes bytes (zeroed) and registers them on each of
  /// `domains` with the matching `access` (one entry per Domain). Errors as
  /// Domain::Register, or SystemError when the memory cannot be had.
  Status Init(uint32_t slots, uint64_t slotBytes, const std::vector<Domain*>& domains,
              const std::vector<uint32_t>& access);

  uint32_t slots() const { return slots_; }
  uint64_t slotBytes() const { return slotBytes_; }
  uint8_t* Slot(uint32_t i) const { return base_ + static_cast<uint64_t>(i) * slotBytes_; }
  /// Offset of slot i from the ring's first byte.
  uint64_t Offset(uint32_t i) const { return static_cast<uint64_t>(i) * slotBytes_; }
  /// The Region on domains[d] of Init.
  const Region* region(size_t d) const { return regions_[d]; }

 private:
  uint32_t slots_ = 0;
  uint64_t slotBytes_ = 0;
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<Domain*> domains_;
  std::vector<const Region*> regions_;
};

}  // namespace railyard::fabric::relay
