// What getProperties reports as ptrSupport (nccl-net-abi.md §2.3): the pointer types
// EVERY route of the device can really use. NCCL hands a device's comms CUDA (or
// DMA-BUF) buffers as soon as ptrSupport says so, whichever peer they go to, so one
// route that cannot read GPU memory (TCP: the CPU copies the bytes) rules them out
// for the whole device. In fabric mode a device's peers may be relayed over TCP at
// any time (routes are planned per connection), so fabric mode reports host only.
// In verbs mode over the fabric comms the facts are those of the device's own verbs
// Domain (plugin/net.cc VerbsFabricPtrSupport): its ports are every route it has, a
// peer-memory module gives kCapDeviceMemory, and DMA-BUF needs kCapDmaBuf (every
// port of THAT device registers DMA-BUFs), not every port of the host.
#pragma once

#include "plugin/abi/common.h"

namespace railyard::plugin {

/// Facts about one NCCL device of this process.
struct RouteFacts {
  /// Every peer this device can reach goes over RDMA ports (verbs mode; never in TCP
  /// mode, never in fabric mode where relayed peers go over TCP).
  bool everyRouteRdma = false;
  bool gdrPeerMemory = false;  ///< a GPUDirect peer-memory module is loaded (CUDA pointers)
  bool portsDmaBuf = false;    ///< every RDMA port of the device registers DMA-BUFs
  bool cudaDmaBuf = false;     ///< the CUDA driver exports DMA-BUFs
};

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
