#include "storage/expert/served_layers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "env/log.h"
#include "storage/expert/expert_error.h"

namespace railyard::expert {
namespace {

/// pread in pieces of at most this many bytes, dropping each piece's page cache.
constexpr uint64_t kLoadPieceBytes = 8ull << 20;

}  // namespace

ServedLayers::~ServedLayers() {
  // Layer i's region covers maps_[i]. A map whose deregistration failed stays mapped
  // until exit: the NIC may still hold it, and reused pages must not be where a late
  // access lands.
  for (size_t i = 0; i < maps_.size(); ++i) {
    if (i < regions_.size()) {
      if (Status st = domain_.Deregister(regions_[i]); !st.ok()) {
        RY_WARN("expert: layer %zu's deregistration failed (%s); its %llu bytes stay mapped until the process exits",
                i, st.message().c_str(), static_cast<unsigned long long>(layerBytes_));
        continue;
      }
    }
    ::munmap(maps_[i], layerBytes_);
  }
}

Status ServedLayers::Load(const Store& store, fabric::Domain& domain, std::unique_ptr<ServedLayers>* out) {
  const Manifest& m = store.manifest();
  const uint64_t bytes = m.LayerFileBytes();
  std::unique_ptr<ServedLayers> s(new ServedLayers(domain, bytes));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string& file = m.layers[i].file;
    RY_RETURN_IF_ERROR(store.CheckLayer(i));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return ExpertError(ExpertErrc::kSystem, "mapping " + std::to_string(bytes) + " bytes for " + file + ": " + std::strerror(errno));
    }
    s->maps_.push_back(p);
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // fewer pages to pin; best effort
    const int fd = store.LayerFd(i);
    for (uint64_t at = 0; at < bytes;) {
      const uint64_t want = std::min(kLoadPieceBytes, bytes - at);
      const ssize_t n = ::pread(fd, static_cast<char*>(p) + at, want, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ExpertError(ExpertErrc::kSystem, "pread of " + file + ": " + std::strerror(errno));
      if (n == 0) {
        return ExpertError(ExpertErrc::kStoreChanged, file + " ended at byte " + std::to_string(at) + " while loading (truncated; " +
                                                          std::to_string(bytes) + " expected)");
      }
      (void)::posix_fadvise(fd, static_cast<off_t>(at), n, POSIX_FADV_DONTNEED);
      at += static_cast<uint64_t>(n);
    }
    // A file rewritten (mtime) or cut and regrown while it was read is not served.
    RY_RETURN_IF_ERROR(store.CheckLayer(i));
    if (::mprotect(p, bytes, PROT_READ) != 0) {
      return ExpertError(ExpertErrc::kSystem, "mprotect of the copy of " + file + ": " + std::strerror(errno));
    }
    const fabric::Region* r = nullptr;
    if (Status st = domain.Register(p, bytes, fabric::kAccessRemoteRead, fabric::MemoryKind::kHost, &r); !st.ok()) {
      return ExpertError(ExpertErrc::kSystem, "registering the copy of " + file + " for remote read (" +
                                                  domain.TransportName() + "): " + st.message());
    }
    s->regions_.push_back(r);
  }
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace railyard::expert
