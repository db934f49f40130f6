// RegistrationCache: registrations of one Domain shared by everything in the process
// (NCCL's regMr, the storage tiers' arenas, GIN/RMA windows, CollNet staging), so a
// range that is already registered is reused instead of registered (and pinned) again.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "env/status.h"
#include "proxy/fabric/domain.h"

namespace railyard::fabric {

/// Reference-counted registrations over one Domain. Thread-safe.
///
/// Acquire reuses a live Region that covers the whole requested range, grants at
/// least the requested access and has the same memory kind (a superset is fine: a
/// region registered for remote read and write serves a request for remote read).
/// Anything else registers a new Region of exactly the requested range and access;
/// overlapping registrations are allowed (as with ibv_reg_mr). Lookup costs
/// O(live regions starting at or below the address); processes hold tens, not
/// thousands.
class RegistrationCache {
 public:
  /// Counters for diagnostics and tests.
  struct Stats {
    uint64_t registrations = 0;  ///< Domain::Register calls that succeeded
    uint64_t reuses = 0;         ///< Acquires served by a live Region
    uint64_t live = 0;           ///< Regions registered now
  };

  /// `domain` must outlive the cache; the cache must be empty (every Acquire
  /// released) when destroyed, or the regions left are deregistered then.
  explicit RegistrationCache(Domain& domain) : domain_(domain) {}
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  /// A Region covering [addr, addr + bytes) with at least `access` and of `kind`:
  /// a live one (its count goes up) or a new Domain::Register. Errors as
  /// Domain::Register (InvalidArgument for NULL, 0 bytes, a wrapping range or bad
  /// access bits; InvalidUsage for device memory the transport cannot reach);
  /// `*out` is unchanged on error.
  Status Acquire(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out);
  /// A live Region covering [addr, addr + bytes) with at least `access` and of
  /// `kind`, its count taken (release with Release), as Acquire finds one; never
  /// registers. False (`*out` unchanged) when none is live: the caller stages
  /// through memory of its own instead (a storage tier moving a blob straight out of
  /// a buffer NCCL's regMr registered, without pinning the caller's memory itself).
  /// Added 2026-12-06 (snapshot tier: puts and gets without the staging copy).
  bool AcquireLive(const void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out);
  /// A new Region for DMA-BUF `fd` (Domain::RegisterDmaBuf; never reused: another fd
  /// may map other memory at the same address), released with Release like any other.
  /// Plain Acquires never reuse it. Errors as Domain::RegisterDmaBuf; `*out` is
  /// unchanged on error. Added 2026-12-01 (vcomms).
  Status AcquireDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access, MemoryKind kind,
                       const Region** out);
  /// Access every NEW registration of Acquire also grants, ORed into the requested
  /// access (0, the default: exactly what was asked). The process fabric sets it on
  /// NCCL's device caches to what regMr asks for (kAccessLocal | kAccessRemoteWrite;
  /// proxy/runtime/process_fabric.h), so an arena a storage tier registered first
  /// (local access only) also serves NCCL's later regMr of memory inside it instead of
  /// a second registration. A request with bits outside the Access flags is passed on
  /// unwidened (the Domain refuses it). Thread-safe. Added 2026-12-01 (shared).
  void SetAccessFloor(uint32_t access);
  /// Drops one count taken by Acquire; the last one deregisters the Region (after
  /// which no byte lands in it or leaves it). InvalidArgument for a region this
  /// cache did not hand out or whose counts are all released.
  Status Release(const Region* region);
  /// Takes one more count on a live `region` this cache handed out (found by pointer,
  /// never dereferenced), so a user's Release of its own count cannot deregister it
  /// while the taker still uses it; dropped with Release. InvalidArgument for a region
  /// this cache did not hand out or whose counts are all released (e.g. a handle from
  /// a peer or a caller that is not, or no longer, a registration). Added 2026-12-06
  /// (collectives: a running op holds the receive buffer NCCL registered).
  Status Retain(const Region* region);
  /// Counts taken on `region` and not released (0 for one not handed out here).
  uint64_t References(const Region* region) const;
  Stats stats() const;
  Domain& domain() { return domain_; }

 private:
  struct Entry {
    const Region* region = nullptr;
    uint64_t refs = 0;
    bool dmabuf = false;  ///< from AcquireDmaBuf: never handed to a plain Acquire
  };
  /// AcquireLive with mu_ held.
  bool TakeLiveLocked(const void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out);

  Domain& domain_;
  mutable std::mutex mu_;
  std::multimap<uint64_t, Entry> byBase_;  ///< live regions by base address
  uint64_t registrations_ = 0;
  uint64_t reuses_ = 0;
  uint32_t accessFloor_ = 0;  ///< SetAccessFloor
};

}  // namespace railyard::fabric
