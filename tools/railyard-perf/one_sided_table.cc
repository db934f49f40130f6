// See one_sided_table.h.
#include "tools/railyard-perf/one_sided_table.h"

#include <dlfcn.h>

namespace railyard::perf {

const char* OneSidedKindName(OneSidedKind kind) {
  switch (kind) {
    case OneSidedKind::kGinV11: return "gin-v11";
    case OneSidedKind::kRmaV14: return "rma-v14";
    case OneSidedKind::kRmaV13: return "rma-v13";
  }
  return "?";
}

const char* OneSidedTable::Symbol() const {
  switch (kind_) {
    case OneSidedKind::kGinV11: return "ncclGinPlugin_v11";
    case OneSidedKind::kRmaV14: return "ncclRmaPlugin_v14";
    case OneSidedKind::kRmaV13: return "ncclRmaPlugin_v13";
  }
  return "?";
}

int OneSidedTable::Version() const {
  switch (kind_) {
    case OneSidedKind::kGinV11: return 11;
    case OneSidedKind::kRmaV14: return 14;
    case OneSidedKind::kRmaV13: return 13;
  }
  return 0;
}

const char* OneSidedTable::Name() const {
  const char* n = gin_ != nullptr ? gin_->name : rma14_ != nullptr ? rma14_->name : rma13_ != nullptr ? rma13_->name : nullptr;
  return n != nullptr ? n : "?";
}

OneSidedTable::OneSidedTable(void* lib, OneSidedKind kind) : kind_(kind) {
  if (lib == nullptr) return;
  switch (kind) {
    case OneSidedKind::kGinV11: gin_ = static_cast<const ncclGin_v11_t*>(::dlsym(lib, Symbol())); break;
    case OneSidedKind::kRmaV14: rma14_ = static_cast<const ncclRma_v14_t*>(::dlsym(lib, Symbol())); break;
    case OneSidedKind::kRmaV13: rma13_ = static_cast<const ncclRma_v13_t*>(::dlsym(lib, Symbol())); break;
  }
}

#define RY_OS_CALL(ginCall, rma14Call, rma13Call)     \
  do {                                                \
    if (gin_ != nullptr) return (ginCall);            \
    if (rma14_ != nullptr) return (rma14Call);        \
    if (rma13_ != nullptr) return (rma13Call);        \
    return ncclInternalError;                         \
  } while (0)

ncclResult_t OneSidedTable::Init(uint64_t commId, ncclDebugLogger_t logger) {
  RY_OS_CALL(gin_->init(&ctx_, commId, logger), rma14_->init(&ctx_, commId, logger),
             rma13_->init(&ctx_, commId, logger));
}

ncclResult_t OneSidedTable::Devices(int* ndev) {
  RY_OS_CALL(gin_->devices(ndev), rma14_->devices(ndev), rma13_->devices(ndev));
}

ncclResult_t OneSidedTable::Properties(int dev, int* netDeviceType, int* maxRecvs, std::string* name,
                                       int* speedMbps) {
  auto fill = [&](const auto& p) {
    *netDeviceType = p.netDeviceType;
    *maxRecvs = p.maxRecvs;
    if (name != nullptr) *name = p.name != nullptr ? p.name : "?";
    if (speedMbps != nullptr) *speedMbps = p.speed;
  };
  if (gin_ != nullptr) {
    ncclNetProperties_v11_t p{};
    const ncclResult_t rc = gin_->getProperties(dev, &p);
    if (rc == ncclSuccess) fill(p);
    return rc;
  }
  ncclNetProperties_v12_t p{};
  const ncclResult_t rc = rma14_ != nullptr ? rma14_->getProperties(dev, &p)
                          : rma13_ != nullptr ? rma13_->getProperties(dev, &p)
                                              : ncclInternalError;
  if (rc == ncclSuccess) fill(p);
  return rc;
}

ncclResult_t OneSidedTable::Listen(int dev, void* handle) {
  RY_OS_CALL(gin_->listen(ctx_, dev, handle, &listenComm_), rma14_->listen(ctx_, dev, handle, &listenComm_),
             rma13_->listen(ctx_, dev, handle, &listenComm_));
}

ncclResult_t OneSidedTable::Connect(std::vector<void*>& handles, int rank, int nContexts, void* connectCtx) {
  const int n = static_cast<int>(handles.size());
  void* ctx = connectCtx != nullptr ? connectCtx : ctx_;
  ncclResult_t rc = ncclInternalError;
  if (gin_ != nullptr) {
    rc = gin_->connect(ctx, handles.data(), n, rank, listenComm_, &collComm_);
    if (gin_->closeListen(listenComm_) != ncclSuccess && rc == ncclSuccess) rc = ncclInternalError;
  } else if (rma14_ != nullptr) {
    rc = rma14_->connect(ctx, handles.data(), n, rank, listenComm_, &collComm_);
    if (rma14_->closeListen(listenComm_) != ncclSuccess && rc == ncclSuccess) rc = ncclInternalError;
    if (rc == ncclSuccess) {
      ncclRmaConfig_v14_t cfg{nContexts, INT32_MIN, 1};  // traffic class undefined, as NCCL may pass
      rc = rma14_->createContext(collComm_, &cfg, &rmaCtx_);
    }
  } else if (rma13_ != nullptr) {
    rc = rma13_->connect(ctx, handles.data(), n, rank, listenComm_, &collComm_);
    if (rma13_->closeListen(listenComm_) != ncclSuccess && rc == ncclSuccess) rc = ncclInternalError;
    if (rc == ncclSuccess) {
      ncclGinConfig_v13_t cfg{0, 0, nContexts, 0, -1};
      ncclNetDeviceHandle_v11_t* dev = nullptr;
      rc = rma13_->createContext(collComm_, &cfg, &rmaCtx_, &dev);
    }
  }
  listenComm_ = nullptr;
  return rc;
}

ncclResult_t OneSidedTable::RegMrSym(void* data, size_t size, uint64_t mrFlags, void** mhandle) {
  void* ginHandle = nullptr;
  ncclResult_t rc = ncclInternalError;
  if (gin_ != nullptr) {
    rc = gin_->regMrSym(collComm_, data, size, NCCL_PTR_HOST, mrFlags, mhandle, &ginHandle);
  } else if (rma14_ != nullptr) {
    return rma14_->regMrSym(collComm_, data, size, NCCL_PTR_HOST, mrFlags, mhandle);
  } else if (rma13_ != nullptr) {
    rc = rma13_->regMrSym(collComm_, data, size, NCCL_PTR_HOST, mrFlags, mhandle, &ginHandle);
  }
  if (rc == ncclSuccess && ginHandle != *mhandle) return ncclInternalError;  // must be the same value
  return rc;
}

ncclResult_t OneSidedTable::DeregMrSym(void* mhandle) {
  RY_OS_CALL(gin_->deregMrSym(collComm_, mhandle), rma14_->deregMrSym(collComm_, mhandle),
             rma13_->deregMrSym(collComm_, mhandle));
}

ncclResult_t OneSidedTable::Iput(uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh,
                                 uint32_t rank, void** request, int context) {
  RY_OS_CALL(gin_->iput(collComm_, srcOff, srcMh, size, dstOff, dstMh, rank, request),
             rma14_->iput(rmaCtx_, context, srcOff, srcMh, size, dstOff, dstMh, rank, request),
             rma13_->iput(rmaCtx_, context, srcOff, srcMh, size, dstOff, dstMh, rank, request));
}

ncclResult_t OneSidedTable::IputSignal(uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh,
                                       uint32_t rank, uint64_t signalOff, void* signalMh, uint64_t value,
                                       uint32_t op, bool strong, void** request, int context) {
  RY_OS_CALL(
      gin_->iputSignal(collComm_, srcOff, srcMh, size, dstOff, dstMh, rank, signalOff, signalMh, value, op, request),
      rma14_->iputSignal(rmaCtx_, context, srcOff, srcMh, size, dstOff, dstMh, rank, signalOff, signalMh, value, op,
                         strong, request),
      rma13_->iputSignal(rmaCtx_, context, srcOff, srcMh, size, dstOff, dstMh, rank, signalOff, signalMh, value, op,
                         request));
}

ncclResult_t OneSidedTable::Iget(uint64_t remoteOff, void* remoteMh, size_t size, uint64_t localOff, void* localMh,
                                 uint32_t rank, void** request, int context) {
  RY_OS_CALL(ncclInvalidUsage,
             rma14_->iget(rmaCtx_, context, remoteOff, remoteMh, size, localOff, localMh, rank, request),
             rma13_->iget(rmaCtx_, context, remoteOff, remoteMh, size, localOff, localMh, rank, request));
}

ncclResult_t OneSidedTable::Iflush(void* mhandle, uint32_t rank, void** request, int context) {
  RY_OS_CALL(ncclInvalidUsage, rma14_->iflush(rmaCtx_, context, mhandle, rank, request),
             rma13_->iflush(rmaCtx_, context, mhandle, rank, request));
}

ncclResult_t OneSidedTable::Test(void* request, int* done) {
  RY_OS_CALL(gin_->test(collComm_, request, done), rma14_->test(collComm_, request, done),
             rma13_->test(collComm_, request, done));
}

ncclResult_t OneSidedTable::Progress() {
  RY_OS_CALL(gin_->ginProgress(collComm_), rma14_->rmaProgress(rmaCtx_), rma13_->ginProgress(rmaCtx_));
}

ncclResult_t OneSidedTable::Close() {
  ncclResult_t rc = ncclSuccess;
  if (rma14_ != nullptr && rmaCtx_ != nullptr) rc = rma14_->destroyContext(rmaCtx_);
  if (rma13_ != nullptr && rmaCtx_ != nullptr) rc = rma13_->destroyContext(rmaCtx_);
  rmaCtx_ = nullptr;
  if (collComm_ == nullptr) return rc;
  ncclResult_t rc2 = gin_ != nullptr     ? gin_->closeColl(collComm_)
                     : rma14_ != nullptr ? rma14_->closeColl(collComm_)
                                         : rma13_->closeColl(collComm_);
  collComm_ = nullptr;
  return rc != ncclSuccess ? rc : rc2;
}

ncclResult_t OneSidedTable::Finalize() {
  void* ctx = ctx_;
  ctx_ = nullptr;
  RY_OS_CALL(gin_->finalize(ctx), rma14_->finalize(ctx), rma13_->finalize(ctx));
}

#undef RY_OS_CALL

}  // namespace railyard::perf
