// ncclRmaPlugin_v13 (= the GIN v13 layout): NCCL 2.30.7 reads it when there is no
// v14 table. A thin adapter onto plugin/gin_core.h. Source: nccl-2.30-abi.md §1.5
// (the v13 shim: init needs netDeviceType GIN_PROXY, the device handle and
// ginHandle are dropped, every signal is strong), §4.3, §5.2.
#include "plugin/abi/gin_v11.h"
#include "plugin/abi/rma_v13.h"
#include "plugin/gin_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {

namespace g = ::railyard::plugin::gin;

// What createContext hands back as the device handle: proxy type, progress needed.
// NCCL's RMA v13 shim discards it.
ncclNetDeviceHandle_v11_t g_proxyHandle = {NCCL_NET_DEVICE_GIN_PROXY, NCCL_GIN_PROXY_VERSION, &g_proxyHandle,
                                           sizeof(ncclNetDeviceHandle_v11_t), 1};

ncclResult_t CreateContextV13(void* collComm, ncclGinConfig_v13_t* config, void** ginCtx,
                              ncclNetDeviceHandle_v11_t** devHandle) {
  const int n = config != nullptr ? config->nContexts : 1;
  ncclResult_t rc = g::CreateContext(collComm, n, ginCtx);
  if (devHandle != nullptr) *devHandle = rc == ncclSuccess ? &g_proxyHandle : nullptr;
  return rc;
}
ncclResult_t RegMrSymV13(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                         void** ginHandle) {
  ncclResult_t rc = g::RegMrSym(collComm, data, size, type, mrFlags, mhandle);
  if (ginHandle != nullptr) *ginHandle = (rc == ncclSuccess && mhandle != nullptr) ? *mhandle : nullptr;
  return rc;
}
ncclResult_t RegMrSymDmaBufV13(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                               uint64_t mrFlags, void** mhandle, void** ginHandle) {
  ncclResult_t rc = g::RegMrSymDmaBuf(collComm, data, size, type, offset, fd, mrFlags, mhandle);
  if (ginHandle != nullptr) *ginHandle = (rc == ncclSuccess && mhandle != nullptr) ? *mhandle : nullptr;
  return rc;
}
ncclResult_t IputV13(void* ginCtx, int context, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff,
                     void* dstMh, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(ginCtx, context, "RMA iput");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iput(coll, srcOff, srcMh, size, dstOff, dstMh, rank, request);
}
ncclResult_t IputSignalV13(void* ginCtx, int context, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff,
                           void* dstMh, uint32_t rank, uint64_t signalOff, void* signalMh, uint64_t signalValue,
                           uint32_t signalOp, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(ginCtx, context, "RMA iputSignal");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::IputSignal(coll, srcOff, srcMh, size, dstOff, dstMh, rank, signalOff, signalMh, signalValue, signalOp,
                       /*strong=*/true, request);
}
ncclResult_t IgetV13(void* ginCtx, int context, uint64_t remoteOff, void* remoteMh, size_t size, uint64_t localOff,
                     void* localMh, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(ginCtx, context, "RMA iget");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iget(coll, remoteOff, remoteMh, size, localOff, localMh, rank, request);
}
ncclResult_t IflushV13(void* ginCtx, int context, void* mhandle, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(ginCtx, context, "RMA iflush");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iflush(coll, mhandle, rank, request);
}
ncclResult_t ProgressV13(void* ginCtx) {
  void* coll = g::ContextCollComm(ginCtx);
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Progress(coll);
}

}  // namespace

extern "C" {

/// The v13 RMA table (NCCL 2.30.7 when no v14 table is found).
RY_EXPORT extern const ncclRma_v13_t ncclRmaPlugin_v13;

const ncclRma_v13_t ncclRmaPlugin_v13 = {
    .name = g::kGinName,
    .init = &g::Init,
    .devices = &g::Devices,
    .getProperties = &g::GetPropertiesV12,
    .listen = &g::Listen,
    .connect = &g::Connect,
    .createContext = &CreateContextV13,
    .regMrSym = &RegMrSymV13,
    .regMrSymDmaBuf = &RegMrSymDmaBufV13,
    .deregMrSym = &g::DeregMrSym,
    .destroyContext = &g::DestroyContext,
    .closeColl = &g::CloseColl,
    .closeListen = &g::CloseListen,
    .iput = &IputV13,
    .iputSignal = &IputSignalV13,
    .iget = &IgetV13,
    .iflush = &IflushV13,
    .test = &g::Test,
    .ginProgress = &ProgressV13,
    .queryLastError = &g::QueryLastError,
    .finalize = &g::Finalize,
};

}  // extern "C"
