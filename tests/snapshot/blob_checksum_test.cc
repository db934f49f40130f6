// The snapshot tier's blob checksum (storage/snapshot/blob_checksum.h): its definition
// (XXH3-64 of the leaves' XXH3-64s), the same value leaf by leaf in any landing order
// and from the pool's threads, several callers at once included.
#include "storage/snapshot/blob_checksum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "storage/checksum/xxh3.h"

namespace railyard::storage::snapshot {
namespace {

std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The definition, written out: each leaf's XXH3-64, then the XXH3-64 of those 8-byte values.
uint64_t ByDefinition(const std::vector<uint8_t>& b) {
  std::vector<uint64_t> leaves;
  for (size_t at = 0; at < b.size(); at += kChecksumLeafBytes) {
    leaves.push_back(checksum::Xxh3(b.data() + at, std::min<size_t>(kChecksumLeafBytes, b.size() - at)));
  }
  return checksum::Xxh3(leaves.data(), leaves.size() * 8);
}

// Past kChecksumPoolMinBytes too: the pool's helpers hash those.
const size_t kSizes[] = {0,
                         1,
                         4096,
                         kChecksumLeafBytes - 1,
                         kChecksumLeafBytes,
                         kChecksumLeafBytes + 1,
                         3 * kChecksumLeafBytes + 5,
                         kChecksumPoolMinBytes - 1,
                         kChecksumPoolMinBytes,
                         kChecksumPoolMinBytes + 3 * kChecksumLeafBytes + 1};

TEST(BlobChecksum, IsTheXxh3OfItsLeavesXxh3s) {
  for (size_t n : kSizes) {
    const std::vector<uint8_t> b = Bytes(n, static_cast<uint32_t>(n));
    EXPECT_EQ(BlobChecksum(b.data(), n), ByDefinition(b)) << n << " bytes";
  }
  EXPECT_EQ(BlobChecksum(nullptr, 0), checksum::Xxh3(nullptr, 0));
  // Not the whole blob's XXH3-64 (wire version 7's) once there is more than nothing.
  const std::vector<uint8_t> b = Bytes(5000, 1);
  EXPECT_NE(BlobChecksum(b.data(), b.size()), checksum::Xxh3(b.data(), b.size()));
}

TEST(BlobChecksum, AByteChangedInAnyLeafChangesIt) {
  std::vector<uint8_t> b = Bytes(3 * kChecksumLeafBytes + 100, 9);
  const uint64_t sum = BlobChecksum(b.data(), b.size());
  for (size_t at : {size_t{0}, kChecksumLeafBytes - 1, kChecksumLeafBytes, 2 * kChecksumLeafBytes + 7, b.size() - 1}) {
    b[at] ^= 0x40;
    EXPECT_NE(BlobChecksum(b.data(), b.size()), sum) << "byte " << at;
    b[at] ^= 0x40;
  }
  // Two leaves swapped: the order of the leaves counts.
  std::vector<uint8_t> swapped = b;
  std::swap_ranges(swapped.begin(), swapped.begin() + kChecksumLeafBytes, swapped.begin() + kChecksumLeafBytes);
  EXPECT_NE(BlobChecksum(swapped.data(), swapped.size()), sum);
}

TEST(BlobChecksum, LeafByLeafInAnyOrderIsTheSame) {
  std::mt19937 rng(4);
  for (size_t n : kSizes) {
    const std::vector<uint8_t> b = Bytes(n, 77);
    // Cut into ranges of random length, announced in a random order.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (uint64_t at = 0; at < n;) {
      const uint64_t take = std::min<uint64_t>(n - at, 1 + rng() % (kChecksumLeafBytes / 3));
      ranges.push_back({at, take});
      at += take;
    }
    std::shuffle(ranges.begin(), ranges.end(), rng);
    LeafChecksum c(b.data(), n);
    for (auto [at, take] : ranges) c.Landed(at, take);
    EXPECT_EQ(c.Digest(), BlobChecksum(b.data(), n)) << n << " bytes";
  }
}

TEST(BlobChecksum, ALeafIsHashedWhenItsLastByteIsAnnounced) {
  // Bytes changed after their leaf was whole no longer count: it was hashed then.
  std::vector<uint8_t> b = Bytes(2 * kChecksumLeafBytes, 6);
  const uint64_t before = BlobChecksum(b.data(), b.size());
  LeafChecksum c(b.data(), b.size());
  c.Landed(kChecksumLeafBytes, kChecksumLeafBytes);  // leaf 1, whole
  c.Landed(0, 10);                                    // leaf 0, not yet
  b[kChecksumLeafBytes + 5] ^= 1;                     // too late for leaf 1
  c.Landed(10, kChecksumLeafBytes - 10);              // leaf 0 whole now, as it is
  EXPECT_EQ(c.Digest(), before);
  EXPECT_NE(BlobChecksum(b.data(), b.size()), before) << "the test's change must count for a fresh hash";
}

TEST(BlobChecksum, DigestHashesWhatWasNeverAnnounced) {
  const std::vector<uint8_t> b = Bytes(2 * kChecksumLeafBytes + 3, 5);
  LeafChecksum c(b.data(), b.size());
  c.Landed(0, 100);                             // part of leaf 0 only
  c.Landed(b.size() - 3, 1000);                 // the end, cut at the blob's end
  EXPECT_EQ(c.Digest(), BlobChecksum(b.data(), b.size()));
  LeafChecksum none(b.data(), b.size());
  EXPECT_EQ(none.Digest(), BlobChecksum(b.data(), b.size()));
}

TEST(BlobChecksum, ThePoolGivesTheSameValueWithAnyNumberOfHelpers) {
  for (int helpers : {0, 1, 3}) {
    ChecksumPool pool(helpers);
    EXPECT_EQ(pool.helpers(), helpers);
    for (size_t n : kSizes) {
      const std::vector<uint8_t> b = Bytes(n, static_cast<uint32_t>(n + 1));
      EXPECT_EQ(pool.Checksum(b.data(), n), BlobChecksum(b.data(), n)) << n << " bytes, " << helpers << " helpers";
    }
  }
}

TEST(BlobChecksum, HelpersAloneHashEveryLeafOfALargeBlob) {
  // The caller only waits: a helper that hashed nothing, or hashed wrongly, fails here
  // (with the caller hashing too, it may take every leaf itself).
  ChecksumPool pool(2, ChecksumPool::Caller::kOnlyWaits);
  ASSERT_EQ(pool.helpers(), 2);
  uint64_t leaves = 0;
  for (size_t n : {kChecksumPoolMinBytes, kChecksumPoolMinBytes + 3 * kChecksumLeafBytes + 1}) {
    const std::vector<uint8_t> b = Bytes(n, static_cast<uint32_t>(n));
    EXPECT_EQ(pool.Checksum(b.data(), n), BlobChecksum(b.data(), n)) << n << " bytes";
    leaves += (n + kChecksumLeafBytes - 1) / kChecksumLeafBytes;
    EXPECT_EQ(pool.helperLeaves(), leaves) << n << " bytes";
  }
  // Under kChecksumPoolMinBytes the caller hashes alone, whatever the pool's mode.
  const std::vector<uint8_t> small = Bytes(kChecksumPoolMinBytes - 1, 9);
  EXPECT_EQ(pool.Checksum(small.data(), small.size()), BlobChecksum(small.data(), small.size()));
  EXPECT_EQ(pool.helperLeaves(), leaves);
}

TEST(BlobChecksum, SeveralCallersShareThePool) {
  std::vector<std::vector<uint8_t>> blobs;
  for (uint32_t i = 0; i < 4; ++i) blobs.push_back(Bytes(kChecksumPoolMinBytes + 1000 * i + 7, i));
  std::vector<uint64_t> want;
  for (const auto& b : blobs) want.push_back(BlobChecksum(b.data(), b.size()));
  for (ChecksumPool::Caller mode : {ChecksumPool::Caller::kHashesToo, ChecksumPool::Caller::kOnlyWaits}) {
    ChecksumPool pool(2, mode);
    std::vector<int> wrong(blobs.size(), 0);
    std::vector<std::thread> callers;
    for (size_t i = 0; i < blobs.size(); ++i) {
      callers.emplace_back([&, i] {
        for (int round = 0; round < 20; ++round) {
          if (pool.Checksum(blobs[i].data(), blobs[i].size()) != want[i]) ++wrong[i];
        }
      });
    }
    for (std::thread& t : callers) t.join();
    const bool helpersOnly = mode == ChecksumPool::Caller::kOnlyWaits;
    for (size_t i = 0; i < blobs.size(); ++i) EXPECT_EQ(wrong[i], 0) << "caller " << i << ", helpers only " << helpersOnly;
    if (helpersOnly) {
      uint64_t leaves = 0;
      for (const auto& b : blobs) leaves += 20 * ((b.size() + kChecksumLeafBytes - 1) / kChecksumLeafBytes);
      EXPECT_EQ(pool.helperLeaves(), leaves);
    }
  }
}

TEST(BlobChecksum, DefaultHelpersAreHalfTheHardwareThreadsFromOneToEight) {
  EXPECT_EQ(DefaultChecksumHelpers(0), 1);
  EXPECT_EQ(DefaultChecksumHelpers(2), 1);
  EXPECT_EQ(DefaultChecksumHelpers(12), 6);
  EXPECT_EQ(DefaultChecksumHelpers(128), 8);
  EXPECT_GE(UsableCpus(), 1u);
}

}  // namespace
}  // namespace railyard::storage::snapshot
