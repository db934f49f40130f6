// Memory registrations of the process's NetRuntime: every NCCL buffer is one MrCache
// entry (the older comms' registration, and RecvTable's software checks) wrapped in
// a MemHandle that also holds its Region in every fabric device's RegistrationCache
// (proxy/runtime/fabric_runtime.h), so the fabric comms, the tiers and GIN/RMA reuse
// one registration per range.
#include <algorithm>
#include <memory>
#include <string>

#include "proxy/mr_cache.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/runtime/net_state.h"

namespace railyard::runtime {

namespace {

using proxy::MemoryRegion;

/// Access of an NCCL buffer's fabric Region: the peer's data Writes land in it; device
/// memory is also read by this host's own HCA (the iflush READ through the loopback
/// Endpoint, FabricRecvComm::IflushFabric).
uint32_t FabricAccessOf(fabric::MemoryKind kind) {
  uint32_t a = fabric::kAccessLocal | fabric::kAccessRemoteWrite;
  if (kind == fabric::MemoryKind::kDevice) a |= fabric::kAccessRemoteRead;
  return a;
}

/// A MemHandle over the MrCache entry `legacy` with `ndev` device slots, the first
/// `acquire` of them filled by `acquireOn(i, &region)` (a RegistrationCache acquire on
/// device i), each region's key packed; *mhandle the handle. On an acquire's error
/// the regions already acquired are released, `legacy` is deregistered and that
/// error returned (nothing stays registered).
template <typename AcquireFn>
Status HandleOverDevices(NetState& g, MemoryRegion* legacy, size_t acquire, size_t ndev, void** mhandle,
                         AcquireFn&& acquireOn) {
  auto h = std::make_unique<proxy::nccl::MemHandle>();
  h->legacy = legacy;
  h->devices.resize(ndev);
  for (size_t i = 0; i < acquire; ++i) {
    Status s = acquireOn(i, &h->devices[i].region);
    if (!s.ok()) {
      for (size_t j = 0; j < i; ++j) (void)g.fabric->registrations(j).Release(h->devices[j].region);
      (void)proxy::GlobalMrCache().Deregister(legacy);
      return s;
    }
    h->devices[i].packedKey = h->devices[i].region->Key().Pack();
  }
  *mhandle = h.release();
  return Status::Ok();
}

/// Wraps a MrCache registration into a MemHandle, registering [data, data + size)
/// (at least 1 byte, memory of `kind`) in every fabric Domain too. Deregisters
/// everything on error.
Status MakeHandle(NetState& g, MemoryRegion* legacy, void* data, size_t size, void** mhandle,
                  fabric::MemoryKind kind = fabric::MemoryKind::kHost) {
  const size_t ndev = g.fabric != nullptr ? g.fabric->devices() : 0;
  return HandleOverDevices(g, legacy, data != nullptr ? ndev : 0, ndev, mhandle,
                           [&](size_t i, const fabric::Region** region) {
                             return g.fabric->registrations(i).Acquire(data, std::max<size_t>(size, 1),
                                                                       FabricAccessOf(kind), kind, region);
                           });
}

/// regMrDmaBuf of a real DMA-BUF (fd >= 0) in verbs mode over the fabric comms: the
/// buffer registered through every device's RegistrationCache (AcquireDmaBuf:
/// ibv_reg_dmabuf_mr on each port), plus a software MrCache entry for RecvTable's
/// checks. `type` kPtrCuda is device memory, kPtrHost host memory (a udmabuf).
/// InvalidArgument for a NULL address or 0 bytes; InvalidUsage when a device's ports
/// cannot register DMA-BUFs; nothing stays registered on error.
Status RegDmaBufVerbsFabric(NetState& g, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle) {
  if (data == nullptr || size == 0) {
    return InvalidArgument("regMrDmaBuf of fd " + std::to_string(fd) + " with " +
                           (data == nullptr ? "a NULL address" : "0 bytes"));
  }
  if (type != kPtrHost && type != kPtrCuda) {
    return InvalidArgument("regMrDmaBuf of pointer type " + std::to_string(type) + " (NCCL_PTR_HOST or NCCL_PTR_CUDA)");
  }
  const fabric::MemoryKind kind = type == kPtrCuda ? fabric::MemoryKind::kDevice : fabric::MemoryKind::kHost;
  MemoryRegion* legacy = nullptr;
  RY_RETURN_IF_ERROR(proxy::GlobalMrCache().Register(data, size, type, &legacy));
  const size_t ndev = g.fabric->devices();
  return HandleOverDevices(g, legacy, ndev, ndev, mhandle, [&](size_t i, const fabric::Region** region) {
    return g.fabric->registrations(i).AcquireDmaBuf(data, size, fd, offset, FabricAccessOf(kind), kind, region);
  });
}

}  // namespace

Status NetRuntime::RegisterMemory(void* data, size_t size, int type, fabric::MemoryKind kind, void** mhandle) {
  MemoryRegion* r = nullptr;
  RY_RETURN_IF_ERROR(proxy::GlobalMrCache().Register(data, size, type, &r));
  return MakeHandle(g_, r, data, size, mhandle, kind);
}

Status NetRuntime::RegisterDmaBuf(proxy::Comm* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                  void** mhandle) {
  NetState& g = g_;
  if (g.ib == nullptr) {
    return InvalidUsage("regMrDmaBuf of a DMA-BUF (fd " + std::to_string(fd) + ", pointer type " +
                        std::to_string(type) + "): this process runs the TCP transport, which cannot read "
                        "device memory (ptrSupport is NCCL_PTR_HOST); use RAILYARD_TRANSPORT=verbs on "
                        "hosts with RDMA ports");
  }
  if (g.verbsMode && g.fabricComms) return RegDmaBufVerbsFabric(g, data, size, type, offset, fd, mhandle);
  if (dynamic_cast<proxy::verbs::VerbsSendComm*>(comm) == nullptr &&
      dynamic_cast<proxy::verbs::VerbsRecvComm*>(comm) == nullptr) {
    return InvalidUsage("regMrDmaBuf of a DMA-BUF (fd " + std::to_string(fd) + ") on a comm whose route goes "
                        "over TCP (a relayed peer in fabric mode), which cannot read device memory; only "
                        "comms to cabled peers over RDMA take DMA-BUFs");
  }
  MemoryRegion* r = nullptr;
  RY_RETURN_IF_ERROR(proxy::GlobalMrCache().RegisterDmaBuf(data, size, type, fd, offset, &r));
  return MakeHandle(g, r, nullptr, size, mhandle);  // device memory: no TCP fabric Region
}

Status NetRuntime::Deregister(void* mhandle) {
  proxy::nccl::MemHandle* h = proxy::nccl::MemHandle::From(mhandle);
  if (h == nullptr) return InvalidArgument("deregMr of a handle regMr did not return");
  NetState& g = g_;
  // A double deregMr fails here: the handle is not touched further.
  RY_RETURN_IF_ERROR(proxy::GlobalMrCache().Deregister(h->legacy));
  for (size_t i = 0; i < h->devices.size(); ++i) {
    if (h->devices[i].region != nullptr) (void)g.fabric->registrations(i).Release(h->devices[i].region);
  }
  h->magic = 0;
  delete h;
  return Status::Ok();
}

}  // namespace railyard::runtime
