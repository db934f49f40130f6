// What getProperties reports as ptrSupport (nccl-net-abi.md §2.3): the pointer types
// EVERY route of the device can really use. NCCL hands a device's comms CUDA (or
// DMA-BUF) buffers as soon as ptrSupport says so, whichever peer they go to, so one
// route that cannot read GPU memory (TCP: the CPU copies the bytes) rules them out
// for the whole device. In fabric mode a device's peers may be relayed over TCP at
// any time (routes are planned per connection), so fabric mode reports host only.
// In verbs mode over the fabric comms the facts are those of the device's own verbs
// Domain (proxy/runtime/net_devices.cc): its ports are every route it has, a
// peer-memory module gives kCapDeviceMemory, and DMA-BUF needs kCapDmaBuf (every
// port of THAT device registers DMA-BUFs), not every port of the host.
#pragma once

#include "plugin/abi/common.h"
#include "proxy/runtime/route_facts.h"

namespace railyard::plugin {

/// The facts (proxy/runtime/route_facts.h), as NetRuntime::Device reports them.
using runtime::RouteFacts;

/// NCCL_PTR_HOST, plus NCCL_PTR_CUDA with GPUDirect peer memory, plus
/// NCCL_PTR_CUDA | NCCL_PTR_DMABUF with DMA-BUF on ports and driver, all only when
/// every route is RDMA.
inline int PtrSupportFor(const RouteFacts& f) {
  int ptr = NCCL_PTR_HOST;
  if (!f.everyRouteRdma) return ptr;
  if (f.gdrPeerMemory) ptr |= NCCL_PTR_CUDA;
  if (f.portsDmaBuf && f.cudaDmaBuf) ptr |= NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
  return ptr;
}

}  // namespace railyard::plugin
