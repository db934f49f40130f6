// RouteFacts: what every route of one NCCL device can really do with memory, from
// which the plugin's edge reports ptrSupport (plugin/ptr_support.h PtrSupportFor).
// NCCL hands a device's comms CUDA (or DMA-BUF) buffers as soon as ptrSupport says
// so, whichever peer they go to, so one route that cannot read GPU memory (TCP: the
// CPU copies the bytes; fabric mode relays some peers over TCP at any time) rules
// them out for the whole device. NetRuntime::Device fills them
// (proxy/runtime/net_devices.cc).
#pragma once

namespace railyard::runtime {

/// Facts about one NCCL device of this process.
struct RouteFacts {
  /// Every peer this device can reach goes over RDMA ports (verbs mode; never in TCP
  /// mode, never in fabric mode where relayed peers go over TCP).
  bool everyRouteRdma = false;
  bool gdrPeerMemory = false;  ///< a GPUDirect peer-memory module is loaded (CUDA pointers)
  bool portsDmaBuf = false;    ///< every RDMA port of the device registers DMA-BUFs
  bool cudaDmaBuf = false;     ///< the CUDA driver exports DMA-BUFs
};

}  // namespace railyard::runtime
