// A fake NCCL net plugin for railyard-perf's tests: exports one table (version chosen by
// FAKE_NET_VERSION at compile time: 11, 8, 7 or 6; 5 exports a symbol that railyard-perf
// must report as unsupported, as NCCL 2.28.9 does; 0 exports nothing).
//
// Its data path works inside one process: listen writes a pointer to the listen comm into
// the handle, connect queues a pipe on it, accept takes it; isend and irecv match in posting
// order on a pipe and memcpy. So `railyard-perf -np 1 -p ring` (rank 0 sends to itself)
// runs every iteration through it, for every table version.
//
// Run-time knobs (environment):
//   FAKE_NET_INIT_FAIL=1   init WARNs "fake: init refused (FAKE_NET_INIT_FAIL=1)" through the
//                          logger and returns ncclSystemError
//   FAKE_NET_NDEV=<n>      devices() reports n (default 2)
//   FAKE_NET_DEVTYPE=<t>   getProperties reports netDeviceType t (default 0 = HOST; v7+)
//   FAKE_NET_LOG=<file>    append one line per init/finalize/devices call
//   FAKE_NET_NO_SIZES=1    test() completes receives without writing sizes[] (a plugin bug
//                          railyard-perf reports as a WARN)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v6.h"
#include "plugin/abi/net_v7.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#if FAKE_NET_VERSION == 11 || FAKE_NET_VERSION == 8 || FAKE_NET_VERSION == 7 || FAKE_NET_VERSION == 6
namespace {

void Log(const char* what) {
  const char* path = std::getenv("FAKE_NET_LOG");
  if (path == nullptr) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", what);
    std::fclose(f);
  }
}

int EnvInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

ncclResult_t InitCommon(ncclDebugLogger_t logger) {
  Log("init");
  if (!EnvInt("FAKE_NET_INIT_FAIL", 0)) return ncclSuccess;
  if (logger != nullptr) logger(NCCL_LOG_WARN, 0, __FILE__, __LINE__, "fake: init refused (FAKE_NET_INIT_FAIL=%d)", 1);
  return ncclSystemError;
}

ncclResult_t Devices(int* ndev) {
  Log("devices");
  *ndev = EnvInt("FAKE_NET_NDEV", 2);
  return ncclSuccess;
}

char gName[] = "fake0";

template <typename P>
void FillCommon(int dev, P* p) {
  std::memset(p, 0, sizeof(*p));
  p->name = gName;
  p->pciPath = nullptr;
  p->guid = std::uint64_t(dev);
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 12345;
  p->port = 1;
  p->maxComms = 1024;
  p->maxRecvs = 1;
  if constexpr (requires { p->netDeviceType; }) p->netDeviceType = ncclNetDeviceType(EnvInt("FAKE_NET_DEVTYPE", 0));
}

template <typename P>
void FillV9(int dev, P* p) {
  FillCommon(dev, p);
  p->forceFlush = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = std::size_t{1} << 30;
  p->maxCollBytes = std::size_t{1} << 29;
}

// ---- the in-process data path --------------------------------------------------------------

constexpr std::uint64_t kHandleMagic = 0x46414b454e455431ull;  // "FAKENET1"

struct Request {
  bool done = false;
  bool recv = false;
  std::size_t size = 0;  ///< bytes moved (receives: what arrived)
};

struct PendingRecv {
  Request* req;
  void* data;
  std::size_t capacity;
};

struct PendingSend {
  Request* req;
  const void* data;
  std::size_t size;
};

/// One connection: what the sender queued and what the receiver posted, matched in order.
struct Pipe {
  std::deque<PendingRecv> recvs;
  std::deque<PendingSend> sends;
  bool failed = false;  ///< a send larger than the posted buffer
  void Match() {
    while (!recvs.empty() && !sends.empty()) {
      PendingRecv r = recvs.front();
      PendingSend s = sends.front();
      recvs.pop_front();
      sends.pop_front();
      if (s.size > r.capacity) {
        failed = true;
        return;
      }
      if (s.size > 0) std::memcpy(r.data, s.data, s.size);
      r.req->size = s.size;
      r.req->done = true;
      s.req->size = s.size;
      s.req->done = true;
    }
  }
};

struct ListenComm {
  std::deque<Pipe*> pending;  ///< connected, not yet accepted
};
struct SendComm {
  Pipe* pipe;
};
struct RecvComm {
  Pipe* pipe;
};

int gMr;  // every registration is this one token

ncclResult_t ListenCore(void* handle, void** listenComm) {
  auto* l = new ListenComm();
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &kHandleMagic, sizeof kHandleMagic);
  std::memcpy(static_cast<char*>(handle) + 8, &l, sizeof l);
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t ConnectCore(void* handle, void** sendComm) {
  std::uint64_t magic = 0;
  std::memcpy(&magic, handle, sizeof magic);
  if (magic != kHandleMagic) return ncclInternalError;  // a handle from another process: not supported
  ListenComm* l = nullptr;
  std::memcpy(&l, static_cast<char*>(handle) + 8, sizeof l);
  auto* pipe = new Pipe();
  l->pending.push_back(pipe);
  *sendComm = new SendComm{pipe};
  return ncclSuccess;
}

ncclResult_t AcceptCore(void* listenComm, void** recvComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  *recvComm = nullptr;
  if (l->pending.empty()) return ncclSuccess;  // not yet: NCCL calls again
  *recvComm = new RecvComm{l->pending.front()};
  l->pending.pop_front();
  return ncclSuccess;
}

ncclResult_t RegMrCore(void** mhandle) {
  *mhandle = &gMr;
  return ncclSuccess;
}

ncclResult_t IsendCore(void* sendComm, void* data, std::size_t size, void** request) {
  Pipe* p = static_cast<SendComm*>(sendComm)->pipe;
  auto* r = new Request();
  p->sends.push_back({r, data, size});
  p->Match();
  *request = r;
  return p->failed ? ncclInternalError : ncclSuccess;
}

ncclResult_t IrecvCore(void* recvComm, int n, void** data, std::size_t capacity, void** request) {
  if (n != 1) return ncclInternalError;
  Pipe* p = static_cast<RecvComm*>(recvComm)->pipe;
  auto* r = new Request();
  r->recv = true;
  p->recvs.push_back({r, data[0], capacity});
  p->Match();
  *request = r;
  return p->failed ? ncclInternalError : ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  *done = r->done ? 1 : 0;
  if (!r->done) return ncclSuccess;
  const bool skipSizes = r->recv && EnvInt("FAKE_NET_NO_SIZES", 0) != 0;
  if (sizes != nullptr && !skipSizes) sizes[0] = int(r->size);
  delete r;
  return ncclSuccess;
}

ncclResult_t CloseSend(void* c) {
  delete static_cast<SendComm*>(c);  // the pipe belongs to the receiver
  return ncclSuccess;
}
ncclResult_t CloseRecv(void* c) {
  auto* rc = static_cast<RecvComm*>(c);
  delete rc->pipe;
  delete rc;
  return ncclSuccess;
}
ncclResult_t CloseListen(void* c) {
  delete static_cast<ListenComm*>(c);
  return ncclSuccess;
}

ncclResult_t Fail() { return ncclInternalError; }
ncclResult_t RegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return Fail(); }
ncclResult_t DeregMr(void*, void*) { return ncclSuccess; }
ncclResult_t Iflush(void*, int, void**, int*, void**, void**) { return Fail(); }
[[maybe_unused]] ncclResult_t Listen(int, void* handle, void** listenComm) { return ListenCore(handle, listenComm); }
[[maybe_unused]] ncclResult_t AcceptDev(void* l, void** r, ncclNetDeviceHandle_v11_t**) { return AcceptCore(l, r); }
[[maybe_unused]] ncclResult_t RegMrSizeT(void*, void*, size_t, int, void** mh) { return RegMrCore(mh); }
[[maybe_unused]] ncclResult_t RegMrInt(void*, void*, int, int, void** mh) { return RegMrCore(mh); }
[[maybe_unused]] ncclResult_t IsendInt(void* c, void* d, int size, int, void*, void** req) {
  return IsendCore(c, d, std::size_t(size), req);
}
[[maybe_unused]] ncclResult_t IrecvInt(void* c, int n, void** d, int* sizes, int*, void**, void** req) {
  return IrecvCore(c, n, d, std::size_t(sizes[0]), req);
}

}  // namespace
#endif

#if FAKE_NET_VERSION == 11
namespace {
ncclResult_t Init11(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t logger, ncclProfilerCallback_t) {
  static int token;
  *ctx = &token;
  return InitCommon(logger);
}
ncclResult_t Props11(int dev, ncclNetProperties_v11_t* p) {
  FillV9(dev, p);
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}
ncclResult_t Listen11(void*, int, void* handle, void** l) { return ListenCore(handle, l); }
ncclResult_t Connect11(void*, int, void* handle, void** s, ncclNetDeviceHandle_v11_t**) { return ConnectCore(handle, s); }
ncclResult_t Isend11(void* c, void* d, size_t size, int, void*, void*, void** req) { return IsendCore(c, d, size, req); }
ncclResult_t Irecv11(void* c, int n, void** d, size_t* sizes, int*, void**, void**, void** req) {
  return IrecvCore(c, n, d, sizes[0], req);
}
ncclResult_t Finalize11(void* ctx) {
  Log(ctx ? "finalize" : "finalize(NULL)");
  return ncclSuccess;
}
}  // namespace
FAKE_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    "Fake11", Init11, Devices, Props11, Listen11, Connect11, AcceptDev, RegMrSizeT, RegMrDmaBuf, DeregMr, Isend11,
    Irecv11, Iflush, Test, CloseSend, CloseRecv, CloseListen, nullptr, nullptr, nullptr, Finalize11, nullptr};
#elif FAKE_NET_VERSION == 8
namespace {
ncclResult_t Init8(ncclDebugLogger_t logger) { return InitCommon(logger); }
ncclResult_t Props8(int dev, ncclNetProperties_v8_t* p) {
  FillCommon(dev, p);
  return ncclSuccess;
}
ncclResult_t Connect8(int, void* handle, void** s, ncclNetDeviceHandle_v8_t**) { return ConnectCore(handle, s); }
}  // namespace
FAKE_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    "Fake8", Init8, Devices, Props8, Listen, Connect8, AcceptDev, RegMrSizeT, RegMrDmaBuf, DeregMr, IsendInt,
    IrecvInt, Iflush, Test, CloseSend, CloseRecv, CloseListen, nullptr, nullptr};
#elif FAKE_NET_VERSION == 7
namespace {
ncclResult_t Init7(ncclDebugLogger_t logger) { return InitCommon(logger); }
ncclResult_t Props7(int dev, ncclNetProperties_v7_t* p) {
  FillCommon(dev, p);
  return ncclSuccess;
}
ncclResult_t Connect7(int, void* handle, void** s, ncclNetDeviceHandle_v7_t**) { return ConnectCore(handle, s); }
}  // namespace
FAKE_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
    "Fake7", Init7, Devices, Props7, Listen, Connect7, AcceptDev, RegMrInt, RegMrDmaBuf, DeregMr, IsendInt,
    IrecvInt, Iflush, Test, CloseSend, CloseRecv, CloseListen, nullptr, nullptr};
#elif FAKE_NET_VERSION == 6
namespace {
ncclResult_t Init6(ncclDebugLogger_t logger) { return InitCommon(logger); }
ncclResult_t Props6(int dev, ncclNetProperties_v6_t* p) {
  FillCommon(dev, p);
  return ncclSuccess;
}
ncclResult_t Connect6(int, void* handle, void** s) { return ConnectCore(handle, s); }
ncclResult_t Accept6(void* l, void** r) { return AcceptCore(l, r); }
}  // namespace
FAKE_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
    "Fake6", Init6, Devices, Props6, Listen, Connect6, Accept6, RegMrInt, RegMrDmaBuf, DeregMr, IsendInt,
    IrecvInt, Iflush, Test, CloseSend, CloseRecv, CloseListen};
#elif FAKE_NET_VERSION == 5
// Only the symbol's presence matters: NCCL 2.28.9 no longer loads v5, nor does railyard-perf.
FAKE_EXPORT const char ncclNetPlugin_v5[64] = "Fake5";
#endif
