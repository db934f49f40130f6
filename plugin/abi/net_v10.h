// ncclNet v10 ABI (NCCL 2.26-2.27), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §2.4 (NCCL 2.28.9,
// src/include/plugin/net/net_v10.h). Differences from v11: init has no
// ctx/commId/config, listen has no ctx, connect takes the comm config per call
// and no ctx, no finalize/setNetAttr, properties lack maxMultiRequestSize.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Physical members of a (virtual) NIC, 20 B.
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v10_t;

/// Per-connect config (v10 passes it to every connect).
typedef struct {
  int trafficClass;  ///< NCCL_NET_TRAFFIC_CLASS_UNDEF (-1) if unset
} ncclNetCommConfig_v10_t;

/// Device properties, 104 B: v11's layout without maxMultiRequestSize.
typedef struct {
  char* name;                        ///< [0]
  char* pciPath;                     ///< [8]
  uint64_t guid;                     ///< [16]
  int ptrSupport;                    ///< [24]
  int regIsGlobal;                   ///< [28]
  int forceFlush;                    ///< [32]
  int speed;                         ///< [36] Mbps
  int port;                          ///< [40]
  float latency;                     ///< [44] microseconds
  int maxComms;                      ///< [48]
  int maxRecvs;                      ///< [52]
  ncclNetDeviceType netDeviceType;   ///< [56]
  int netDeviceVersion;              ///< [60]
  ncclNetVDeviceProps_v10_t vProps;  ///< [64]
  size_t maxP2pBytes;                ///< [88]
  size_t maxCollBytes;               ///< [96]
} ncclNetProperties_v10_t;

/// The v10 net function table (20 slots, 160 B), exported as `ncclNetPlugin_v10`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

// ---- layout checks (fact sheet §2.4) ----
static_assert(sizeof(ncclNetVDeviceProps_v10_t) == 20);
static_assert(sizeof(ncclNetCommConfig_v10_t) == 4);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
static_assert(offsetof(ncclNetProperties_v10_t, guid) == 16);
static_assert(offsetof(ncclNetProperties_v10_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v10_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v10_t, forceFlush) == 32);
static_assert(offsetof(ncclNetProperties_v10_t, speed) == 36);
static_assert(offsetof(ncclNetProperties_v10_t, port) == 40);
static_assert(offsetof(ncclNetProperties_v10_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v10_t, maxComms) == 48);
static_assert(offsetof(ncclNetProperties_v10_t, maxRecvs) == 52);
static_assert(offsetof(ncclNetProperties_v10_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v10_t, netDeviceVersion) == 60);
static_assert(offsetof(ncclNetProperties_v10_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v10_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v10_t, maxCollBytes) == 96);

static_assert(sizeof(ncclNet_v10_t) == 160);
static_assert(offsetof(ncclNet_v10_t, init) == 1 * 8);
static_assert(offsetof(ncclNet_v10_t, listen) == 4 * 8);
static_assert(offsetof(ncclNet_v10_t, connect) == 5 * 8);
static_assert(offsetof(ncclNet_v10_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v10_t, irecv) == 11 * 8);
static_assert(offsetof(ncclNet_v10_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v10_t, getDeviceMr) == 17 * 8);
static_assert(offsetof(ncclNet_v10_t, irecvConsumed) == 18 * 8);
static_assert(offsetof(ncclNet_v10_t, makeVDevice) == 19 * 8);
