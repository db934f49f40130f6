// ncclRma v14 ABI (NCCL 2.30.7), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-2.30-abi.md §5.2-§5.4 (NCCL 2.30.7,
// src/include/plugin/rma/rma_v14.h): 21 slots, 168 B. Slots 0-5 as GIN v13.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v12.h"

/// createContext config of RMA v14 (12 B).
typedef struct {
  int nContexts;     ///< [0] data calls take context 0..nContexts-1
  int trafficClass;  ///< [4] may be INT_MIN: any negative value is undefined
  int rankStride;    ///< [8] NCCL only targets peers whose rank differs by a multiple
} ncclRmaConfig_v14_t;

/// The v14 RMA table, exported as `ncclRmaPlugin_v14`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*createContext)(void* collComm, ncclRmaConfig_v14_t* config, void** rmaCtx);
  ncclResult_t (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                           void** mhandle);
  ncclResult_t (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, uint64_t mrFlags, void** mhandle);
  ncclResult_t (*deregMrSym)(void* collComm, void* mhandle);
  ncclResult_t (*destroyContext)(void* rmaCtx);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*iput)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size,
                       uint64_t dstOff, void* dstMhandle, uint32_t rank, void** request);
  ncclResult_t (*iputSignal)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size,
                             uint64_t dstOff, void* dstMhandle, uint32_t rank, uint64_t signalOff,
                             void* signalMhandle, uint64_t signalValue, uint32_t signalOp,
                             bool isStrongSignal, void** request);
  ncclResult_t (*iget)(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size,
                       uint64_t localOff, void* localMhandle, uint32_t rank, void** request);
  ncclResult_t (*iflush)(void* rmaCtx, int context, void* mhandle, uint32_t rank, void** request);
  ncclResult_t (*test)(void* collComm, void* request, int* done);
  ncclResult_t (*rmaProgress)(void* rmaCtx);
  ncclResult_t (*queryLastError)(void* rmaCtx, bool* hasError);
  ncclResult_t (*finalize)(void* ctx);
} ncclRma_v14_t;

static_assert(sizeof(ncclRmaConfig_v14_t) == 12);
static_assert(sizeof(ncclRma_v14_t) == 168);
static_assert(offsetof(ncclRma_v14_t, createContext) == 6 * 8);
static_assert(offsetof(ncclRma_v14_t, iput) == 13 * 8);
static_assert(offsetof(ncclRma_v14_t, iputSignal) == 14 * 8);
static_assert(offsetof(ncclRma_v14_t, test) == 17 * 8);
static_assert(offsetof(ncclRma_v14_t, rmaProgress) == 18 * 8);
static_assert(offsetof(ncclRma_v14_t, finalize) == 20 * 8);
