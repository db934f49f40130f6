// Records of the NCCL comms over the fabric (proxy/nccl/): the listen handle, the
// hello a connector sends, the clear-to-send record a receiver writes into the
// sender's FIFO and the close notice. Every byte of them comes from a peer: each
// Decode* validates before anything is used. Little-endian fixed layouts, encoded
// with memcpy; RecordHeader (proxy/wire.h) opens each one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/remote_key.h"
#include "proxy/wire.h"

namespace railyard::proxy::nccl {

/// Bytes of a packed Worker address a handle can carry (16 bytes of header, then a TCP
/// Worker's 12 a rail: 4 rails; a fabric-mode host address's 8 a rail: 6).
inline constexpr size_t kHandleAddressBytes = 64;
/// Most bytes of a packed Worker address or RemoteKey accepted from a peer.
inline constexpr size_t kMaxPackedBytes = 512;

/// The 128-byte listen handle (NCCL_NET_HANDLE_MAXSIZE) of a fabric listener. Bytes
/// [112, 128) are connect()'s own state, as in proxy/handle.h.
struct FabricHandleWire {
  RecordHeader header;      ///< kind = kFabricListen
  uint64_t listenId;        ///< random, names the listen comm at its Worker
  uint32_t pid;             ///< listener's process id (errors)
  uint16_t addressBytes;    ///< bytes of `address` in use, 1..kHandleAddressBytes
  uint16_t pad;
  char host[24];            ///< listener's host name, NUL-padded (errors)
  uint8_t address[kHandleAddressBytes];  ///< the listener Worker's packed Address()
  uint64_t stageMagic;
  uint64_t stageState;
};
static_assert(sizeof(FabricHandleWire) == 128);

/// A decoded fabric listen handle.
struct FabricHandle {
  uint64_t listenId = 0;
  uint32_t pid = 0;
  std::string host;                  ///< at most 23 bytes
  std::vector<uint8_t> address;      ///< packed Worker address (validated by Worker::Connect)
};

/// Writes `h` into `out` (128 bytes), zeroing the connect-state area. InvalidArgument
/// when the address does not fit.
Status EncodeFabricHandle(const FabricHandle& h, void* out);
/// True when the 128 bytes at `in` carry a Railyard header of kind kFabricListen (any
/// version: DecodeFabricHandle then names a wrong one).
bool IsFabricHandle(const void* in);
/// Validates magic, version (InvalidUsage naming both versions), kind and the address
/// length. InvalidUsage for anything that is not a fabric listen handle.
Status DecodeFabricHandle(const void* in, FabricHandle* out);

/// Connector → listener, as a fabric Send record: a new send comm wants a receiver.
struct Hello {
  uint64_t listenId = 0;
  uint32_t sendCommId = 0;           ///< the connector's comm id (immediates of CTS name it)
  uint32_t pid = 0;
  std::string host;                  ///< at most 31 bytes
  std::vector<uint8_t> fifoKey;      ///< packed RemoteKey of the sender's FIFO
  std::vector<uint8_t> address;      ///< the connector Worker's packed Address()
};
/// Record bytes of `h`.
std::vector<uint8_t> EncodeHello(const Hello& h);
/// Validates a record: header, kind, lengths (each <= kMaxPackedBytes, exact total),
/// and unpacks the FIFO key (RemoteKey::Unpack). RemoteError naming the fault.
Status DecodeHello(std::span<const uint8_t> bytes, Hello* out, fabric::RemoteKey* fifoKey);

/// One posted buffer in a clear-to-send record.
struct FabricCtsEntry {
  uint64_t addr;      ///< receiver address of the buffer
  uint64_t size;      ///< bytes available
  int32_t tag;
  uint16_t keyBytes;  ///< bytes of `key` in use
  uint16_t pad;
  uint8_t key[fabric::RemoteKey::PackedBytes(fabric::RemoteKey::kMaxRails)];  ///< packed RemoteKey of its region
};
static_assert(sizeof(FabricCtsEntry) == 128);

/// Receiver → sender: one irecv of n buffers, written into FIFO slot seq % 32.
struct FabricCts {
  RecordHeader header;   ///< kind = kFabricCts
  uint64_t seq;          ///< receive sequence on this comm, from 0
  uint32_t n;            ///< entries, 1..kMaxRecvs
  uint32_t recvCommId;   ///< the receiver's comm id (immediates of data Writes name it)
  FabricCtsEntry entries[kMaxRecvs];
};
static_assert(sizeof(FabricCts) == 24 + 128 * kMaxRecvs);

/// Bytes of a FabricCts with `n` entries (what the receiver writes).
constexpr size_t FabricCtsBytes(uint32_t n) { return 24 + sizeof(FabricCtsEntry) * n; }

/// Validates a CTS record of `bytes` bytes as written by the peer: header, kind,
/// n in 1..kMaxRecvs, bytes == FabricCtsBytes(n), every key unpacks and covers its
/// buffer. Fills `plain` (for CtsMatcher) and `keys`. RemoteError naming the fault;
/// `plain` and `keys` unchanged on error.
Status DecodeCts(const FabricCts& rec, uint64_t bytes, CtsRecord* plain, fabric::RemoteKey (&keys)[kMaxRecvs]);

/// Either side → the other, as a fabric Send record: the comm `commId` (the
/// receiving side's id) was closed by its peer.
struct CloseNotice {
  uint32_t commId = 0;
};
std::vector<uint8_t> EncodeClose(const CloseNotice& c);
/// RemoteError unless the record is exactly a close notice.
Status DecodeClose(std::span<const uint8_t> bytes, CloseNotice* out);

/// The record kind of a Send record (0 when it is too short or not Railyard's).
uint16_t RecordKindOf(std::span<const uint8_t> bytes);

}  // namespace railyard::proxy::nccl
