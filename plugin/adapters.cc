// Version adapters; see adapters.h. Source: shared/docs/nccl-net-abi.md §2.4, §2.8.
#include "plugin/adapters.h"

#include <algorithm>

namespace railyard::plugin::adapters {
namespace {

// Shared by v10 and v9, whose properties have the same fields.
template <typename Props>
void CopyV9Layout(const ncclNetProperties_v11_t& src, Props* dst) {
  dst->name = src.name;
  dst->pciPath = src.pciPath;
  dst->guid = src.guid;
  dst->ptrSupport = src.ptrSupport;
  dst->regIsGlobal = src.regIsGlobal;
  dst->forceFlush = src.forceFlush;
  dst->speed = src.speed;
  dst->port = src.port;
  dst->latency = src.latency;
  dst->maxComms = src.maxComms;
  dst->maxRecvs = src.maxRecvs;
  dst->netDeviceType = src.netDeviceType;
  dst->netDeviceVersion = src.netDeviceVersion;
  dst->vProps.ndevs = src.vProps.ndevs;
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) dst->vProps.devs[i] = src.vProps.devs[i];
  dst->maxP2pBytes = src.maxP2pBytes;
  dst->maxCollBytes = src.maxCollBytes;
}

template <typename Props>
ncclResult_t GetPropertiesVia(GetPropertiesFn getProperties, int dev, Props* props) {
  if (props == nullptr) return ncclInternalError;
  ncclNetProperties_v11_t v11;
  ncclResult_t rc = getProperties(dev, &v11);
  if (rc != ncclSuccess) return rc;
  CopyProperties(v11, props);
  return ncclSuccess;
}

template <typename VProps>
ncclResult_t MakeVDeviceVia(MakeVDeviceFn makeVDevice, int* d, VProps* props) {
  if (d == nullptr || props == nullptr) return ncclInternalError;
  if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC) return ncclInvalidArgument;
  ncclNetVDeviceProps_v11_t v11{};
  v11.ndevs = props->ndevs;
  for (int i = 0; i < props->ndevs; ++i) v11.devs[i] = props->devs[i];
  return makeVDevice(d, &v11);
}

}  // namespace

void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v10_t* dst) {
  CopyV9Layout(src, dst);
}

void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v9_t* dst) {
  CopyV9Layout(src, dst);
}

void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v8_t* dst) {
  dst->name = src.name;
  dst->pciPath = src.pciPath;
  dst->guid = src.guid;
  dst->ptrSupport = src.ptrSupport;
  dst->regIsGlobal = src.regIsGlobal;
  dst->speed = src.speed;
  dst->port = src.port;
  dst->latency = src.latency;
  dst->maxComms = src.maxComms;
  dst->maxRecvs = std::min(src.maxRecvs, kMaxV8Recvs);
  dst->netDeviceType = src.netDeviceType;
  dst->netDeviceVersion = src.netDeviceVersion;
}

ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev,
                           ncclNetProperties_v10_t* props) {
  return GetPropertiesVia(getProperties, dev, props);
}
ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev,
                           ncclNetProperties_v9_t* props) {
  return GetPropertiesVia(getProperties, dev, props);
}
ncclResult_t GetProperties(GetPropertiesFn getProperties, int dev,
                           ncclNetProperties_v8_t* props) {
  return GetPropertiesVia(getProperties, dev, props);
}

ncclResult_t MakeVDevice(MakeVDeviceFn makeVDevice, int* d, ncclNetVDeviceProps_v10_t* props) {
  return MakeVDeviceVia(makeVDevice, d, props);
}
ncclResult_t MakeVDevice(MakeVDeviceFn makeVDevice, int* d, ncclNetVDeviceProps_v9_t* props) {
  return MakeVDeviceVia(makeVDevice, d, props);
}

ncclResult_t IsendV8(IsendFn isend, void* sendComm, void* data, int size, int tag, void* mhandle,
                     void** request) {
  if (size < 0) {
    if (request != nullptr) *request = nullptr;
    return ncclInvalidArgument;
  }
  return isend(sendComm, data, static_cast<size_t>(size), tag, mhandle, /*phandle=*/nullptr,
               request);
}

ncclResult_t IrecvV8(IrecvFn irecv, void* recvComm, int n, void** data, int* sizes, int* tags,
                     void** mhandles, void** request) {
  auto reject = [request] {
    if (request != nullptr) *request = nullptr;
    return ncclInvalidArgument;
  };
  if (n < 1 || n > kMaxV8Recvs || sizes == nullptr) return reject();
  size_t wide[kMaxV8Recvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return reject();
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return irecv(recvComm, n, data, wide, tags, mhandles, /*phandles=*/nullptr, request);
}

ncclResult_t LegacyContext::Init(InitFn init, FinalizeFn finalize, ncclDebugLogger_t logger,
                                 ncclProfilerCallback_t profiler) {
  std::lock_guard<std::mutex> lock(mu_);
  if (initialized_.load(std::memory_order_relaxed)) return ncclSuccess;
  void* ctx = nullptr;
  ncclResult_t rc = init(&ctx, /*commId=*/0, /*config=*/nullptr, logger, profiler);
  if (rc != ncclSuccess) {
    if (finalize != nullptr) (void)finalize(ctx);
    return rc;
  }
  ctx_.store(ctx, std::memory_order_release);
  initialized_.store(true, std::memory_order_release);
  return ncclSuccess;
}

}  // namespace railyard::plugin::adapters
