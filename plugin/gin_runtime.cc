// See gin_runtime.h: the GIN/RMA tables' view of the shared one-sided fabric.
#include "plugin/gin_runtime.h"

#include "plugin/one_sided_fabric.h"
#include "proxy/wire.h"

namespace railyard::plugin::gin {

Status AcquireRuntime(Runtime* out) {
  OneSidedFabric f;
  RY_RETURN_IF_ERROR(AcquireOneSidedFabric("GIN/RMA", &f));
  out->domain = f.domain;
  out->cache = f.cache;
  out->options = railyard::gin::GinOptions{};
  out->options.timeoutMs = f.config->timeoutMs;
  out->options.queueDepth = 32 * proxy::kMaxRecvs;
  // regMrSymDmaBuf registers through the shared cache (never reused: another fd may
  // map other memory at the same address). A Domain that cannot register DMA-BUFs
  // (TCP: the CPU cannot read what the fd maps) refuses it with InvalidUsage naming
  // the transport (Domain::RegisterDmaBuf), and nothing is registered.
  fabric::RegistrationCache* cache = f.cache;
  out->options.acquireDmaBuf = [cache](void* data, uint64_t bytes, int fd, uint64_t offset, fabric::MemoryKind kind,
                                       const fabric::Region** region) {
    return cache->AcquireDmaBuf(data, bytes, fd, offset, fabric::kAccessAll, kind, region);
  };
  return Status::Ok();
}

void ReleaseRuntime() { ReleaseOneSidedFabric(); }

}  // namespace railyard::plugin::gin
