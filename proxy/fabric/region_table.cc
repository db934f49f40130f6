#include "proxy/fabric/region_table.h"

#include "proxy/fabric/random_id.h"

namespace railyard::fabric {
namespace {

std::string RegionHex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Status RegionTable::Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                             std::shared_ptr<RegionRecord>* out, const RailKeys* railKeys) {
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  if (addr == nullptr) return InvalidArgument("register of a NULL address");
  if (bytes == 0) return InvalidArgument("register of 0 bytes");
  if (a + bytes < a) return InvalidArgument("register range wraps the address space");
  if (access == 0 || !ValidAccess(access)) {
    return InvalidArgument("register with access " + std::to_string(access) +
                           " (need one or more of local, remote-read, remote-write, remote-atomic)");
  }
  std::unique_lock lock(mu_);
  // Each key drawn on its own from the kernel's CSPRNG: none can be derived from
  // another a peer was given (SecretKey64).
  uint64_t key = 0;
  do {
    key = SecretKey64();
  } while (byKey_.count(key) != 0);
  Region r;
  r.base = a;
  r.length = bytes;
  r.access = access;
  r.kind = kind;
  r.softwareKey = key;
  if (railKeys != nullptr) {
    r.railLkeys = railKeys->lkeys;
    r.railRkeys = railKeys->rkeys;
    r.railMr = railKeys->mrs;
  }
  auto rec = std::make_shared<RegionRecord>(std::move(r));
  byKey_[key] = rec;
  byPtr_[&rec->region_] = rec;
  *out = std::move(rec);
  return Status::Ok();
}

Status RegionTable::Deregister(const Region* region) {
  std::shared_ptr<RegionRecord> rec;
  {
    std::unique_lock lock(mu_);
    auto it = byPtr_.find(region);
    if (it == byPtr_.end()) return InvalidArgument("deregister of a region that is not registered");
    rec = it->second;
    byPtr_.erase(it);
    byKey_.erase(rec->region_.softwareKey);
  }
  std::unique_lock live(rec->mu_);  // waits for a landing under way
  rec->alive_ = false;
  return Status::Ok();
}

FabricErrc RegionTable::Resolve(uint64_t key, uint64_t addr, uint64_t bytes, uint32_t right,
                                std::shared_ptr<RegionRecord>* out, std::string* why) const {
  std::shared_lock lock(mu_);
  auto it = byKey_.find(key);
  if (it == byKey_.end()) {
    *why = "no registered region has key " + RegionHex(key);
    return FabricErrc::kBadKey;
  }
  const Region& r = it->second->region_;
  if ((r.access & right) != right) {
    *why = "region " + RegionHex(r.base) + "+" + std::to_string(r.length) + " grants " + AccessText(r.access) +
           ", not " + AccessText(right);
    return FabricErrc::kAccessDenied;
  }
  if (!r.Contains(addr, bytes)) {
    *why = "[" + RegionHex(addr) + ", +" + std::to_string(bytes) + ") is outside region " + RegionHex(r.base) + "+" +
           std::to_string(r.length);
    return FabricErrc::kOutOfBounds;
  }
  *out = it->second;
  return FabricErrc::kNone;
}

std::shared_ptr<RegionRecord> RegionTable::Find(const Region* region) const {
  std::shared_lock lock(mu_);
  auto it = byPtr_.find(region);
  return it == byPtr_.end() ? nullptr : it->second;
}

size_t RegionTable::Size() const {
  std::shared_lock lock(mu_);
  return byKey_.size();
}

}  // namespace railyard::fabric
