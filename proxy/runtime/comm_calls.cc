// The data path below the ABI edge: one comm's isend, irecv or iflush, handed to the
// comms written once over the fabric (which take MemHandles) or to the older comms
// (which take the MemHandle's MrCache registration).
#include "proxy/nccl/fabric_recv_comm.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/runtime/net_runtime.h"
#include "proxy/wire.h"

namespace railyard::runtime {

namespace {

using proxy::nccl::MemHandle;

/// The MrCache registration of an mhandle (for the older comms), NULL if none.
proxy::MemoryRegion* Legacy(void* mhandle) {
  MemHandle* h = MemHandle::From(mhandle);
  return h != nullptr ? h->legacy : nullptr;
}

}  // namespace

Status IsendOn(proxy::SendComm* comm, void* data, size_t size, int tag, void* mhandle, proxy::Request** request) {
  if (auto* f = dynamic_cast<proxy::nccl::FabricSendComm*>(comm)) {
    return f->IsendFabric(data, size, tag, MemHandle::From(mhandle), request);
  }
  return comm->Isend(data, size, tag, Legacy(mhandle), request);
}

Status IrecvOn(proxy::RecvComm* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               proxy::Request** request) {
  if (auto* f = dynamic_cast<proxy::nccl::FabricRecvComm*>(comm)) {
    return f->IrecvFabric(n, data, sizes, tags, reinterpret_cast<MemHandle* const*>(mhandles), request);
  }
  proxy::MemoryRegion* legacy[proxy::kMaxRecvs] = {};
  for (int i = 0; i < n && i < proxy::kMaxRecvs && mhandles != nullptr; ++i) legacy[i] = Legacy(mhandles[i]);
  return comm->Irecv(n, data, sizes, tags, mhandles != nullptr ? legacy : nullptr, request);
}

Status IflushOn(proxy::RecvComm* comm, int n, void** data, int* sizes, void** mhandles, proxy::Request** request) {
  if (auto* f = dynamic_cast<proxy::nccl::FabricRecvComm*>(comm)) {
    // The fabric comms: a READ of device memory through the device's loopback Endpoint.
    return f->IflushFabric(n, data, sizes, reinterpret_cast<MemHandle* const*>(mhandles), request);
  }
  proxy::MemoryRegion* legacy[proxy::kMaxRecvs] = {};
  for (int i = 0; i < n && i < proxy::kMaxRecvs && mhandles != nullptr; ++i) legacy[i] = Legacy(mhandles[i]);
  return comm->Iflush(n, data, sizes, mhandles != nullptr ? legacy : nullptr, request);
}

}  // namespace railyard::runtime
