// What ranks of a GIN/RMA comm exchange: the 128-byte connect handle NCCL allgathers
// (it carries the rank's fabric Worker address), and the records sent over the mesh
// at connect (hello) and inside every symmetric registration (window). Every record
// carries the wire version; one from another version is refused naming both.
//
// Source: shared/docs/nccl-net-abi.md §4.4 (the handles are allgathered by NCCL and
// all of them handed to connect), nccl-2.30-abi.md §4.6, §5.3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::gin {

/// Version of the handle and of every record below.
inline constexpr uint16_t kWireVersion = 1;
/// NCCL's handle size (NCCL_NET_HANDLE_MAXSIZE = NCCL_GIN_HANDLE_MAXSIZE = 128).
inline constexpr size_t kHandleBytes = 128;
/// Header bytes of a handle: magic u32, version u16, address length u16.
inline constexpr size_t kHandleHeaderBytes = 8;
/// Largest Worker address a handle carries.
inline constexpr size_t kMaxAddressBytes = kHandleBytes - kHandleHeaderBytes;

/// Writes a handle into `out` (kHandleBytes, zero padded): magic "RYGN", version,
/// the address length and the packed Worker address. InvalidArgument when the
/// address is empty or longer than kMaxAddressBytes.
Status PackHandle(std::span<const uint8_t> workerAddress, uint8_t out[kHandleBytes]);
/// Parses rank `rank`'s handle (peer data): magic, version (another one fails naming
/// both), 1..kMaxAddressBytes address bytes, zero padding. `address` unchanged on error.
Status UnpackHandle(const uint8_t handle[kHandleBytes], int rank, std::vector<uint8_t>* address);

/// Kinds of records.
enum class RecordKind : uint16_t { kHello = 1, kWindow = 2 };

/// One record over the mesh. Little-endian: magic "RYGR" u32, version u16, kind u16,
/// rank u32, nranks u32, mesh id u64, sequence u64 (window registrations, 0 for
/// hello), window bytes u64, MR flags u64, key length u16, reserved u16, then the
/// packed RemoteKey (windows only).
struct Record {
  RecordKind kind = RecordKind::kHello;
  uint32_t rank = 0;       ///< sender's rank
  uint32_t nranks = 0;     ///< sender's comm size
  uint64_t meshId = 0;     ///< hash of every handle: the same on every rank of one comm
  uint64_t seq = 0;        ///< window registration number (1, 2, ...) of the sender
  uint64_t bytes = 0;      ///< window size in bytes
  uint64_t mrFlags = 0;    ///< NCCL_NET_MR_FLAG_* the sender registered with
  fabric::RemoteKey key;   ///< the sender's window key (windows only)

  std::vector<uint8_t> Pack() const;
  /// Validates peer bytes: size, magic, version (another fails naming both), known
  /// kind, key (RemoteKey::Unpack) with key.length == bytes for windows.
  static Status Unpack(std::span<const uint8_t> bytes, Record* out);
};

/// FNV-1a over every rank's handle, in rank order: the comm's mesh id.
uint64_t MeshId(std::span<const std::vector<uint8_t>> addresses);

}  // namespace railyard::gin
