// ncclRma v13 ABI (NCCL 2.30.7) = ncclGin_v13_t, Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-2.30-abi.md §4.3, §1.5, §5.2 (NCCL 2.30.7,
// src/include/plugin/gin/gin_v13.h, plugin/rma/rma_v13.cc): 21 slots, 168 B. NCCL's
// RMA v13 shim requires getProperties(0).netDeviceType == GIN_PROXY, drops the
// device handle and ginHandle, and treats every signal as strong.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v12.h"

/// createContext config of GIN v13 / RMA v13 (20 B).
typedef struct {
  int nSignals;      ///< [0]
  int nCounters;     ///< [4]
  int nContexts;     ///< [8]  contexts of this ginCtx: data calls take 0..nContexts-1
  int queueDepth;    ///< [12]
  int trafficClass;  ///< [16] may be INT_MIN (undefined): any negative value is undefined
} ncclGinConfig_v13_t;

/// The v13 GIN table, also exported as `ncclRmaPlugin_v13`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*createContext)(void* collComm, ncclGinConfig_v13_t* config, void** ginCtx,
                                ncclNetDeviceHandle_v11_t** devHandle);
  ncclResult_t (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                           void** mhandle, void** ginHandle);
  ncclResult_t (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, uint64_t mrFlags, void** mhandle, void** ginHandle);
  ncclResult_t (*deregMrSym)(void* collComm, void* mhandle);
  ncclResult_t (*destroyContext)(void* ginCtx);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*iput)(void* ginCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size,
                       uint64_t dstOff, void* dstMhandle, uint32_t rank, void** request);
  ncclResult_t (*iputSignal)(void* ginCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size,
                             uint64_t dstOff, void* dstMhandle, uint32_t rank, uint64_t signalOff,
                             void* signalMhandle, uint64_t signalValue, uint32_t signalOp,
                             void** request);
  ncclResult_t (*iget)(void* ginCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size,
                       uint64_t localOff, void* localMhandle, uint32_t rank, void** request);
  ncclResult_t (*iflush)(void* ginCtx, int context, void* mhandle, uint32_t rank, void** request);
  ncclResult_t (*test)(void* collComm, void* request, int* done);
  ncclResult_t (*ginProgress)(void* ginCtx);
  ncclResult_t (*queryLastError)(void* ginCtx, bool* hasError);
  ncclResult_t (*finalize)(void* ctx);
} ncclGin_v13_t;
typedef ncclGin_v13_t ncclRma_v13_t;

static_assert(sizeof(ncclGinConfig_v13_t) == 20);
static_assert(offsetof(ncclGinConfig_v13_t, trafficClass) == 16);
static_assert(sizeof(ncclGin_v13_t) == 168);
static_assert(offsetof(ncclGin_v13_t, iput) == 13 * 8);
static_assert(offsetof(ncclGin_v13_t, iget) == 15 * 8);
static_assert(offsetof(ncclGin_v13_t, iflush) == 16 * 8);
static_assert(offsetof(ncclGin_v13_t, test) == 17 * 8);
static_assert(offsetof(ncclGin_v13_t, finalize) == 20 * 8);
