// A symmetric window: one local registration plus every rank's base and key,
// exchanged inside the collective regMrSym (nccl-net-abi.md §4.4; nccl-2.30-abi.md
// §5.3). Addressed by offset on any rank.
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/fabric/region.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::gin {

/// NCCL_NET_MR_FLAG_FORCE_SO (nccl-net-abi.md §2.1): strong ordering on the window.
inline constexpr uint64_t kMrFlagForceSo = 1ull << 0;
/// NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (nccl-2.30-abi.md §4.4): a hint, accepted.
inline constexpr uint64_t kMrFlagSignalNeverReset = 1ull << 1;

/// One window of a comm.
struct Window {
  uint64_t id = 0;                 ///< the handle NCCL holds (mhandle == ginHandle); < 2^63
  uint64_t seq = 0;                ///< registration number, the same on every rank
  uint64_t localBase = 0;          ///< this rank's first byte
  uint64_t bytes = 0;              ///< this rank's window size
  uint64_t mrFlags = 0;            ///< NCCL_NET_MR_FLAG_* given at registration
  const fabric::Region* region = nullptr;  ///< the RegistrationCache's region covering it
  std::vector<fabric::RemoteKey> keys;     ///< per rank: base, length, key

  bool forceSo() const { return (mrFlags & kMrFlagForceSo) != 0; }
  /// True when [off, off+size) lies inside rank `rank`'s window (no overflow).
  bool RemoteContains(uint32_t rank, uint64_t off, uint64_t size) const {
    const uint64_t len = keys[rank].length;
    return size <= len && off <= len - size;
  }
  /// True when [off, off+size) lies inside this rank's window.
  bool LocalContains(uint64_t off, uint64_t size) const { return size <= bytes && off <= bytes - size; }
};

}  // namespace railyard::gin
