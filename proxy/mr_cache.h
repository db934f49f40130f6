// Memory registration: a process-wide cache of registered regions keyed by
// address range, with the remote key (rkey) a peer names when it writes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "env/status.h"

namespace railyard::proxy {

/// One registered region. Handed to NCCL as the mhandle (an opaque pointer).
struct MemoryRegion {
  uint64_t base = 0;  ///< first byte (page-aligned down from the request)
  uint64_t len = 0;   ///< bytes covered (page-aligned up)
  uint32_t rkey = 0;  ///< key peers quote in CTS entries and chunk headers; never 0
  int ptrType = 0;    ///< NCCL_PTR_HOST / NCCL_PTR_CUDA of the registration
  int refs = 0;       ///< registrations sharing this entry (guarded by the cache lock)
  /// Hardware registrations made by the cache's MrBackend, one per RDMA device of the
  /// verbs transport (index = the backend's device index); empty without a backend.
  /// hcaMr holds the backend's handle (an ibv_mr*), hcaLkey/hcaRkey its keys.
  std::vector<void*> hcaMr;
  std::vector<uint32_t> hcaLkey;
  std::vector<uint32_t> hcaRkey;
  /// CPU writes into the region in progress (MrCache::PinForWrite); Deregister of the
  /// last reference waits until none is left.
  std::atomic<int> writers{0};

  /// True when [addr, addr+bytes) lies inside this region (no overflow).
  bool Contains(uint64_t addr, uint64_t bytes) const {
    return addr >= base && bytes <= len && addr - base <= len - bytes;
  }
};

/// Registers regions with hardware (the verbs transport: ibv_reg_mr on every
/// device's protection domain). Called by MrCache under its lock, once per new
/// region (a sub-range of a cached region reuses it).
class MrBackend {
 public:
  virtual ~MrBackend() = default;
  /// Registers [region->base, region->base + region->len) and fills region->hca*.
  /// `dmabufFd` >= 0 registers a DMA-BUF (GPU memory; `dmabufOffset` is the offset
  /// of base inside it, nccl-net-abi.md §2.5 "regMrDmaBuf"). Errors: SystemError
  /// naming the device and errno; nothing stays registered after an error.
  virtual Status Register(MemoryRegion* region, int dmabufFd, uint64_t dmabufOffset) = 0;
  /// Undoes Register (the region is going away).
  virtual void Deregister(MemoryRegion* region) = 0;
};

/// Thread-safe registration cache. A registration inside an existing region reuses
/// it (reference-counted), so re-registering a sub-range is almost free, as NCCL
/// expects when a plugin reports regIsGlobal = 1 (nccl-net-abi.md §2.3).
/// Registrations are process-wide, not tied to a comm.
class MrCache {
 public:
  /// Registers [addr, addr+bytes). bytes may be 0 (a 1-byte region is recorded).
  /// InvalidArgument for a NULL address with bytes > 0 or a range that wraps.
  Status Register(const void* addr, size_t bytes, int ptrType, MemoryRegion** out);
  /// As Register, for a DMA-BUF: the region is exactly [addr, addr+bytes) (no page
  /// rounding: the buffer is device memory) and the backend registers `fd` at
  /// `offset`. InvalidUsage when no backend is installed.
  Status RegisterDmaBuf(const void* addr, size_t bytes, int ptrType, int fd, uint64_t offset,
                        MemoryRegion** out);
  /// Installs the hardware backend used for every new region (nullptr = none).
  /// Regions registered before keep their state; call before the first Register.
  void SetBackend(MrBackend* backend);
  /// Drops one reference; the entry goes away with the last one (after any write
  /// pinned by PinForWrite has finished: see there). InvalidArgument
  /// when `region` is not registered here (double deregister, foreign pointer).
  Status Deregister(MemoryRegion* region);
  /// True when region `rkey` exists and holds [addr, addr+bytes). Used on every
  /// remote write before a byte lands.
  bool Contains(uint32_t rkey, uint64_t addr, uint64_t bytes) const;
  /// Pins region `rkey` for one CPU write into [addr, addr+bytes) (a TCP payload
  /// received straight into a posted buffer). True, with *pinned set, when the
  /// region is registered and holds the range; false otherwise (nothing pinned).
  /// Until Unpin(*pinned), a Deregister that drops the region's last reference
  /// waits, so no byte lands in memory after deregMr returned. Hold a pin only for
  /// one non-blocking write (a recv call), never across a wait.
  bool PinForWrite(uint32_t rkey, uint64_t addr, uint64_t bytes, MemoryRegion** pinned) const;
  /// Ends a write pinned by PinForWrite.
  static void Unpin(MemoryRegion* pinned) { pinned->writers.fetch_sub(1, std::memory_order_release); }
  /// True when `region` is a live entry of this cache.
  bool IsRegistered(const MemoryRegion* region) const;
  /// Number of distinct regions (for tests and diagnostics).
  size_t Size() const;

 private:
  mutable std::shared_mutex mu_;
  std::multimap<uint64_t, std::unique_ptr<MemoryRegion>> byBase_;
  std::unordered_map<uint32_t, MemoryRegion*> byKey_;
  std::unordered_set<const MemoryRegion*> live_;  ///< pointers handed out, for safe checks
  uint32_t nextKey_ = 1;
  MrBackend* backend_ = nullptr;

  Status Insert(uint64_t lo, uint64_t hi, int ptrType, int fd, uint64_t offset, bool reuse,
                MemoryRegion** out);
};

/// The process-wide cache used by every comm of the plugin.
MrCache& GlobalMrCache();

}  // namespace railyard::proxy
