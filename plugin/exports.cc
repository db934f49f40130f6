// The symbols NCCL looks up in libnccl-net-railyard.so: ncclNetPlugin_v11,
// _v10, _v9 and _v8 (tried newest first; NCCL 2.28.9 uses v11), plus
// railyard_version. ncclNetPlugin_v12, ncclGinPlugin_v11 and ncclRmaPlugin_v14 /
// _v13 are in plugin/net_v12.cc, gin_v11.cc, rma_v14.cc and rma_v13.cc. Each
// table is a thin adapter onto railyard::plugin (plugin/net.h); the version
// conversions live in plugin/adapters.{h,cc}.
//
// Source: /work/shared/docs/nccl-net-abi.md §1.3, §2.2-§2.8, §7.1-§7.9 (NCCL 2.28.9).
// getDeviceMr and irecvConsumed are NULL in every table: Railyard is a host
// plugin (netDeviceType HOST), and a non-NULL irecvConsumed would be called
// with stale request pointers (§2.5, §7.9).
#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"
#include "plugin/adapters.h"
#include "plugin/net.h"
#include "railyard/railyard.h"

#ifndef RAILYARD_VERSION
#error "RAILYARD_VERSION must be defined by the build (plugin/CMakeLists.txt)"
#endif

#define RY_EXPORT __attribute__((visibility("default")))

namespace {

namespace ry = ::railyard::plugin;
namespace ad = ::railyard::plugin::adapters;

// ---------------- v11: straight onto railyard::plugin ----------------

// v11 connect/accept carry a devComm out-parameter that a host plugin ignores:
// NCCL's pointer stays NULL (§2.5).
ncclResult_t ConnectV11(void* ctx, int dev, void* handle, void** sendComm,
                        ncclNetDeviceHandle_v11_t** /*sendDevComm*/) {
  return ry::Connect(ctx, dev, handle, sendComm);
}
ncclResult_t AcceptV11(void* listenComm, void** recvComm,
                       ncclNetDeviceHandle_v11_t** /*recvDevComm*/) {
  return ry::Accept(listenComm, recvComm);
}

// ---------------- v10/v9/v8: one process-wide ctx ----------------

// Created by the first older-version init through ry::Init (commId 0, config
// NULL) and used by every older listen/connect. See adapters::LegacyContext.
ad::LegacyContext g_legacy;

ncclResult_t InitV10(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction) {
  return g_legacy.Init(&ry::Init, &ry::Finalize, logFunction, profFunction);
}
ncclResult_t InitV9(ncclDebugLogger_t logFunction) {
  return g_legacy.Init(&ry::Init, &ry::Finalize, logFunction, nullptr);
}
ncclResult_t ListenLegacy(int dev, void* handle, void** listenComm) {
  return ry::Listen(g_legacy.ctx(), dev, handle, listenComm);
}
// v10 passes a per-connect config carrying the traffic class. It is ignored:
// the TCP transport has no traffic class yet, and the legacy ctx is shared by
// all communicators. When a transport honours it, build a per-config ctx here.
ncclResult_t ConnectV10(int dev, ncclNetCommConfig_v10_t* /*config*/, void* handle,
                        void** sendComm, ncclNetDeviceHandle_v10_t** /*sendDevComm*/) {
  return ry::Connect(g_legacy.ctx(), dev, handle, sendComm);
}
ncclResult_t ConnectV9(int dev, void* handle, void** sendComm,
                       ncclNetDeviceHandle_v9_t** /*sendDevComm*/) {
  return ry::Connect(g_legacy.ctx(), dev, handle, sendComm);
}
// ncclNetDeviceHandle_v8_t..v10_t are one typedef chain, so this serves v8-v10.
ncclResult_t AcceptLegacy(void* listenComm, void** recvComm,
                          ncclNetDeviceHandle_v10_t** /*recvDevComm*/) {
  return ry::Accept(listenComm, recvComm);
}

ncclResult_t GetPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  return ad::GetProperties(&ry::GetProperties, dev, props);
}
ncclResult_t GetPropertiesV9(int dev, ncclNetProperties_v9_t* props) {
  return ad::GetProperties(&ry::GetProperties, dev, props);
}
ncclResult_t GetPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
  return ad::GetProperties(&ry::GetProperties, dev, props);
}

ncclResult_t MakeVDeviceV10(int* d, ncclNetVDeviceProps_v10_t* props) {
  return ad::MakeVDevice(&ry::MakeVDevice, d, props);
}
ncclResult_t MakeVDeviceV9(int* d, ncclNetVDeviceProps_v9_t* props) {
  return ad::MakeVDevice(&ry::MakeVDevice, d, props);
}

// v9 has no profiler handles: pass NULL.
ncclResult_t IsendV9(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                     void** request) {
  return ry::Isend(sendComm, data, size, tag, mhandle, /*phandle=*/nullptr, request);
}
ncclResult_t IrecvV9(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                     void** mhandles, void** request) {
  return ry::Irecv(recvComm, n, data, sizes, tags, mhandles, /*phandles=*/nullptr, request);
}

// v8 sizes are int.
ncclResult_t IsendV8(void* sendComm, void* data, int size, int tag, void* mhandle,
                     void** request) {
  return ad::IsendV8(&ry::Isend, sendComm, data, size, tag, mhandle, request);
}
ncclResult_t IrecvV8(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                     void** request) {
  return ad::IrecvV8(&ry::Irecv, recvComm, n, data, sizes, tags, mhandles, request);
}

}  // namespace

extern "C" {

/// The v11 net table (NCCL 2.28.x). NCCL 2.28.9 picks this one.
RY_EXPORT extern const ncclNet_v11_t ncclNetPlugin_v11;
/// The v10 net table (NCCL 2.26-2.27).
RY_EXPORT extern const ncclNet_v10_t ncclNetPlugin_v10;
/// The v9 net table (NCCL 2.24-2.25).
RY_EXPORT extern const ncclNet_v9_t ncclNetPlugin_v9;
/// The v8 net table (NCCL 2.20-2.23).
RY_EXPORT extern const ncclNet_v8_t ncclNetPlugin_v8;

const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = ry::kPluginName,
    .init = &ry::Init,
    .devices = &ry::Devices,
    .getProperties = &ry::GetProperties,
    .listen = &ry::Listen,
    .connect = &ConnectV11,
    .accept = &AcceptV11,
    .regMr = &ry::RegMr,
    .regMrDmaBuf = &ry::RegMrDmaBuf,
    .deregMr = &ry::DeregMr,
    .isend = &ry::Isend,
    .irecv = &ry::Irecv,
    .iflush = &ry::Iflush,
    .test = &ry::Test,
    .closeSend = &ry::CloseSend,
    .closeRecv = &ry::CloseRecv,
    .closeListen = &ry::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = &ry::MakeVDevice,
    .finalize = &ry::Finalize,
    .setNetAttr = &ry::SetNetAttr,
};

const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = ry::kPluginName,
    .init = &InitV10,
    .devices = &ry::Devices,
    .getProperties = &GetPropertiesV10,
    .listen = &ListenLegacy,
    .connect = &ConnectV10,
    .accept = &AcceptLegacy,
    .regMr = &ry::RegMr,
    .regMrDmaBuf = &ry::RegMrDmaBuf,
    .deregMr = &ry::DeregMr,
    .isend = &ry::Isend,
    .irecv = &ry::Irecv,
    .iflush = &ry::Iflush,
    .test = &ry::Test,
    .closeSend = &ry::CloseSend,
    .closeRecv = &ry::CloseRecv,
    .closeListen = &ry::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = &MakeVDeviceV10,
};

const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = ry::kPluginName,
    .init = &InitV9,
    .devices = &ry::Devices,
    .getProperties = &GetPropertiesV9,
    .listen = &ListenLegacy,
    .connect = &ConnectV9,
    .accept = &AcceptLegacy,
    .regMr = &ry::RegMr,
    .regMrDmaBuf = &ry::RegMrDmaBuf,
    .deregMr = &ry::DeregMr,
    .isend = &IsendV9,
    .irecv = &IrecvV9,
    .iflush = &ry::Iflush,
    .test = &ry::Test,
    .closeSend = &ry::CloseSend,
    .closeRecv = &ry::CloseRecv,
    .closeListen = &ry::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = &MakeVDeviceV9,
};

const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = ry::kPluginName,
    .init = &InitV9,  // same signature: init(logger)
    .devices = &ry::Devices,
    .getProperties = &GetPropertiesV8,
    .listen = &ListenLegacy,
    .connect = &ConnectV9,  // same signature (device handle typedef chain)
    .accept = &AcceptLegacy,
    .regMr = &ry::RegMr,
    .regMrDmaBuf = &ry::RegMrDmaBuf,
    .deregMr = &ry::DeregMr,
    .isend = &IsendV8,
    .irecv = &IrecvV8,
    .iflush = &ry::Iflush,
    .test = &ry::Test,
    .closeSend = &ry::CloseSend,
    .closeRecv = &ry::CloseRecv,
    .closeListen = &ry::CloseListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
};

const char* railyard_version(void) { return RAILYARD_VERSION; }

}  // extern "C"
