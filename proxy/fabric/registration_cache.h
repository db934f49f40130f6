// RegistrationCache: one per Domain, so NCCL's regMr, the tier arenas, the GIN/RMA
// windows and CollNet staging share registrations (DESIGN.md §2 of this session).
// This is the gin branch's scratch copy of the interface the coordinator puts on
// main; the coordinator's version wins at merge.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "env/status.h"
#include "proxy/fabric/domain.h"

namespace railyard::fabric {

/// Reference-counted registrations of one Domain. Thread-safe.
class RegistrationCache {
 public:
  explicit RegistrationCache(Domain& domain) : domain_(domain) {}
  /// A Region covering [addr, addr+bytes) with at least `access` and the same kind:
  /// an existing live one (its count goes up: no second registration, no second pin)
  /// or a new Domain::Register. Errors as Domain::Register.
  Status Acquire(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                 const Region** out);
  /// Drops one count taken by Acquire; the last one deregisters. InvalidArgument for
  /// a region this cache did not hand out.
  Status Release(const Region* region);
  struct Stats {
    uint64_t registrations = 0;  ///< Domain::Register calls made
    uint64_t reuses = 0;         ///< Acquires served by a live region
    uint64_t live = 0;           ///< regions registered now
  };
  Stats stats() const;
  Domain& domain() { return domain_; }

 private:
  Domain& domain_;
  mutable std::mutex mu_;
  std::map<const Region*, uint64_t> counts_;
  Stats stats_;
};

}  // namespace railyard::fabric
