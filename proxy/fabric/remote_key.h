// RemoteKey: what a peer needs to address a Region of this process: base, length,
// the software key, the access it grants and the rkey of every rail, packed to
// bytes for exchange (cf. UCX uct_md_mkey_pack / uct_rkey_unpack). Every packed key
// comes from a peer and is validated on unpack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "env/status.h"

namespace railyard::fabric {

/// The remote half of a registration.
struct RemoteKey {
  /// Packed layout version; Unpack refuses every other.
  static constexpr uint16_t kVersion = 1;
  /// Most rails a key carries (a Domain has at most this many rails).
  static constexpr size_t kMaxRails = 16;
  /// Bytes of a packed key with `rails` rkeys.
  static constexpr size_t PackedBytes(size_t rails) { return 40 + 4 * rails; }

  uint64_t base = 0;         ///< target virtual address of the region's first byte
  uint64_t length = 0;       ///< bytes in the region
  uint64_t softwareKey = 0;  ///< names the region at the target (TCP emulation checks it); never 0
  uint32_t access = 0;       ///< Access flags the region grants (informational: the target decides)
  std::vector<uint32_t> railRkeys;  ///< hardware rkey per rail (verbs); empty for TCP

  /// Little-endian bytes: magic "RYRK", version u16, rail count u16, base u64,
  /// length u64, software key u64, access u32, reserved u32, then one u32 rkey per rail.
  std::vector<uint8_t> Pack() const;
  /// Parses and validates packed bytes: exact size for its rail count, magic, version,
  /// rails <= kMaxRails, base + length does not wrap, a non-zero software key and
  /// known access bits. InvalidArgument (peer data) naming what is wrong; `out` is
  /// unchanged on error.
  static Status Unpack(std::span<const uint8_t> bytes, RemoteKey* out);

  bool operator==(const RemoteKey&) const = default;
};

}  // namespace railyard::fabric
