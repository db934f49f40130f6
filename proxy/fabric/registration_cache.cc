// See registration_cache.h (gin branch's scratch copy; the coordinator's wins).
#include "proxy/fabric/registration_cache.h"

namespace railyard::fabric {

Status RegistrationCache::Acquire(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                                  const Region** out) {
  if (out == nullptr) return InvalidArgument("RegistrationCache::Acquire: out is NULL");
  std::lock_guard lock(mu_);
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  for (auto& [region, count] : counts_) {
    if (region->kind == kind && (region->access & access) == access && region->Contains(a, bytes)) {
      ++count;
      ++stats_.reuses;
      *out = region;
      return Status::Ok();
    }
  }
  const Region* region = nullptr;
  RY_RETURN_IF_ERROR(domain_.Register(addr, bytes, access, kind, &region));
  counts_[region] = 1;
  ++stats_.registrations;
  stats_.live = counts_.size();
  *out = region;
  return Status::Ok();
}

Status RegistrationCache::Release(const Region* region) {
  std::lock_guard lock(mu_);
  auto it = counts_.find(region);
  if (it == counts_.end()) return InvalidArgument("RegistrationCache::Release: unknown region");
  if (--it->second > 0) return Status::Ok();
  counts_.erase(it);
  stats_.live = counts_.size();
  return domain_.Deregister(region);
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace railyard::fabric
