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
  // options.acquireDmaBuf stays unset until the Domain interface registers DMA-BUFs
  // (Domain::RegisterDmaBuf / RegistrationCache::AcquireDmaBuf, the vcomms branch):
  // then it is `cache->AcquireDmaBuf(data, bytes, fd, offset, kAccessAll, kind, out)`.
  return Status::Ok();
}

void ReleaseRuntime() { ReleaseOneSidedFabric(); }

}  // namespace railyard::plugin::gin
