// Queue-pair records: what the two ends of a verbs connection exchange on the
// control socket before any QP leaves INIT. Versioned and checked in full before
// a single ibv_modify_qp, so a peer of another version, a truncated record or a
// set that does not cover the connection's QPs fails with an error saying which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/wire.h"

namespace railyard::proxy::verbs {

/// Version of the QP record layout and meaning (independent of kProtocolVersion,
/// which covers handles and socket records). Bump on any change.
inline constexpr uint16_t kQpRecordVersion = 1;
/// Most rails (RDMA device ports) one side of a connection may use.
inline constexpr int kMaxConnRails = 8;
/// Most data QPs of one connection (NCCL 2.28.9 caps NCCL_IB_QPS_PER_CONNECTION x
/// devices at 128, fact sheet 5.1).
inline constexpr int kMaxConnQps = 128;

/// Record kinds of the verbs handshake (RecordHeader::kind), after wire.h's kinds.
inline constexpr uint16_t kKindQpSet = 16;    ///< a QP record set follows the header
inline constexpr uint16_t kKindQpReady = 17;  ///< connector → listener: my QPs are RTS

/// One rail (device port) of the side that sends the record.
struct QpRailWire {
  uint8_t gid[16];     ///< the source GID this side's QPs on the rail use (network order)
  uint32_t fifoRkey;   ///< rkey of the CTS FIFO on this rail (sender side; 0 on the receiver)
  uint32_t ringRkey;   ///< rkey of the completion ring on this rail (receiver side; 0 on the sender)
  uint16_t lid;        ///< port LID (InfiniBand link layer; 0 on RoCE)
  uint8_t mtu;         ///< active MTU as enum ibv_mtu (1..5)
  uint8_t linkLayer;   ///< IBV_LINK_LAYER_* of the port
  uint8_t port;        ///< 1-based port number (for error messages)
  uint8_t pad[3];
  char device[24];     ///< RDMA device name, NUL-padded (for error messages)
};
static_assert(sizeof(QpRailWire) == 56);

/// One data QP.
struct QpWire {
  uint32_t qpn;   ///< QP number
  uint32_t psn;   ///< initial packet sequence number (24 bits used)
  uint8_t rail;   ///< index into the record's rails
  uint8_t pad[7];
};
static_assert(sizeof(QpWire) == 16);

/// Fixed part of a QP record set; `nrails` QpRailWire and `nqps` QpWire follow.
struct QpSetHeader {
  RecordHeader header;   ///< magic, kProtocolVersion, kind = kKindQpSet
  uint16_t qpVersion;    ///< kQpRecordVersion
  uint16_t nrails;       ///< 1..kMaxConnRails
  uint16_t nqps;         ///< 1..kMaxConnQps
  uint8_t trafficClass;  ///< GRH traffic class the connector chose (connector's values win)
  uint8_t serviceLevel;  ///< service level the connector chose
  uint32_t bytes;        ///< total record bytes, this header included
  uint32_t ringEntries;  ///< completion ring entries per QP (receiver side; 0 on the sender)
  uint64_t fifoAddr;     ///< CTS FIFO address (sender side; 0 on the receiver)
  uint64_t ringAddr;     ///< completion rings address (receiver side; 0 on the sender)
};
static_assert(sizeof(QpSetHeader) == 40);

/// Decoded QP record set.
struct QpSet {
  uint8_t trafficClass = 0;
  uint8_t serviceLevel = 0;
  uint32_t ringEntries = 0;
  uint64_t fifoAddr = 0;
  uint64_t ringAddr = 0;
  std::vector<QpRailWire> rails;
  std::vector<QpWire> qps;
};

/// Bytes of the encoded form of `set`.
size_t QpSetBytes(const QpSet& set);

/// Encodes `set` (header filled in here) into bytes for the control socket.
std::vector<char> EncodeQpSet(const QpSet& set);

/// Reads the total length a QP record set announces from its first
/// sizeof(QpSetHeader) bytes, checking magic, protocol version, kind and QP record
/// version first. InvalidUsage (naming what is wrong: "another plugin", "QP record
/// version 2, this Railyard speaks 1", a length out of range) otherwise.
Status QpSetLength(const void* header, size_t have, uint32_t* bytes);

/// Decodes and validates a whole record set of `size` bytes. `expectedQps` > 0 is the
/// QP count this side requires (the connector's own count, when checking the
/// listener's reply); 0 accepts any count in 1..kMaxConnQps. Errors (InvalidUsage),
/// each saying which: wrong magic/version/kind, another QP record version, a record
/// shorter than its header or than it announces ("truncated"), a rail or QP count out
/// of range, a set that does not cover the expected QPs, a QP naming a rail that is
/// not in the set, an MTU outside 256..4096, a zero QP number.
Status DecodeQpSet(const void* data, size_t size, int expectedQps, QpSet* out);

/// "rxe0:1" for a rail of a decoded set.
std::string RailName(const QpRailWire& rail);

}  // namespace railyard::proxy::verbs
