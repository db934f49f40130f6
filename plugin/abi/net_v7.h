// ncclNet v7 ABI (NCCL 2.14-2.18), Railyard's own declarations, for railyard-perf's loader.
//
// Source of truth: NCCL 2.28.9 still loads ncclNetPlugin_v7 (fact sheet §1.3, "tried from
// newest to oldest: v11 ... v7, v6"); the layout is NCCL's src/include/plugin/net/net_v7.h and
// its shim src/plugin/net/net_v7.cc. Differences from v8: the properties have no regIsGlobal
// (so speed and every later field sit 4 bytes earlier still), and regMr takes an int size
// (NCCL's shim refuses sizes >= 2 GiB). Railyard does not export v7.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Device properties, 56 B. NOT prefix-compatible with v8+.
typedef struct {
  char* name;                       ///< [0]
  char* pciPath;                    ///< [8]
  uint64_t guid;                    ///< [16]
  int ptrSupport;                   ///< [24]
  int speed;                        ///< [28] Mbps
  int port;                         ///< [32]
  float latency;                    ///< [36] microseconds
  int maxComms;                     ///< [40]
  int maxRecvs;                     ///< [44]
  ncclNetDeviceType netDeviceType;  ///< [48]
  int netDeviceVersion;             ///< [52]
} ncclNetProperties_v7_t;

/// The v7 net function table (19 slots, 152 B), exported as `ncclNetPlugin_v7`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v7_t;

static_assert(sizeof(ncclNetProperties_v7_t) == 56);
static_assert(offsetof(ncclNetProperties_v7_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v7_t, speed) == 28);
static_assert(offsetof(ncclNetProperties_v7_t, port) == 32);
static_assert(offsetof(ncclNetProperties_v7_t, latency) == 36);
static_assert(offsetof(ncclNetProperties_v7_t, maxComms) == 40);
static_assert(offsetof(ncclNetProperties_v7_t, maxRecvs) == 44);
static_assert(offsetof(ncclNetProperties_v7_t, netDeviceType) == 48);
static_assert(offsetof(ncclNetProperties_v7_t, netDeviceVersion) == 52);

static_assert(sizeof(ncclNet_v7_t) == 152);
static_assert(offsetof(ncclNet_v7_t, regMr) == 7 * 8);
static_assert(offsetof(ncclNet_v7_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v7_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v7_t, irecvConsumed) == 18 * 8);
