// Domain: the rails of this process and the registrations that cover all of them
// (cf. UCX's uct_md). Workers are created from it; every Region of a Domain can be
// used by every Worker and Endpoint of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/access.h"
#include "proxy/fabric/capabilities.h"
#include "proxy/fabric/region.h"
#include "proxy/fabric/worker.h"

namespace railyard::fabric {

/// One rail of the Domain: a local port the transport sends on.
struct RailInfo {
  std::string device;     ///< interface or HCA name, as errors name it ("lo", "mlx5_0")
  std::string address;    ///< IPv4 address the rail's sockets bind (TCP)
  uint32_t speedMbps = 0; ///< link speed, weights the striping
};

/// Rails plus registrations. Register/Deregister are thread-safe; Workers may serve
/// remote accesses on other threads meanwhile.
class Domain {
 public:
  virtual ~Domain() = default;

  /// "tcp", "verbs", ...
  virtual const char* TransportName() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  virtual const std::vector<RailInfo>& rails() const = 0;

  /// Registers [addr, addr + bytes) on every rail with `access` (Access flags).
  /// InvalidArgument for NULL, 0 bytes, a wrapping range or bad access bits;
  /// InvalidUsage for device memory when the transport lacks kCapDeviceMemory.
  /// The Region stays valid until Deregister.
  virtual Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind,
                          const Region** out) = 0;
  /// Removes a registration. Once this returns, no byte lands in it or leaves it
  /// (operations using it at the target fail with DEREGISTERED); the memory may be
  /// freed. InvalidArgument for a region that is not registered here.
  virtual Status Deregister(const Region* region) = 0;
  /// Registers the DMA-BUF `fd` (bytes [offset, offset + bytes) of the buffer) on every
  /// rail, seen at virtual address `addr` (the iova operations name: Region::base =
  /// addr, so LocalSlice offsets and RemoteKey addresses work as for Register). The
  /// Region is of `kind` (kDevice for GPU memory). The fd stays the caller's (it may
  /// be closed after this returns; the registration keeps the buffer).
  /// InvalidArgument for fd < 0, NULL addr, 0 bytes, a wrapping range or bad access
  /// bits; InvalidUsage when the transport lacks kCapDmaBuf (the default: TCP cannot
  /// read a DMA-BUF); SystemError when the driver refuses the fd.
  /// Added additively (2026-12-01, vcomms): the default refuses.
  virtual Status RegisterDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access,
                                MemoryKind kind, const Region** out) {
    (void)addr, (void)bytes, (void)offset, (void)access, (void)kind, (void)out;
    return InvalidUsage(std::string("fabric register of DMA-BUF fd ") + std::to_string(fd) + ": the " +
                        TransportName() + " transport cannot register DMA-BUFs");
  }
  /// Creates a Worker (listening on every rail). The Worker must be destroyed before
  /// the Domain.
  virtual Status CreateWorker(std::unique_ptr<Worker>* out) = 0;
};

}  // namespace railyard::fabric
