// ncclCollNet v11 ABI (NCCL 2.28.x), Railyard's own declarations; exported by
// plugin/collnet_v11.cc.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §3.1, §3.2 (NCCL 2.28.9,
// src/include/plugin/net/net_v11.h). v8-v10: plugin/abi/collnet_v8.h, collnet_v10.h
// (declared from the fact sheet's list of differences).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v11.h"

/// One scatter/gather element of iallgather / ireducescatter (24 B).
typedef struct {
  void* mhandle;  ///< registration covering [address, address + size)
  void* address;
  size_t size;    ///< bytes
} ncclNetSGE_v11_t;

/// The v11 CollNet function table (19 slots, 152 B), exported as
/// `ncclCollNetPlugin_v11`. `connect` is blocking and collective (one rank per node).
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  /// `count` is in elements.
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v11_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v11_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v11_t;

// ---- layout checks (fact sheet §3.1) ----
static_assert(sizeof(ncclNetSGE_v11_t) == 24);
static_assert(offsetof(ncclNetSGE_v11_t, size) == 16);
static_assert(sizeof(ncclCollNet_v11_t) == 152);
static_assert(offsetof(ncclCollNet_v11_t, connect) == 5 * 8);
static_assert(offsetof(ncclCollNet_v11_t, reduceSupport) == 6 * 8);
static_assert(offsetof(ncclCollNet_v11_t, iallreduce) == 10 * 8);
static_assert(offsetof(ncclCollNet_v11_t, test) == 14 * 8);
static_assert(offsetof(ncclCollNet_v11_t, makeVDevice) == 17 * 8);
static_assert(offsetof(ncclCollNet_v11_t, finalize) == 18 * 8);
