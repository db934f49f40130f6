// Wire format of the fabric's TCP transport: one 64-byte frame header per frame,
// optionally followed by a payload, and the packed Worker address peers exchange.
// Every field from a peer is hostile: DecodeFrameHeader checks the shape of a
// header (magic, version, type, sizes) before the transport looks at its meaning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::fabric::tcp {

/// Wire version; a peer of another version is refused (FabricErrc::kVersion: its
/// first frame fails DecodeFrameHeader naming both versions, and a target answers such
/// a hello with a NACK of kVersion before it closes the socket, so the initiator reads
/// the same named error). Version 2: lazily acknowledged Writes (kFlagLazyAck) and the
/// cumulative bound every ack carries (FrameType::kAck). Version 3: a hello says
/// whether its socket was spliced through relays (kFlagRelayed).
constexpr uint8_t kWireVersion = 3;
/// Largest payload of one frame (a chunk), bytes.
constexpr uint64_t kMaxFramePayload = 64ull << 20;
/// Largest Write/Read, bytes (1 TiB).
constexpr uint64_t kMaxOpBytes = 1ull << 40;
/// Largest Send record, bytes.
constexpr uint64_t kMaxRecordBytes = 64 * 1024;
/// Largest NACK text, bytes.
constexpr uint64_t kMaxNackText = 1024;
/// Ops of one Endpoint on the wire at once: the target refuses a sequence number
/// outside [its frontier, + kOpWindow); more ops wait at the initiator.
constexpr int kOpWindow = 256;
/// Most sockets one connection may have (all rails together).
constexpr uint64_t kMaxSocketsPerConnection = 64;

/// Frame types. Initiator to target: hello, write, read request, fetch-add, record.
/// Target to initiator: ack, read data, nack.
enum class FrameType : uint8_t {
  kHello = 1,     ///< first frame of every socket: addr = worker id, seq = connection id,
                  ///< offset = socket index, opBytes = socket count, value = rail, key = the
                  ///< worker id the connection is named by in errors (0: addr)
  kWrite = 2,     ///< a chunk of a Write: [offset, + payload) of the op's [addr, + opBytes)
  kReadReq = 3,   ///< a chunk of a Read: [offset, + value) of the op's [addr, + opBytes)
  kFetchAdd = 4,  ///< add `value` at addr (opBytes 8)
  kRecord = 5,    ///< a Send record of opBytes (= payload) bytes
  kAck = 16,      ///< op `seq` is complete at the target (FetchAdd: value = old value);
                  ///< offset = the cumulative bound: every lazily acked Write (kFlagLazyAck)
                  ///< below it is complete too. With kFlagBoundOnly it names no op of its own.
  kReadData = 17, ///< bytes [offset, + payload) of Read `seq`
  kNack = 18,     ///< op `seq` was refused: value = FabricErrc, payload = text
};

/// Header flag: the Write carries the immediate `imm`.
constexpr uint16_t kFlagImmediate = 1;
/// Header flag (with kFlagImmediate, Writes only): `value` is the bytes the target's
/// immediate event reports (Endpoint::WriteFinal: the whole Write this op ends),
/// opBytes..kMaxOpBytes. A target without it refuses the frame (unknown flags).
constexpr uint16_t kFlagReportBytes = 2;

/// Header flag (Writes only, wire version 2): the initiator does not wait for this op's
/// own ack (Endpoint::WriteLazy). The target sends it none: the Write is acknowledged
/// by the cumulative bound (offset) of a later ack, which the target sends at the
/// latest after kMaxDeferredAcks such Writes, or kDeferredAckMicros after the first
/// (tcp_target.h).
constexpr uint16_t kFlagLazyAck = 4;
/// Header flag (acks only, wire version 2): the ack only carries its cumulative bound
/// (seq 0, no op of its own): the target's flush of deferred lazy acks.
constexpr uint16_t kFlagBoundOnly = 8;

/// Header flag (hellos only, wire version 3): the initiator dialled this socket through
/// relays that splice it (TcpWorker::ConnectSpliced), so the address it arrives from is
/// the route's last relay, not the initiator's host. The target's errors say so.
constexpr uint16_t kFlagRelayed = 16;

/// The 64-byte header, little-endian on the wire (the host is little-endian).
struct FrameHeader {
  uint32_t magic = 0;
  uint8_t version = 0;
  uint8_t type = 0;
  uint16_t flags = 0;
  uint32_t imm = 0;
  uint32_t payloadBytes = 0;
  uint64_t seq = 0;
  uint64_t addr = 0;
  uint64_t opBytes = 0;
  uint64_t offset = 0;
  uint64_t key = 0;
  uint64_t value = 0;

  FrameType frameType() const { return static_cast<FrameType>(type); }
};
static_assert(sizeof(FrameHeader) == 64);

/// The magic "RYFB".
constexpr uint32_t kFrameMagic = 0x42465952;

/// A header of `type` with magic and version set.
FrameHeader MakeHeader(FrameType type);

/// Which side reads a frame: a target accepts initiator frames only, and back.
enum class Direction { kToTarget, kToInitiator };

/// Checks the shape of `h` as received by `dir`: magic (InvalidArgument "not a
/// Railyard fabric frame"), version (InvalidUsage naming both versions), a type
/// of that direction, known flags, payload and sizes within the limits above and
/// consistent with the type (a Write chunk inside its op, a record's payload equal
/// to its size, ...). Meaning (keys, bounds, sequence window) is checked by the
/// transport.
Status DecodeFrameHeader(const uint8_t* bytes, Direction dir, FrameHeader* out);

/// "write seq 7 addr 0x... op 4096 chunk +0/4096 key 0x...", for messages.
std::string DescribeFrame(const FrameHeader& h);

/// One rail of a Worker's address.
struct RailAddress {
  uint32_t ipv4 = 0;       ///< network byte order
  uint16_t port = 0;       ///< host byte order
  uint32_t speedMbps = 0;
  bool operator==(const RailAddress&) const = default;
};

/// A Worker's address: its id and one listening address per rail.
struct WorkerAddress {
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kMaxRails = 16;
  uint64_t workerId = 0;
  std::vector<RailAddress> rails;

  /// magic "RYWA", version u16, rails u16, worker id u64, then per rail ipv4 (network
  /// order) u32, port u16, reserved u16, speed u32.
  std::vector<uint8_t> Pack() const;
  /// Validates: exact size, magic, version, 1..kMaxRails rails, non-zero worker id,
  /// ports and addresses, zero reserved bytes. InvalidArgument naming what is wrong.
  static Status Unpack(std::span<const uint8_t> bytes, WorkerAddress* out);
  bool operator==(const WorkerAddress&) const = default;
};

/// "127.0.0.2:40121".
std::string RailAddressText(const RailAddress& a);

}  // namespace railyard::fabric::tcp
