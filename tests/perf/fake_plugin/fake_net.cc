// A fake NCCL net plugin for railyard-perf's loader tests: exports one table
// (version chosen by FAKE_NET_VERSION at compile time; 7 exports a symbol that
// railyard-perf must report as unsupported, 0 exports nothing) with working
// init/devices/getProperties/finalize. Everything else fails with
// ncclInternalError: it moves no data.
//
// Run-time knobs (environment):
//   FAKE_NET_INIT_FAIL=1   init returns ncclSystemError
//   FAKE_NET_NDEV=<n>      devices() reports n (default 2)
//   FAKE_NET_DEVTYPE=<t>   getProperties reports netDeviceType t (default 0 = HOST)
//   FAKE_NET_LOG=<file>    append one line per init/finalize/devices call
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#if FAKE_NET_VERSION == 11 || FAKE_NET_VERSION == 8
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

ncclResult_t InitCommon() {
  Log("init");
  return EnvInt("FAKE_NET_INIT_FAIL", 0) ? ncclSystemError : ncclSuccess;
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
  p->netDeviceType = ncclNetDeviceType(EnvInt("FAKE_NET_DEVTYPE", 0));
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

// Stubs for the data path: this fake moves no data.
ncclResult_t Fail() { return ncclInternalError; }
ncclResult_t RegMr(void*, void*, size_t, int, void**) { return Fail(); }
ncclResult_t RegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return Fail(); }
ncclResult_t DeregMr(void*, void*) { return Fail(); }
ncclResult_t Iflush(void*, int, void**, int*, void**, void**) { return Fail(); }
ncclResult_t Test(void*, int*, int*) { return Fail(); }
ncclResult_t Close(void*) { return Fail(); }
ncclResult_t Accept(void*, void**, ncclNetDeviceHandle_v11_t**) { return Fail(); }
[[maybe_unused]] ncclResult_t Listen(int, void*, void**) { return Fail(); }

}  // namespace
#endif

#if FAKE_NET_VERSION == 11
namespace {
ncclResult_t Init11(void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t, ncclProfilerCallback_t) {
  static int token;
  *ctx = &token;
  return InitCommon();
}
ncclResult_t Props11(int dev, ncclNetProperties_v11_t* p) {
  FillV9(dev, p);
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}
ncclResult_t Listen11(void*, int, void*, void**) { return Fail(); }
ncclResult_t Connect11(void*, int, void*, void**, ncclNetDeviceHandle_v11_t**) { return Fail(); }
ncclResult_t Isend11(void*, void*, size_t, int, void*, void*, void**) { return Fail(); }
ncclResult_t Irecv11(void*, int, void**, size_t*, int*, void**, void**, void**) { return Fail(); }
ncclResult_t Finalize11(void* ctx) {
  Log(ctx ? "finalize" : "finalize(NULL)");
  return ncclSuccess;
}
}  // namespace
FAKE_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    "Fake11", Init11, Devices, Props11, Listen11, Connect11, Accept, RegMr, RegMrDmaBuf, DeregMr, Isend11, Irecv11,
    Iflush, Test, Close, Close, Close, nullptr, nullptr, nullptr, Finalize11, nullptr};
#elif FAKE_NET_VERSION == 8
namespace {
ncclResult_t Init8(ncclDebugLogger_t) { return InitCommon(); }
ncclResult_t Props8(int dev, ncclNetProperties_v8_t* p) {
  FillCommon(dev, p);
  return ncclSuccess;
}
ncclResult_t Connect8(int, void*, void**, ncclNetDeviceHandle_v8_t**) { return Fail(); }
ncclResult_t Isend8(void*, void*, int, int, void*, void**) { return Fail(); }
ncclResult_t Irecv8(void*, int, void**, int*, int*, void**, void**) { return Fail(); }
}  // namespace
FAKE_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    "Fake8", Init8, Devices, Props8, Listen, Connect8, Accept, RegMr, RegMrDmaBuf, DeregMr, Isend8, Irecv8,
    Iflush, Test, Close, Close, Close, nullptr, nullptr};
#elif FAKE_NET_VERSION == 7
// Only the symbol's presence matters: railyard-perf must call it unsupported.
FAKE_EXPORT const char ncclNetPlugin_v7[64] = "Fake7";
#endif
