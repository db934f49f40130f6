// The paging arena: the peer-owned residency of one paging-mode kind. A registered
// arena of `slots` blobs is a cache over a swap file: alloc hands a client a free
// slot (evicting the least recently used committed blob to swap when none is
// free), commit makes the written slot the key's blob, get returns a resident
// slot (faulting it back from swap first) pinned until release. A pinned or
// half-written slot is never evicted or reused, so a get racing an eviction or a
// fault returns the right bytes. A client that goes away (Drop) loses its
// half-written slots and pins: nothing it did not commit is ever served.
//
// An alloc or a fault that finds every slot pinned or being written waits (up to the
// arena's slot wait) for one to come free rather than failing at once: more clients at
// once than slots is a queue, not an error, while they keep moving. The queue is first
// come, first served: a slot that comes free goes to the oldest waiter, and a newcomer
// queues behind the waiters even when a slot is free that instant.
//
// Thread-safe (one mutex). A commit hashes its slot and writes it through to swap, and
// a get reads a blob back from swap, without holding it (the slot is that client's
// until linked; the key's other gets, its removes and commits wait for a fault), and
// an eviction writes its victim to swap without it too (the victim's slot pinned by
// the eviction meanwhile). Under it: a full disk's exchange, and with sync the erasing
// of a forgotten blob's swap record (one header write and fdatasync, on a remove, a
// replacing commit or a torn fault).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "env/status.h"
#include "storage/snapshot/blob_checksum.h"
#include "storage/snapshot/swap_file.h"

namespace railyard::storage::snapshot {

/// Counters for diagnostics and tests.
struct PagingStats {
  uint64_t blobs = 0;       ///< committed keys
  uint64_t resident = 0;    ///< committed blobs with a resident copy
  uint64_t evictions = 0;   ///< blobs written to swap to free a slot
  uint64_t faults = 0;      ///< blobs read back from swap on get
  uint64_t rebuilt = 0;     ///< blobs found in the swap file at start
  uint64_t tornDropped = 0; ///< swap records dropped at start for a bad checksum
  uint64_t reclaimed = 0;   ///< slots taken back from clients that went away uncommitted
  uint64_t waiting = 0;     ///< allocs and faults queued for a slot now
  uint64_t faultWaits = 0;  ///< requests waiting for a get's fault of their key now
  uint64_t queuedTold = 0;  ///< "still waiting" (Queued::tell: the server's kQueued) told so far
};

/// Most gets one client may hold unreleased in one paging arena (pins, counted per get,
/// the same key's included). Railyard's client holds at most its batch depth (8,
/// kMaxBatchDepth) at once; a get past this is refused InvalidUsage.
constexpr uint64_t kMaxPinsPerClient = 256;

/// How a request that waits at a PagingArena (for a slot, or for another get's fault
/// of its key) says it still waits: `tell` is called under the arena's lock (so it must
/// not block) once per `everyMs` of the wait (each client's own interval: the server
/// sends kQueued every QueuedBeatMs of the peer's and that client's timeouts). No
/// `tell`, or `everyMs` <= 0: never.
struct PagingQueued {
  std::function<void()> tell;
  int64_t everyMs = 0;
};

/// See file comment.
class PagingArena {
 public:
  /// `arena` is `slots * blobBytes` bytes the caller owns (registered for remote
  /// access); `swap` the kind's swap file with what its rebuild found. An alloc or a
  /// fault that finds every slot pinned or being written waits up to `slotWaitMs` for
  /// one to come free (other clients' gets and puts end within their own timeout),
  /// telling its `queued` (Alloc, Get) every so often meanwhile; a commit or remove
  /// waiting for a get's fault of its key tells its own the same way.
  /// A commit's check hashes the slot with `checksums`' helper threads when given (the
  /// server's, shared by its arenas; it outlives this arena), else alone.
  PagingArena(uint8_t* arena, uint64_t slots, uint64_t blobBytes, std::unique_ptr<SwapFile> swap,
              const SwapRebuild& rebuild, int64_t slotWaitMs = 0, ChecksumPool* checksums = nullptr);

  /// See PagingQueued.
  using Queued = PagingQueued;

  /// A slot for `client` to write `key`'s new blob into; its byte offset in the
  /// arena. The key's previous blob (if any) stays readable until commit. Asked again
  /// for a key it has allocated and not committed, the client gets the same slot.
  /// SystemError "swap disk full" when a slot could only be freed by evicting to a
  /// full disk; InvalidUsage when every slot stayed pinned or being written for the
  /// whole slot wait.
  ///
  /// `busy` (optional; the server passes it): a client that already holds a slot being
  /// written or a pin (a batch with requests ahead) must not wait for a slot, since what
  /// would free one may be its own commit or release queued behind this request. So
  /// when it holds one and no slot can be had now, *busy = true and nothing changes
  /// (the client asks again once it holds nothing); else *busy = false.
  /// `queued` (optional): see Queued.
  Status Alloc(uint64_t client, uint64_t key, uint64_t* offset, bool* busy = nullptr, const Queued& queued = {});
  /// Makes `client`'s slot for `key` the key's blob, after checking its bytes
  /// against `checksum` (BlobChecksum). With a sync swap file the blob is written
  /// through (durable) first. On any error the slot is reclaimed and the previous
  /// blob of the key (if any) is kept. InvalidUsage when `client` has no alloc for `key`.
  /// The hash and the write-through run outside the arena's lock; of two clients'
  /// commits of one key at once, the one that began later wins (its generation), as
  /// a rebuild from swap would decide. While a get faults the key from swap, the
  /// commit waits for it to land, telling `queued` (optional; see Queued) meanwhile.
  Status Commit(uint64_t client, uint64_t key, uint64_t checksum, const Queued& queued = {});

  /// Commit's three steps (Commit runs them in a row), public so that tests can
  /// interleave two clients' commits. Begin (locked): finds the client's slot for the
  /// key (InvalidUsage as Commit's), gives the commit its generation and, with a sync
  /// swap file, a record. Check (unlocked): the slot's hash against `checksum`
  /// (InvalidArgument), then the write-through (SystemError). End (locked): on an error
  /// from Check frees the slot and record and returns it; else links the slot as the
  /// key's blob, unless a commit of the key that began later has been linked already
  /// (then this one is dropped as superseded, and Ok); it waits for a get's fault of the
  /// key first, telling `queued` meanwhile.
  struct PendingCommit {
    uint64_t key = 0;
    uint64_t checksum = 0;
    int64_t slot = -1;
    int64_t swapSlot = -1;  ///< the write-through record, or -1
    uint64_t generation = 0;
    bool recordTouched = false;  ///< Check wrote (some of) the record: End tombstones it on failure
  };
  Status BeginCommit(uint64_t client, uint64_t key, uint64_t checksum, PendingCommit* out);
  Status CheckCommit(PendingCommit& p);
  Status EndCommit(const PendingCommit& p, Status checked, const Queued& queued = {});
  /// Told how a get's fault from swap goes, on the get's thread without the arena's
  /// lock (it should not block for long: the key's other gets, its removes and commits
  /// wait for the fault): first with `ready` 0 once the slot is chosen (`offset` and `checksum` are
  /// then final), then with the bytes from the blob's start already in the slot after
  /// each piece read but the last. Those bytes are not yet checked: they count only if
  /// Get then returns Ok.
  using FaultProgress = std::function<void(uint64_t offset, uint64_t checksum, uint64_t ready)>;

  /// `key`'s blob, resident and pinned for `client` until Release: its offset and
  /// checksum; *found = false when the key is unknown. SystemError when it must be
  /// faulted and the swap read fails; the key is dropped if its record is torn.
  /// InvalidUsage, nothing pinned, when `client` already holds kMaxPinsPerClient pins.
  /// `progress` (optional) follows a fault as it happens (see FaultProgress). `busy`
  /// as Alloc's, for a fault that needs a slot: *busy = true (before any progress
  /// call; nothing pinned, *found true) when the client holds one and none is free now.
  /// `queued` as Alloc's (before any progress call).
  Status Get(uint64_t client, uint64_t key, bool* found, uint64_t* offset, uint64_t* checksum,
             const FaultProgress& progress = {}, bool* busy = nullptr, const Queued& queued = {});
  /// Drops one pin of `client` on `key`, its oldest. InvalidUsage when it holds none.
  Status Release(uint64_t client, uint64_t key);
  /// Forgets `key` (its slot is reused once unpinned). *found = false when unknown.
  /// With sync, SystemError when its swap record could not be erased (the key is gone
  /// from the arena, but a restart would bring it back).
  /// While a get faults the key from swap, waits for it to land, telling `queued`.
  Status Remove(uint64_t key, bool* found, const Queued& queued = {});
  /// `client` went away: its uncommitted slots are reclaimed, its pins dropped.
  void Drop(uint64_t client);
  /// The serving peer is stopping: every request waiting for a slot ends now with
  /// SystemError "the snapshot peer is stopping", and later ones that would wait do
  /// the same (review: a stop waited out every queued request's slot wait, 60 s by
  /// default). A fault under way still finishes its read. Idempotent.
  void Stop();
  /// True while `client` is in the middle of an operation: a slot allocated and not yet
  /// committed, or a pin not yet released. (Between operations it holds nothing, and
  /// its control connection may rest as long as it likes.)
  bool Holds(uint64_t client) const;
  /// True when some request waits for a slot (an alloc or a fault queued) while
  /// `client` has held one slot being written, or one pin, for more than `maxHoldMs`
  /// (counted from the alloc or the get that took it; an alloc asked again for the same
  /// key does not restart it). The server drops such a client (hostile-peer probe: a
  /// client could alloc every slot, never commit, and stay alive with requests that
  /// need no slot, so that every other client's put and get failed after its slot
  /// wait). Without a waiter nobody is held up, and a slow client is left alone.
  bool HoldsTooLong(uint64_t client, int64_t maxHoldMs) const;
  /// True when `client` holds `key`'s slot being written or a pin of `key`: its commit
  /// or release of `key` ends a hold (the server lets it through HoldsTooLong).
  bool HoldsKey(uint64_t client, uint64_t key) const;

  PagingStats stats() const;
  uint64_t blobBytes() const { return blobBytes_; }
  uint64_t slots() const { return slots_.size(); }
  /// How long an alloc or fault may queue for a slot (ms): the constructor's.
  int64_t slotWaitMs() const { return slotWaitMs_; }
  /// A test seam: `seen` is called with the key of every dirty blob about to be written
  /// to swap to free its slot, on the evicting thread without the arena's lock, just
  /// before the write (a test blocks there to act while an eviction writes). Set before
  /// the arena is used; empty: none.
  void SetEvictionWriteSeen(std::function<void(uint64_t key)> seen) { evictionWrite_ = std::move(seen); }
  /// A test seam as SetEvictionWriteSeen: `seen` is called with the key of every fault
  /// from swap, on the get's thread without the arena's lock, just before the read.
  void SetFaultReadSeen(std::function<void(uint64_t key)> seen) { faultRead_ = std::move(seen); }

 private:
  /// A waiting request's "still waiting": its Queued::tell once per Queued::everyMs, on
  /// one schedule for the whole request (a get's fault wait and slot wait alike).
  class Beat {
   public:
    /// `told` counts the tells (stats_.queuedTold, under the arena's lock).
    Beat(const Queued& q, uint64_t& told);
    Beat(Queued&&, uint64_t&) = delete;  // `q` is kept by reference: no temporaries
    /// Waits on `cv` (its lock held) until notified, `until` (none: no bound) or the
    /// next tell is due, then tells if it is due (never at or past `until`). Returns
    /// the time it woke.
    std::chrono::steady_clock::time_point Wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                               std::optional<std::chrono::steady_clock::time_point> until);

   private:
    const Queued& q_;
    uint64_t& told_;
    bool on_;
    std::chrono::steady_clock::time_point next_{};
  };
  struct Slot {
    enum State : uint8_t { kFree, kWriting, kFaulting, kResident } state = kFree;
    uint64_t key = 0;
    uint64_t writer = 0;   ///< kWriting: the client
    std::chrono::steady_clock::time_point since{};  ///< kWriting: when the client's alloc took it
    uint32_t pins = 0;     ///< kResident: gets not yet released, and an eviction writing it out
    bool orphan = false;   ///< kResident: no blob points here any more (freed on last unpin)
  };
  struct Blob {
    int64_t slot = -1;      ///< resident copy, or -1
    int64_t swapSlot = -1;  ///< copy in the swap file (identical bytes), or -1
    uint64_t checksum = 0;
    uint64_t generation = 0;
    bool faulting = false;  ///< a get is reading it from swap into a slot, without the lock
    std::list<uint64_t>::iterator lru;  ///< in lru_ while resident
  };

  uint8_t* SlotData(int64_t s) const { return arena_ + static_cast<uint64_t>(s) * blobBytes_; }
  /// A free slot, evicting the LRU unpinned resident blob when there is none; when
  /// every slot is pinned or being written (or others already wait), queues on `lock`
  /// (of mu_) up to slotWaitMs_ for one, first come first served, or, with `busy` given,
  /// sets *busy and returns Ok with *out -1 (taking no place in the queue). `beat` (the
  /// request's) tells its client that it still waits; the wait ends at `until` (the
  /// request's arrival plus slotWaitMs_, however many waits it had).
  Status TakeSlot(std::unique_lock<std::mutex>& lock, int64_t* out, bool* busy, Beat& beat,
                  std::chrono::steady_clock::time_point until);
  /// "every one of the N arena slots is pinned ...": why no slot could be taken.
  std::string NoSlotMessage() const;
  /// Holds() under mu_.
  bool HoldsLocked(uint64_t client) const;
  /// TakeSlot's one try, without waiting for a slot to come free: a free slot, else
  /// the LRU unpinned blob's (written to swap first when dirty, by EvictDirty, which lets
  /// `lock` go for the write; on a full disk a clean blob's instead). SystemError when
  /// only dirty blobs could give one and the disk refused the write; InvalidUsage
  /// (NoSlotMessage) when every slot is pinned or being written.
  Status TakeSlotNow(std::unique_lock<std::mutex>& lock, int64_t* out);
  /// Writes `key`'s dirty resident blob to a new swap record with `lock` (of mu_) let go
  /// meanwhile, its slot pinned by the eviction so that nothing evicts, takes or frees
  /// it under the write. Then the blob is clean (if it is still the same blob), and true
  /// with *out its slot when that slot can be taken now: the blob was unpinned all along,
  /// or was removed or replaced meanwhile (an orphan). False when a get pinned the slot
  /// meanwhile, or the write failed (*writeFailed says why): the caller looks again.
  bool EvictDirty(std::unique_lock<std::mutex>& lock, uint64_t key, int64_t* out, Status* writeFailed);
  void FreeSlot(int64_t s);
  /// Pins `b` (resident in b.slot) for `client` and fills Get's outputs.
  void Pin(uint64_t client, uint64_t key, const Blob& b, bool* found, uint64_t* offset, uint64_t* checksum);
  /// Waits on `lock` (of mu_) while a get faults `key` from swap (Remove and commits of
  /// the key must not forget its record or slot under the read), `beat` telling the
  /// request's client that it still waits.
  void WaitForFault(std::unique_lock<std::mutex>& lock, uint64_t key, Beat& beat);
  /// Get on a full disk: swaps `b` (in swap) with the LRU unpinned dirty resident
  /// blob, through one record. False when there is no such blob or I/O fails.
  bool Exchange(uint64_t key, Blob& b);
  /// Unlinks a blob's resident copy and swap copy (the slot is freed or orphaned). With
  /// sync, SystemError when its swap record could not be erased: the record stays on
  /// disk (its space kept out of use) and a restart would bring the blob back.
  Status Forget(uint64_t key, Blob& b);
  void Touch(uint64_t key, Blob& b);

  mutable std::mutex mu_;
  std::condition_variable slotFreed_;  ///< a pin dropped, a slot freed or committed, a waiter left
  std::condition_variable faultDone_;  ///< a fault from swap ended (landed or failed)
  std::deque<uint64_t> waiting_;       ///< tickets of TakeSlot's waiters, oldest first
  uint64_t nextTicket_ = 0;
  int64_t slotWaitMs_ = 0;
  ChecksumPool* checksums_ = nullptr;
  std::function<void(uint64_t)> evictionWrite_;  ///< SetEvictionWriteSeen
  std::function<void(uint64_t)> faultRead_;      ///< SetFaultReadSeen
  uint64_t faultWaits_ = 0;                      ///< PagingStats::faultWaits
  bool stopping_ = false;                        ///< Stop() was called
  uint8_t* arena_;
  uint64_t blobBytes_;
  std::vector<Slot> slots_;
  std::vector<int64_t> free_;
  std::map<uint64_t, Blob> blobs_;
  std::list<uint64_t> lru_;  ///< resident keys, most recent at the front
  /// One get's pin of a slot, and when the get took it (HoldsTooLong).
  struct Pinned {
    int64_t slot = -1;
    std::chrono::steady_clock::time_point since{};
  };
  std::map<std::pair<uint64_t, uint64_t>, std::deque<Pinned>> pins_;  ///< (client, key) -> its pins, oldest first
  /// Pins `client` holds in all (at most kMaxPinsPerClient: a hostile-peer probe pinned
  /// 2M gets of one key, 31 MB, and each release scanned them under the arena's lock).
  uint64_t PinsHeld(uint64_t client) const;
  std::unique_ptr<SwapFile> swap_;
  uint64_t generation_ = 0;
  PagingStats stats_;
};

}  // namespace railyard::storage::snapshot
