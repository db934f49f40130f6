// Region: one registration of a Domain, covering every rail (one software key for
// the TCP emulation, one MR per rail's protection domain for verbs).
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/fabric/access.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::fabric {

/// A registered byte range [base, base + length). Owned by its Domain; valid from
/// Domain::Register until Domain::Deregister.
struct Region {
  uint64_t base = 0;         ///< first byte (exactly the registered address, no page rounding)
  uint64_t length = 0;       ///< bytes, > 0
  uint32_t access = 0;       ///< Access flags
  MemoryKind kind = MemoryKind::kHost;
  uint64_t softwareKey = 0;  ///< unique among the Domain's live regions, never 0, hard to guess
  /// Per rail (index = rail of the Domain): hardware keys and the transport's MR
  /// handle (an ibv_mr* for verbs). Empty for TCP.
  std::vector<uint32_t> railLkeys;
  std::vector<uint32_t> railRkeys;
  std::vector<void*> railMr;

  /// True when [addr, addr + bytes) lies inside the region (no overflow; bytes may be 0
  /// at any address from base to base + length).
  bool Contains(uint64_t addr, uint64_t bytes) const {
    return addr >= base && bytes <= length && addr - base <= length - bytes;
  }
  /// The remote half, for packing and sending to peers.
  RemoteKey Key() const {
    return RemoteKey{base, length, softwareKey, access, railRkeys};
  }
};

}  // namespace railyard::fabric
