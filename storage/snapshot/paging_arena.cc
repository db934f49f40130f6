#include "storage/snapshot/paging_arena.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "env/log.h"

namespace railyard::storage::snapshot {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

PagingArena::Beat::Beat(const Queued& q, uint64_t& told) : q_(q), told_(told), on_(q.tell && q.everyMs > 0) {
  if (on_) next_ = Clock::now() + std::chrono::milliseconds(q_.everyMs);
}

Clock::time_point PagingArena::Beat::Wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                          std::optional<Clock::time_point> until) {
  if (on_ && (!until || next_ < *until)) {
    cv.wait_until(lock, next_);
  } else if (until) {
    cv.wait_until(lock, *until);
  } else {
    cv.wait(lock);
  }
  const Clock::time_point now = Clock::now();
  if (on_ && now >= next_ && (!until || now < *until)) {
    q_.tell();
    ++told_;
    next_ = now + std::chrono::milliseconds(q_.everyMs);
  }
  return now;
}


PagingArena::PagingArena(uint8_t* arena, uint64_t slots, uint64_t blobBytes, std::unique_ptr<SwapFile> swap,
                         const SwapRebuild& rebuild, int64_t slotWaitMs, ChecksumPool* checksums)
    : slotWaitMs_(slotWaitMs), checksums_(checksums), arena_(arena), blobBytes_(blobBytes), slots_(slots), swap_(std::move(swap)) {
  free_.reserve(slots);
  for (uint64_t s = slots; s > 0; --s) free_.push_back(static_cast<int64_t>(s - 1));
  for (const SwapRecord& r : rebuild.records) {
    Blob b;
    b.swapSlot = r.slot;
    b.checksum = r.checksum;
    b.generation = r.generation;
    blobs_[r.key] = b;
    generation_ = std::max(generation_, r.generation);
  }
  stats_.rebuilt = rebuild.records.size();
  stats_.tornDropped = rebuild.torn;
}

void PagingArena::FreeSlot(int64_t s) {
  slots_[s] = Slot{};
  free_.push_back(s);
  slotFreed_.notify_all();
}

void PagingArena::Touch(uint64_t key, Blob& b) {
  lru_.erase(b.lru);
  lru_.push_front(key);
  b.lru = lru_.begin();
}

Status PagingArena::TakeSlot(std::unique_lock<std::mutex>& lock, int64_t* out, bool* busy, Beat& beat,
                             std::chrono::steady_clock::time_point until) {
  // First come, first served: while anyone waits, a newcomer queues behind them even
  // when a slot is free this instant (freed and not yet taken by the head waiter).
  Status st = waiting_.empty() ? TakeSlotNow(lock, out) : InvalidUsage(NoSlotMessage());
  // Only "every slot pinned or being written" is worth waiting out: the gets and puts
  // holding them end (release, commit, or their connection's timeout) soon.
  if (st.ok() || st.code() != Code::kInvalidUsage) return st;
  if (busy != nullptr) {
    *busy = true;
    *out = -1;
    return Status::Ok();
  }
  // In the queue until this returns, however it returns (a throw included): leaving
  // it (with a slot or without) lets the next waiter try.
  const uint64_t ticket = nextTicket_++;
  waiting_.push_back(ticket);
  struct Place {
    PagingArena& arena;
    uint64_t ticket;
    ~Place() {
      arena.waiting_.erase(std::find(arena.waiting_.begin(), arena.waiting_.end(), ticket));
      arena.slotFreed_.notify_all();
    }
  } place{*this, ticket};
  for (;;) {  // still queued: the beat tells the client to keep waiting
    if (stopping_) return SystemError("the snapshot peer is stopping: no arena slot will come free");
    const bool timedOut = beat.Wait(slotFreed_, lock, until) >= until;
    if (stopping_) return SystemError("the snapshot peer is stopping: no arena slot will come free");
    if (waiting_.front() == ticket) {
      st = TakeSlotNow(lock, out);
      if (st.ok() || st.code() != Code::kInvalidUsage) return st;
    }
    if (timedOut) {
      // The advice first (new-user trial: it came last, after a long account).
      return InvalidUsage("no arena slot came free within " + std::to_string(slotWaitMs_) +
                          " ms (twice the peer's RAILYARD_TIMEOUT_MS): give the arena more slots, or have fewer "
                          "clients put and get at once (" + NoSlotMessage() +
                          ": more clients at once than the arena has slots, or one stopped mid-operation)");
    }
  }
}

std::string PagingArena::NoSlotMessage() const {
  return "every one of the " + std::to_string(slots_.size()) +
         " arena slots is pinned by a get or being written: no slot to evict";
}

Status PagingArena::TakeSlotNow(std::unique_lock<std::mutex>& lock, int64_t* out) {
  // The least recently used unpinned blob gives its slot; a dirty one (no swap copy)
  // is written out first. When that write fails (a full disk), a clean one further up
  // (already in swap) can still give its slot without a write, so the put is not
  // failed while a slot can be had.
  Status writeFailed;
  for (;;) {
    if (!free_.empty()) {
      *out = free_.back();
      free_.pop_back();
      return Status::Ok();
    }
    bool lookAgain = false;
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      const uint64_t key = *it;
      Blob& b = blobs_.at(key);
      const int64_t slot = b.slot;
      if (slots_[slot].pins > 0) continue;
      if (b.swapSlot < 0) {  // dirty: write it out before its slot is reused
        if (!writeFailed.ok()) continue;  // the disk refused one already: only clean ones now
        if (EvictDirty(lock, key, out, &writeFailed)) return Status::Ok();
        lookAgain = true;  // the arena moved while the lock was out: start over
        break;
      }
      b.slot = -1;
      lru_.erase(std::next(it).base());
      ++stats_.evictions;
      slots_[slot] = Slot{};
      *out = slot;
      return Status::Ok();
    }
    if (lookAgain) continue;
    if (!writeFailed.ok()) return writeFailed;
    return InvalidUsage(NoSlotMessage());
  }
}

bool PagingArena::EvictDirty(std::unique_lock<std::mutex>& lock, uint64_t key, int64_t* out, Status* writeFailed) {
  Blob& b = blobs_.at(key);
  const int64_t slot = b.slot;
  const uint64_t generation = b.generation;
  const uint64_t checksum = b.checksum;
  // Only a cache-only arena has dirty blobs (a sync one writes every commit through),
  // so the record freed below when the write is wasted needs no tombstone: a restart
  // without sync starts its file empty.
  const int64_t record = swap_->Allocate();
  // Written without the arena's lock (other clients' puts, gets and commits go on): the
  // evictor's pin keeps the slot from being evicted, taken or freed under the write (a
  // get may still pin it and read it: its bytes do not change; a remove or a newer
  // commit of the key orphans it), and the record is this eviction's alone.
  ++slots_[slot].pins;
  // However the window ends (a throw included), the lock is held again, the pin dropped
  // and whoever waits for a slot told: this one may be takeable now (the caller looks
  // again), or an orphan whose last pin this was.
  struct Unpin {
    PagingArena& arena;
    std::unique_lock<std::mutex>& lock;
    int64_t slot;
    int64_t record;  ///< freed on a throw; -1 once accounted for
    ~Unpin() {
      if (!lock.owns_lock()) lock.lock();
      Slot& s = arena.slots_[slot];
      --s.pins;
      if (record >= 0) arena.swap_->Free(record);
      if (record >= 0 && s.pins == 0 && s.orphan) {
        arena.FreeSlot(slot);  // notifies
      } else {
        arena.slotFreed_.notify_all();
      }
    }
  };
  Status wrote;
  {
    Unpin unpin{*this, lock, slot, record};
    lock.unlock();
    if (evictionWrite_) evictionWrite_(key);
    wrote = swap_->Write(record, key, generation, SlotData(slot), checksum);
    unpin.record = -1;
  }
  Slot& s = slots_[slot];
  auto it = blobs_.find(key);
  const bool same = it != blobs_.end() && it->second.slot == slot && it->second.generation == generation;
  if (wrote.ok() && same) {
    it->second.swapSlot = record;  // clean now, whatever happens to its slot
  } else {
    swap_->Free(record);
    if (!wrote.ok()) {
      *writeFailed = SystemError("cannot free an arena slot: evicting key " + std::to_string(key) + " failed: " +
                                 wrote.message());
    }
  }
  if (s.pins > 0) return false;  // a get pinned it meanwhile: another victim
  if (s.orphan) {                // its blob was removed or replaced meanwhile: the slot is free
    s = Slot{};
    *out = slot;
    return true;
  }
  // Not an orphan: the blob is still the one written (only Forget, which orphans a
  // pinned slot, unlinks a blob from its slot; a re-commit has a new generation).
  if (!wrote.ok() || !same) return false;
  it->second.slot = -1;
  lru_.erase(it->second.lru);
  ++stats_.evictions;
  s = Slot{};
  *out = slot;
  return true;
}

bool PagingArena::Exchange(uint64_t key, Blob& b) {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    Blob& v = blobs_.at(*it);
    if (slots_[v.slot].pins > 0 || v.swapSlot >= 0) continue;
    std::vector<uint8_t> tmp(blobBytes_);
    if (!swap_->Read(b.swapSlot, key, b.checksum, tmp.data()).ok()) return false;
    if (!swap_->Write(b.swapSlot, *it, v.generation, SlotData(v.slot), v.checksum).ok()) return false;
    const int64_t s = v.slot;
    v.swapSlot = b.swapSlot;
    v.slot = -1;
    lru_.erase(std::next(it).base());
    std::memcpy(SlotData(s), tmp.data(), blobBytes_);
    slots_[s] = Slot{};
    slots_[s].state = Slot::kResident;
    slots_[s].key = key;
    b.swapSlot = -1;
    b.slot = s;
    lru_.push_front(key);
    b.lru = lru_.begin();
    ++stats_.evictions;
    return true;
  }
  return false;
}

Status PagingArena::Alloc(uint64_t client, uint64_t key, uint64_t* offset, bool* busy, const Queued& queued) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy != nullptr) *busy = false;
  // An earlier uncommitted alloc of the same key by this client is superseded: its slot
  // is handed back again (the client writes the whole blob anew), never freed first,
  // where a queued waiter would take it and leave this alloc waiting or busy.
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == Slot::kWriting && slots_[i].writer == client && slots_[i].key == key) {
      *offset = static_cast<uint64_t>(i) * blobBytes_;
      return Status::Ok();
    }
  }
  int64_t s = -1;
  Beat beat(queued, stats_.queuedTold);
  RY_RETURN_IF_ERROR(TakeSlot(lock, &s, busy != nullptr && HoldsLocked(client) ? busy : nullptr, beat,
                              Clock::now() + std::chrono::milliseconds(slotWaitMs_)));
  if (s < 0) return Status::Ok();  // busy
  slots_[s].state = Slot::kWriting;
  slots_[s].key = key;
  slots_[s].writer = client;
  slots_[s].since = Clock::now();
  *offset = static_cast<uint64_t>(s) * blobBytes_;
  return Status::Ok();
}

Status PagingArena::Forget(uint64_t key, Blob& b) {
  if (b.slot >= 0) {
    lru_.erase(b.lru);
    Slot& s = slots_[b.slot];
    if (s.pins > 0) {
      s.orphan = true;
    } else {
      FreeSlot(b.slot);
    }
    b.slot = -1;
  }
  if (b.swapSlot >= 0) {
    if (swap_->sync()) {
      if (Status st = swap_->Tombstone(b.swapSlot); !st.ok()) {
        // The record stays on disk with an older generation (a replaced blob: the
        // newer record wins a rebuild, which erases this one) or as the key's last
        // (a removed key: the caller says so). Its space stays out of use, so no later
        // record half-written over it can be read as this key's.
        RY_WARN("snapshot: %s", st.message().c_str());
        b.swapSlot = -1;
        return SystemError("the swap record of key " + std::to_string(key) + " could not be erased (" + st.message() +
                           "): a restart would bring the blob back");
      }
    }
    swap_->Free(b.swapSlot);
    b.swapSlot = -1;
  }
  return Status::Ok();
}

Status PagingArena::Commit(uint64_t client, uint64_t key, uint64_t checksum, const Queued& queued) {
  PendingCommit p;
  RY_RETURN_IF_ERROR(BeginCommit(client, key, checksum, &p));
  return EndCommit(p, CheckCommit(p), queued);
}

Status PagingArena::BeginCommit(uint64_t client, uint64_t key, uint64_t checksum, PendingCommit* out) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t s = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == Slot::kWriting && slots_[i].writer == client && slots_[i].key == key) {
      s = static_cast<int64_t>(i);
      break;
    }
  }
  if (s < 0) return InvalidUsage("commit of key " + std::to_string(key) + " without an alloc of it");
  *out = PendingCommit{key, checksum, s, swap_->sync() ? swap_->Allocate() : -1, ++generation_};
  return Status::Ok();
}

Status PagingArena::CheckCommit(PendingCommit& p) {
  // No lock: the slot stays its client's (being written) until EndCommit links it, so
  // no other client evicts, takes or frees it, and that client's own requests (which
  // could reuse or drop it) come one after the other on its connection; the swap
  // record was allocated for this commit alone.
  const uint8_t* data = SlotData(p.slot);
  const uint64_t sum = checksums_ != nullptr ? checksums_->Checksum(data, blobBytes_) : BlobChecksum(data, blobBytes_);
  if (sum != p.checksum) {
    return InvalidArgument("commit of key " + std::to_string(p.key) +
                           ": the slot's bytes do not match the client's checksum (not every byte landed); "
                           "the blob was not stored");
  }
  if (p.swapSlot >= 0) {  // write-through: durable before commit returns
    if (Status ws = swap_->Write(p.swapSlot, p.key, p.generation, data, p.checksum, &p.recordTouched); !ws.ok()) {
      return SystemError("commit of key " + std::to_string(p.key) + " failed: " + ws.message());
    }
  }
  return Status::Ok();
}

Status PagingArena::EndCommit(const PendingCommit& p, Status checked, const Queued& queued) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!checked.ok()) {
    FreeSlot(p.slot);
    if (p.recordTouched) {
      // A write-through that failed late (its fdatasync) may have left the whole record
      // on disk: tombstoned before reuse, as any forgotten blob's, so no rebuild brings
      // back a commit reported as failed.
      Blob dead;
      dead.swapSlot = p.swapSlot;
      (void)Forget(p.key, dead);  // warned; the commit's own error is the answer
    } else if (p.swapSlot >= 0) {  // nothing reached it (a full disk refused the space)
      swap_->Free(p.swapSlot);
    }
    return checked;
  }
  Blob nb;
  nb.swapSlot = p.swapSlot;
  nb.checksum = p.checksum;
  nb.generation = p.generation;
  Beat beat(queued, stats_.queuedTold);
  WaitForFault(lock, p.key, beat);  // the key's blob being read from swap is not forgotten under it
  auto it = blobs_.find(p.key);
  if (it != blobs_.end() && it->second.generation > p.generation) {
    // Another client's commit of this key began after this one and ended first: the
    // later one wins, as a rebuild from swap would decide by generation.
    FreeSlot(p.slot);
    (void)Forget(p.key, nb);  // its swap record (tombstoned first with sync; older, so a rebuild drops it)
    return Status::Ok();
  }
  if (it != blobs_.end()) {
    (void)Forget(p.key, it->second);  // warned; older than this commit's record, which wins a rebuild
    blobs_.erase(it);
  }
  nb.slot = p.slot;
  slots_[p.slot].state = Slot::kResident;
  slots_[p.slot].writer = 0;
  lru_.push_front(p.key);
  nb.lru = lru_.begin();
  blobs_[p.key] = nb;
  slotFreed_.notify_all();  // a written slot is evictable now
  return Status::Ok();
}

Status PagingArena::Get(uint64_t client, uint64_t key, bool* found, uint64_t* offset, uint64_t* checksum,
                        const FaultProgress& progress, bool* busy, const Queued& queued) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy != nullptr) *busy = false;
  if (const uint64_t held = PinsHeld(client); held >= kMaxPinsPerClient) {
    return InvalidUsage("get of key " + std::to_string(key) + ": this client holds " + std::to_string(held) +
                        " gets unreleased, the most one client may hold (" + std::to_string(kMaxPinsPerClient) +
                        "); release some first");
  }
  // One schedule of kQueued and one slot wait for the whole request: a wait for another
  // get's fault says so as one for a slot does, and waits for a slot, however many
  // (the key may change under each), end at `until`.
  Beat beat(queued, stats_.queuedTold);
  const Clock::time_point until = Clock::now() + std::chrono::milliseconds(slotWaitMs_);
  for (;;) {
    auto it = blobs_.find(key);
    if (it == blobs_.end()) {
      *found = false;
      return Status::Ok();
    }
    if (it->second.faulting) {  // another get is reading it from swap: wait for it to land
      WaitForFault(lock, key, beat);
      continue;
    }
    if (it->second.slot >= 0) {
      Touch(key, it->second);
      Pin(client, key, it->second, found, offset, checksum);
      return Status::Ok();
    }
    // In swap only: fault it back into a slot.
    int64_t s = -1;
    Status taken = TakeSlot(lock, &s, busy != nullptr && HoldsLocked(client) ? busy : nullptr, beat, until);
    if (taken.ok() && s < 0) {  // busy: the client asks again once it holds nothing
      *found = true;
      return Status::Ok();
    }
    // A wait for a slot let other clients in: the key may be gone, replaced, resident
    // or being faulted by another get now. Then look again (each case ends there).
    it = blobs_.find(key);
    if (it == blobs_.end() || it->second.slot >= 0 || it->second.faulting) {
      if (taken.ok()) FreeSlot(s);
      continue;
    }
    Blob& b = it->second;
    if (!taken.ok()) {
      // Every evictable slot is dirty and the swap disk is full: exchange the LRU
      // victim with this blob's swap record (it is read out first, under the lock), so
      // earlier blobs stay readable on a full disk. (With a sync swap file nothing is dirty.)
      if (taken.code() != Code::kSystemError || !Exchange(key, b)) return taken;
      ++stats_.faults;
      Pin(client, key, b, found, offset, checksum);
      return Status::Ok();
    }
    // Read it without holding the arena: the slot is this get's (kFaulting: not free,
    // not evictable), the swap record stays the blob's (a remove or a commit of the key
    // waits for the fault, evictions write only to records they allocate), and the key's
    // other gets wait for it above. So `b` outlives the read.
    b.faulting = true;
    slots_[s].state = Slot::kFaulting;
    slots_[s].key = key;
    const int64_t record = b.swapSlot;
    const uint64_t sum = b.checksum;
    // Whatever ends the fault, a throw included, the key's waiters are woken and the
    // slot does not stay kFaulting.
    struct FaultGuard {
      PagingArena& arena;
      std::unique_lock<std::mutex>& lock;
      Blob& blob;
      int64_t slot;
      bool armed = true;
      ~FaultGuard() {
        if (!armed) return;
        if (!lock.owns_lock()) lock.lock();
        blob.faulting = false;
        arena.FreeSlot(slot);
        arena.faultDone_.notify_all();
      }
    } guard{*this, lock, b, s};
    lock.unlock();
    const uint64_t at = static_cast<uint64_t>(s) * blobBytes_;
    std::function<void(uint64_t)> landed;
    if (progress) {
      progress(at, sum, 0);
      landed = [&](uint64_t bytes) { progress(at, sum, bytes); };
    }
    if (faultRead_) faultRead_(key);
    const Status st = swap_->Read(record, key, sum, SlotData(s), landed);
    lock.lock();
    guard.armed = false;
    b.faulting = false;
    faultDone_.notify_all();
    if (!st.ok()) {
      FreeSlot(s);
      if (st.code() == Code::kInternalError) {  // torn: never served
        (void)Forget(key, b);  // warned; a torn record is never served, nor rebuilt
        blobs_.erase(key);
      }
      return SystemError("get of key " + std::to_string(key) + ": fault from swap failed: " + st.message());
    }
    slots_[s].state = Slot::kResident;
    b.slot = s;
    lru_.push_front(key);
    b.lru = lru_.begin();
    ++stats_.faults;
    Pin(client, key, b, found, offset, checksum);
    return Status::Ok();
  }
}

void PagingArena::Pin(uint64_t client, uint64_t key, const Blob& b, bool* found, uint64_t* offset, uint64_t* checksum) {
  ++slots_[b.slot].pins;
  pins_[{client, key}].push_back(Pinned{b.slot, Clock::now()});
  *found = true;
  *offset = static_cast<uint64_t>(b.slot) * blobBytes_;
  *checksum = b.checksum;
}

void PagingArena::WaitForFault(std::unique_lock<std::mutex>& lock, uint64_t key, Beat& beat) {
  for (auto it = blobs_.find(key); it != blobs_.end() && it->second.faulting; it = blobs_.find(key)) {
    ++faultWaits_;
    beat.Wait(faultDone_, lock, std::nullopt);
    --faultWaits_;
  }
}

Status PagingArena::Release(uint64_t client, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pins_.find({client, key});
  if (it == pins_.end() || it->second.empty()) {
    return InvalidUsage("release of key " + std::to_string(key) + " that this client has not got");
  }
  // The oldest pin first: a batch's gets of one key are released in the order taken.
  const int64_t s = it->second.front().slot;
  it->second.pop_front();
  if (it->second.empty()) pins_.erase(it);
  if (--slots_[s].pins == 0) {
    if (slots_[s].orphan) FreeSlot(s);
    slotFreed_.notify_all();  // evictable again
  }
  return Status::Ok();
}

Status PagingArena::Remove(uint64_t key, bool* found, const Queued& queued) {
  std::unique_lock<std::mutex> lock(mu_);
  Beat beat(queued, stats_.queuedTold);
  WaitForFault(lock, key, beat);  // its swap record is being read
  auto it = blobs_.find(key);
  *found = it != blobs_.end();
  if (*found) {
    const Status forgot = Forget(key, it->second);
    blobs_.erase(it);
    if (!forgot.ok()) return SystemError("remove of key " + std::to_string(key) + ": " + forgot.message());
  }
  return Status::Ok();
}

void PagingArena::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  slotFreed_.notify_all();
}

void PagingArena::Drop(uint64_t client) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == Slot::kWriting && slots_[i].writer == client) {
      FreeSlot(static_cast<int64_t>(i));
      ++stats_.reclaimed;
    }
  }
  for (auto it = pins_.lower_bound({client, 0}); it != pins_.end() && it->first.first == client;) {
    for (const Pinned& p : it->second) {
      if (--slots_[p.slot].pins == 0 && slots_[p.slot].orphan) FreeSlot(p.slot);
    }
    it = pins_.erase(it);
  }
  slotFreed_.notify_all();
}

uint64_t PagingArena::PinsHeld(uint64_t client) const {
  uint64_t n = 0;  // at most kMaxPinsPerClient entries, each of one pin or more
  for (auto it = pins_.lower_bound({client, 0}); it != pins_.end() && it->first.first == client; ++it) {
    n += it->second.size();
  }
  return n;
}

bool PagingArena::Holds(uint64_t client) const {
  std::lock_guard<std::mutex> lock(mu_);
  return HoldsLocked(client);
}

bool PagingArena::HoldsLocked(uint64_t client) const {
  for (const Slot& s : slots_) {
    if (s.state == Slot::kWriting && s.writer == client) return true;
  }
  auto it = pins_.lower_bound({client, 0});
  return it != pins_.end() && it->first.first == client;
}

bool PagingArena::HoldsTooLong(uint64_t client, int64_t maxHoldMs) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_.empty()) return false;
  const Clock::time_point before = Clock::now() - std::chrono::milliseconds(maxHoldMs);
  for (const Slot& s : slots_) {
    if (s.state == Slot::kWriting && s.writer == client && s.since < before) return true;
  }
  for (auto it = pins_.lower_bound({client, 0}); it != pins_.end() && it->first.first == client; ++it) {
    if (!it->second.empty() && it->second.front().since < before) return true;
  }
  return false;
}

bool PagingArena::HoldsKey(uint64_t client, uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : slots_) {
    if (s.state == Slot::kWriting && s.writer == client && s.key == key) return true;
  }
  auto it = pins_.find({client, key});
  return it != pins_.end() && !it->second.empty();
}

PagingStats PagingArena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PagingStats s = stats_;
  s.waiting = waiting_.size();
  s.faultWaits = faultWaits_;
  s.blobs = blobs_.size();
  s.resident = lru_.size();
  return s;
}

}  // namespace railyard::storage::snapshot
