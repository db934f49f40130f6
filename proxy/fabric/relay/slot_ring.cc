#include "proxy/fabric/relay/slot_ring.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "env/log.h"

namespace railyard::fabric::relay {

SlotRing::~SlotRing() {
  // The ring is remotely writable: memory a Domain failed to deregister may still take
  // a peer's Write, so it is never unmapped (kept until exit; the pages are not reused).
  bool held = false;
  for (size_t d = 0; d < regions_.size(); ++d) {
    if (regions_[d] == nullptr) continue;
    if (Status s = domains_[d]->Deregister(regions_[d]); !s.ok()) {
      RY_WARN("fabric relay: a slot ring's deregistration failed (%s); its %llu bytes stay mapped until the process "
              "exits",
              s.message().c_str(), static_cast<unsigned long long>(bytes_));
      held = true;
    }
  }
  if (base_ != nullptr && !held) munmap(base_, bytes_);
}

Status SlotRing::Init(uint32_t slots, uint64_t slotBytes, const std::vector<Domain*>& domains,
                      const std::vector<uint32_t>& access) {
  if (base_ != nullptr) return InvalidUsage("relay slot ring initialised twice");
  if (slots == 0 || slotBytes == 0 || domains.size() != access.size() || domains.empty()) {
    return InvalidArgument("relay slot ring: bad sizes");
  }
  bytes_ = static_cast<uint64_t>(slots) * slotBytes;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    base_ = nullptr;
    return SystemError("relay slot ring: mmap of " + std::to_string(bytes_) + " bytes: " + std::strerror(errno));
  }
  base_ = static_cast<uint8_t*>(p);
  slots_ = slots;
  slotBytes_ = slotBytes;
  for (size_t d = 0; d < domains.size(); ++d) {
    const Region* r = nullptr;
    RY_RETURN_IF_ERROR(domains[d]->Register(base_, bytes_, access[d], MemoryKind::kHost, &r));
    domains_.push_back(domains[d]);
    regions_.push_back(r);
  }
  return Status::Ok();
}

}  // namespace railyard::fabric::relay
