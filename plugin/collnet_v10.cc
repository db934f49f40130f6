// ncclCollNetPlugin_v10 and _v9 (NCCL 2.24-2.27): init(logger) and listen(dev, ...)
// with one process-wide context, no finalize; properties through the net adapters'
// v11 -> v10/v9 copies. Source: nccl-net-abi.md §3.1 "Version differences", §2.4.
#include "plugin/abi/collnet_v10.h"
#include "plugin/adapters.h"
#include "plugin/collnet_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {
namespace cn = ::railyard::plugin::collnet;
namespace ad = ::railyard::plugin::adapters;

ncclResult_t GetPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
  return ad::GetProperties(&cn::GetPropertiesV11, dev, props);
}
ncclResult_t GetPropertiesV9(int dev, ncclNetProperties_v9_t* props) {
  return ad::GetProperties(&cn::GetPropertiesV11, dev, props);
}
ncclResult_t Iallgather(void* comm, void* send, int nParts, ncclNetSGE_v10_t* parts, size_t bpr, size_t off,
                        size_t bytes, void* sendMh, void** request) {
  return cn::Iallgather(comm, send, nParts, reinterpret_cast<ncclNetSGE_v12_t*>(parts), bpr, off, bytes,
                        sendMh, request);
}
ncclResult_t Ireducescatter(void* comm, int nParts, ncclNetSGE_v10_t* parts, void* recv, size_t bpr,
                            size_t off, size_t bytes, ncclDataType_t t, ncclRedOp_t op, void* recvMh,
                            void** request) {
  return cn::Ireducescatter(comm, nParts, reinterpret_cast<ncclNetSGE_v12_t*>(parts), recv, bpr, off, bytes,
                            t, op, recvMh, request);
}
ncclResult_t MakeVDeviceV10(int* d, ncclNetVDeviceProps_v10_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  return cn::MakeVDevice(d, props->ndevs, props->devs);
}
ncclResult_t MakeVDeviceV9(int* d, ncclNetVDeviceProps_v9_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  return cn::MakeVDevice(d, props->ndevs, props->devs);
}
}  // namespace

extern "C" {
/// The v10 CollNet table (NCCL 2.26-2.27).
RY_EXPORT extern const ncclCollNet_v10_t ncclCollNetPlugin_v10;
/// The v9 CollNet table (NCCL 2.24-2.25).
RY_EXPORT extern const ncclCollNet_v9_t ncclCollNetPlugin_v9;

const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    .name = cn::kCollNetName,
    .init = &cn::InitLegacy,
    .devices = &cn::Devices,
    .getProperties = &GetPropertiesV10,
    .listen = &cn::ListenLegacy,
    .connect = &cn::Connect,
    .reduceSupport = &cn::ReduceSupport,
    .regMr = &cn::RegMr,
    .regMrDmaBuf = &cn::RegMrDmaBuf,
    .deregMr = &cn::DeregMr,
    .iallreduce = &cn::Iallreduce,
    .iallgather = &Iallgather,
    .ireducescatter = &Ireducescatter,
    .iflush = &cn::Iflush,
    .test = &cn::Test,
    .closeColl = &cn::CloseColl,
    .closeListen = &cn::CloseListen,
    .makeVDevice = &MakeVDeviceV10,
};

const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    .name = cn::kCollNetName,
    .init = &cn::InitLegacy,
    .devices = &cn::Devices,
    .getProperties = &GetPropertiesV9,
    .listen = &cn::ListenLegacy,
    .connect = &cn::Connect,
    .reduceSupport = &cn::ReduceSupport,
    .regMr = &cn::RegMr,
    .regMrDmaBuf = &cn::RegMrDmaBuf,
    .deregMr = &cn::DeregMr,
    .iallreduce = &cn::Iallreduce,
    .iallgather = &Iallgather,
    .ireducescatter = &Ireducescatter,
    .iflush = &cn::Iflush,
    .test = &cn::Test,
    .closeColl = &cn::CloseColl,
    .closeListen = &cn::CloseListen,
    .makeVDevice = &MakeVDeviceV9,
};
}  // extern "C"
