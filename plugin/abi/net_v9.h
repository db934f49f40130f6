// ncclNet v9 ABI (NCCL 2.24-2.25), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §2.4 (NCCL 2.28.9,
// src/include/plugin/net/net_v9.h). Differences from v10: init takes only the
// logger, connect has no config, isend/irecv have no phandle(s). Properties
// have the same 104-byte layout as v10.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Physical members of a (virtual) NIC, 20 B.
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

/// Device properties, 104 B (same layout as v10).
typedef struct {
  char* name;                       ///< [0]
  char* pciPath;                    ///< [8]
  uint64_t guid;                    ///< [16]
  int ptrSupport;                   ///< [24]
  int regIsGlobal;                  ///< [28]
  int forceFlush;                   ///< [32] new in v9 (inserted; v8 is not prefix-compatible)
  int speed;                        ///< [36] Mbps
  int port;                         ///< [40]
  float latency;                    ///< [44] microseconds
  int maxComms;                     ///< [48]
  int maxRecvs;                     ///< [52]
  ncclNetDeviceType netDeviceType;  ///< [56]
  int netDeviceVersion;             ///< [60]
  ncclNetVDeviceProps_v9_t vProps;  ///< [64]
  size_t maxP2pBytes;               ///< [88]
  size_t maxCollBytes;              ///< [96]
} ncclNetProperties_v9_t;

/// The v9 net function table (20 slots, 160 B), exported as `ncclNetPlugin_v9`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

// ---- layout checks (fact sheet §2.4) ----
static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20);
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(offsetof(ncclNetProperties_v9_t, guid) == 16);
static_assert(offsetof(ncclNetProperties_v9_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v9_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32);
static_assert(offsetof(ncclNetProperties_v9_t, speed) == 36);
static_assert(offsetof(ncclNetProperties_v9_t, port) == 40);
static_assert(offsetof(ncclNetProperties_v9_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v9_t, maxComms) == 48);
static_assert(offsetof(ncclNetProperties_v9_t, maxRecvs) == 52);
static_assert(offsetof(ncclNetProperties_v9_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60);
static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96);

static_assert(sizeof(ncclNet_v9_t) == 160);
static_assert(offsetof(ncclNet_v9_t, init) == 1 * 8);
static_assert(offsetof(ncclNet_v9_t, connect) == 5 * 8);
static_assert(offsetof(ncclNet_v9_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v9_t, irecv) == 11 * 8);
static_assert(offsetof(ncclNet_v9_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v9_t, irecvConsumed) == 18 * 8);
static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 19 * 8);
