// ncclCollNet v12 ABI (NCCL 2.30.x), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-2.30-abi.md §3 (NCCL 2.30.7): the same 19
// slots as v11 with the _v12 types (128-byte properties, 8-member vProps); the SGE is
// unchanged (24 B). Export it beside ncclNetPlugin_v12 (§7 gotcha 5: with a v11
// CollNet, NCCL reads uninitialised railId/planeId).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v12.h"

/// One scatter/gather element of iallgather / ireducescatter (24 B).
typedef struct {
  void* mhandle;  ///< registration covering [address, address + size)
  void* address;
  size_t size;    ///< bytes
} ncclNetSGE_v12_t;

/// The v12 CollNet function table (19 slots, 152 B), exported as `ncclCollNetPlugin_v12`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v12_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v12_t;

static_assert(sizeof(ncclNetSGE_v12_t) == 24);
static_assert(sizeof(ncclCollNet_v12_t) == 152);
static_assert(offsetof(ncclCollNet_v12_t, iallreduce) == 10 * 8);
static_assert(offsetof(ncclCollNet_v12_t, makeVDevice) == 17 * 8);
static_assert(offsetof(ncclCollNet_v12_t, finalize) == 18 * 8);
