// ncclCollNetPlugin_v8 (NCCL 2.20-2.23): v9's shape without makeVDevice, an int
// iallreduce count, and SGEs with a uint32_t size (converted here; NCCL passes one
// part). Source: nccl-net-abi.md §3.1 "Version differences", §2.4.
#include <vector>

#include "plugin/abi/collnet_v8.h"
#include "plugin/adapters.h"
#include "plugin/collnet_core.h"

#define RY_EXPORT __attribute__((visibility("default")))

namespace {
namespace cn = ::railyard::plugin::collnet;
namespace ad = ::railyard::plugin::adapters;

constexpr int kMaxParts = 64;

ncclResult_t GetPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
  return ad::GetProperties(&cn::GetPropertiesV11, dev, props);
}
ncclResult_t IallreduceV8(void* comm, void* send, void* recv, int count, ncclDataType_t t, ncclRedOp_t op,
                          void* sendMh, void* recvMh, void** request) {
  if (count < 0) {
    if (request) *request = nullptr;
    return ncclInvalidArgument;
  }
  return cn::Iallreduce(comm, send, recv, static_cast<size_t>(count), t, op, sendMh, recvMh, request);
}
/// Widens up to kMaxParts v8 SGEs; false (ncclInvalidArgument) for more or a NULL list.
bool Widen(int n, const ncclNetSGE_v8_t* in, ncclNetSGE_v12_t* out) {
  if (n < 1 || n > kMaxParts || in == nullptr) return false;
  for (int i = 0; i < n; ++i) out[i] = {in[i].mhandle, in[i].address, in[i].size};
  return true;
}
ncclResult_t IallgatherV8(void* comm, void* send, int nParts, ncclNetSGE_v8_t* parts, size_t bpr, size_t off,
                          size_t bytes, void* sendMh, void** request) {
  ncclNetSGE_v12_t wide[kMaxParts];
  if (!Widen(nParts, parts, wide)) {
    if (request) *request = nullptr;
    return ncclInvalidArgument;
  }
  return cn::Iallgather(comm, send, nParts, wide, bpr, off, bytes, sendMh, request);
}
ncclResult_t IreducescatterV8(void* comm, int nParts, ncclNetSGE_v8_t* parts, void* recv, size_t bpr,
                              size_t off, size_t bytes, ncclDataType_t t, ncclRedOp_t op, void* recvMh,
                              void** request) {
  ncclNetSGE_v12_t wide[kMaxParts];
  if (!Widen(nParts, parts, wide)) {
    if (request) *request = nullptr;
    return ncclInvalidArgument;
  }
  return cn::Ireducescatter(comm, nParts, wide, recv, bpr, off, bytes, t, op, recvMh, request);
}
}  // namespace

extern "C" {
/// The v8 CollNet table (NCCL 2.20-2.23).
RY_EXPORT extern const ncclCollNet_v8_t ncclCollNetPlugin_v8;
const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    .name = cn::kCollNetName,
    .init = &cn::InitLegacy,
    .devices = &cn::Devices,
    .getProperties = &GetPropertiesV8,
    .listen = &cn::ListenLegacy,
    .connect = &cn::Connect,
    .reduceSupport = &cn::ReduceSupport,
    .regMr = &cn::RegMr,
    .regMrDmaBuf = &cn::RegMrDmaBuf,
    .deregMr = &cn::DeregMr,
    .iallreduce = &IallreduceV8,
    .iallgather = &IallgatherV8,
    .ireducescatter = &IreducescatterV8,
    .iflush = &cn::Iflush,
    .test = &cn::Test,
    .closeColl = &cn::CloseColl,
    .closeListen = &cn::CloseListen,
};
}  // extern "C"
