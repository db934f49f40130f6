// Striping: how an operation is cut into chunks and which rail carries each chunk.
// Chunks go over the rails weighted by rail speed (smooth weighted round robin, as
// proxy/routing does for sockets), with a bounded number of chunks in flight per
// rail, so a slow rail never holds a long queue (cf. the scheduler of aws-ofi-nccl:
// below a threshold a message goes whole on one rail, above it is split).
#pragma once

#include <cstdint>
#include <vector>

#include "env/config.h"
#include "env/status.h"

namespace railyard::fabric {

/// Striping parameters (RAILYARD_STRIPE_* in env/variables.cc).
struct StripeOptions {
  /// Ops of more bytes than this are striped over the rails; smaller ones go on one rail.
  uint64_t thresholdBytes = 64 * 1024;
  /// Most bytes in one chunk (a frame's payload). Any op above this is cut. This
  /// default serves direct users and tests; the runtime takes RAILYARD_STRIPE_CHUNK_BYTES
  /// (512 KiB unless set) through FromConfig.
  uint64_t chunkBytes = 1024 * 1024;
  /// Chunks queued on one rail and not yet written out, at most.
  int chunksInFlightPerRail = 4;

  /// From RAILYARD_STRIPE_THRESHOLD_BYTES, RAILYARD_STRIPE_CHUNK_BYTES and
  /// RAILYARD_STRIPE_CHUNKS_PER_RAIL.
  static StripeOptions FromConfig(const env::Config& config);
  /// InvalidArgument when a value is out of range (chunk 4 KiB..64 MiB, in flight 1..1024).
  Status Validate() const;
};

/// One chunk of an operation: bytes [offset, offset + bytes) of it.
struct Chunk {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool operator==(const Chunk&) const = default;
};

/// Cuts an op of `bytes` for `rails` rails. Not striped (bytes <= threshold, or one
/// rail): chunks of chunkBytes, the last one shorter; a 0-byte op is one 0-byte
/// chunk. Striped: chunks of min(chunkBytes, ceil(bytes / rails) rounded up to
/// 4 KiB), so every rail gets at least one chunk of a large enough op.
std::vector<Chunk> CutIntoChunks(uint64_t bytes, int rails, const StripeOptions& options);

/// True when an op of `bytes` is striped over `rails` rails.
inline bool IsStriped(uint64_t bytes, int rails, const StripeOptions& options) {
  return rails > 1 && bytes > options.thresholdBytes;
}

/// Chooses the rail of each chunk. Not thread-safe (one per Endpoint).
class StripeScheduler {
 public:
  /// `speedsMbps[i]` weights rail i (0 counts as 1); `maxInFlight` chunks per rail.
  StripeScheduler(std::vector<uint32_t> speedsMbps, int maxInFlight);

  /// The rail for the next chunk: the smooth-weighted-round-robin choice among rails
  /// with room; -1 when every rail is full.
  int Pick();
  /// The rail Pick would choose now, without taking the turn (-1 when every rail is
  /// full). For ops too small to count as load (a 0-byte Write carrying only an
  /// immediate, a credit): they ride along on the next rail instead of consuming a
  /// turn, so the data ops between them still alternate over the rails. Found on the
  /// CollNet ring, where every data Write alternated with a credit Write on the same
  /// Endpoint and so every unstriped chunk took the same rail (2026-12-06).
  int Peek() const;
  /// Ops of at most this many bytes are too small to count as load (see Peek).
  static constexpr uint64_t kTinyOpBytes = 4096;
  /// True when `rail` has room for one more chunk.
  bool HasRoom(int rail) const { return inFlight_[rail] < maxInFlight_; }
  /// A chunk was queued on `rail` (after Pick, or for a rail chosen otherwise).
  void OnQueued(int rail) { ++inFlight_[rail]; }
  /// A chunk of `rail` was written out; its slot is free again.
  void OnWritten(int rail) {
    if (inFlight_[rail] > 0) --inFlight_[rail];
  }
  int InFlight(int rail) const { return inFlight_[rail]; }
  int rails() const { return static_cast<int>(weight_.size()); }

 private:
  std::vector<int64_t> weight_;
  std::vector<int64_t> current_;
  std::vector<int> inFlight_;
  int maxInFlight_;
};

}  // namespace railyard::fabric
