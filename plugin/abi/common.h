// Railyard's own declarations of the types and constants shared by every
// version of NCCL's net / CollNet plugin ABI.
//
// Source of truth: /work/shared/docs/nccl-net-abi.md §2.1 (NCCL 2.28.9,
// src/include/plugin/nccl_net.h, src/include/nccl_common.h,
// src/include/nccl_device/net_device.h, src/include/nccl.h). Written from that
// fact sheet, not copied from NCCL. Names, types and values follow NCCL exactly
// so that the exported tables are binary-compatible; never include NCCL's own
// headers in the same translation unit.
//
// Sizes/offsets asserted here and in the net_vN.h headers assume LP64
// (x86-64 / aarch64 Linux), which is the only ABI NCCL ships for.
#pragma once

#include <cstddef>
#include <cstdint>

static_assert(sizeof(void*) == 8 && sizeof(long) == 8 && sizeof(int) == 4,
              "Railyard's NCCL ABI declarations assume an LP64 target");

// ---------------------------------------------------------------------------
// Result codes (nccl.h). Railyard's railyard::Code uses the same numbers.
// ---------------------------------------------------------------------------

/// Return value of every plugin entry point (nccl.h, NCCL 2.28.9).
/// Convention (ext-net/README.md): ncclSystemError for network/hardware/syscall
/// failures, ncclInternalError when NCCL misuses the API, ncclInvalidUsage for
/// user or configuration errors, ncclRemoteError for peer/completion errors.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

// ---------------------------------------------------------------------------
// Logging (nccl_common.h)
// ---------------------------------------------------------------------------

/// Level argument of ncclDebugLogger_t. Same values as railyard::log::Level.
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

/// Subsystem bit flags passed as the `flags` argument of ncclDebugLogger_t.
typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/// NCCL's printf-style logger, handed to every version's `init`.
/// `flags` is an OR of ncclDebugLogSubSys bits; `file`/`line` name the call site.
/// NCCL filters by NCCL_DEBUG / NCCL_DEBUG_SUBSYS itself.
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

/// Profiler callback handed to v10+ `init` (nccl_common.h).
/// `type`: 0 start, 1 stop, 2 update, 3 update-and-stop. On start NCCL
/// dereferences `pHandle` when a profiler is loaded, so only call it with the
/// non-NULL phandle(s) that isend/irecv received. `pluginId` = type << 16 | version.
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                                int64_t pluginId, void* extData);

// ---------------------------------------------------------------------------
// Sizes and limits (nccl_net.h)
// ---------------------------------------------------------------------------

/// Bytes NCCL reserves for a listen handle; listen writes at most this many.
#define NCCL_NET_HANDLE_MAXSIZE 128
/// Requests each sendComm / recvComm must allow in flight.
#define NCCL_NET_MAX_REQUESTS 32
/// Members of one virtual NIC (vProps.devs capacity) in v9..v11.
#define NCCL_NET_MAX_DEVS_PER_NIC 4
/// Plugin slots per process (14 external + IB + Socket).
#define NCCL_NET_MAX_PLUGINS 16
/// Upper bound (bytes, 1 TiB) NCCL accepts for maxP2pBytes / maxCollBytes.
#define NCCL_MAX_NET_SIZE_BYTES (1ull << 40)
/// maxP2pBytes the v8 shim synthesises (bytes, 1 GiB).
#define MAX_NET_SIZE (1024ull * 1024 * 1024)
/// maxCollBytes the v8 shim and IB report (bytes, 512 MiB).
#define MAX_COLLNET_SIZE (512ull * 1024 * 1024)

// ---------------------------------------------------------------------------
// Pointer types (bit mask; ptrSupport and the `type` of regMr*)
// ---------------------------------------------------------------------------

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

// ---------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------

/// Value `*request` may hold on entry to irecv (LL/LL128, n == 1): the plugin
/// may complete early, but must always overwrite *request (§2.5).
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/// Defined but unused in 2.28.9.
#define NCCL_NET_MULTI_REQUEST 0x2
/// Registration flag: force strong ordering (GIN).
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
/// GIN signal operations.
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2
/// ncclNetCommConfig_vN_t::trafficClass when the comm config leaves it unset.
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
/// Min/max fields of ncclNetAttr_v11_t that are unknown.
#define NCCL_NET_ATTR_UNDEF -1

// ---------------------------------------------------------------------------
// Device offload (nccl_device/net_device.h)
// ---------------------------------------------------------------------------

/// Kind of device-side code a NIC needs. A net plugin must report HOST (or
/// UNPACK with version NCCL_NET_DEVICE_UNPACK_VERSION) from getProperties(0);
/// the GIN types make NCCL reject a net plugin (§1.4, §7.7).
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

/// Device-side comm handle returned through connect/accept's devComm argument
/// (32 B). A host plugin leaves it alone (NCCL's pointer stays NULL).
typedef struct {
  ncclNetDeviceType netDeviceType;  ///< offset 0
  int netDeviceVersion;             ///< offset 4
  void* handle;                     ///< offset 8
  size_t size;                      ///< offset 16
  int needsProxyProgress;           ///< offset 24
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v9_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v10_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_t;

// ---------------------------------------------------------------------------
// Collective enums (nccl.h), used by CollNet and by ncclNetAttr_v11_t masks.
// ---------------------------------------------------------------------------

/// Reduction operations. Values above ncclNumOps are dynamic PreMulSum ops.
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff  ///< forces a 4-byte enum, as in NCCL
} ncclRedOp_t;

/// Element types.
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

// ---------------------------------------------------------------------------
// Layout checks (§2.1)
// ---------------------------------------------------------------------------

static_assert(sizeof(ncclResult_t) == 4);
static_assert(sizeof(ncclDebugLogLevel) == 4);
static_assert(sizeof(ncclNetDeviceType) == 4);
static_assert(sizeof(ncclRedOp_t) == 4);
static_assert(sizeof(ncclDataType_t) == 4);
static_assert(ncclInProgress == 7 && ncclRemoteError == 6 && ncclInvalidUsage == 5);
static_assert(sizeof(ncclNetDeviceHandle_v11_t) == 32);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, netDeviceType) == 0);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, netDeviceVersion) == 4);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, handle) == 8);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, size) == 16);
static_assert(offsetof(ncclNetDeviceHandle_v11_t, needsProxyProgress) == 24);
static_assert(NCCL_MAX_NET_SIZE_BYTES == 1099511627776ull);
