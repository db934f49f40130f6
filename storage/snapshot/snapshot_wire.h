// The snapshot tier's control-channel wire format: the versioned fixed-size
// handshake header (kind, arena bytes, blob bytes, mode), the peer's reply (its
// Worker address and the arena's packed RemoteKey), and the fixed-size requests
// and responses of paging mode (alloc, commit, get, release, remove).
//
// Every integer is little-endian (the encoders write it so; x86-64 and aarch64
// hosts are little-endian). Every byte read from the socket is peer data: the
// decoders validate it and name what is wrong.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::storage::snapshot {

/// How an arena is used (the handshake's `mode`).
enum class Mode : uint8_t {
  kRaw = 1,     ///< the client owns allocation: whole blobs at offsets it chooses
  kPaging = 2,  ///< the peer owns residency: alloc/commit/get/remove by key
  /// Not an arena's mode: a discovery handshake (kind empty, sizes and address 0)
  /// that asks the peer for the list of its arenas (ArenaInfo) and ends there. A peer
  /// older than discovery refuses it as "unknown mode 3".
  kList = 3,
};

/// "raw", "paging", "mode <n>".
std::string ModeName(Mode mode);

/// The handshake header, client -> peer, exactly kHeaderBytes on the wire:
/// magic "RYSN" u32, version u16, mode u8, reserved u8 (0), kind (32 bytes, NUL
/// padded, 1..31 bytes of [A-Za-z0-9_.-]), arena bytes u64, blob bytes u64,
/// worker-address bytes u32, the client's control timeout u32 (ms; 0: not said).
/// The client's packed Worker address (that many bytes, 1..kMaxAddressBytes) follows.
struct Header {
  static constexpr uint32_t kMagic = 0x4e535952;  // "RYSN"
  /// 8: the blob checksum (commit, get) is blob_checksum.h's, XXH3-64 of the blob's
  /// 256 KiB leaves' XXH3-64s, which the peer checks with several threads (7 had the
  /// XXH3-64 of the whole blob, one thread's work after the last byte landed).
  /// 7: a commit or a remove waiting at the peer for a get's fault of its key is
  /// answered kQueued as a queued alloc or get is (before, it heard nothing for as long
  /// as the fault took, and a version-6 client takes kQueued there as out of turn).
  /// 6: the header carries the client's control timeout (bytes 60..63, reserved
  /// before), and the peer says kQueued to that client often enough for it
  /// (QueuedBeatMs of both timeouts): before, a client whose RAILYARD_TIMEOUT_MS was
  /// below the peer's beat (a quarter of the peer's timeout, at most 1 s) timed out
  /// against a live peer keeping its request queued (new-user trial).
  /// 5: an alloc or a get queued at the peer for a slot is answered kQueued every
  /// little while until its answer (Response), and the handshake reply ends with the
  /// peer's slot wait (Reply::slotWaitMs): a client tells a live peer keeping its
  /// request queued from a silent one, and bounds how long it accepts the former.
  /// 4: an alloc or a get from a client that holds a slot or a pin already (a batch
  /// with requests ahead) is answered kBusy instead of waiting for a slot (Response).
  /// 3: kRelease has no response (the client does not wait a round trip for it), and a
  /// get faulted from swap is answered kFaulting, then kReady records (Response).
  /// 2: the blob checksums are XXH3-64 (1 had XXH64). A peer of another version is
  /// refused at the handshake, naming both, rather than failing every commit's checksum
  /// or waiting for a response that never comes.
  static constexpr uint16_t kVersion = 8;
  static constexpr size_t kBytes = 64;
  static constexpr size_t kMaxKindBytes = 31;
  static constexpr uint32_t kMaxAddressBytes = 4096;

  uint16_t version = kVersion;
  Mode mode = Mode::kPaging;
  std::string kind;
  uint64_t arenaBytes = 0;
  uint64_t blobBytes = 0;
  uint32_t addressBytes = 0;
  uint32_t timeoutMs = 0;  ///< the client's control timeout (RAILYARD_TIMEOUT_MS); 0: not said

  std::array<uint8_t, kBytes> Encode() const;
  /// Parses and validates: magic, version (another one is refused naming both),
  /// mode, kind charset and padding, reserved byte zero, blob bytes > 0, arena
  /// bytes a non-zero multiple of blob bytes, address length 1..kMaxAddressBytes;
  /// for Mode::kList instead: no kind, zero sizes, no address.
  /// InvalidArgument naming the field; `out` unchanged on error.
  static Status Decode(std::span<const uint8_t, kBytes> bytes, Header* out);
  /// The first check of Decode alone, on a header's first 4 bytes: InvalidArgument
  /// naming the magic read (and, for an expert-tier client's transport choice, saying
  /// so) unless it is "RYSN". The peer asks it before it waits for the rest.
  static Status CheckMagic(std::span<const uint8_t, 4> first);
};

/// True when `kind` is 1..31 bytes of [A-Za-z0-9_.-].
bool ValidKind(const std::string& kind);

/// The peer's handshake reply: magic "RYSA" u32, version u16, status u16 (0 ok,
/// else a railyard::Code), then either a message (u32 bytes <= kMaxMessageBytes,
/// then text) or the peer's Worker address (u32 bytes, then bytes), the arena's
/// packed RemoteKey (u32 bytes, then bytes) and the slot wait (u64 ms: how long the
/// peer may keep an alloc or a faulting get queued for a paging slot, which also bounds
/// a request waiting for a get's fault of its key: the client takes kQueued for this
/// long plus its own timeout; 0 for a raw arena).
struct Reply {
  static constexpr uint32_t kMagic = 0x41535952;  // "RYSA"
  /// The longest slot wait a peer can give: twice the largest RAILYARD_TIMEOUT_MS
  /// (INT32_MAX ms). A client refuses a reply with more (a hostile peer's, which would
  /// otherwise keep a call queued for decades).
  static constexpr uint64_t kMaxSlotWaitMs = 2 * uint64_t{0x7fffffff};
  static constexpr uint32_t kMaxMessageBytes = 1024;
  static constexpr uint32_t kMaxKeyBytes = 256;

  Status status;
  std::vector<uint8_t> workerAddress;
  std::vector<uint8_t> arenaKey;
  uint64_t slotWaitMs = 0;

  std::vector<uint8_t> Encode() const;
};

/// One arena in the answer to a discovery handshake (Mode::kList): the reply's
/// 8-byte head (Reply's magic, version, status 0), a u32 count (1..kMaxArenas), then
/// count entries of exactly kBytes: kind (32 bytes, NUL padded), mode u8 (raw or
/// paging), reserved 7 bytes (0), blob bytes u64, arena bytes u64 (0: a raw arena no
/// client has sized yet), max bytes u64 (the largest size a client may give such an
/// arena; 0 for arenas of a fixed size).
struct ArenaInfo {
  static constexpr size_t kBytes = 64;
  static constexpr uint32_t kMaxArenas = 256;
  std::string kind;
  Mode mode = Mode::kPaging;
  uint64_t blobBytes = 0;
  uint64_t arenaBytes = 0;
  uint64_t maxBytes = 0;

  std::array<uint8_t, kBytes> Encode() const;
  /// Validates every field (kind charset and padding, mode raw or paging, reserved
  /// zero, blob bytes > 0, arena bytes a multiple of them, an unsized arena only with
  /// a max of at least one blob). InvalidArgument naming the field.
  static Status Decode(std::span<const uint8_t, kBytes> bytes, ArenaInfo* out);
};

/// Paging-mode operations.
enum class Op : uint32_t {
  kAlloc = 1,    ///< key -> offset of a slot to write the blob into (pinned to this client)
  kCommit = 2,   ///< key, checksum: the written slot becomes the key's blob
  kGet = 3,      ///< key -> offset and checksum (pinned until kRelease), or absent
  kRelease = 4,  ///< key: drops this client's pin taken by kGet; the only op with no response
  kRemove = 5,   ///< key: forgets the blob (absent when unknown)
};

/// "alloc", "commit", ...
const char* OpName(Op op);

/// A request, exactly kBytes: op u32, reserved u32 (0), key u64, checksum u64
/// (commit: the blob checksum, BlobChecksum; else 0), reserved u64 (0).
struct Request {
  static constexpr size_t kBytes = 32;
  Op op = Op::kGet;
  uint64_t key = 0;
  uint64_t checksum = 0;

  std::array<uint8_t, kBytes> Encode() const;
  /// InvalidArgument for an unknown op or non-zero reserved bytes.
  static Status Decode(std::span<const uint8_t, kBytes> bytes, Request* out);
};

/// A response (to every request but kRelease), exactly kBytes then `messageBytes` of text: result u32
/// (kOk, kAbsent, kError, kFaulting, kReady, kBusy or kQueued), code u32 (a railyard::Code on error),
/// offset u64 (into the arena; kReady: bytes), checksum u64, message bytes u32
/// (<= Reply::kMaxMessageBytes), reserved u32 (0).
///
/// A get of a blob that is in the swap file only is answered as it is faulted back, so
/// the client reads the first bytes while the peer still reads the rest from disk:
/// kFaulting (offset and checksum as kOk; nothing of the blob is there yet), then
/// kReady records whose `offset` says how many bytes from the blob's start are in the
/// slot (growing), the last of them the whole blob; or, at any point after kFaulting,
/// kError (the fault failed: nothing is pinned, the get fails).
///
/// kBusy answers an alloc, or a get that must fault its blob, from a client that holds
/// a slot being written or a pin already when no slot is free now: the peer does not
/// wait for one (what would free it may be that client's own commit or release, queued
/// behind the request), takes nothing, and the client asks again once it holds nothing.
/// A client that holds nothing is never answered kBusy: it waits for a slot.
///
/// kQueued (nothing but the result, as kBusy) precedes the answer to an alloc or a get
/// that waits at the peer for a slot, and to an alloc, get, commit or remove that waits
/// for a get's fault of its key, once per QueuedBeatMs of the wait (none when it waits
/// less): the peer is alive and the request still queued, so the client keeps waiting,
/// up to the slot wait the handshake reply gave plus its own timeout. A release has no
/// answer, so never this one.
struct Response {
  static constexpr size_t kBytes = 32;
  enum Result : uint32_t { kOk = 0, kAbsent = 1, kError = 2, kFaulting = 3, kReady = 4, kBusy = 5, kQueued = 6 };
  Result result = kOk;
  uint32_t code = 0;
  uint64_t offset = 0;
  uint64_t checksum = 0;
  std::string message;

  /// The fixed part followed by the message.
  std::vector<uint8_t> Encode() const;
  /// Parses the fixed part; `*messageBytes` says how many text bytes follow.
  /// InvalidArgument for an unknown result or code, a long message, reserved != 0.
  static Status DecodeFixed(std::span<const uint8_t, kBytes> bytes, Response* out, uint32_t* messageBytes);
};

/// The least interval between two kQueued answers (ms): a client (hostile or not)
/// cannot make the peer send them faster than this, however short the timeout it gives.
inline constexpr int64_t kMinQueuedBeatMs = 10;

/// How often (ms) a peer with control timeout `peerTimeoutMs` sends kQueued to a client
/// whose handshake gave `clientTimeoutMs` (0: not said) while the client's alloc or get
/// waits for a slot, or its request for a get's fault of the key: a quarter of the
/// shorter timeout, at most 1 s, at least
/// kMinQueuedBeatMs, so the client hears from a live peer several times within its own
/// timeout (one below 40 ms hears every 10 ms).
int64_t QueuedBeatMs(int64_t peerTimeoutMs, uint32_t clientTimeoutMs);

/// A kReady record of a faulting get says `ready` bytes are in the slot, after
/// `before`: RemoteError unless before < ready <= blobBytes.
Status CheckReady(uint64_t before, uint64_t ready, uint64_t blobBytes);

}  // namespace railyard::storage::snapshot
