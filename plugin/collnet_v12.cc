// ncclCollNetPlugin_v12 (NCCL 2.30): straight onto plugin/collnet_core.h.
// Source: /work/shared/docs/nccl-2.30-abi.md §3 and §7 (exported beside
// ncclNetPlugin_v12 so NCCL never reads uninitialised railId/planeId).
#include "plugin/abi/collnet_v12.h"
#include "plugin/collnet_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {
namespace cn = ::railyard::plugin::collnet;
ncclResult_t MakeVDeviceV12(int* d, ncclNetVDeviceProps_v12_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  return cn::MakeVDevice(d, props->ndevs, props->devs);
}
}  // namespace

extern "C" {
/// The v12 CollNet table (NCCL 2.30.x).
RY_EXPORT extern const ncclCollNet_v12_t ncclCollNetPlugin_v12;
const ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    .name = cn::kCollNetName,
    .init = &cn::Init,
    .devices = &cn::Devices,
    .getProperties = &cn::GetPropertiesV12,
    .listen = &cn::Listen,
    .connect = &cn::Connect,
    .reduceSupport = &cn::ReduceSupport,
    .regMr = &cn::RegMr,
    .regMrDmaBuf = &cn::RegMrDmaBuf,
    .deregMr = &cn::DeregMr,
    .iallreduce = &cn::Iallreduce,
    .iallgather = &cn::Iallgather,
    .ireducescatter = &cn::Ireducescatter,
    .iflush = &cn::Iflush,
    .test = &cn::Test,
    .closeColl = &cn::CloseColl,
    .closeListen = &cn::CloseListen,
    .makeVDevice = &MakeVDeviceV12,
    .finalize = &cn::Finalize,
};
}  // extern "C"
