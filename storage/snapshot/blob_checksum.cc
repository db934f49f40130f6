#include "storage/snapshot/blob_checksum.h"

#include <sched.h>

#include <algorithm>
#include <system_error>

#include "env/log.h"
#include "storage/checksum/xxh3.h"

namespace railyard::storage::snapshot {
namespace {

uint64_t Leaves(uint64_t n) { return (n + kChecksumLeafBytes - 1) / kChecksumLeafBytes; }

uint64_t LeafLength(uint64_t n, uint64_t leaf) { return std::min(kChecksumLeafBytes, n - leaf * kChecksumLeafBytes); }

uint64_t LeafDigest(const uint8_t* p, uint64_t n, uint64_t leaf) {
  return checksum::Xxh3(p + leaf * kChecksumLeafBytes, LeafLength(n, leaf));
}

// The leaf digests as bytes (little-endian hosts only, as the wire: snapshot_wire.h).
uint64_t Root(const std::vector<uint64_t>& digests) {
  return checksum::Xxh3(digests.data(), digests.size() * sizeof(uint64_t));
}

}  // namespace

uint64_t BlobChecksum(const void* p, uint64_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  std::vector<uint64_t> digests(Leaves(n));
  for (uint64_t i = 0; i < digests.size(); ++i) digests[i] = LeafDigest(b, n, i);
  return Root(digests);
}

LeafChecksum::LeafChecksum(const uint8_t* base, uint64_t bytes)
    : base_(base), bytes_(bytes), landed_(Leaves(bytes)), digests_(Leaves(bytes)), hashed_(Leaves(bytes)) {}

void LeafChecksum::Landed(uint64_t offset, uint64_t n) {
  if (offset >= bytes_) return;
  const uint64_t end = offset + std::min(n, bytes_ - offset);
  for (uint64_t at = offset; at < end;) {
    const uint64_t leaf = at / kChecksumLeafBytes;
    const uint64_t leafEnd = std::min(end, (leaf + 1) * kChecksumLeafBytes);
    landed_[leaf] += leafEnd - at;
    if (!hashed_[leaf] && landed_[leaf] >= LeafLength(bytes_, leaf)) HashLeaf(leaf);
    at = leafEnd;
  }
}

void LeafChecksum::HashLeaf(uint64_t leaf) {
  digests_[leaf] = LeafDigest(base_, bytes_, leaf);
  hashed_[leaf] = true;
}

uint64_t LeafChecksum::Digest() {
  for (uint64_t i = 0; i < digests_.size(); ++i) {
    if (!hashed_[i]) HashLeaf(i);
  }
  return Root(digests_);
}

struct ChecksumPool::Job {
  const uint8_t* p = nullptr;
  uint64_t n = 0;
  uint64_t leaves = 0;
  std::vector<uint64_t> digests;
  std::atomic<uint64_t> next{0};  ///< the next leaf nobody took
  std::atomic<uint64_t> done{0};  ///< leaves hashed
  std::mutex mu;
  std::condition_variable cv;
};

ChecksumPool::ChecksumPool(int helpers, Caller caller) : caller_(caller) {
  for (int i = 0; i < helpers; ++i) {
    try {
      threads_.emplace_back([this] { HelperLoop(); });
    } catch (const std::system_error& e) {
      RY_WARN("snapshot: a checksum helper thread could not start (%s); the commit checks run with %zu of %d", e.what(),
              threads_.size(), helpers);
      break;
    }
  }
}

ChecksumPool::~ChecksumPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ChecksumPool::Work(Job& job, std::atomic<uint64_t>* count) {
  for (uint64_t i; (i = job.next.fetch_add(1)) < job.leaves;) {
    job.digests[i] = LeafDigest(job.p, job.n, i);
    // Counted before `done`: a caller that saw its blob done sees the count too.
    if (count != nullptr) count->fetch_add(1, std::memory_order_relaxed);
    if (job.done.fetch_add(1) + 1 == job.leaves) {
      std::lock_guard<std::mutex> lock(job.mu);  // the caller's wait sees it
      job.cv.notify_all();
    }
  }
}

void ChecksumPool::HelperLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = jobs_.front();
    }
    Work(*job, &helperLeaves_);
    std::lock_guard<std::mutex> lock(mu_);  // every leaf taken: off the queue
    if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
  }
}

uint64_t ChecksumPool::Checksum(const void* p, uint64_t n) {
  const uint64_t leaves = Leaves(n);
  if (threads_.empty() || n < kChecksumPoolMinBytes) return BlobChecksum(p, n);
  auto job = std::make_shared<Job>();
  job->p = static_cast<const uint8_t*>(p);
  job->n = n;
  job->leaves = leaves;
  job->digests.resize(leaves);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
  }
  cv_.notify_all();
  if (caller_ == Caller::kHashesToo) {
    Work(*job, nullptr);
    std::lock_guard<std::mutex> lock(mu_);  // every leaf taken: off the queue, if no helper popped it
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) jobs_.erase(it);
  }  // else the helper that finds it has no leaf left pops it
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->done.load() == job->leaves; });
  return Root(job->digests);
}

int DefaultChecksumHelpers(unsigned cpus) { return static_cast<int>(std::clamp<unsigned>(cpus / 2, 1, 8)); }

unsigned UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

}  // namespace railyard::storage::snapshot
