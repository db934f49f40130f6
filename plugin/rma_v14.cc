// ncclRmaPlugin_v14: NCCL 2.30.7's RMA table (the backend of NCCL's own GIN proxy
// and of host ncclPutSignal), a thin adapter onto plugin/gin_core.h.
// Source: nccl-2.30-abi.md §4.7, §5.2-§5.4, §7.
#include "plugin/abi/rma_v14.h"
#include "plugin/gin_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {

namespace g = ::railyard::plugin::gin;

ncclResult_t CreateContextV14(void* collComm, ncclRmaConfig_v14_t* config, void** rmaCtx) {
  // trafficClass may be INT_MIN (undefined) and rankStride only narrows the peers
  // NCCL targets: the full mesh serves any stride.
  const int n = config != nullptr ? config->nContexts : 1;
  return g::CreateContext(collComm, n, rmaCtx);
}
ncclResult_t IputV14(void* rmaCtx, int context, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff,
                     void* dstMh, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(rmaCtx, context, "RMA iput");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iput(coll, srcOff, srcMh, size, dstOff, dstMh, rank, request);
}
ncclResult_t IputSignalV14(void* rmaCtx, int context, uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff,
                           void* dstMh, uint32_t rank, uint64_t signalOff, void* signalMh, uint64_t signalValue,
                           uint32_t signalOp, bool isStrongSignal, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(rmaCtx, context, "RMA iputSignal");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::IputSignal(coll, srcOff, srcMh, size, dstOff, dstMh, rank, signalOff, signalMh, signalValue, signalOp,
                       isStrongSignal, request);
}
ncclResult_t IgetV14(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMh, size_t size, uint64_t localOff,
                     void* localMh, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(rmaCtx, context, "RMA iget");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iget(coll, remoteOff, remoteMh, size, localOff, localMh, rank, request);
}
ncclResult_t IflushV14(void* rmaCtx, int context, void* mhandle, uint32_t rank, void** request) {
  if (request != nullptr) *request = nullptr;
  void* coll = g::ContextComm(rmaCtx, context, "RMA iflush");
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Iflush(coll, mhandle, rank, request);
}
ncclResult_t ProgressV14(void* rmaCtx) {
  void* coll = g::ContextCollComm(rmaCtx);
  if (coll == nullptr) return ncclInvalidArgument;
  return g::Progress(coll);
}

}  // namespace

extern "C" {

/// The v14 RMA table (NCCL 2.30.7 and later).
RY_EXPORT extern const ncclRma_v14_t ncclRmaPlugin_v14;

const ncclRma_v14_t ncclRmaPlugin_v14 = {
    .name = g::kGinName,
    .init = &g::Init,
    .devices = &g::Devices,
    .getProperties = &g::GetPropertiesV12,
    .listen = &g::Listen,
    .connect = &g::Connect,
    .createContext = &CreateContextV14,
    .regMrSym = &g::RegMrSym,
    .regMrSymDmaBuf = &g::RegMrSymDmaBuf,
    .deregMrSym = &g::DeregMrSym,
    .destroyContext = &g::DestroyContext,
    .closeColl = &g::CloseColl,
    .closeListen = &g::CloseListen,
    .iput = &IputV14,
    .iputSignal = &IputSignalV14,
    .iget = &IgetV14,
    .iflush = &IflushV14,
    .test = &g::Test,
    .rmaProgress = &ProgressV14,
    .queryLastError = &g::QueryLastError,
    .finalize = &g::Finalize,
};

}  // extern "C"
