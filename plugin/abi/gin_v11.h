// ncclGin v11 ABI (NCCL 2.28.x, 2.29 through a shim), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §4.3-§4.4 (NCCL 2.28.9,
// src/include/plugin/gin/gin_v11.h): 19 slots, 152 B. Railyard exports a proxy-mode
// table (getProperties reports NCCL_NET_DEVICE_GIN_PROXY); createContext,
// destroyContext and queryLastError are NULL (GDAKI only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v11.h"

/// NCCL_GIN_PROXY_VERSION (nccl-net-abi.md §4.4).
#define NCCL_GIN_PROXY_VERSION 100

/// The v11 GIN function table, exported as `ncclGinPlugin_v11`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*createContext)(void* collComm, int nSignals, int nCounters, void** ginCtx,
                                ncclNetDeviceHandle_v11_t** devHandle);
  ncclResult_t (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                           void** mhandle, void** ginHandle);
  ncclResult_t (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, uint64_t mrFlags, void** mhandle, void** ginHandle);
  ncclResult_t (*deregMrSym)(void* collComm, void* mhandle);
  ncclResult_t (*destroyContext)(void* ginCtx);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*iput)(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                       void* dstMhandle, uint32_t rank, void** request);
  ncclResult_t (*iputSignal)(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size,
                             uint64_t dstOff, void* dstMhandle, uint32_t rank, uint64_t signalOff,
                             void* signalMhandle, uint64_t signalValue, uint32_t signalOp,
                             void** request);
  ncclResult_t (*test)(void* collComm, void* request, int* done);
  ncclResult_t (*ginProgress)(void* collComm);
  ncclResult_t (*queryLastError)(void* ginCtx, bool* hasError);
  ncclResult_t (*finalize)(void* ctx);
} ncclGin_v11_t;

static_assert(sizeof(ncclGin_v11_t) == 152);
static_assert(offsetof(ncclGin_v11_t, connect) == 5 * 8);
static_assert(offsetof(ncclGin_v11_t, regMrSym) == 7 * 8);
static_assert(offsetof(ncclGin_v11_t, iput) == 13 * 8);
static_assert(offsetof(ncclGin_v11_t, iputSignal) == 14 * 8);
static_assert(offsetof(ncclGin_v11_t, test) == 15 * 8);
static_assert(offsetof(ncclGin_v11_t, finalize) == 18 * 8);
