// ncclCollNetPlugin_v11 (NCCL 2.28): the v12 implementation with the v11 properties
// and SGE (same 24-byte layout as v12's). Source: nccl-net-abi.md §3.1.
#include <type_traits>

#include "plugin/abi/collnet_v11.h"
#include "plugin/collnet_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {
namespace cn = ::railyard::plugin::collnet;
static_assert(sizeof(ncclNetSGE_v11_t) == sizeof(ncclNetSGE_v12_t) &&
              offsetof(ncclNetSGE_v11_t, size) == offsetof(ncclNetSGE_v12_t, size));

ncclResult_t IallgatherV11(void* comm, void* send, int nParts, ncclNetSGE_v11_t* parts, size_t bpr,
                           size_t off, size_t bytes, void* sendMh, void** request) {
  return cn::Iallgather(comm, send, nParts, reinterpret_cast<ncclNetSGE_v12_t*>(parts), bpr, off, bytes,
                        sendMh, request);
}
ncclResult_t IreducescatterV11(void* comm, int nParts, ncclNetSGE_v11_t* parts, void* recv, size_t bpr,
                               size_t off, size_t bytes, ncclDataType_t t, ncclRedOp_t op, void* recvMh,
                               void** request) {
  return cn::Ireducescatter(comm, nParts, reinterpret_cast<ncclNetSGE_v12_t*>(parts), recv, bpr, off, bytes,
                            t, op, recvMh, request);
}
ncclResult_t MakeVDeviceV11(int* d, ncclNetVDeviceProps_v11_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  return cn::MakeVDevice(d, props->ndevs, props->devs);
}
}  // namespace

extern "C" {
/// The v11 CollNet table (NCCL 2.28.x).
RY_EXPORT extern const ncclCollNet_v11_t ncclCollNetPlugin_v11;
const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = cn::kCollNetName,
    .init = &cn::Init,
    .devices = &cn::Devices,
    .getProperties = &cn::GetPropertiesV11,
    .listen = &cn::Listen,
    .connect = &cn::Connect,
    .reduceSupport = &cn::ReduceSupport,
    .regMr = &cn::RegMr,
    .regMrDmaBuf = &cn::RegMrDmaBuf,
    .deregMr = &cn::DeregMr,
    .iallreduce = &cn::Iallreduce,
    .iallgather = &IallgatherV11,
    .ireducescatter = &IreducescatterV11,
    .iflush = &cn::Iflush,
    .test = &cn::Test,
    .closeColl = &cn::CloseColl,
    .closeListen = &cn::CloseListen,
    .makeVDevice = &MakeVDeviceV11,
    .finalize = &cn::Finalize,
};
}  // extern "C"
