// What a fabric transport can do, in one set of flags (cf. UCX's UCT_IFACE_FLAG_*,
// src/uct/api/uct.h). Tests and the layers above skip or choose by these flags
// instead of by transport name.
#pragma once

#include <cstddef>
#include <cstdint>

namespace railyard::fabric {

/// Capability bits.
enum Capability : uint64_t {
  kCapSend = 1ull << 0,          ///< Endpoint::Send of small records
  kCapWrite = 1ull << 1,         ///< Endpoint::Write
  kCapWriteImm = 1ull << 2,      ///< Write with a 32-bit immediate delivered as an event
  kCapRead = 1ull << 3,          ///< Endpoint::Read
  kCapFetchAdd = 1ull << 4,      ///< Endpoint::FetchAdd (64-bit, returns the old value)
  kCapFence = 1ull << 5,         ///< Endpoint::Fence
  kCapStriping = 1ull << 6,      ///< large ops are striped over the rails of the endpoint
  kCapHostMemory = 1ull << 7,    ///< Regions in host memory
  kCapDeviceMemory = 1ull << 8,  ///< Regions in GPU memory: only where every route can read it
  /// The target names the remote-access cause (OUT_OF_BOUNDS, BAD_KEY, ACCESS_DENIED,
  /// DEREGISTERED) instead of the generic REMOTE_ACCESS.
  kCapPreciseRemoteErrors = 1ull << 9,
  /// The target's CPU takes part in every remote access (TCP emulation): a Region
  /// deregistered mid-operation is refused with DEREGISTERED by the target.
  kCapTargetCpuChecks = 1ull << 10,
  /// Endpoints reach Workers of other processes (the fake transport is in-process only).
  kCapMultiProcess = 1ull << 11,
  /// Domain::RegisterDmaBuf works on every rail (verbs: ibv_reg_dmabuf_mr on every
  /// port's device). Added 2026-12-01 (vcomms).
  kCapDmaBuf = 1ull << 12,
};

/// A transport's capabilities and limits.
struct Capabilities {
  uint64_t flags = 0;
  size_t maxRecordBytes = 0;   ///< largest Endpoint::Send record, bytes
  uint64_t maxOpBytes = 0;     ///< largest Write/Read, bytes
  int maxOpsInFlight = 0;      ///< ops one Endpoint keeps on the wire (more are queued locally)

  bool Has(uint64_t f) const { return (flags & f) == f; }
};

}  // namespace railyard::fabric
