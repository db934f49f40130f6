// ncclNet v11 ABI (NCCL 2.28.x), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §2.2, §2.3, §2.5, §7.1
// (NCCL 2.28.9, src/include/plugin/net/net_v11.h). This is the version
// NCCL 2.28.9 uses; railyard::plugin (plugin/net.h) implements it directly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"

/// Physical members of a (virtual) NIC, 20 B. A physical device reports {1, {dev}}.
typedef struct {
  int ndevs;                            ///< 1..NCCL_NET_MAX_DEVS_PER_NIC
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];  ///< physical device indices
} ncclNetVDeviceProps_v11_t;

/// Per-communicator config handed to v11 init (may be NULL from our own adapters).
typedef struct {
  int trafficClass;  ///< from ncclConfig_t.trafficClass; NCCL_NET_TRAFFIC_CLASS_UNDEF (-1) if unset
} ncclNetCommConfig_v11_t;

/// Device properties, 112 B. NCCL passes an uninitialised struct: fill every field.
typedef struct {
  char* name;                          ///< [0]   logs, topology matching by name
  char* pciPath;                       ///< [8]   sysfs PCI dir (realpath); NULL for a vNIC
  uint64_t guid;                       ///< [16]  same guid = same fabric port
  int ptrSupport;                      ///< [24]  OR of NCCL_PTR_*
  int regIsGlobal;                     ///< [28]  1 = registrations not tied to a comm (cached)
  int forceFlush;                      ///< [32]  1 = always flush GDR receives
  int speed;                           ///< [36]  Mbps (100000 = 100 Gb/s)
  int port;                            ///< [40]  physical port number
  float latency;                       ///< [44]  microseconds; 0 = NCCL default
  int maxComms;                        ///< [48]  most connections the device can hold
  int maxRecvs;                        ///< [52]  most buffers per grouped irecv
  ncclNetDeviceType netDeviceType;     ///< [56]  NCCL_NET_DEVICE_HOST for Railyard
  int netDeviceVersion;                ///< [60]  0 for HOST
  ncclNetVDeviceProps_v11_t vProps;    ///< [64]  physical members
  size_t maxP2pBytes;                  ///< [88]  bytes per isend/irecv, in (0, 1 TiB]
  size_t maxCollBytes;                 ///< [96]  bytes per CollNet op, in (0, 1 TiB]
  int maxMultiRequestSize;             ///< [104] new in v11; set 1 (unread by 2.28.9)
} ncclNetProperties_v11_t;

/// Connection-level attributes (16 B); NCCL_NET_ATTR_UNDEF = unknown.
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

/// Hint passed to setNetAttr (44 B). op/algo/proto are bit masks (§2.2).
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;  ///< [0]
  ncclNetCommAttr_v11_t recvCommAttr;  ///< [16]
  uint32_t op;                         ///< [32] mask of 1 << ncclFunc_t
  uint32_t algo;                       ///< [36] mask: Tree 0, Ring 1, CollNetDirect 2, ...
  uint32_t proto;                      ///< [40] mask: LL 0, LL128 1, Simple 2
} ncclNetAttr_v11_t;

/// The v11 net function table (22 pointer slots, 176 B), exported as
/// `ncclNetPlugin_v11`. Semantics of each slot: fact sheet §2.5.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

// ---- layout checks (fact sheet §2.2, §2.3) ----
static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20);
static_assert(sizeof(ncclNetCommConfig_v11_t) == 4);
static_assert(sizeof(ncclNetCommAttr_v11_t) == 16);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
static_assert(offsetof(ncclNetAttr_v11_t, recvCommAttr) == 16);
static_assert(offsetof(ncclNetAttr_v11_t, op) == 32);
static_assert(offsetof(ncclNetAttr_v11_t, algo) == 36);
static_assert(offsetof(ncclNetAttr_v11_t, proto) == 40);

static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(offsetof(ncclNetProperties_v11_t, name) == 0);
static_assert(offsetof(ncclNetProperties_v11_t, pciPath) == 8);
static_assert(offsetof(ncclNetProperties_v11_t, guid) == 16);
static_assert(offsetof(ncclNetProperties_v11_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v11_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v11_t, forceFlush) == 32);
static_assert(offsetof(ncclNetProperties_v11_t, speed) == 36);
static_assert(offsetof(ncclNetProperties_v11_t, port) == 40);
static_assert(offsetof(ncclNetProperties_v11_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v11_t, maxComms) == 48);
static_assert(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52);
static_assert(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v11_t, netDeviceVersion) == 60);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96);
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);

static_assert(sizeof(ncclNet_v11_t) == 176);
static_assert(offsetof(ncclNet_v11_t, name) == 0 * 8);
static_assert(offsetof(ncclNet_v11_t, init) == 1 * 8);
static_assert(offsetof(ncclNet_v11_t, devices) == 2 * 8);
static_assert(offsetof(ncclNet_v11_t, getProperties) == 3 * 8);
static_assert(offsetof(ncclNet_v11_t, listen) == 4 * 8);
static_assert(offsetof(ncclNet_v11_t, connect) == 5 * 8);
static_assert(offsetof(ncclNet_v11_t, accept) == 6 * 8);
static_assert(offsetof(ncclNet_v11_t, regMr) == 7 * 8);
static_assert(offsetof(ncclNet_v11_t, regMrDmaBuf) == 8 * 8);
static_assert(offsetof(ncclNet_v11_t, deregMr) == 9 * 8);
static_assert(offsetof(ncclNet_v11_t, isend) == 10 * 8);
static_assert(offsetof(ncclNet_v11_t, irecv) == 11 * 8);
static_assert(offsetof(ncclNet_v11_t, iflush) == 12 * 8);
static_assert(offsetof(ncclNet_v11_t, test) == 13 * 8);
static_assert(offsetof(ncclNet_v11_t, closeSend) == 14 * 8);
static_assert(offsetof(ncclNet_v11_t, closeRecv) == 15 * 8);
static_assert(offsetof(ncclNet_v11_t, closeListen) == 16 * 8);
static_assert(offsetof(ncclNet_v11_t, getDeviceMr) == 17 * 8);
static_assert(offsetof(ncclNet_v11_t, irecvConsumed) == 18 * 8);
static_assert(offsetof(ncclNet_v11_t, makeVDevice) == 19 * 8);
static_assert(offsetof(ncclNet_v11_t, finalize) == 20 * 8);
static_assert(offsetof(ncclNet_v11_t, setNetAttr) == 21 * 8);
