// ncclNet v8 ABI (NCCL 2.20-2.23), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §2.4, §7.3 (NCCL 2.28.9,
// src/include/plugin/net/net_v8.h). Differences from v9: isend/irecv sizes are
// int, no makeVDevice, and the 64-byte properties have no forceFlush, vProps or
// max*Bytes, so `speed` and every later field sit 4 bytes earlier than in v9+.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Device properties, 64 B. NOT prefix-compatible with v9+.
typedef struct {
  char* name;                       ///< [0]
  char* pciPath;                    ///< [8]
  uint64_t guid;                    ///< [16]
  int ptrSupport;                   ///< [24]
  int regIsGlobal;                  ///< [28]
  int speed;                        ///< [32] Mbps
  int port;                         ///< [36]
  float latency;                    ///< [40] microseconds
  int maxComms;                     ///< [44]
  int maxRecvs;                     ///< [48]
  ncclNetDeviceType netDeviceType;  ///< [52]
  int netDeviceVersion;             ///< [56]
} ncclNetProperties_v8_t;

/// The v8 net function table (19 slots, 152 B), exported as `ncclNetPlugin_v8`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

// ---- layout checks (fact sheet §2.4: the v8 shift) ----
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
static_assert(offsetof(ncclNetProperties_v8_t, name) == 0);
static_assert(offsetof(ncclNetProperties_v8_t, pciPath) == 8);
static_assert(offsetof(ncclNetProperties_v8_t, guid) == 16);
static_assert(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32);
static_assert(offsetof(ncclNetProperties_v8_t, port) == 36);
static_assert(offsetof(ncclNetProperties_v8_t, latency) == 40);
static_assert(offsetof(ncclNetProperties_v8_t, maxComms) == 44);
static_assert(offsetof(ncclNetProperties_v8_t, maxRecvs) == 48);
static_assert(offsetof(ncclNetProperties_v8_t, netDeviceType) == 52);
static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);

static_assert(sizeof(ncclNet_v8_t) == 152);
static_assert(offsetof(ncclNet_v8_t, init) == 1 * 8);
static_assert(offsetof(ncclNet_v8_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v8_t, irecv) == 11 * 8);
static_assert(offsetof(ncclNet_v8_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v8_t, irecvConsumed) == 18 * 8);
