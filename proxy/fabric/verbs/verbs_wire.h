// What the verbs transport exchanges before any QP leaves INIT: the Worker address
// (out of band) and, on the bootstrap TCP connection, one hello each way followed
// by the versioned QP record set of proxy/verbs/qp_record.h. Everything decoded
// here comes from a peer: checked in full, exact sizes, before use.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "env/status.h"

namespace railyard::fabric::verbs {

/// A verbs Worker's address: its id, the bootstrap listener and its rail count.
/// Packed little-endian: magic "RYVA", version u16, rails u16, worker id u64,
/// IPv4 u32 (network order), port u16, reserved u16 (24 bytes).
struct VerbsAddress {
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kBytes = 24;
  uint64_t workerId = 0;  ///< never 0
  uint32_t ipv4 = 0;      ///< bootstrap listener address, network order
  uint16_t port = 0;      ///< bootstrap listener port, host order, never 0
  uint16_t rails = 0;     ///< 1..16

  std::vector<uint8_t> Pack() const;
  /// InvalidArgument (peer data) naming what is wrong: size, magic, version, rails,
  /// a zero worker id or port, non-zero reserved bytes. `out` unchanged on error.
  static Status Unpack(std::span<const uint8_t> bytes, VerbsAddress* out);
  /// "w=<id hex> 10.0.0.1:40121".
  std::string Name() const;
};

/// The fixed record each side sends first on the bootstrap connection (48 bytes,
/// little-endian on every host this runs on; fields are fixed width).
struct VerbsHello {
  static constexpr uint32_t kMagic = 0x48565952;  ///< "RYVH"
  /// 2 (issue 10): a Write with immediate of more than one work request ends in a
  /// SEND WITH IMM carrying a WriteSizeRecord; a version-1 target would take that
  /// for a Send record, so the versions refuse each other at the hello.
  static constexpr uint16_t kVersion = 2;
  static constexpr uint16_t kRoleConnect = 1;
  static constexpr uint16_t kRoleAccept = 2;
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t role = 0;
  uint64_t workerId = 0;       ///< the sender's Worker id
  uint64_t connection = 0;     ///< connector's connection number (echoed by the acceptor)
  uint32_t recordCredits = 0;  ///< acceptor: receive buffers posted (records + immediates)
  uint32_t recordBytes = 0;    ///< acceptor: bytes of each receive buffer
  uint64_t creditAddr = 0;     ///< connector: address of its credit word (the acceptor writes it)
  uint32_t creditRkey = 0;     ///< connector: rkey of the credit word on rail 0
  uint32_t reserved = 0;
};
static_assert(sizeof(VerbsHello) == 48);

/// The size record of a Write with immediate that takes more than one work request
/// (striped over rails, cut into chunks, or an Endpoint::WriteFinal naming a bigger
/// whole): a WRITE WITH IMM's completion reports only its own work request's bytes
/// (ibv_wc::byte_len), so the initiator writes the data with plain RDMA WRITEs and
/// then, on rail 0 once every chunk on the other rails has completed, posts a SEND
/// WITH IMM of these 16 bytes into one of the target's receive buffers. RC order on
/// rail 0 places it after that rail's chunks, so the immediate (and the size) become
/// visible only after every byte of the Write. Little-endian: magic "RYSZ" u32,
/// reserved u32 (0), bytes u64 (the whole Write's size, the kImmediate's Event::bytes).
struct WriteSizeRecord {
  static constexpr uint32_t kMagic = 0x5a535952;  ///< "RYSZ"
  static constexpr size_t kBytes = 16;
  uint64_t bytes = 0;

  std::vector<uint8_t> Pack() const;
  /// Peer data: exactly kBytes, the magic, reserved 0, bytes <= maxBytes; else
  /// InvalidArgument naming the field. `out` unchanged on error.
  static Status Unpack(std::span<const uint8_t> data, uint64_t maxBytes, WriteSizeRecord* out);
};

/// Checks a received hello: magic, version, the expected role, a non-zero worker id;
/// an acceptor's credits 4..4096 and buffer bytes 1..64 KiB; a connector's credit
/// address non-zero. InvalidArgument naming the field otherwise.
Status CheckHello(const VerbsHello& h, uint16_t expectRole);

}  // namespace railyard::fabric::verbs
