// See collnet_core.h.
#include "plugin/collnet_core.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/log.h"
#include "plugin/collnet_handle.h"
#include "plugin/collnet_runtime.h"
#include "plugin/collnet_shape.h"
#include "plugin/net.h"
#include "proxy/collectives/coll_proxy.h"

namespace railyard::plugin::collnet {
namespace {
using collectives::CollKind;
using collectives::CollOp;
using collectives::DataType;
using collectives::RedOp;


struct Ctx {
  Runtime rt;
};

struct ListenState {
  Runtime rt;
  std::unique_ptr<fabric::Worker> worker;
};

struct Comm {
  Runtime rt;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<collectives::CollProxy> proxy;  // destroyed first (joins its thread)
  int rank = -1;
  /// Operations posted and their bytes (the whole element space), by CollKind:
  /// logged at close, so an operator sees whether NCCL used CollNet at all.
  std::array<uint64_t, 3> posted{}, postedBytes{};
  ~Comm() { proxy.reset(); worker.reset(); }
};

/// One iallreduce/iallgather/ireducescatter/iflush in flight.
struct Request {
  Comm* comm = nullptr;  ///< NULL for iflush (done at once)
  collectives::CollRequest* req = nullptr;
  std::vector<uint8_t> bounce;          ///< allgather result when the parts are not one buffer
  std::vector<ncclNetSGE_v12_t> parts;  ///< where `bounce` goes when done
  std::vector<uint8_t> gathered;        ///< reducescatter input gathered from several parts
};

ncclResult_t Fail(const Status& s, const char* call) {
  RY_WARN("CollNet %s: %s", call, s.message().c_str());
  return static_cast<ncclResult_t>(s.ncclResult());
}

/// This rank's and every rank's share of a byte window: block r is the part of
/// [r * bytesPerRank, (r + 1) * bytesPerRank) inside [offset, offset + bytes).
std::vector<uint64_t> WindowBlocks(int nranks, size_t bytesPerRank, size_t offset, size_t bytes) {
  std::vector<uint64_t> b(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const uint64_t lo = std::max<uint64_t>(uint64_t(r) * bytesPerRank, offset);
    const uint64_t hi = std::min<uint64_t>(uint64_t(r + 1) * bytesPerRank, offset + bytes);
    b[static_cast<size_t>(r)] = hi > lo ? hi - lo : 0;
  }
  return b;
}

static_assert(kHandleBytes == NCCL_NET_HANDLE_MAXSIZE, "the CollNet handle is NCCL's net handle");

ncclResult_t PostOp(Comm* c, CollOp op, Request* r, void** request) {
  const size_t kind = static_cast<size_t>(op.kind);
  uint64_t elems = 0;
  for (uint64_t e : op.blockElems) elems += e;
  const uint64_t bytes = elems * collectives::TypeBytes(op.type);
  Status s = c->proxy->Post(std::move(op), &r->req);
  if (!s.ok()) {
    delete r;
    *request = nullptr;
    return Fail(s, "post");
  }
  r->comm = c;
  *request = r;
  c->posted[kind] += 1;
  c->postedBytes[kind] += bytes;
  return ncclSuccess;
}

Ctx* g_legacy = nullptr;
std::mutex g_legacyMu;

}  // namespace

ncclResult_t Init(void** ctx, uint64_t /*commId*/, ncclDebugLogger_t /*logFunction*/) {
  if (ctx == nullptr) return ncclInvalidArgument;
  *ctx = nullptr;
  auto c = std::make_unique<Ctx>();
  if (Status s = AcquireRuntime(&c->rt); !s.ok()) return Fail(s, "init");
  *ctx = c.release();
  return ncclSuccess;
}

ncclResult_t Finalize(void* ctx) {
  if (ctx == nullptr) return ncclSuccess;  // a failed init's ctx (2.28 §7 gotcha 2)
  delete static_cast<Ctx*>(ctx);
  ReleaseRuntime();
  return ncclSuccess;
}

ncclResult_t InitLegacy(ncclDebugLogger_t logFunction) {
  std::lock_guard lock(g_legacyMu);
  if (g_legacy) return ncclSuccess;
  void* ctx = nullptr;
  ncclResult_t r = Init(&ctx, 0, logFunction);
  if (r == ncclSuccess) g_legacy = static_cast<Ctx*>(ctx);
  return r;
}

ncclResult_t ListenLegacy(int dev, void* handle, void** listenComm) {
  Ctx* ctx = nullptr;
  {
    std::lock_guard lock(g_legacyMu);
    ctx = g_legacy;
  }
  if (ctx == nullptr) return ncclInvalidUsage;
  return Listen(ctx, dev, handle, listenComm);
}

ncclResult_t Devices(int* ndev) {
  if (ndev == nullptr) return ncclInvalidArgument;
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t GetPropertiesV11(int dev, ncclNetProperties_v11_t* props) {
  if (props == nullptr || dev != 0) return ncclInvalidArgument;
  int netDevs = 0;
  if (plugin::Devices(&netDevs) != ncclSuccess || netDevs < 1 ||
      plugin::GetProperties(0, props) != ncclSuccess) {
    std::memset(props, 0, sizeof *props);
    static char kName[] = "railyard-collnet";
    props->name = kName;
    props->pciPath = nullptr;
    props->guid = 0;
    props->speed = 10000;
    props->maxComms = 65536;
    props->maxRecvs = 1;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    props->maxP2pBytes = MAX_NET_SIZE;
  }
  props->ptrSupport = NCCL_PTR_HOST;  // reductions run on the CPU
  props->regIsGlobal = 1;             // registrations live in the process's cache
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxCollBytes = MAX_COLLNET_SIZE;
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  ncclNetProperties_v11_t p;
  if (ncclResult_t r = GetPropertiesV11(dev, &p); r != ncclSuccess) return r;
  std::memset(props, 0, sizeof *props);
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;  // written, never left uninitialised (2.30 §7 gotcha 5)
  props->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm) {
  if (ctx == nullptr || handle == nullptr || listenComm == nullptr) return ncclInvalidArgument;
  *listenComm = nullptr;
  if (dev != 0) return Fail(InvalidArgument("listen on device " + std::to_string(dev) + ": CollNet has device 0 only"), "listen");
  auto l = std::make_unique<ListenState>();
  if (Status s = AcquireRuntime(&l->rt); !s.ok()) return Fail(s, "listen");
  if (Status s = l->rt.domain->CreateWorker(&l->worker); !s.ok()) {
    ReleaseRuntime();
    return Fail(s, "listen");
  }
  CollnetHandle ch;
  ch.address = l->worker->Address();
  FillLocator(*l->rt.domain, &ch);
  bool dropped = false;
  if (Status s = ch.Pack(static_cast<uint8_t*>(handle), &dropped); !s.ok()) {
    l->worker.reset();
    ReleaseRuntime();
    return Fail(s, "listen");
  }
  if (dropped) {
    RY_INFO(log::kNet | log::kInit,
            "CollNet: listen: the handle has no room for %zu neighbours / %zu rails beside a %zu-byte address "
            "(the shape is read from what fits)",
            ch.neighbours.size(), ch.rails.size(), ch.address.size());
  }
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t Connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  if (collComm == nullptr) return ncclInvalidArgument;
  *collComm = nullptr;
  if (handles == nullptr || listenComm == nullptr) return ncclInvalidArgument;
  ListenState* l = static_cast<ListenState*>(listenComm);
  if (!l->worker) return Fail(InvalidUsage("connect: this listen comm was already connected"), "connect");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Fail(InvalidArgument("connect: rank " + std::to_string(rank) + " of " + std::to_string(nranks)), "connect");
  }
  std::vector<CollnetHandle> hs(static_cast<size_t>(nranks));
  std::vector<std::vector<uint8_t>> addrs;
  for (int r = 0; r < nranks; ++r) {
    const uint8_t* h = static_cast<const uint8_t*>(handles[r]);
    Status u = h ? CollnetHandle::Unpack({h, kHandleBytes}, &hs[static_cast<size_t>(r)])
                 : InvalidArgument("NULL handle");
    if (!u.ok()) return Fail(InvalidArgument("connect: rank " + std::to_string(r) + "'s handle: " + u.message()), "connect");
    addrs.push_back(hs[static_cast<size_t>(r)].address);
  }
  collectives::CollOptions options = l->rt.options;
  ShapeSource source = ShapeSource::kRankOrder;
  if (Status t = CollnetTopology(l->rt.shapeSetting, *l->rt.domain, hs, &options.topology, &source); !t.ok()) {
    return Fail(t, "connect");
  }
  std::unique_ptr<collectives::CollComm> comm;
  Status s = collectives::CollComm::Connect(*l->worker, *l->rt.cache, rank, nranks, addrs, options, &comm);
  if (!s.ok()) return Fail(s, "connect");
  auto c = std::make_unique<Comm>();
  if (Status a = AcquireRuntime(&c->rt); !a.ok()) return Fail(a, "connect");
  c->worker = std::move(l->worker);
  c->proxy = std::make_unique<collectives::CollProxy>(std::move(comm));
  c->rank = rank;
  std::string order;
  for (int r : options.topology.OrderFor(nranks)) order += (order.empty() ? "" : " ") + std::to_string(r);
  RY_INFO(log::kNet | log::kInit, "CollNet: rank %d of %d connected (%s, order %s, from the %s; %s; one-shot up to %llu bytes)",
          rank, nranks, collectives::ShapeName(options.topology.shape), order.c_str(), ShapeSourceName(source),
          l->rt.domain->TransportName(),
          static_cast<unsigned long long>(options.smallBytes));
  *collComm = c.release();
  return ncclSuccess;
}

ncclResult_t ReduceSupport(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported) {
  if (supported == nullptr) return ncclInvalidArgument;
  *supported = collectives::ValidDataType(static_cast<int>(dataType)) &&
               collectives::ValidRedOp(static_cast<int>(redOp));
  return ncclSuccess;
}

ncclResult_t RegMr(void* collComm, void* data, size_t size, int type, void** mhandle) {
  if (collComm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    return Fail(InvalidUsage("regMr: pointer type " + std::to_string(type) + " (CollNet reduces host memory only)"),
                "regMr");
  }
  Comm* c = static_cast<Comm*>(collComm);
  const fabric::Region* region = nullptr;
  Status s = c->rt.cache->Acquire(data, size, fabric::kAccessLocal, fabric::MemoryKind::kHost, &region);
  if (!s.ok()) return Fail(s, "regMr");
  *mhandle = const_cast<fabric::Region*>(region);
  return ncclSuccess;
}

ncclResult_t RegMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t /*offset*/,
                         int /*fd*/, void** mhandle) {
  // Non-NULL on purpose: a NULL regMrDmaBuf turns DMA-BUF off for the net table too
  // (2.30 §2.3). ptrSupport never offers DMA-BUF, so NCCL passes host memory only.
  return RegMr(collComm, data, size, type, mhandle);
}

ncclResult_t DeregMr(void* collComm, void* mhandle) {
  if (collComm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  Status s = static_cast<Comm*>(collComm)->rt.cache->Release(static_cast<const fabric::Region*>(mhandle));
  return s.ok() ? ncclSuccess : Fail(s, "deregMr");
}

ncclResult_t Iallreduce(void* collComm, void* sendData, void* recvData, size_t count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* /*sendMhandle*/,
                        void* recvMhandle, void** request) {
  if (collComm == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (!collectives::ValidDataType(dataType) || !collectives::ValidRedOp(redOp)) {
    return Fail(InvalidArgument("iallreduce: datatype " + std::to_string(dataType) + " op " +
                                std::to_string(redOp) + " not supported"), "iallreduce");
  }
  Comm* c = static_cast<Comm*>(collComm);
  CollOp op;
  op.kind = CollKind::kAllReduce;
  op.type = static_cast<DataType>(dataType);
  op.op = static_cast<RedOp>(redOp);
  op.blockElems = collectives::EvenBlocks(count, c->proxy->nranks());
  op.send = sendData;
  op.recv = recvData;
  op.recvRegion = static_cast<const fabric::Region*>(recvMhandle);
  return PostOp(c, std::move(op), new Request, request);
}

ncclResult_t Iallgather(void* collComm, void* sendData, int nRecvParts, ncclNetSGE_v12_t* recvParts,
                        size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                        void* /*sendMhandle*/, void** request) {
  if (collComm == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  Comm* c = static_cast<Comm*>(collComm);
  const int n = c->proxy->nranks();
  if (nRecvParts < 1 || recvParts == nullptr || windowOffset + windowBytes > uint64_t(n) * bytesPerRank ||
      windowOffset + windowBytes < windowOffset) {
    return Fail(InvalidArgument("iallgather: " + std::to_string(nRecvParts) + " parts, window [" +
                                std::to_string(windowOffset) + ", +" + std::to_string(windowBytes) +
                                ") of " + std::to_string(n) + " x " + std::to_string(bytesPerRank) + " bytes"),
                "iallgather");
  }
  uint64_t partBytes = 0;
  for (int i = 0; i < nRecvParts; ++i) partBytes += recvParts[i].size;
  if (partBytes < windowBytes) {
    return Fail(InvalidArgument("iallgather: the parts hold " + std::to_string(partBytes) + " bytes, the window " +
                                std::to_string(windowBytes)), "iallgather");
  }
  auto r = std::make_unique<Request>();
  CollOp op;
  op.kind = CollKind::kAllGather;
  op.type = DataType::kUint8;
  op.blockElems = WindowBlocks(n, bytesPerRank, windowOffset, windowBytes);
  op.send = sendData;
  if (recvParts[0].size >= windowBytes) {
    op.recv = recvParts[0].address;
    op.recvRegion = static_cast<const fabric::Region*>(recvParts[0].mhandle);
  } else {
    r->bounce.resize(windowBytes);
    r->parts.assign(recvParts, recvParts + nRecvParts);
    op.recv = r->bounce.data();
  }
  return PostOp(c, std::move(op), r.release(), request);
}

ncclResult_t Ireducescatter(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                            void* recvData, size_t bytesPerRank, size_t windowOffset,
                            size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                            void* recvMhandle, void** request) {
  if (collComm == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  Comm* c = static_cast<Comm*>(collComm);
  const int n = c->proxy->nranks();
  if (!collectives::ValidDataType(dataType) || !collectives::ValidRedOp(redOp)) {
    return Fail(InvalidArgument("ireducescatter: datatype " + std::to_string(dataType) + " op " +
                                std::to_string(redOp) + " not supported"), "ireducescatter");
  }
  const size_t tb = collectives::TypeBytes(static_cast<DataType>(dataType));
  if (nSendParts < 1 || sendParts == nullptr || windowOffset + windowBytes > uint64_t(n) * bytesPerRank ||
      bytesPerRank % tb || windowOffset % tb || windowBytes % tb) {
    return Fail(InvalidArgument("ireducescatter: " + std::to_string(nSendParts) + " parts, window [" +
                                std::to_string(windowOffset) + ", +" + std::to_string(windowBytes) + ") of " +
                                std::to_string(n) + " x " + std::to_string(bytesPerRank) +
                                " bytes (element " + std::to_string(tb) + " bytes)"), "ireducescatter");
  }
  uint64_t partBytes = 0;
  for (int i = 0; i < nSendParts; ++i) partBytes += sendParts[i].size;
  if (partBytes < windowBytes) {
    return Fail(InvalidArgument("ireducescatter: the parts hold " + std::to_string(partBytes) +
                                " bytes, the window " + std::to_string(windowBytes)), "ireducescatter");
  }
  auto r = std::make_unique<Request>();
  CollOp op;
  op.kind = CollKind::kReduceScatter;
  op.type = static_cast<DataType>(dataType);
  op.op = static_cast<RedOp>(redOp);
  for (uint64_t b : WindowBlocks(n, bytesPerRank, windowOffset, windowBytes)) op.blockElems.push_back(b / tb);
  if (sendParts[0].size >= windowBytes) {
    op.send = sendParts[0].address;
  } else {  // several parts: gather the window into one buffer (the engine reads it once)
    r->gathered.resize(windowBytes);
    uint64_t at = 0;
    for (int i = 0; i < nSendParts && at < windowBytes; ++i) {
      const uint64_t take = std::min<uint64_t>(sendParts[i].size, windowBytes - at);
      std::memcpy(r->gathered.data() + at, sendParts[i].address, take);
      at += take;
    }
    op.send = r->gathered.data();
  }
  op.recv = recvData;
  op.recvRegion = static_cast<const fabric::Region*>(recvMhandle);
  return PostOp(c, std::move(op), r.release(), request);
}

ncclResult_t Iflush(void* collComm, void* /*data*/, int /*size*/, void* /*mhandle*/, void** request) {
  if (collComm == nullptr || request == nullptr) return ncclInvalidArgument;
  *request = new Request;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* size) {
  if (request == nullptr || done == nullptr) return ncclInvalidArgument;
  Request* r = static_cast<Request*>(request);
  *done = 0;
  if (r->comm == nullptr) {
    *done = 1;
    if (size) *size = 0;
    delete r;
    return ncclSuccess;
  }
  bool finished = false;
  uint64_t bytes = 0;
  Status s = r->comm->proxy->Test(r->req, &finished, &bytes);
  if (!s.ok()) {
    delete r;
    return Fail(s, "test");
  }
  if (!finished) return ncclSuccess;
  if (!r->parts.empty()) {
    uint64_t at = 0;
    for (const auto& p : r->parts) {
      const uint64_t take = std::min<uint64_t>(p.size, r->bounce.size() - at);
      std::memcpy(p.address, r->bounce.data() + at, take);
      at += take;
    }
  }
  *done = 1;
  if (size) *size = static_cast<int>(std::min<uint64_t>(bytes, INT32_MAX));
  delete r;
  return ncclSuccess;
}

ncclResult_t CloseColl(void* collComm) {
  if (collComm == nullptr) return ncclInvalidArgument;
  Comm* c = static_cast<Comm*>(collComm);
  std::string ran;
  for (size_t k = 0; k < c->posted.size(); ++k) {
    ran += std::string(ran.empty() ? "" : ", ") + std::to_string(c->posted[k]) + " " +
           collectives::CollKindName(static_cast<CollKind>(k)) + " (" + std::to_string(c->postedBytes[k]) + " bytes)";
  }
  RY_INFO(log::kNet | log::kInit, "CollNet: rank %d closed after %s", c->rank, ran.c_str());
  delete c;
  ReleaseRuntime();
  return ncclSuccess;
}

ncclResult_t CloseListen(void* listenComm) {
  if (listenComm == nullptr) return ncclInvalidArgument;
  delete static_cast<ListenState*>(listenComm);
  ReleaseRuntime();
  return ncclSuccess;
}

ncclResult_t MakeVDevice(int* d, int ndevs, const int* devs) {
  if (d == nullptr || devs == nullptr) return ncclInvalidArgument;
  if (ndevs != 1 || devs[0] != 0) {
    return Fail(InvalidUsage("makeVDevice: CollNet has one device (0), which already spans every rail"),
                "makeVDevice");
  }
  *d = 0;
  return ncclSuccess;
}

}  // namespace railyard::plugin::collnet
