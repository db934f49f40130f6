// ncclNetPlugin_v12: NCCL 2.30's net table (same slots as v11, 128-byte properties
// with railId/planeId, vProps of 8). A thin adapter onto railyard::plugin
// (plugin/net.h) through plugin/net_v12_adapters.h. Source: nccl-2.30-abi.md §2.
#include "plugin/abi/net_v12.h"
#include "plugin/net.h"
#include "plugin/net_v12_adapters.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {

namespace ry = ::railyard::plugin;
namespace ad = ::railyard::plugin::adapters;

ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
  return ad::GetPropertiesV12(&ry::GetProperties, dev, props);
}
// A host plugin leaves the device comm alone (NCCL's pointer stays NULL).
ncclResult_t ConnectV12(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** /*devComm*/) {
  return ry::Connect(ctx, dev, handle, sendComm);
}
ncclResult_t AcceptV12(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** /*devComm*/) {
  return ry::Accept(listenComm, recvComm);
}
ncclResult_t MakeVDeviceV12(int* d, ncclNetVDeviceProps_v12_t* props) {
  return ad::MakeVDeviceV12(&ry::MakeVDevice, d, props);
}

}  // namespace

extern "C" {

/// The v12 net table (NCCL 2.30.x picks this one).
RY_EXPORT extern const ncclNet_v12_t ncclNetPlugin_v12;

const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = ry::kPluginName,
    .init = &ry::Init,  // ncclNetCommConfig_v12_t is ncclNetCommConfig_v11_t
    .devices = &ry::Devices,
    .getProperties = &GetPropertiesV12,
    .listen = &ry::Listen,
    .connect = &ConnectV12,
    .accept = &AcceptV12,
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
    .makeVDevice = &MakeVDeviceV12,
    .finalize = &ry::Finalize,
    .setNetAttr = &ry::SetNetAttr,  // ncclNetAttr_v12_t is ncclNetAttr_v11_t
};

}  // extern "C"
