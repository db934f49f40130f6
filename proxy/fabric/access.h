// Access rights of a registered Region and the kind of memory it covers.
#pragma once

#include <cstdint>
#include <string>

namespace railyard::fabric {

/// Access flags of a Region, OR-ed together (cf. ibv_access_flags: LOCAL_WRITE,
/// REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC). A target refuses every remote access
/// whose right the region lacks (FabricErrc::kAccessDenied).
enum Access : uint32_t {
  kAccessLocal = 1u << 0,         ///< usable as the local side of this process's ops
  kAccessRemoteRead = 1u << 1,    ///< peers may Read it
  kAccessRemoteWrite = 1u << 2,   ///< peers may Write it
  kAccessRemoteAtomic = 1u << 3,  ///< peers may FetchAdd in it
  kAccessAll = kAccessLocal | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic,
};

/// True when `flags` has no bit outside kAccessAll.
inline bool ValidAccess(uint64_t flags) { return (flags & ~uint64_t{kAccessAll}) == 0; }

/// "local|remote-read|..." ("none" for 0), for messages.
std::string AccessText(uint32_t flags);

/// Where a Region's bytes live. Host memory is what every transport can touch; device
/// memory only where the route can really read it (Capabilities::kCapDeviceMemory).
enum class MemoryKind : uint8_t {
  kHost = 0,
  kDevice = 1,  ///< GPU memory (CUDA pointer or DMA-BUF)
};

}  // namespace railyard::fabric
