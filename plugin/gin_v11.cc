// ncclGinPlugin_v11: NCCL 2.28/2.29's GIN table in proxy mode, a thin adapter onto
// plugin/gin_core.h. Source: nccl-net-abi.md §4.2-§4.4. createContext,
// destroyContext and queryLastError are NULL (GDAKI only; proxy mode tracks errors
// itself). mhandle and ginHandle are the same value; every signal is strong (v11's
// rule: after the put and every earlier put to the peer on the collComm).
#include "plugin/abi/gin_v11.h"
#include "plugin/gin_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {

namespace g = ::railyard::plugin::gin;

ncclResult_t RegMrSymV11(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                         void** ginHandle) {
  ncclResult_t rc = g::RegMrSym(collComm, data, size, type, mrFlags, mhandle);
  if (ginHandle != nullptr) *ginHandle = (rc == ncclSuccess && mhandle != nullptr) ? *mhandle : nullptr;
  return rc;
}
ncclResult_t RegMrSymDmaBufV11(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                               uint64_t mrFlags, void** mhandle, void** ginHandle) {
  ncclResult_t rc = g::RegMrSymDmaBuf(collComm, data, size, type, offset, fd, mrFlags, mhandle);
  if (ginHandle != nullptr) *ginHandle = (rc == ncclSuccess && mhandle != nullptr) ? *mhandle : nullptr;
  return rc;
}
ncclResult_t IputSignalV11(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                           void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                           uint64_t signalValue, uint32_t signalOp, void** request) {
  return g::IputSignal(collComm, srcOff, srcMhandle, size, dstOff, dstMhandle, rank, signalOff, signalMhandle,
                       signalValue, signalOp, /*strong=*/true, request);
}

}  // namespace

extern "C" {

/// The v11 GIN table (NCCL 2.28.x; 2.29 through its shim), proxy mode.
RY_EXPORT extern const ncclGin_v11_t ncclGinPlugin_v11;

const ncclGin_v11_t ncclGinPlugin_v11 = {
    .name = g::kGinName,
    .init = &g::Init,
    .devices = &g::Devices,
    .getProperties = &g::GetProperties,
    .listen = &g::Listen,
    .connect = &g::Connect,
    .createContext = nullptr,
    .regMrSym = &RegMrSymV11,
    .regMrSymDmaBuf = &RegMrSymDmaBufV11,
    .deregMrSym = &g::DeregMrSym,
    .destroyContext = nullptr,
    .closeColl = &g::CloseColl,
    .closeListen = &g::CloseListen,
    .iput = &g::Iput,
    .iputSignal = &IputSignalV11,
    .test = &g::Test,
    .ginProgress = &g::Progress,
    .queryLastError = nullptr,
    .finalize = &g::Finalize,
};

}  // extern "C"
