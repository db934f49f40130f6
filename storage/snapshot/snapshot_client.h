// The snapshot tier's client: one control connection to a peer's arena of one
// kind, a fabric Endpoint to the peer's Worker and a BlobMover's staging buffer.
//
// Raw mode: WriteAt/ReadAt move whole blobs at offsets the caller owns.
// Paging mode: Put = alloc (the peer picks a slot) + one-sided writes + commit
// (carrying the blob's XXH3-64, which the peer checks); Get = get (the slot is
// pinned) + one-sided reads + release, the bytes checked against the checksum.
// Every call completes before it returns: when Put returns, the blob is in the
// peer's arena (or, with RAILYARD_SWAP_SYNC=1 there, durably in its swap file).
// After a transport or protocol error the client stays failed (sticky).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"
#include "proxy/socket.h"
#include "storage/snapshot/blob_mover.h"
#include "storage/snapshot/snapshot_wire.h"

namespace railyard::storage::snapshot {

/// What to connect to.
struct ClientOptions {
  std::string host = "127.0.0.1";  ///< the peer's control address (IPv4)
  uint16_t port = 0;               ///< the peer's control port
  std::string kind;                ///< arena kind
  Mode mode = Mode::kPaging;
  uint64_t arenaBytes = 0;         ///< must equal the peer's arena (slots x blob bytes)
  uint64_t blobBytes = 0;          ///< must equal the peer's blob bytes
  int timeoutMs = 30000;           ///< control-channel timeout (RAILYARD_TIMEOUT_MS)
  MoverOptions mover;              ///< chunking of the transfers
  /// PutBatch/GetBatch: blobs in flight at once (clamped to 1..kMaxBatchDepth, and to
  /// half the arena's slots). 1 moves a batch one blob after the other, as Put/Get.
  int batchDepth = 2;
  /// What errors call the peer: "" = host:port. A peer reached through a ControlTunnel
  /// (plugin/tier_route.h) is dialed at the tunnel's local 127.0.0.1:PORT, which is not
  /// what the user asked for: the caller names it here ("host:h2 (via relay h1)"), and
  /// every control call's error then says "to <peerName>".
  std::string peerName;
};

/// Most blobs a batch keeps in flight (ClientOptions::batchDepth).
constexpr int kMaxBatchDepth = 8;

/// One blob of a PutBatch or GetBatch: what to move, and afterwards what became of it.
struct BatchBlob {
  uint64_t key = 0;
  /// PutBatch: the blob to store (read only); GetBatch: where it lands.
  void* data = nullptr;
  uint64_t bytes = 0;      ///< must equal the arena's blob bytes
  bool found = false;      ///< GetBatch: set when the peer held the key (else `data` is untouched)
  bool attempted = false;  ///< set once this blob's requests were sent (to success or to `status`)
  /// This blob's outcome. Ok for one not attempted, but for the blob that made the
  /// batch be refused before anything was sent (NULL data, a wrong size): its error.
  Status status;
};

/// Asks the snapshot peer at host:port which arenas it serves (a discovery handshake,
/// Mode::kList): kind, mode, blob bytes, arena bytes and, for raw arenas the first
/// client sizes, the largest size allowed. Every entry is validated. RemoteError for
/// a peer that is not a snapshot peer or sends a bad list; InvalidUsage with the
/// peer's words when it refuses (an older peer: "unknown mode 3"); errors of the
/// connection (SystemError). `peerName`, when not empty, is what the errors call the peer
/// instead of host:port (a tunnel's local port means nothing to the user).
Status ListArenas(const std::string& host, uint16_t port, int timeoutMs, std::vector<ArenaInfo>* out,
                  const std::string& peerName = "");

/// See file comment. Not thread-safe; the Worker must be polled by this client only
/// while a call runs (the calls drive its Progress).
class SnapshotClient {
 public:
  /// Connects, handshakes (the peer refuses another version, kind, mode or size,
  /// naming what differs: returned as InvalidUsage with its message), validates the
  /// peer's Worker address and arena key, and opens the Endpoint. `cache` (over the
  /// Worker's Domain) and `worker` must outlive the client.
  static Status Connect(fabric::RegistrationCache& cache, fabric::Worker& worker, const ClientOptions& options,
                        std::unique_ptr<SnapshotClient>* out);
  ~SnapshotClient();

  // ---- raw mode ------------------------------------------------------------------
  /// Writes one whole blob (`bytes` must equal the blob bytes) at `offset` (a multiple
  /// of the blob bytes, inside the arena). InvalidArgument for any other offset or
  /// size, and nothing is written; InvalidUsage on a paging arena.
  Status WriteAt(uint64_t offset, const void* src, uint64_t bytes);
  /// Reads the whole blob at `offset` into `dst`; checks as WriteAt.
  Status ReadAt(uint64_t offset, void* dst, uint64_t bytes);

  // ---- paging mode ---------------------------------------------------------------
  /// Stores `key` (`bytes` must equal the blob bytes). Errors: InvalidArgument for a
  /// wrong size (nothing sent); the peer's refusal with the peer's own code and its
  /// message after "the peer says: " (e.g. SystemError "... swap disk full ..."); a
  /// handle that failed earlier, its error again (nothing sent); transport errors. A
  /// failed Put leaves the key's previous blob in place.
  Status Put(uint64_t key, const void* src, uint64_t bytes);
  /// Fetches `key` into `dst` (`bytes` = the blob bytes); *found = false (and `dst`
  /// untouched) when the peer does not know it. RemoteError when the bytes read do
  /// not match the blob's checksum.
  Status Get(uint64_t key, void* dst, uint64_t bytes, bool* found);
  /// Stores every blob of `blobs` as Put would, keeping up to
  /// ClientOptions::batchDepth of them in flight (each one's alloc is answered while
  /// an earlier blob's bytes move, and its commit checked while a later one's move), so
  /// a batch does not pay a control round trip per blob. A key given twice is stored
  /// twice, in order (the later wins); blobs of different keys may be stored out of
  /// order. When the peer has no free slot for a blob while this client holds one
  /// (kBusy: other clients hold the rest), that blob waits until this client holds
  /// nothing and is asked for alone, so clients batching at once queue for slots
  /// rather than wait on each other. Each blob's outcome is in its `status`; one
  /// blob's failure (a full swap disk, a checksum) does not stop the others, but a
  /// failure of the handle (the connection or fabric route) ends the batch: the blobs
  /// in flight get that error and later ones stay not attempted. Returns Ok when every
  /// blob was stored, else the first failure, naming its index and key.
  /// InvalidArgument, with nothing sent, for a NULL `data` or a wrong size anywhere in
  /// the batch (the first such blob's `status` says so), and InvalidUsage so for a key
  /// this handle staged (Alloc or Stage) and has not committed (the batch's alloc of it
  /// would take that slot from under the Commit); an empty batch is Ok. The blobs
  /// in flight when the handle fails (up to twice the depth: allocs asked ahead and
  /// commits not yet answered) get "in flight when the handle failed (...)": they
  /// may or may not have been stored.
  Status PutBatch(std::span<BatchBlob> blobs);
  /// Fetches every blob of `blobs` as Get would, in order, up to batchDepth in flight
  /// (the next gets asked for, and faulted from the peer's swap file there, while this
  /// one's bytes move). A key the peer does not hold is not an error: `found` says.
  /// Errors as PutBatch.
  Status GetBatch(std::span<BatchBlob> blobs);
  /// Forgets `key` at the peer; *found says whether it was there. While another
  /// client's get faults the key from the peer's swap file, the remove waits for it,
  /// hearing kQueued (wire version 7) as a queued alloc does.
  Status Remove(uint64_t key, bool* found);
  /// The first half of Put: alloc and write, without commit (the peer serves nothing
  /// of it until Commit). `*checksum` gets the blob's XXH3-64.
  Status Stage(uint64_t key, const void* src, uint64_t bytes, uint64_t* checksum);
  /// The second half of Put. Waits, hearing kQueued, while another client's get faults
  /// the key from the peer's swap file (as Remove).
  Status Commit(uint64_t key, uint64_t checksum);
  /// Stage in two steps (for callers that fill a slot over time, and for tests that
  /// stop the peer between them): Alloc asks the peer for a slot for `key` and returns
  /// its offset; WriteSlot writes the whole blob there (`*checksum` as Stage).
  /// InvalidUsage (nothing taken, the handle usable) when no slot is free and this
  /// handle holds one already from an earlier Alloc not yet committed (the message names
  /// its keys): the peer does not make a client holding a slot wait for another (wire
  /// version 4). A client holding nothing may wait there for a slot, queued first come
  /// first served, up to the peer's slot wait (twice its RAILYARD_TIMEOUT_MS); the peer
  /// says kQueued every QueuedBeatMs (of its and this client's timeout, sent in the
  /// handshake) meanwhile (wire versions 5, 6), so this client keeps
  /// waiting while the peer is alive (a silent one fails it after its own
  /// RAILYARD_TIMEOUT_MS), up to that slot wait plus its own timeout. Get waits so too.
  Status Alloc(uint64_t key, uint64_t* offset);
  Status WriteSlot(uint64_t offset, const void* src, uint64_t bytes, uint64_t* checksum);

  /// Closes the control connection and keeps the fabric Endpoint: the peer takes this
  /// client for gone (its uncommitted slots and pins are reclaimed, its arena key is
  /// revoked) while one-sided operations can still be posted, which is what a client
  /// killed with Writes still in flight looks like to the peer. For tests of that
  /// case; later control calls (alloc, commit, get, remove) fail.
  void CloseControl() { control_.Reset(); }
  /// True when the peer has closed this handle's control connection (it dropped the
  /// client: gone, or stopped for the peer's timeout in the middle of a put or get),
  /// seen without reading a byte or waiting. For tests that must not race the drop.
  bool ControlClosedByPeer() const;
  /// Sends a kRelease of `key` (the pin a Get took) and returns at once: the peer
  /// answers no release (wire version 3), and one of a pin this client does not hold
  /// is logged there and changes nothing. Get sends it itself; public for tests of that
  /// rule. Errors: the control connection's, sticky.
  Status SendRelease(uint64_t key);

  /// Ok, or the error that failed this client.
  Status status() const { return failed_; }
  uint64_t blobBytes() const { return options_.blobBytes; }
  uint64_t arenaBytes() const { return options_.arenaBytes; }
  Mode mode() const { return options_.mode; }
  const BlobMover& mover() const { return *mover_; }
  /// Gets so far whose blob the peer faulted from its swap file as this client read it
  /// (answered kFaulting, then kReady records as its pieces landed).
  uint64_t faultedGets() const { return faultedGets_; }
  /// kReady records taken so far (each piece but a blob's last, and the last).
  uint64_t readyRecords() const { return readyRecords_; }
  /// Batch requests the peer answered kBusy (it had no slot for them while this client
  /// held one), each asked again once this client held nothing.
  uint64_t busyAnswers() const { return busyAnswers_; }
  /// kQueued records taken so far: an alloc or get queued at the peer for a slot, and a
  /// request waiting there for a get's fault of its key, hears one every QueuedBeatMs
  /// of its wait.
  uint64_t queuedAnswers() const { return queuedAnswers_; }

 private:
  SnapshotClient(fabric::Worker& worker, ClientOptions o) : worker_(worker), options_(std::move(o)) {}
  /// Sends a request and waits for its response (every op but kRelease). A get's
  /// kFaulting is returned as is (its kReady records follow: Get reads them).
  Status Call(Op op, uint64_t key, uint64_t checksum, Response* out);
  /// Call's halves: sends one request without waiting (errors sticky) ...
  Status SendRequest(Op op, uint64_t key, uint64_t checksum);
  /// ... and takes the next response, which answers the oldest request not yet
  /// answered (the peer answers in order), checking it fits `op`: an offset inside the
  /// arena, no kReady or kAbsent out of turn (a sticky RemoteError otherwise).
  Status Answer(Op op, uint64_t key, Response* out);
  /// The rest of a get answered kOk or kFaulting (`r`): reads the blob into `dst`
  /// (gated by the kReady records while it is faulted), releases the pin and checks
  /// the bytes against the blob's checksum.
  Status ReadBlob(uint64_t key, const Response& r, void* dst, uint64_t bytes);
  /// `written` (WriteSlot's result for `key`) with the call named first, "snapshot put
  /// of key K to PEER: writing the blob: ..." (unless it names one already).
  Status NamedWrite(uint64_t key, Status written) const;
  /// Why a request asked with nothing else of this handle in flight was answered kBusy:
  /// InvalidUsage naming the keys staged (allocated by Alloc or Stage, not committed).
  Status BusyWhileStaged(Op op) const;
  /// PutBatch/GetBatch's checks before anything is sent.
  Status CheckBatch(std::span<BatchBlob> blobs, const char* what) const;
  /// Blobs a batch keeps in flight: batchDepth, at most half the arena's slots (1 at least).
  size_t BatchDepth() const;
  /// Reads one response (fixed part and message) from the control connection; kError
  /// becomes the peer's Status (not sticky), a malformed one a sticky RemoteError.
  Status RecvResponse(const std::string& what, std::chrono::steady_clock::time_point began, Response* out);
  /// "snapshot get of key 7 to h2": how a call's errors start.
  std::string CallName(Op op, uint64_t key) const;
  Status CheckBlob(uint64_t bytes, const char* what) const;
  /// OK, or the sticky failure (failed_) said as an earlier one: "snapshot: this
  /// handle's connection to the peer failed earlier (<first error>); ...".
  Status Earlier() const;
  Status Sticky(Status s);
  /// Like Sticky for any code: `s` (not Ok) fails the handle. For failures that leave
  /// something held at the peer (a written slot, a pin, a fault's unread records).
  Status FailHandle(Status s);
  /// `s` (a control-connection error of a call that began at `began`) with the fabric
  /// Endpoint's error appended when the Endpoint has failed, or fails while the call is
  /// still within RAILYARD_TIMEOUT_MS (waiting at most 1 s): a relayed route names peer,
  /// relay and sequence there. So a connection that broke at once (a killed relay)
  /// waits for that cause, and one that timed out adds no wait to its timeout. Ok
  /// passes unchanged.
  Status WithRouteCause(Status s, std::chrono::steady_clock::time_point began);
  /// `s` (a failed call: the control connection's error, or the fabric's BAD_KEY of a
  /// write into a revoked slot) with why the peer most likely closed the
  /// connection appended, when it did close it (end of stream or reset, not silence)
  /// while this handle held a slot allocated and not committed, after a pause since the
  /// peer's last answer of at least half the peer's RAILYARD_TIMEOUT_MS (which is half
  /// the slot wait its handshake gave; waiting up to 200 ms for the close then, as a
  /// dropped client's key is revoked just before): the peer drops a client stopped mid-put for that long
  /// (new-user trial: the commit after such a pause said only "connection closed by
  /// peer"). Else, when the fabric refused this handle's arena key (BAD_KEY,
  /// DEREGISTERED, or over verbs REMOTE_ACCESS), that the peer revoked it. Either is returned as SystemError (a
  /// network error, code 2 in the C API) whatever `s`'s code; else `s` unchanged.
  Status WithDropCause(Status s) const;

  fabric::Worker& worker_;
  ClientOptions options_;
  proxy::Fd control_;
  fabric::RemoteKey arenaKey_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::unique_ptr<BlobMover> mover_;
  Status failed_;
  uint64_t faultedGets_ = 0;
  uint64_t readyRecords_ = 0;
  uint64_t busyAnswers_ = 0;
  std::vector<uint64_t> staged_;  ///< keys Alloc (or Stage) took a slot for, not yet committed
  uint64_t slotWaitMs_ = 0;    ///< the peer's, from the handshake reply
  uint64_t queuedAnswers_ = 0;
  /// When the peer last answered (or the handshake ended): WithDropCause's measure of a pause.
  std::chrono::steady_clock::time_point lastAnswer_ = std::chrono::steady_clock::now();
};

}  // namespace railyard::storage::snapshot
