// See collnet_runtime.h: the CollNet tables' view of the shared one-sided fabric.
#include "plugin/collnet_runtime.h"

#include "plugin/one_sided_fabric.h"

namespace railyard::plugin::collnet {

Status AcquireRuntime(Runtime* out) {
  OneSidedFabric f;
  RY_RETURN_IF_ERROR(AcquireOneSidedFabric("CollNet", &f));
  out->domain = f.domain;
  out->cache = f.cache;
  out->options = collectives::CollOptions{};
  out->options.timeoutMs = f.config->timeoutMs;
  out->options.chunkBytes = f.config->collnetChunkBytes / 8 * 8;
  out->options.slots = static_cast<uint32_t>(f.config->collnetSlots);
  out->options.smallBytes = f.config->collnetSmallBytes;
  out->shapeSetting = f.config->collnetShape;
  return Status::Ok();
}

void ReleaseRuntime() { ReleaseOneSidedFabric(); }

}  // namespace railyard::plugin::collnet
