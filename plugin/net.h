// Railyard's one implementation of the NCCL net API, in v11 shape. The exported
// tables (plugin/exports.cc: ncclNetPlugin_v11 .. _v8) are thin adapters onto it.
// Calling rules come from ../shared/docs/nccl-net-abi.md §2.5 (NCCL 2.28.9,
// src/transport/net.cc and ext-net/README.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/net_v11.h"

namespace railyard::plugin {

/// Name reported in the tables' `name` field; NCCL_NET matches it case-insensitively.
inline constexpr const char* kPluginName = "Railyard";

/// v11 init: runs once per communicator; global discovery is reference-counted.
/// `config` may be NULL (older-version adapters); config->trafficClass -1 = undefined.
ncclResult_t Init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
/// Number of devices (physical first, then virtual). Fails before Init.
ncclResult_t Devices(int* ndev);
/// Fills every field of `props` for device `dev` (any thread, any time after Init).
ncclResult_t GetProperties(int dev, ncclNetProperties_v11_t* props);
/// Never blocks. Writes at most NCCL_NET_HANDLE_MAXSIZE bytes into `handle`.
ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm);
/// Never blocks: success with *sendComm == NULL means "call again with the same handle".
ncclResult_t Connect(void* ctx, int dev, void* handle, void** sendComm);
/// Never blocks: success with *recvComm == NULL means "call again".
ncclResult_t Accept(void* listenComm, void** recvComm);
/// Registers [data, data+size) of pointer type `type` (NCCL_PTR_HOST/CUDA) on a comm.
ncclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mhandle);
/// DMA-BUF registration; the fd is NCCL's and is not kept.
ncclResult_t RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle);
ncclResult_t DeregMr(void* comm, void* mhandle);
/// May return *request == NULL ("not yet": the receiver has not posted).
ncclResult_t Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request);
/// Always overwrites *request (which may arrive holding NCCL_NET_OPTIONAL_RECV_COMPLETION).
ncclResult_t Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** phandles, void** request);
/// Host memory needs no flush: returns *request = NULL.
ncclResult_t Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
/// Never blocks. On done, a send writes sizes[0], a receive writes sizes[0..n).
ncclResult_t Test(void* request, int* done, int* sizes);
ncclResult_t CloseSend(void* sendComm);
ncclResult_t CloseRecv(void* recvComm);
ncclResult_t CloseListen(void* listenComm);
ncclResult_t MakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props);
/// Called once per Init'd ctx, also after a failed Init (ctx may be NULL). The last
/// one stops every thread the plugin started.
ncclResult_t Finalize(void* ctx);
/// A hint; ignored.
ncclResult_t SetNetAttr(void* ctx, ncclNetAttr_v11_t* netAttr);
/// Whether the initialised plugin runs fabric mode (RAILYARD_FABRIC: the rails as one
/// device, routes, relays); false before the first init. Thread-safe. Added for the
/// GIN/RMA glue (plugin/gin_runtime.cc), which refuses a fabric-mode Domain with no relays.
bool InFabricMode();

}  // namespace railyard::plugin
