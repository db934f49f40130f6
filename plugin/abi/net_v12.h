// ncclNet v12 ABI (NCCL 2.30.x), Railyard's own declarations.
//
// Source of truth: /work/shared/docs/nccl-2.30-abi.md §2.1-§2.3 (NCCL 2.30.7,
// src/include/plugin/net/net_v12.h): the same 22 slots as v11 with _v12 types; a
// 128-byte properties struct whose vProps holds 8 members and which adds railId
// and planeId. Written from that fact sheet, not copied from NCCL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v11.h"

/// Members of one virtual NIC in v12 (v11 and older: 4).
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
/// railId / planeId when they do not apply.
#define NCCL_NET_ID_UNDEF -1

/// Physical members of a (virtual) NIC, 36 B.
typedef struct {
  int ndevs;                                ///< 1..NCCL_NET_MAX_DEVS_PER_NIC_V12
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];  ///< physical device indices
} ncclNetVDeviceProps_v12_t;

typedef ncclNetCommConfig_v11_t ncclNetCommConfig_v12_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

/// Device properties, 128 B. NCCL passes an uninitialised struct: fill every field.
/// Same offsets as v11 up to vProps; maxP2pBytes moves to 104.
typedef struct {
  char* name;                          ///< [0]
  char* pciPath;                       ///< [8]
  uint64_t guid;                       ///< [16]
  int ptrSupport;                      ///< [24]
  int regIsGlobal;                     ///< [28]
  int forceFlush;                      ///< [32]
  int speed;                           ///< [36]  Mbps
  int port;                            ///< [40]
  float latency;                       ///< [44]  microseconds
  int maxComms;                        ///< [48]
  int maxRecvs;                        ///< [52]
  ncclNetDeviceType netDeviceType;     ///< [56]
  int netDeviceVersion;                ///< [60]
  ncclNetVDeviceProps_v12_t vProps;    ///< [64]  36 B
  size_t maxP2pBytes;                  ///< [104]
  size_t maxCollBytes;                 ///< [112]
  int maxMultiRequestSize;             ///< [120] set 1 (unread)
  int16_t railId;                      ///< [124] NCCL_NET_ID_UNDEF when it does not apply
  int16_t planeId;                     ///< [126] NCCL_NET_ID_UNDEF when it does not apply
} ncclNetProperties_v12_t;

/// The v12 net function table (22 slots, 176 B), exported as `ncclNetPlugin_v12`.
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

// ---- layout checks (nccl-2.30-abi.md §2.1, §2.2) ----
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36);
static_assert(sizeof(ncclNetProperties_v12_t) == 128);
static_assert(alignof(ncclNetProperties_v12_t) == 8);
static_assert(offsetof(ncclNetProperties_v12_t, netDeviceVersion) == 60);
static_assert(offsetof(ncclNetProperties_v12_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
static_assert(offsetof(ncclNetProperties_v12_t, maxCollBytes) == 112);
static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126);
static_assert(sizeof(ncclNet_v12_t) == 176);
static_assert(offsetof(ncclNet_v12_t, makeVDevice) == 19 * 8);
static_assert(offsetof(ncclNet_v12_t, finalize) == 20 * 8);
static_assert(offsetof(ncclNet_v12_t, setNetAttr) == 21 * 8);
