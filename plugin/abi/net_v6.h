// ncclNet v6 ABI (NCCL 2.12-2.13), Railyard's own declarations, for railyard-perf's loader.
//
// Source of truth: NCCL 2.28.9 still loads ncclNetPlugin_v6 (fact sheet §1.3); the layout is
// NCCL's src/include/plugin/net/net_v6.h and its shim src/plugin/net/net_v6.cc. Differences
// from v7: the properties end after maxRecvs (no netDeviceType/Version: NCCL's shim reports
// HOST), connect/accept have no device-comm argument, and the table has no getDeviceMr or
// irecvConsumed. Railyard does not export v6.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Device properties, 48 B.
typedef struct {
  char* name;       ///< [0]
  char* pciPath;    ///< [8]
  uint64_t guid;    ///< [16]
  int ptrSupport;   ///< [24]
  int speed;        ///< [28] Mbps
  int port;         ///< [32]
  float latency;    ///< [36] microseconds
  int maxComms;     ///< [40]
  int maxRecvs;     ///< [44]
} ncclNetProperties_v6_t;

/// The v6 net function table (17 slots, 136 B), exported as `ncclNetPlugin_v6`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
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
} ncclNet_v6_t;

static_assert(sizeof(ncclNetProperties_v6_t) == 48);
static_assert(offsetof(ncclNetProperties_v6_t, speed) == 28);
static_assert(offsetof(ncclNetProperties_v6_t, maxRecvs) == 44);

static_assert(sizeof(ncclNet_v6_t) == 136);
static_assert(offsetof(ncclNet_v6_t, connect) == 5 * 8);
static_assert(offsetof(ncclNet_v6_t, regMr) == 7 * 8);
static_assert(offsetof(ncclNet_v6_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v6_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v6_t, closeListen) == 16 * 8);
