// Moves one blob between caller memory and a peer's registered arena through one
// staging buffer registered (through the RegistrationCache) on every rail: the
// blob is cut into chunks, each chunk copied into a free staging slot and written
// (or read into a slot and copied out), with at most `chunksPerRail` chunks in
// flight per rail of the Domain; the Endpoint spreads them over the rails. Caller
// host memory that a live registration of the cache already covers (NCCL's regMr
// of the same Domain, or the caller's own Acquire) is written from and read into
// directly, chunk by chunk the same way, with no staging copy. Every
// call completes (or fails) before it returns; it drives the Worker's Progress
// itself, bounded by the Endpoint's own timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"

namespace railyard::storage::snapshot {

/// Chunking of a BlobMover.
struct MoverOptions {
  uint64_t chunkBytes = 1 << 20;  ///< bytes per chunk (4 KiB..64 MiB)
  int chunksPerRail = 4;          ///< chunks in flight per rail (1..64)
};

/// See file comment. Not thread-safe (one thread: the Worker's poller).
class BlobMover {
 public:
  /// Allocates and registers the staging buffer (rails * chunksPerRail * chunkBytes).
  /// InvalidArgument for options out of range; errors of RegistrationCache::Acquire.
  static Status Create(fabric::RegistrationCache& cache, fabric::Worker& worker, const MoverOptions& options,
                       std::unique_ptr<BlobMover>* out);
  ~BlobMover();

  /// Writes `bytes` of `src` to [remoteAddr, + bytes) of `key`'s region over `ep`;
  /// returns once every byte has landed at the peer. `*checksum` (when given) gets
  /// the blob checksum of the bytes (blob_checksum.h), leaf by leaf as they are posted;
  /// untouched when the call fails.
  Status Put(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr, const void* src,
             uint64_t bytes, uint64_t* checksum);
  /// How much of a Get's source may be read yet, for a source still being filled (a
  /// snapshot blob faulted from the peer's swap file): sets `*ready`, the bytes from
  /// the start that may be read (it only grows, up to the Get's bytes). Called with
  /// `wait` false while chunks are in flight (it returns at once) and true when nothing
  /// else can move (it waits for more, bounded by the caller's own timeout). An error
  /// ends the Get with it.
  using ReadyGate = std::function<Status(bool wait, uint64_t* ready)>;

  /// Reads [remoteAddr, + bytes) of `key`'s region into `dst`; `*checksum` as Put.
  /// With `gate`, chunks are read only as far as it says is ready (ReadyGate).
  Status Get(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr, void* dst, uint64_t bytes,
             uint64_t* checksum, const ReadyGate& gate = {});

  /// A 0-byte Write to `remoteAddr` of `key`'s region over `ep`, returning once the
  /// peer has taken it: the connection is up end to end (its first frames, which the
  /// peer's listener wants within RAILYARD_ACCEPT_TIMEOUT_MS, are sent and answered),
  /// the key is accepted. The Endpoint's errors (a silent peer: its own timeout).
  Status Probe(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr);

  uint64_t stagingBytes() const { return stagingBytes_; }
  /// Puts and Gets so far that moved the caller's memory directly (no staging copy).
  uint64_t directMoves() const { return directMoves_; }
  const fabric::Region* staging() const { return region_; }

 private:
  BlobMover(fabric::RegistrationCache& cache, fabric::Worker& worker) : cache_(cache), worker_(worker) {}
  Status Move(bool write, fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr, uint8_t* user,
              uint64_t bytes, uint64_t* checksum, const ReadyGate& gate);

  fabric::RegistrationCache& cache_;
  fabric::Worker& worker_;
  MoverOptions options_;
  uint64_t slots_ = 0;
  uint64_t stagingBytes_ = 0;
  uint8_t* staging_ = nullptr;
  const fabric::Region* region_ = nullptr;
  uint64_t nextCookie_ = 1;
  uint64_t directMoves_ = 0;
  std::vector<fabric::Event> events_;
};

}  // namespace railyard::storage::snapshot
