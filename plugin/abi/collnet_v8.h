// ncclCollNet v8 ABI (NCCL 2.20-2.23), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §3.1 "Version differences": 17
// slots (v9's without makeVDevice), iallreduce takes an int count, the SGE size is
// uint32_t (the struct is still 24 B because of padding); properties are v8's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v8.h"

/// One scatter/gather element (24 B).
typedef struct {
  void* mhandle;
  void* address;
  uint32_t size;  ///< bytes
} ncclNetSGE_v8_t;

/// The v8 CollNet table (17 slots, 136 B), exported as `ncclCollNetPlugin_v8`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,
                          void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  /// `count` is in elements (int in v8).
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v8_t* recvParts, size_t bytesPerRank,
                             size_t windowOffset, size_t windowBytes, void* sendMhandle,
                             void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v8_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v8_t;

static_assert(sizeof(ncclNetSGE_v8_t) == 24);
static_assert(offsetof(ncclNetSGE_v8_t, size) == 16);
static_assert(sizeof(ncclCollNet_v8_t) == 136);
static_assert(offsetof(ncclCollNet_v8_t, iallreduce) == 10 * 8);
static_assert(offsetof(ncclCollNet_v8_t, closeListen) == 16 * 8);
