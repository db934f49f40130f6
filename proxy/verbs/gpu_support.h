// What GPU memory this host can hand to the RDMA devices: the facts behind the
// verbs transport's ptrSupport (NCCL_PTR_CUDA, NCCL_PTR_DMABUF). Reported only when
// the host really has them, so NCCL never registers memory Railyard cannot serve.
#pragma once

#include <string>

namespace railyard::proxy::verbs {

/// True when a GPUDirect RDMA peer-memory module is loaded, so ibv_reg_mr accepts
/// CUDA device pointers: <sysfsRoot>/kernel/mm/memory_peers/nv_mem/version,
/// <sysfsRoot>/module/nvidia_peermem/version or <sysfsRoot>/module/nv_peer_mem/version
/// exists (the files NCCL 2.28.9 checks in net_ib.cc ncclIbGdrSupport).
bool GdrPeerMemory(const std::string& sysfsRoot = "/sys");

/// True when the CUDA driver (libcuda.so.1, loaded with dlopen, so nothing links
/// against CUDA) initialises and GPU 0 reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
/// (= 124 in cuda.h). False without a driver or GPU. The result is computed once.
bool CudaDmaBuf();

}  // namespace railyard::proxy::verbs
