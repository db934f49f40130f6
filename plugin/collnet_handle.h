// The CollNet connect handle (what listen writes and connect receives from every rank,
// NCCL_NET_HANDLE_MAXSIZE = 128 bytes; ../shared/docs/nccl-net-abi.md §3.2): the rank's
// Worker address plus a locator that lets every rank find the cabling shape from the
// handles alone, whatever the transport (plugin/collnet_shape.h):
//   - the rank's host (a 32-bit digest of topology::LocalHostId()),
//   - in fabric mode, its cable neighbours as its cabling agent's graph has them,
//   - its rails' IPv4 networks (address and prefix length: a verbs Worker address
//     carries no rail addresses, a TCP one no prefix).
// Layout, little-endian: magic "RYCL", version u16 (2), address length u16, the
// address, then host digest u32, flags u8 (bit 0 neighbours present, bit 1 rails
// present), neighbour count u8, rail count u8, reserved u8 (0), neighbours x u32
// (host digests, ascending), rails x (IPv4 u32 network order, prefix length u8).
// Everything in a received handle is peer data: Unpack checks all of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "env/status.h"

namespace railyard::plugin::collnet {

/// The handle's size (NCCL_NET_HANDLE_MAXSIZE, plugin/abi/common.h).
inline constexpr size_t kHandleBytes = 128;

/// One rail's IPv4 network as its host sees it.
struct HandleRail {
  uint32_t ipv4 = 0;   ///< network order
  uint8_t prefix = 0;  ///< prefix length, 1..32
  bool operator==(const HandleRail&) const = default;
};

/// A decoded CollNet handle.
struct CollnetHandle {
  static constexpr uint16_t kVersion = 2;
  std::vector<uint8_t> address;  ///< the Worker's packed address (Worker::Address)
  uint32_t host = 0;             ///< HostDigest of the rank's host id; never 0
  bool hasNeighbours = false;    ///< `neighbours` is the cabling graph's (fabric mode)
  std::vector<uint32_t> neighbours;  ///< host digests of the cable neighbours, ascending
  bool hasRails = false;         ///< `rails` lists every rail of the rank's Domain
  std::vector<HandleRail> rails;

  /// Writes the handle into `out` (kHandleBytes, zero-filled first). The address must
  /// fit (InternalError otherwise); neighbours and then rails are written only when all
  /// of them fit in what is left: a list that does not fit is left out (its flag clear,
  /// `*dropped` set when given), so connect falls back to what the handles still tell.
  /// InvalidArgument for host 0, more than 255 entries or a prefix outside 1..32.
  Status Pack(uint8_t* out, bool* dropped = nullptr) const;
  /// Validates magic, version, lengths inside the 128 bytes, the reserved byte and
  /// unknown flags zero, counts zero when their flag is clear, host digest non-zero,
  /// neighbours ascending without duplicates or the host itself, prefixes 1..32.
  /// InvalidArgument naming what is wrong; `*out` unchanged on error.
  static Status Unpack(std::span<const uint8_t> bytes, CollnetHandle* out);
};

/// A 32-bit digest of a 64-bit host id (high half xor low half; 0 maps to 1): what
/// handles carry, so a ring's two neighbours fit beside a 4-rail TCP address.
uint32_t HostDigest(uint64_t hostId);

}  // namespace railyard::plugin::collnet
