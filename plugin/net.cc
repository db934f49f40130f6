// The one implementation of the NCCL net API (v11 shape): the ABI edge. Each call
// checks its arguments, calls the process's NetRuntime (proxy/runtime/net_runtime.h:
// process state, transport choice, devices, routes, registrations, threads) or the
// comm it names, and turns the Status into an ncclResult_t, logging the error once
// at WARN with the call's name. Calling rules: ../shared/docs/nccl-net-abi.md §2.5
// and §2.6.
#include "plugin/net.h"

#include <cstring>

#include "env/log.h"
#include "plugin/ptr_support.h"
#include "proxy/comm.h"
#include "proxy/runtime/net_runtime.h"
#include "proxy/wire.h"

namespace railyard::plugin {

namespace {

using proxy::Comm;
using proxy::ListenComm;
using proxy::RecvComm;
using proxy::Request;
using proxy::SendComm;
using runtime::CommContext;
using runtime::NetRuntime;

static_assert(runtime::kPtrHost == NCCL_PTR_HOST && runtime::kPtrCuda == NCCL_PTR_CUDA);

NetRuntime& R() { return NetRuntime::Process(); }

/// Logs `s` at WARN naming `call` and returns its ncclResult_t.
ncclResult_t NetFail(const Status& s, const char* call) {
  RY_WARN("%s: %s", call, s.message().c_str());
  return static_cast<ncclResult_t>(s.ncclResult());
}

/// ncclSuccess, or NetFail(s, call).
ncclResult_t Result(const Status& s, const char* call) { return s.ok() ? ncclSuccess : NetFail(s, call); }

/// The context NCCL hands back (NULL from the v8..v10 adapters).
CommContext* ContextOf(void* ctx) { return static_cast<CommContext*>(ctx); }

/// What getProperties reports as ptrSupport: what every route of the device can do
/// (plugin/ptr_support.h).
int PtrSupport(const runtime::RouteFacts& f) { return PtrSupportFor(f); }

}  // namespace

ncclResult_t Init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t /*profFunction*/) {
  if (ctx != nullptr) *ctx = nullptr;
  if (logFunction != nullptr) {
    log::SetNcclLogger(reinterpret_cast<log::NcclLogger>(logFunction));
  }
  CommContext* c = nullptr;
  Status s = R().Open(commId, config != nullptr ? config->trafficClass : -1, &c);
  if (!s.ok()) return NetFail(s, "init");
  if (ctx != nullptr) *ctx = c;
  return ncclSuccess;
}

ncclResult_t Devices(int* ndev) {
  if (ndev == nullptr) return ncclInvalidArgument;
  return Result(R().DeviceCount(ndev), "devices");
}

ncclResult_t GetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  runtime::DeviceInfo d;
  if (Status s = R().Device(dev, &d); !s.ok()) return NetFail(s, "getProperties");
  std::memset(props, 0, sizeof *props);
  props->name = const_cast<char*>(d.name);
  props->pciPath = const_cast<char*>(d.pciPath);
  props->speed = d.speedMbps;
  props->port = d.port;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  if (!d.fusedFrom.empty()) {
    props->vProps.ndevs = static_cast<int>(d.fusedFrom.size());
    for (size_t i = 0; i < d.fusedFrom.size(); ++i) props->vProps.devs[i] = d.fusedFrom[i];
  }
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = PtrSupport(d.routes);
  props->regIsGlobal = 1;  // registrations live in the process-wide MR cache
  props->forceFlush = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = proxy::kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->maxP2pBytes = MAX_NET_SIZE;  // test() reports int sizes; NCCL sends ≤ 1 GiB anyway
  props->maxCollBytes = MAX_COLLNET_SIZE;
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return ncclInvalidArgument;
  *listenComm = nullptr;
  ListenComm* l = nullptr;
  if (Status s = R().Listen(ContextOf(ctx), dev, handle, &l); !s.ok()) return NetFail(s, "listen");
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t Connect(void* ctx, int dev, void* handle, void** sendComm) {
  if (handle == nullptr || sendComm == nullptr) return ncclInvalidArgument;
  *sendComm = nullptr;
  SendComm* comm = nullptr;  // stays NULL while the connect is under way: NCCL calls again
  if (Status s = R().Connect(ContextOf(ctx), dev, handle, &comm); !s.ok()) return NetFail(s, "connect");
  *sendComm = comm;
  return ncclSuccess;
}

ncclResult_t Accept(void* listenComm, void** recvComm) {
  if (listenComm == nullptr || recvComm == nullptr) return ncclInvalidArgument;
  *recvComm = nullptr;
  RecvComm* comm = nullptr;
  if (Status s = R().Accept(static_cast<ListenComm*>(listenComm), &comm); !s.ok()) return NetFail(s, "accept");
  *recvComm = comm;
  return ncclSuccess;
}

ncclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST && !(type == NCCL_PTR_CUDA && (PtrSupport(R().HostRouteFacts()) & NCCL_PTR_CUDA) != 0)) {
    return NetFail(InvalidUsage("regMr of pointer type " + std::to_string(type) +
                             ": Railyard supports host memory here (ptrSupport HOST); GPU memory "
                             "needs regMrDmaBuf on the verbs transport"),
                "regMr");
  }
  const fabric::MemoryKind kind = type == NCCL_PTR_CUDA ? fabric::MemoryKind::kDevice : fabric::MemoryKind::kHost;
  return Result(R().RegisterMemory(data, size, type, kind, mhandle), "regMr");
}

ncclResult_t RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  // NCCL passes fd -1 for memory that is not a DMA-BUF: a plain registration, in
  // every mode (RegMr checks the pointer type against ptrSupport).
  if (fd < 0) return RegMr(comm, data, size, type, mhandle);
  return Result(R().RegisterDmaBuf(static_cast<Comm*>(comm), data, size, type, offset, fd, mhandle),
                "regMrDmaBuf");
}

ncclResult_t DeregMr(void* /*comm*/, void* mhandle) { return Result(R().Deregister(mhandle), "deregMr"); }

ncclResult_t Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                   void* /*phandle*/, void** request) {
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (sendComm == nullptr) return NetFail(InvalidArgument("isend on a NULL comm"), "isend");
  Request* r = nullptr;
  auto* comm = static_cast<SendComm*>(static_cast<Comm*>(sendComm));
  if (Status s = runtime::IsendOn(comm, data, size, tag, mhandle, &r); !s.ok()) return NetFail(s, "isend");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** /*phandles*/, void** request) {
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;  // always overwrite: it may hold NCCL_NET_OPTIONAL_RECV_COMPLETION
  if (recvComm == nullptr || data == nullptr || sizes == nullptr || tags == nullptr) {
    return NetFail(InvalidArgument("irecv with a NULL comm or array"), "irecv");
  }
  Request* r = nullptr;
  auto* comm = static_cast<RecvComm*>(static_cast<Comm*>(recvComm));
  if (Status s = runtime::IrecvOn(comm, n, data, sizes, tags, mhandles, &r); !s.ok()) return NetFail(s, "irecv");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  // A NULL request tells NCCL no flush was needed (§2.5 "iflush"): host memory, and
  // the TCP transport (the CPU wrote the data). The verbs transports flush GPU memory.
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (recvComm == nullptr || n <= 0 || data == nullptr || sizes == nullptr) return ncclSuccess;
  Request* r = nullptr;
  auto* comm = static_cast<RecvComm*>(static_cast<Comm*>(recvComm));
  if (Status s = runtime::IflushOn(comm, n, data, sizes, mhandles, &r); !s.ok()) return NetFail(s, "iflush");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) return ncclInvalidArgument;
  *done = 0;
  if (!R().Running()) {
    // The last finalize closed every comm; the request went with its comm, so it
    // must not be read (misuse, but it fails cleanly instead of reading freed memory).
    return NetFail(InvalidUsage("test() after finalize: the request's comm was closed by finalize"), "test");
  }
  auto* r = static_cast<Request*>(request);
  Status s = r->owner->Test(r, done, sizes);
  return s.ok() ? ncclSuccess : static_cast<ncclResult_t>(s.ncclResult());  // the comm logged it once
}

ncclResult_t CloseSend(void* sendComm) {
  if (sendComm == nullptr) return ncclSuccess;
  return Result(R().CloseComm(static_cast<Comm*>(sendComm)), "close");
}

ncclResult_t CloseRecv(void* recvComm) {
  if (recvComm == nullptr) return ncclSuccess;
  return Result(R().CloseComm(static_cast<Comm*>(recvComm)), "close");
}

ncclResult_t CloseListen(void* listenComm) {
  if (listenComm == nullptr) return ncclSuccess;
  return Result(R().CloseListen(static_cast<ListenComm*>(listenComm)), "closeListen");
}

ncclResult_t MakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  // Verbs mode fuses RDMA ports; the TCP transport refuses, and NCCL then logs it and
  // keeps the physical devices (§2.5 "makeVDevice").
  return Result(R().AddVirtualDevice(props != nullptr ? props->ndevs : 0, props != nullptr ? props->devs : nullptr, d),
                "makeVDevice");
}

ncclResult_t Finalize(void* ctx) {
  (void)R().Close(ContextOf(ctx));  // NCCL finalizes after a failed init too (§1.4): nothing to close then
  return ncclSuccess;
}

ncclResult_t SetNetAttr(void* /*ctx*/, ncclNetAttr_v11_t* /*netAttr*/) {
  return ncclSuccess;  // a hint (§2.5 "setNetAttr"); the TCP transport has no use for it
}

bool InFabricMode() { return R().InFabricMode(); }

}  // namespace railyard::plugin
