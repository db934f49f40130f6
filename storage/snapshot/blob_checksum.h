// The snapshot tier's blob checksum: XXH3-64 over a blob's leaves' XXH3-64s, so that
// a blob can be hashed by several threads at once (the peer's commit check,
// ChecksumPool) and leaf by leaf as its bytes land in any order (a get's chunks, a
// fault's pieces: LeafChecksum). The commit's and the get's checksum on the control
// wire (version 8) and each swap record's (swap format version 3).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace railyard::storage::snapshot {

/// Bytes per leaf of the blob checksum (the last leaf of a blob may be shorter). Part
/// of the wire and swap formats: both ends and every swap file must agree.
constexpr uint64_t kChecksumLeafBytes = uint64_t{256} << 10;
/// The smallest blob ChecksumPool hashes with its helpers; a smaller one the caller
/// hashes alone: waking a helper took longer than it saved (this VM: a 1 MiB blob's
/// check 36 us alone, 47-109 us with one helper; 4 MiB 1.3-1.5x faster with it,
/// 16-64 MiB 1.7-1.9x; railyard-checksum-bench, docs/benchmarks.md).
constexpr uint64_t kChecksumPoolMinBytes = uint64_t{4} << 20;

/// The blob checksum of [p, p + n): XXH3-64 (seed 0, checksum::Xxh3) of the
/// concatenated little-endian XXH3-64s of its ceil(n / kChecksumLeafBytes) leaves, in
/// blob order (of no bytes when n is 0). One thread.
uint64_t BlobChecksum(const void* p, uint64_t n);

/// The blob checksum of `bytes` bytes at `base`, each leaf hashed (from `base`) as soon
/// as its last byte is announced by Landed, in whatever order ranges are announced.
/// One thread at a time.
class LeafChecksum {
 public:
  /// `base` stays readable for this object's life.
  LeafChecksum(const uint8_t* base, uint64_t bytes);
  /// [offset, offset + n) now holds its final bytes. Announced ranges must not overlap
  /// (a byte announced twice would count twice); a range past the end is cut there.
  void Landed(uint64_t offset, uint64_t n);
  /// The blob checksum; hashes first (from `base`, as it is now) any leaf not yet whole.
  uint64_t Digest();

 private:
  void HashLeaf(uint64_t leaf);
  const uint8_t* base_;
  uint64_t bytes_;
  std::vector<uint64_t> landed_;  ///< bytes announced per leaf
  std::vector<uint64_t> digests_;
  std::vector<bool> hashed_;
};

/// Helper threads that hash the leaves of BlobChecksum together with the calling
/// thread: the paging peer's commit check of a 16 MiB blob took 1.7-1.9 ms on one
/// core of this VM after its last byte landed (docs/benchmarks.md), serial with the
/// put. Owned by the SnapshotServer, which starts its threads (constructor) and joins
/// them (destructor).
class ChecksumPool {
 public:
  /// Who hashes a blob's leaves: the helpers with the calling thread (what the peer
  /// runs), or the helpers alone while the caller waits (tests: every leaf is then
  /// provably a helper's).
  enum class Caller { kHashesToo, kOnlyWaits };
  /// `helpers` threads (0: every call hashes alone, whatever `caller` says). A thread
  /// the system refuses (std::system_error) is warned about and the pool runs with
  /// those it got.
  explicit ChecksumPool(int helpers, Caller caller = Caller::kHashesToo);
  ~ChecksumPool();
  ChecksumPool(const ChecksumPool&) = delete;
  ChecksumPool& operator=(const ChecksumPool&) = delete;
  /// BlobChecksum(p, n); with the helpers from kChecksumPoolMinBytes. Thread-safe: calls
  /// from several threads share the helpers, and each caller hashes leaves of its own
  /// blob too, so a call never waits for a helper to be free (only for leaves a helper
  /// took to finish).
  uint64_t Checksum(const void* p, uint64_t n);
  int helpers() const { return static_cast<int>(threads_.size()); }
  /// Leaves the helper threads have hashed since construction (each leaf of a blob
  /// from kChecksumPoolMinBytes is hashed by a helper or by its caller, whichever takes
  /// it first).
  uint64_t helperLeaves() const { return helperLeaves_.load(std::memory_order_relaxed); }

 private:
  struct Job;
  void HelperLoop();
  /// Hashes leaves of `job` nobody took yet, until none is left, adding each to `*count`
  /// (when given) before it counts as done.
  static void Work(Job& job, std::atomic<uint64_t>* count);
  Caller caller_;
  std::atomic<uint64_t> helperLeaves_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  ///< blobs with leaves nobody took yet, oldest first
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// Helper threads for a peer that may run on `cpus` CPUs (UsableCpus; 0 unknown): half of
/// them, 1..8, leaving the rest to the fabric's and the control threads.
int DefaultChecksumHelpers(unsigned cpus);

/// The CPUs this process may run on (sched_getaffinity: a cpuset or taskset limits it),
/// else std::thread::hardware_concurrency(); 0 when neither says.
unsigned UsableCpus();

}  // namespace railyard::storage::snapshot
