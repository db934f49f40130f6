// The records a control tunnel (control_tunnel.h) exchanges over a fabric Endpoint:
// a 24-byte header, then a payload whose meaning depends on the type. Everything
// received is peer data (it may come from any host, through any relay): Decode
// checks magic, version, type, reserved bits and the payload's size for the type
// before anything is used.
//
//   offset  size  field
//   0       4     magic "RYTU" (0x55545952, little-endian)
//   4       2     version (kVersion)
//   6       1     type (TunnelRecordType)
//   7       1     reserved, 0
//   8       8     tunnel id (chosen by the dialing side, random, non-zero)
//   16      8     value: kCredit = bytes of the stream consumed so far (cumulative);
//                 0 otherwise
//   24      ...   payload: kOpen = the dialer's Worker address (1..kMaxAddressBytes);
//                 kData = 1..kMaxDataBytes stream bytes; kClose = a reason text
//                 (0..kMaxReasonBytes); kCredit = none
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "env/status.h"

namespace railyard::storage::tunnel {

constexpr uint32_t kMagic = 0x55545952;  // "RYTU"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;
constexpr size_t kMaxAddressBytes = 512;
/// Stream bytes per data record: fits a TCP record (64 KiB) and a relay slot with room.
constexpr size_t kMaxDataBytes = 32 * 1024;
constexpr size_t kMaxReasonBytes = 256;

/// What a record says.
enum class TunnelRecordType : uint8_t {
  kOpen = 1,    ///< a new tunnel; the payload is where to send the answers
  kData = 2,    ///< stream bytes, in order
  kCredit = 3,  ///< the receiver consumed `value` bytes of the stream in all
  kClose = 4,   ///< the sender closed its end (after its last data record)
};

/// One decoded record (payload copied).
struct TunnelRecord {
  TunnelRecordType type = TunnelRecordType::kData;
  uint64_t tunnel = 0;
  uint64_t value = 0;
  std::vector<uint8_t> payload;
};

/// Packs `r`. InvalidArgument for a payload too long for its type or tunnel id 0.
Status Encode(const TunnelRecord& r, std::vector<uint8_t>* out);

/// Decodes peer bytes. InvalidArgument naming the field: short record, magic,
/// version (naming both), unknown type, reserved bits, tunnel id 0, payload size for
/// the type, a value where none belongs.
Status Decode(std::span<const uint8_t> bytes, TunnelRecord* out);

}  // namespace railyard::storage::tunnel
