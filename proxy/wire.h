// On-the-wire records of Railyard's receiver-posted-buffer protocol and its
// connection setup. Shared by every transport: TCP sends them on sockets, the
// verbs transport places the same CTS entries with RDMA WRITE.
//
// All multi-byte fields are little-endian (every supported host is); each record
// is a fixed-layout struct whose size is asserted below, encoded with memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "env/status.h"

namespace railyard::proxy {

/// "RYRD" in little-endian byte order: the first 4 bytes of every handle and record.
inline constexpr uint32_t kMagic = 0x44525952u;
/// Protocol version of handles and records. Bump on any layout or meaning change;
/// peers with a different version are refused with an error naming both versions.
inline constexpr uint16_t kProtocolVersion = 1;

/// Record kinds (the `kind` field of RecordHeader).
enum class RecordKind : uint16_t {
  kHello = 1,   ///< connector → listener, first bytes on every socket of a connection
  kReject = 2,  ///< listener → connector on the control socket: hello refused
  kCts = 3,     ///< receiver → sender: clear to send (one irecv, n entries follow)
  kChunk = 4,   ///< sender → receiver: one chunk of data, payload follows
  kRelay = 5,   ///< connector → relay: carry this socket on towards a host with no cable
  // The NCCL comms over the fabric (proxy/nccl/nccl_records.h):
  kFabricListen = 6,  ///< a listen handle naming a fabric Worker
  kFabricHello = 7,   ///< connector → listener (fabric Send record): a new send comm
  kFabricCts = 8,     ///< receiver → sender (fabric Write into the sender's FIFO)
  kFabricClose = 9,   ///< either side (fabric Send record): the comm was closed
};

/// Common first 8 bytes of every record.
struct RecordHeader {
  uint32_t magic;    ///< kMagic
  uint16_t version;  ///< kProtocolVersion
  uint16_t kind;     ///< RecordKind
};
static_assert(sizeof(RecordHeader) == 8);

/// Checks magic and version of a record header; `what` names the record in the error
/// ("connection record", "handle", ...). InvalidUsage says whether the bytes come from
/// another plugin (wrong magic) or another Railyard version (wrong version).
Status CheckHeader(const RecordHeader& h, const char* what);

/// Opens every socket of a connection (control socket index 0, data sockets 1..nsocks).
struct HelloRecord {
  RecordHeader header;
  uint64_t listenId;    ///< the listen comm this connection is for (from the handle)
  uint64_t connId;      ///< random, chosen by the connector; groups the sockets
  uint16_t sockIndex;   ///< 0 = control, 1..nsocks = data
  uint16_t nsocks;      ///< number of data sockets in the connection
  uint32_t pid;         ///< connector's process id (for error messages)
  char host[32];        ///< connector's host name, NUL-padded (for error messages)
};
static_assert(sizeof(HelloRecord) == 64);

/// Sent by the listener on the control socket before closing a refused connection.
struct RejectRecord {
  RecordHeader header;
  char reason[120];  ///< NUL-terminated text
};
static_assert(sizeof(RejectRecord) == 128);

/// One posted receive buffer, as the receiver announces it.
struct CtsEntry {
  uint64_t addr;  ///< receiver virtual address of the buffer
  uint64_t size;  ///< bytes available at addr
  uint32_t rkey;  ///< registration key of the region holding the buffer
  int32_t tag;    ///< tag posted by irecv (NCCL: the sender's rank)
};
static_assert(sizeof(CtsEntry) == 24);

/// Maximum buffers in one grouped receive (reported as maxRecvs; NCCL's IB uses 8).
inline constexpr int kMaxRecvs = 8;

/// Clear-to-send: one irecv of n buffers. Matching is in posting order (seq).
struct CtsRecord {
  RecordHeader header;
  uint64_t seq;    ///< receive sequence number on this connection, from 0
  uint32_t n;      ///< valid entries, 1..kMaxRecvs
  uint32_t pad;
  CtsEntry entries[kMaxRecvs];
};
static_assert(sizeof(CtsRecord) == 24 + 24 * kMaxRecvs);

/// Header of one chunk of a message written into a posted buffer. `len` payload
/// bytes follow. The receiver accepts it only if [addr, addr+len) lies inside the
/// region `rkey` AND inside the buffer posted as (seq, slot).
struct ChunkHeader {
  RecordHeader header;
  uint64_t seq;    ///< receive sequence this message completes a slot of
  uint32_t slot;   ///< index of the entry in that CTS record
  uint32_t len;    ///< payload bytes in this chunk
  uint64_t addr;   ///< destination address on the receiver
  uint64_t total;  ///< total message bytes (the "immediate": size reported by test())
  uint32_t rkey;   ///< region key from the CTS entry
  uint32_t pad;
};
static_assert(sizeof(ChunkHeader) == 48);

/// First bytes on a socket opened to a relay (railyardd, or a process using the
/// plugin, on a host between the two ends). The relay connects on towards
/// `destHost` (directly when cabled to it, else through the next relay, with
/// `hops` + 1) and from then on copies bytes both ways; what follows this record
/// (hello, records, chunks) passes through unchanged, so the final hop writes
/// straight into the receiver's posted buffers.
struct RelayRecord {
  RecordHeader header;  ///< kind = kRelay
  uint64_t destHost;    ///< cabling host id of the listener
  uint64_t originHost;  ///< cabling host id of the connector (for logs)
  uint16_t destPort;    ///< listener TCP port on destHost
  uint16_t sockIndex;   ///< socket index in its connection: spreads sockets over rails and paths
  uint8_t hops;         ///< relays passed before this one
  uint8_t flags;        ///< kRelayFlagMac: a kRelayMacBytes MAC follows the record
  uint8_t pad[2];
  char originName[24];  ///< connector's host name (for logs)
};
static_assert(sizeof(RelayRecord) == 56);

/// RelayRecord::flags: the record is followed by an HMAC-SHA256 of its 56 bytes
/// (purpose "railyard.relay.record", topology/cluster_key.h), made with the cluster
/// key. Set exactly when RAILYARD_CLUSTER_KEY_FILE is configured.
inline constexpr uint8_t kRelayFlagMac = 1;
/// Bytes of that MAC.
inline constexpr size_t kRelayMacBytes = 32;
/// Purpose label of relay-record MACs (topology/cluster_key.h).
inline constexpr const char* kRelayMacPurpose = "railyard.relay.record";

/// Most relays one connection may cross (a ring of 16 needs at most 7).
inline constexpr int kMaxRelayHops = 15;

/// Fills a RecordHeader with magic, version and kind.
RecordHeader MakeHeader(RecordKind kind);

/// Copies `host` (truncated to 31 bytes) into a NUL-padded 32-byte field.
void CopyHostName(const std::string& host, char (&out)[32]);

}  // namespace railyard::proxy
