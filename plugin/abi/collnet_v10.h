// ncclCollNet v10 and v9 ABIs (NCCL 2.24-2.27), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §3.1 "Version differences": 18
// slots, init(logger) with no ctx or commId, listen(dev, handle, listenComm) with no
// ctx, no finalize; the SGE size is size_t. v10 and v9 differ only in the properties
// type, and ncclNetProperties_v10_t and _v9_t have the same layout (§2.4).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v9.h"

/// One scatter/gather element (24 B), v9 and v10.
typedef struct {
  void* mhandle;
  void* address;
  size_t size;  ///< bytes
} ncclNetSGE_v10_t;
typedef ncclNetSGE_v10_t ncclNetSGE_v9_t;

#define RY_COLLNET_V9_V10_TABLE(V)                                                              \
  typedef struct {                                                                              \
    const char* name;                                                                           \
    ncclResult_t (*init)(ncclDebugLogger_t logFunction);                                        \
    ncclResult_t (*devices)(int* ndev);                                                         \
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_##V##_t* props);                   \
    ncclResult_t (*listen)(int dev, void* handle, void** listenComm);                           \
    ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm,            \
                            void** collComm);                                                   \
    ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);  \
    ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);   \
    ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type,              \
                                uint64_t offset, int fd, void** mhandle);                       \
    ncclResult_t (*deregMr)(void* collComm, void* mhandle);                                     \
    ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,    \
                               ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,   \
                               void* recvMhandle, void** request);                              \
    ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,                  \
                               ncclNetSGE_##V##_t* recvParts, size_t bytesPerRank,              \
                               size_t windowOffset, size_t windowBytes, void* sendMhandle,      \
                               void** request);                                                 \
    ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_##V##_t* sendParts, \
                                   void* recvData, size_t bytesPerRank, size_t windowOffset,    \
                                   size_t windowBytes, ncclDataType_t dataType,                 \
                                   ncclRedOp_t redOp, void* recvMhandle, void** request);       \
    ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request); \
    ncclResult_t (*test)(void* request, int* done, int* size);                                  \
    ncclResult_t (*closeColl)(void* collComm);                                                  \
    ncclResult_t (*closeListen)(void* listenComm);                                              \
    ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_##V##_t* props);                    \
  } ncclCollNet_##V##_t;

/// The v10 and v9 CollNet tables (18 slots, 144 B), exported as `ncclCollNetPlugin_v10`
/// and `ncclCollNetPlugin_v9`.
RY_COLLNET_V9_V10_TABLE(v10)
RY_COLLNET_V9_V10_TABLE(v9)
#undef RY_COLLNET_V9_V10_TABLE

static_assert(sizeof(ncclNetSGE_v10_t) == 24);
static_assert(sizeof(ncclCollNet_v10_t) == 144);
static_assert(sizeof(ncclCollNet_v9_t) == 144);
static_assert(offsetof(ncclCollNet_v10_t, makeVDevice) == 17 * 8);
