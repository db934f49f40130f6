// Version adapters between NCCL's older net ABIs (v10, v9, v8) and Railyard's
// v11-shaped implementation (plugin/net.h). plugin/exports.cc builds the
// exported tables from these; they live in railyard_core so unit tests can
// drive them with test doubles (every v11 callee is a function-pointer parameter).
//
// Source: /work/shared/docs/nccl-net-abi.md §2.4, §2.5, §2.8, §7.1-§7.3 (NCCL 2.28.9).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

namespace railyard::plugin::adapters {

/// Most buffers the v8 irecv adapter accepts in one call (it converts the
/// int sizes into a size_t array on the stack). The v8 properties report
/// maxRecvs capped to this, so a conforming NCCL never exceeds it.
inline constexpr int kMaxV8Recvs = 8;

// ---- v11 callee signatures (match plugin/net.h) ----
using InitFn = ncclResult_t (*)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                                ncclDebugLogger_t logFunction,
                                ncclProfilerCallback_t profFunction);
using FinalizeFn = ncclResult_t (*)(void* ctx);
using GetPropertiesFn = ncclResult_t (*)(int dev, ncclNetProperties_v11_t* props);
using IsendFn = ncclResult_t (*)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                                 void* phandle, void** request);
using IrecvFn = ncclResult_t (*)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhandles, void** phandles, void** request);
using MakeVDeviceFn = ncclResult_t (*)(int* d, ncclNetVDeviceProps_v11_t* props);

// ---- properties: v11 -> older layouts ----

/// Writes every field of `*dst` from `src` (v10 = v11 minus maxMultiRequestSize).
/// Padding bytes are not written. `dst` must not be NULL.
void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v10_t* dst);
/// Writes every field of `*dst` from `src` (same layout as v10).
void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v9_t* dst);
/// Writes every field of `*dst` from `src`. v8 has no forceFlush, vProps or
/// max*Bytes (dropped); maxRecvs is capped to kMaxV8Recvs.
void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v8_t* dst);

/// Calls `getProperties(dev, &local_v11)` and, on success, copies the result
/// into `*props` with CopyProperties. Returns the callee's error unchanged (and
/// leaves `*props` unwritten), or ncclInternalError when `props` is NULL.
ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev, ncclNetProperties_v10_t* props);
ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev, ncclNetProperties_v9_t* props);
ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev, ncclNetProperties_v8_t* props);

// ---- makeVDevice: v10/v9 vProps -> v11 vProps ----

/// Converts `*props` into a v11 vProps (same 20-byte shape) and calls
/// `makeVDevice(d, &v11)`. ncclInternalError when `d` or `props` is NULL;
/// ncclInvalidArgument when props->ndevs is outside [0, NCCL_NET_MAX_DEVS_PER_NIC].
ncclResult_t MakeVDevice(MakeVDeviceFn makeVDevice, int* d, ncclNetVDeviceProps_v10_t* props);
ncclResult_t MakeVDevice(MakeVDeviceFn makeVDevice, int* d, ncclNetVDeviceProps_v9_t* props);

// ---- v8 int-size data path ----

/// v8 isend: `size` (bytes, int) must be >= 0, else ncclInvalidArgument and
/// `*request` is set to NULL. Calls `isend` with size_t size and phandle NULL.
ncclResult_t IsendV8(IsendFn isend, void* sendComm, void* data, int size, int tag, void* mhandle,
                     void** request);

/// v8 irecv: `n` must be in [1, kMaxV8Recvs] and every sizes[i] >= 0, else
/// ncclInvalidArgument (and `*request` = NULL when `request` is non-NULL).
/// Converts the int sizes (bytes) into a size_t array on the stack and calls
/// `irecv` with phandles NULL. Any incoming NCCL_NET_OPTIONAL_RECV_COMPLETION
/// in `*request` is passed through (the v11 Irecv always overwrites it).
ncclResult_t IrecvV8(IrecvFn irecv, void* recvComm, int n, void** data, int* sizes, int* tags,
                     void** mhandles, void** request);

// ---- the process-wide ctx for v10/v9/v8 ----

/// The one context used by the v10/v9/v8 tables, whose init/listen/connect
/// carry no ctx. The first successful Init() creates it through the v11 init
/// (commId 0, config NULL); later Init() calls only return ncclSuccess. It is
/// never finalized: old ABIs have no finalize, and NCCL 2.28.9's shims
/// reference-count old plugins and never call one (§2.8). Thread-safe.
class LegacyContext {
 public:
  /// Runs `init(&ctx, 0, nullptr, logger, profiler)` once. If it fails,
  /// `finalize(ctx)` is called (the v11 contract: finalize follows a failed
  /// init), the error is returned and the next Init() tries again.
  ncclResult_t Init(InitFn init, FinalizeFn finalize, ncclDebugLogger_t logger,
                    ncclProfilerCallback_t profiler);
  /// The ctx for Listen/Connect; NULL before the first successful Init().
  void* ctx() const { return ctx_.load(std::memory_order_acquire); }
  /// True once an Init() has succeeded.
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::atomic<bool> initialized_{false};
  std::atomic<void*> ctx_{nullptr};
};

}  // namespace railyard::plugin::adapters
