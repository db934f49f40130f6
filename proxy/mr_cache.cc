#include "proxy/mr_cache.h"

#include <unistd.h>

#include <mutex>
#include <thread>

namespace railyard::proxy {

namespace {
uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}
}  // namespace

Status MrCache::Register(const void* addr, size_t bytes, int ptrType, MemoryRegion** out) {
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  if (addr == nullptr && bytes > 0) return InvalidArgument("regMr of a NULL address");
  if (a + bytes < a) return InvalidArgument("regMr range wraps the address space");
  const uint64_t page = PageSize();
  const uint64_t lo = a & ~(page - 1);
  const uint64_t hi = (a + (bytes == 0 ? 1 : bytes) + page - 1) & ~(page - 1);
  return Insert(lo, hi, ptrType, -1, 0, true, out);
}

Status MrCache::RegisterDmaBuf(const void* addr, size_t bytes, int ptrType, int fd,
                               uint64_t offset, MemoryRegion** out) {
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  if (addr == nullptr || bytes == 0) return InvalidArgument("regMrDmaBuf of an empty range");
  if (a + bytes < a) return InvalidArgument("regMrDmaBuf range wraps the address space");
  if (fd < 0) return InvalidArgument("regMrDmaBuf with fd " + std::to_string(fd));
  {
    std::shared_lock lock(mu_);
    if (backend_ == nullptr) {
      return InvalidUsage("regMrDmaBuf needs the verbs transport (no RDMA device in use)");
    }
  }
  return Insert(a, a + bytes, ptrType, fd, offset, false, out);
}

void MrCache::SetBackend(MrBackend* backend) {
  std::unique_lock lock(mu_);
  backend_ = backend;
}

Status MrCache::Insert(uint64_t lo, uint64_t hi, int ptrType, int fd, uint64_t offset, bool reuse,
                       MemoryRegion** out) {
  std::unique_lock lock(mu_);
  // Reuse an entry that already covers the range. Entries are few (one per NCCL
  // buffer), so a walk over the bases at or below `lo` is cheap.
  for (auto it = byBase_.upper_bound(lo); reuse && it != byBase_.begin();) {
    --it;
    MemoryRegion* r = it->second.get();
    if (r->ptrType == ptrType && r->Contains(lo, hi - lo)) {
      ++r->refs;
      *out = r;
      return Status::Ok();
    }
  }
  auto region = std::make_unique<MemoryRegion>();
  region->base = lo;
  region->len = hi - lo;
  region->ptrType = ptrType;
  region->refs = 1;
  if (backend_ != nullptr) RY_RETURN_IF_ERROR(backend_->Register(region.get(), fd, offset));
  do {
    region->rkey = nextKey_++;
  } while (region->rkey == 0 || byKey_.count(region->rkey) != 0);
  *out = region.get();
  byKey_[region->rkey] = region.get();
  live_.insert(region.get());
  byBase_.emplace(lo, std::move(region));
  return Status::Ok();
}

Status MrCache::Deregister(MemoryRegion* region) {
  std::unique_lock lock(mu_);
  if (region == nullptr) return InvalidArgument("deregMr of a NULL handle");
  if (live_.count(region) == 0) {
    return InvalidArgument("deregMr of a handle that is not registered (double deregister?)");
  }
  if (--region->refs > 0) return Status::Ok();
  // A write pinned before this lock was taken may still be copying into the region
  // (one non-blocking recv); new pins need the lock, so none can start now.
  while (region->writers.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (!region->hcaMr.empty() && backend_ != nullptr) backend_->Deregister(region);
  byKey_.erase(region->rkey);
  live_.erase(region);
  auto [first, last] = byBase_.equal_range(region->base);
  for (auto it = first; it != last; ++it) {
    if (it->second.get() == region) {
      byBase_.erase(it);
      break;
    }
  }
  return Status::Ok();
}

bool MrCache::Contains(uint32_t rkey, uint64_t addr, uint64_t bytes) const {
  std::shared_lock lock(mu_);
  auto k = byKey_.find(rkey);
  return k != byKey_.end() && k->second->Contains(addr, bytes);
}

bool MrCache::PinForWrite(uint32_t rkey, uint64_t addr, uint64_t bytes, MemoryRegion** pinned) const {
  std::shared_lock lock(mu_);
  auto k = byKey_.find(rkey);
  if (k == byKey_.end() || !k->second->Contains(addr, bytes)) return false;
  k->second->writers.fetch_add(1, std::memory_order_acq_rel);
  *pinned = k->second;
  return true;
}

bool MrCache::IsRegistered(const MemoryRegion* region) const {
  std::shared_lock lock(mu_);
  return live_.count(region) != 0;
}

size_t MrCache::Size() const {
  std::shared_lock lock(mu_);
  return byKey_.size();
}

MrCache& GlobalMrCache() {
  static MrCache* cache = new MrCache();  // never destroyed: comms may outlive statics
  return *cache;
}

}  // namespace railyard::proxy
