// See gin_core.h.
#include "plugin/gin_core.h"

#include <cstring>
#include <memory>

#include "env/log.h"
#include "plugin/abi/gin_v11.h"
#include "plugin/gin_runtime.h"
#include "plugin/net.h"
#include "plugin/net_v12_adapters.h"
#include "proxy/gin/gin_comm.h"

namespace railyard::plugin::gin {
namespace {

using railyard::gin::GinComm;
using railyard::gin::Request;

constexpr uint64_t kCtxMagic = 0x5259474e43545821ull;     // "RYGNCTX!"
constexpr uint64_t kListenMagic = 0x5259474e4c53544eull;  // "RYGNLSTN"
constexpr uint64_t kCollMagic = 0x5259474e434f4c4cull;    // "RYGNCOLL"
constexpr uint64_t kRmaMagic = 0x5259474e524d4158ull;     // "RYGNRMAX"

struct GinCtx {
  uint64_t magic = kCtxMagic;
  void* netCtx = nullptr;
  Runtime rt;  ///< one reference on the one-sided fabric per ctx (getProperties reads its capabilities)
};
struct ListenComm {
  uint64_t magic = kListenMagic;
  Runtime rt;
  std::unique_ptr<fabric::Worker> worker;
};
struct Coll {
  uint64_t magic = kCollMagic;
  Runtime rt;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<GinComm> comm;  // destroyed before the worker
  ~Coll() {
    comm.reset();
    worker.reset();
  }
};
struct RmaCtx {
  uint64_t magic = kRmaMagic;
  Coll* coll = nullptr;
  int nContexts = 0;
};

ncclResult_t GinFail(const Status& s, const char* call) {
  RY_WARN("%s: %s", call, s.message().c_str());
  return static_cast<ncclResult_t>(s.ncclResult());
}
ncclResult_t GinBad(const char* call, const char* what) {
  return GinFail(InvalidArgument(std::string(what)), call);
}
Coll* AsColl(void* p) {
  auto* c = static_cast<Coll*>(p);
  return (c != nullptr && c->magic == kCollMagic) ? c : nullptr;
}
uint64_t Id(void* mhandle) { return reinterpret_cast<uintptr_t>(mhandle); }
fabric::MemoryKind KindOf(int type) {
  return type == NCCL_PTR_HOST ? fabric::MemoryKind::kHost : fabric::MemoryKind::kDevice;
}

}  // namespace

ncclResult_t Init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  if (ctx == nullptr) return GinBad("GIN init", "ctx out-pointer is NULL");
  *ctx = nullptr;
  void* netCtx = nullptr;
  ncclResult_t rc = plugin::Init(&netCtx, commId, nullptr, logFunction, nullptr);
  if (rc != ncclSuccess) {
    (void)plugin::Finalize(netCtx);
    return rc;
  }
  auto* c = new GinCtx;
  c->netCtx = netCtx;
  if (Status s = AcquireRuntime(&c->rt); !s.ok()) {
    delete c;
    (void)plugin::Finalize(netCtx);
    return GinFail(s, "GIN init");
  }
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t Finalize(void* ctx) {
  if (ctx == nullptr) return ncclSuccess;
  auto* c = static_cast<GinCtx*>(ctx);
  if (c->magic != kCtxMagic) return GinBad("GIN finalize", "not a Railyard GIN/RMA context");
  c->magic = 0;
  ncclResult_t rc = plugin::Finalize(c->netCtx);
  delete c;
  ReleaseRuntime();
  return rc;
}

ncclResult_t Devices(int* ndev) { return plugin::Devices(ndev); }

ncclResult_t GetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (props == nullptr) return GinBad("GIN getProperties", "props is NULL");
  ncclResult_t rc = plugin::GetProperties(dev, props);
  if (rc != ncclSuccess) return rc;
  props->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
  props->netDeviceVersion = NCCL_GIN_PROXY_VERSION;
  // CUDA only where the fabric's transport can read device memory (verbs with a
  // GPUDirect peer-memory module); the TCP fabric's CPU copies cannot.
  props->ptrSupport = NCCL_PTR_HOST;
  Runtime rt;
  if (AcquireRuntime(&rt).ok()) {
    if (rt.domain->capabilities().Has(fabric::kCapDeviceMemory)) props->ptrSupport |= NCCL_PTR_CUDA;
    ReleaseRuntime();
  }
  int m = 1;
  while (m * 2 <= props->maxRecvs) m *= 2;
  props->maxRecvs = m;  // queue sizes are 32 × maxRecvs, indexed with a mask (2.30 sheet §7.9)
  return ncclSuccess;
}

ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
  if (props == nullptr) return GinBad("GIN getProperties", "props is NULL");
  return adapters::GetPropertiesV12(&GetProperties, dev, props);
}

ncclResult_t Listen(void* /*ctx*/, int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return GinBad("GIN listen", "handle or listenComm is NULL");
  *listenComm = nullptr;
  int ndev = 0;
  ncclResult_t rc = plugin::Devices(&ndev);
  if (rc != ncclSuccess) return rc;
  if (dev < 0 || dev >= ndev) {
    return GinFail(InvalidArgument("device " + std::to_string(dev) + " outside 0.." + std::to_string(ndev - 1)),
                "GIN listen");
  }
  auto l = std::make_unique<ListenComm>();
  Status s = AcquireRuntime(&l->rt);
  if (!s.ok()) return GinFail(s, "GIN listen");
  AwaitCables(*l->rt.domain, l->rt.options.timeoutMs);  // fabric mode: a Worker over every cable
  s = l->rt.domain->CreateWorker(&l->worker);
  if (s.ok()) s = railyard::gin::PackHandle(l->worker->Address(), static_cast<uint8_t*>(handle));
  if (!s.ok()) {
    l->worker.reset();
    ReleaseRuntime();
    return GinFail(s, "GIN listen");
  }
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t Connect(void* /*ctx*/, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  if (collComm == nullptr) return GinBad("GIN connect", "collComm out-pointer is NULL");
  *collComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || l->magic != kListenMagic || !l->worker) {
    return GinBad("GIN connect", "not a live Railyard GIN listen comm");
  }
  if (handles == nullptr || nranks < 1) return GinBad("GIN connect", "no handles");
  auto c = std::make_unique<Coll>();
  Status s = AcquireRuntime(&c->rt);
  if (!s.ok()) return GinFail(s, "GIN connect");
  c->worker = std::move(l->worker);
  std::span<const uint8_t* const> hs(reinterpret_cast<const uint8_t* const*>(handles), size_t(nranks));
  s = GinComm::Connect(c->rt.options, *c->rt.cache, *c->worker, hs, rank, &c->comm);
  if (!s.ok()) {
    c.reset();
    ReleaseRuntime();
    return GinFail(s, "GIN connect");
  }
  *collComm = c.release();
  return ncclSuccess;
}

ncclResult_t CloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l == nullptr || l->magic != kListenMagic) return GinBad("GIN closeListen", "not a Railyard GIN listen comm");
  l->magic = 0;
  l->worker.reset();
  delete l;
  ReleaseRuntime();
  return ncclSuccess;
}

ncclResult_t CloseColl(void* collComm) {
  Coll* c = AsColl(collComm);
  if (c == nullptr) return GinBad("GIN closeColl", "not a Railyard GIN collComm");
  c->magic = 0;
  delete c;
  ReleaseRuntime();
  return ncclSuccess;
}

ncclResult_t RegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || mhandle == nullptr) return GinBad("GIN regMrSym", "not a Railyard GIN collComm, or mhandle NULL");
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    return GinFail(InvalidArgument("memory type " + std::to_string(type) + " (HOST 1 or CUDA 2)"), "GIN regMrSym");
  }
  uint64_t id = 0;
  Status s = c->comm->RegisterWindow(data, size, KindOf(type), mrFlags, &id);
  if (!s.ok()) return GinFail(s, "GIN regMrSym");
  *mhandle = reinterpret_cast<void*>(uintptr_t(id));
  return ncclSuccess;
}

ncclResult_t RegMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                            uint64_t mrFlags, void** mhandle) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || mhandle == nullptr) {
    return GinBad("GIN regMrSymDmaBuf", "not a Railyard GIN collComm, or mhandle NULL");
  }
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    return GinFail(InvalidArgument("memory type " + std::to_string(type) + " (HOST 1 or CUDA 2)"), "GIN regMrSymDmaBuf");
  }
  uint64_t id = 0;
  Status s = c->comm->RegisterWindowDmaBuf(data, size, fd, offset, KindOf(type), mrFlags, &id);
  if (!s.ok()) return GinFail(s, "GIN regMrSymDmaBuf");
  *mhandle = reinterpret_cast<void*>(uintptr_t(id));
  return ncclSuccess;
}

ncclResult_t DeregMrSym(void* collComm, void* mhandle) {
  Coll* c = AsColl(collComm);
  if (c == nullptr) return GinBad("GIN deregMrSym", "not a Railyard GIN collComm");
  Status s = c->comm->DeregisterWindow(Id(mhandle));
  return s.ok() ? ncclSuccess : GinFail(s, "GIN deregMrSym");
}

ncclResult_t Iput(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                  void* dstMhandle, uint32_t rank, void** request) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || request == nullptr) return GinBad("GIN iput", "not a Railyard GIN collComm, or request NULL");
  Request* r = nullptr;
  Status s = c->comm->Put(srcOff, Id(srcMhandle), size, dstOff, Id(dstMhandle), rank, &r);
  *request = r;
  return s.ok() ? ncclSuccess : GinFail(s, "GIN iput");
}

ncclResult_t IputSignal(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                        void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                        uint64_t signalValue, uint32_t signalOp, bool strong, void** request) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || request == nullptr) {
    return GinBad("GIN iputSignal", "not a Railyard GIN collComm, or request NULL");
  }
  if (signalOp == 0) return GinBad("GIN iputSignal", "signal op 0 (INC 1 or ADD 2)");
  Request* r = nullptr;
  Status s = c->comm->PutSignal(srcOff, Id(srcMhandle), size, dstOff, Id(dstMhandle), rank, signalOff,
                                Id(signalMhandle), signalValue, signalOp, strong, &r);
  *request = r;
  return s.ok() ? ncclSuccess : GinFail(s, "GIN iputSignal");
}

ncclResult_t Iget(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                  void* localMhandle, uint32_t rank, void** request) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || request == nullptr) return GinBad("RMA iget", "not a Railyard collComm, or request NULL");
  Request* r = nullptr;
  Status s = c->comm->Get(remoteOff, Id(remoteMhandle), size, localOff, Id(localMhandle), rank, &r);
  *request = r;
  return s.ok() ? ncclSuccess : GinFail(s, "RMA iget");
}

ncclResult_t Iflush(void* collComm, void* /*mhandle*/, uint32_t rank, void** request) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || request == nullptr) return GinBad("RMA iflush", "not a Railyard collComm, or request NULL");
  Request* r = nullptr;
  Status s = c->comm->Flush(rank, &r);
  *request = r;
  return s.ok() ? ncclSuccess : GinFail(s, "RMA iflush");
}

ncclResult_t Test(void* collComm, void* request, int* done) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || done == nullptr) return GinBad("GIN test", "not a Railyard GIN collComm, or done NULL");
  bool d = false;
  Status s = c->comm->Test(static_cast<Request*>(request), &d);
  *done = d ? 1 : 0;
  return s.ok() ? ncclSuccess : GinFail(s, "GIN test");
}

ncclResult_t Progress(void* collComm) {
  Coll* c = AsColl(collComm);
  if (c == nullptr) return GinBad("GIN progress", "not a Railyard GIN collComm");
  Status s = c->comm->Progress();
  return s.ok() ? ncclSuccess : static_cast<ncclResult_t>(s.ncclResult());
}

ncclResult_t CreateContext(void* collComm, int nContexts, void** rmaCtx) {
  Coll* c = AsColl(collComm);
  if (c == nullptr || rmaCtx == nullptr) return GinBad("RMA createContext", "not a Railyard collComm, or ctx NULL");
  *rmaCtx = nullptr;
  if (nContexts < 1 || nContexts > 1024) {
    return GinFail(InvalidArgument("nContexts " + std::to_string(nContexts) + " outside 1..1024"), "RMA createContext");
  }
  auto* r = new RmaCtx;
  r->coll = c;
  r->nContexts = nContexts;
  *rmaCtx = r;
  return ncclSuccess;
}

ncclResult_t DestroyContext(void* rmaCtx) {
  auto* r = static_cast<RmaCtx*>(rmaCtx);
  if (r == nullptr || r->magic != kRmaMagic) return GinBad("RMA destroyContext", "not a Railyard RMA context");
  r->magic = 0;
  delete r;
  return ncclSuccess;
}

void* ContextComm(void* rmaCtx, int context, const char* call) {
  auto* r = static_cast<RmaCtx*>(rmaCtx);
  if (r == nullptr || r->magic != kRmaMagic) {
    (void)GinBad(call, "not a Railyard RMA context");
    return nullptr;
  }
  if (context < 0 || context >= r->nContexts) {
    (void)GinFail(InvalidArgument("context " + std::to_string(context) + " outside 0.." +
                               std::to_string(r->nContexts - 1)),
               call);
    return nullptr;
  }
  return r->coll;
}

void* ContextCollComm(void* rmaCtx) {
  auto* r = static_cast<RmaCtx*>(rmaCtx);
  return (r != nullptr && r->magic == kRmaMagic) ? r->coll : nullptr;
}

ncclResult_t QueryLastError(void* rmaCtx, bool* hasError) {
  if (hasError == nullptr) return GinBad("RMA queryLastError", "hasError is NULL");
  void* coll = ContextCollComm(rmaCtx);
  Coll* c = AsColl(coll);
  if (c == nullptr) return GinBad("RMA queryLastError", "not a Railyard RMA context");
  *hasError = !c->comm->status().ok();
  return ncclSuccess;
}

}  // namespace railyard::plugin::gin
