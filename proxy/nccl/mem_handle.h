// The mhandle regMr hands to NCCL: the registration in the process-wide MrCache
// (which RecvTable checks every completion against, and which the comms that are
// not on the fabric yet use) plus one fabric Region per NCCL device whose comms run
// over the fabric, with its packed RemoteKey (what a clear-to-send record carries).
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/fabric/region.h"
#include "proxy/mr_cache.h"

namespace railyard::proxy::nccl {

/// One regMr. Owned by the plugin between regMr and deregMr.
struct MemHandle {
  /// "RYMH": tells a MemHandle from a foreign pointer NCCL may pass.
  static constexpr uint32_t kMagic = 0x484d5952u;
  uint32_t magic = kMagic;
  MemoryRegion* legacy = nullptr;  ///< never NULL for a live handle
  /// Per fabric device (the index of its CommWorker): the Region covering exactly
  /// [addr, addr + max(size, 1)) (NULL for a NULL address), and its packed key.
  struct PerDevice {
    const fabric::Region* region = nullptr;
    std::vector<uint8_t> packedKey;
  };
  std::vector<PerDevice> devices;

  /// The MemHandle behind an mhandle NCCL passes back, or NULL when it is not one
  /// (NULL, or a foreign pointer: the magic does not match).
  static MemHandle* From(void* mhandle) {
    auto* h = static_cast<MemHandle*>(mhandle);
    return h != nullptr && h->magic == kMagic ? h : nullptr;
  }

  /// The Region of device `dev` when it holds [addr, addr + bytes); NULL otherwise.
  const fabric::Region* RegionFor(size_t dev, uint64_t addr, uint64_t bytes) const {
    if (dev >= devices.size() || devices[dev].region == nullptr) return nullptr;
    return devices[dev].region->Contains(addr, bytes) ? devices[dev].region : nullptr;
  }
};

}  // namespace railyard::proxy::nccl
