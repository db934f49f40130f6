// The software registration table of a Domain: software keys, the remote-access
// check a target makes before a byte lands or leaves, and liveness pins so that
// deregistration waits for a landing in progress and nothing lands afterwards.
// Thread-safe: Register/Deregister may run on any thread while Workers resolve keys.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "env/status.h"
#include "proxy/fabric/fabric_error.h"
#include "proxy/fabric/region.h"

namespace railyard::fabric {

/// A live registration, shared by the table and the operations using it.
class RegionRecord {
 public:
  explicit RegionRecord(Region r) : region_(std::move(r)) {}
  const Region& region() const { return region_; }

  /// Runs `fn()` while holding the liveness lock, if the region is still registered;
  /// returns false (and does not run `fn`) once it was deregistered. `fn` must be
  /// short and never block (one non-blocking recv/send/copy): Deregister waits for it.
  template <typename Fn>
  bool WithLive(Fn&& fn) {
    std::shared_lock lock(mu_);
    if (!alive_) return false;
    fn();
    return true;
  }
  /// True while registered (a hint: WithLive is the check that counts).
  bool Alive() const {
    std::shared_lock lock(mu_);
    return alive_;
  }

 private:
  friend class RegionTable;
  Region region_;
  mutable std::shared_mutex mu_;
  bool alive_ = true;
};

/// Hardware keys a Region carries beside its software key (Region::railLkeys,
/// railRkeys, railMr): a Domain whose table fronts registrations made elsewhere too
/// (runtime::CableSetDomain's RDMA rails).
struct RailKeys {
  std::vector<uint32_t> lkeys;
  std::vector<uint32_t> rkeys;
  std::vector<void*> mrs;
};

/// Software keys and liveness of every Region of one Domain.
class RegionTable {
 public:
  /// Registers [addr, addr + bytes). InvalidArgument for a NULL address, 0 bytes, a
  /// wrapping range, no access or unknown access bits. The region gets a fresh
  /// random non-zero software key and, when `railKeys` is given, those hardware keys
  /// (set before the region is published to any thread).
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                  std::shared_ptr<RegionRecord>* out, const RailKeys* railKeys = nullptr);
  /// Removes `region`: it can no longer be resolved, and once this returns no byte
  /// lands in it or leaves it through any operation (a landing under way finishes
  /// first). InvalidArgument for a region not registered here (double deregister).
  Status Deregister(const Region* region);
  /// The check a target makes for a remote access: region `key` exists (kBadKey),
  /// has `right` (kAccessDenied) and holds [addr, addr + bytes) (kOutOfBounds).
  /// kNone and *out set on success; `*why` says what failed otherwise.
  FabricErrc Resolve(uint64_t key, uint64_t addr, uint64_t bytes, uint32_t right,
                     std::shared_ptr<RegionRecord>* out, std::string* why) const;
  /// The record of a region registered here, or nullptr.
  std::shared_ptr<RegionRecord> Find(const Region* region) const;
  /// Live regions.
  size_t Size() const;

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<RegionRecord>> byKey_;
  std::unordered_map<const Region*, std::shared_ptr<RegionRecord>> byPtr_;
};

}  // namespace railyard::fabric
