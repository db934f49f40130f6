#include "proxy/fabric/registration_cache.h"

#include <cstdio>
#include <string>

namespace railyard::fabric {

RegistrationCache::~RegistrationCache() {
  std::lock_guard lock(mu_);
  for (auto& [base, e] : byBase_) (void)domain_.Deregister(e.region);
  byBase_.clear();
}

Status RegistrationCache::Acquire(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                                  const Region** out) {
  std::lock_guard lock(mu_);
  if (TakeLiveLocked(addr, bytes, access, kind, out)) return Status::Ok();
  const Region* region = nullptr;
  Status s = domain_.Register(addr, bytes, ValidAccess(access) ? access | accessFloor_ : access, kind, &region);
  if (!s.ok()) return s;
  byBase_.emplace(region->base, Entry{region, 1});
  ++registrations_;
  *out = region;
  return Status::Ok();
}

bool RegistrationCache::TakeLiveLocked(const void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                                       const Region** out) {
  if (addr == nullptr || bytes == 0 || !ValidAccess(access)) return false;
  const auto a = reinterpret_cast<uint64_t>(addr);
  // Every live region starting at or below addr, nearest first.
  for (auto it = byBase_.upper_bound(a); it != byBase_.begin();) {
    --it;
    const Region& r = *it->second.region;
    if (!it->second.dmabuf && r.kind == kind && (r.access & access) == access && r.Contains(a, bytes)) {
      ++it->second.refs;
      ++reuses_;
      *out = it->second.region;
      return true;
    }
  }
  return false;
}

bool RegistrationCache::AcquireLive(const void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                                    const Region** out) {
  std::lock_guard lock(mu_);
  return TakeLiveLocked(addr, bytes, access, kind, out);
}

Status RegistrationCache::AcquireDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access,
                                        MemoryKind kind, const Region** out) {
  std::lock_guard lock(mu_);
  const Region* region = nullptr;
  Status s = domain_.RegisterDmaBuf(addr, bytes, fd, offset, access, kind, &region);
  if (!s.ok()) return s;
  byBase_.emplace(region->base, Entry{region, 1, true});
  ++registrations_;
  *out = region;
  return Status::Ok();
}

void RegistrationCache::SetAccessFloor(uint32_t access) {
  std::lock_guard lock(mu_);
  accessFloor_ = access;
}

Status RegistrationCache::Release(const Region* region) {
  std::lock_guard lock(mu_);
  if (region != nullptr) {
    // Found by pointer, never through region->base: a Region released once too often
    // was freed by its Domain, so it must not be read (found by ASan).
    for (auto it = byBase_.begin(); it != byBase_.end(); ++it) {
      if (it->second.region != region) continue;
      if (--it->second.refs > 0) return Status::Ok();
      byBase_.erase(it);
      return domain_.Deregister(region);
    }
  }
  char what[96];
  std::snprintf(what, sizeof(what), "region %p", static_cast<const void*>(region));
  return InvalidArgument(std::string("registration cache: release of ") + what +
                         ", which it did not hand out or whose counts are all released");
}

Status RegistrationCache::Retain(const Region* region) {
  std::lock_guard lock(mu_);
  if (region != nullptr) {
    for (auto& [base, entry] : byBase_) {  // by pointer: `region` may be garbage
      if (entry.region != region) continue;
      ++entry.refs;
      return Status::Ok();
    }
  }
  char what[96];
  std::snprintf(what, sizeof(what), "region %p", static_cast<const void*>(region));
  return InvalidArgument(std::string("registration cache: retain of ") + what +
                         ", which it did not hand out or whose counts are all released");
}

uint64_t RegistrationCache::References(const Region* region) const {
  std::lock_guard lock(mu_);
  if (region == nullptr) return 0;
  for (const auto& [base, entry] : byBase_) {  // by pointer: `region` may be freed
    if (entry.region == region) return entry.refs;
  }
  return 0;
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard lock(mu_);
  return Stats{registrations_, reuses_, byBase_.size()};
}

}  // namespace railyard::fabric
