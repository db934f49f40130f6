// railyard-checksum-bench: the paging peer's commit check of one blob, timed the ways
// it has been computed: the blob's whole XXH3-64 (wire version 7's checksum), the
// blob checksum of its leaves by one thread (BlobChecksum), and by the calling thread
// with a ChecksumPool's helpers (the peer's). Each blob is written by memcpy just
// before it is hashed, as a put's bytes land just before the check. Medians of
// --iters runs; one JSON object per line:
//   {"size", "flat_us", "leaves_us", "pool_us", "helpers"}
//   railyard-checksum-bench [--sizes 1M,4M,16M,64M] [--iters 15] [--helpers N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "storage/checksum/xxh3.h"
#include "storage/snapshot/blob_checksum.h"

namespace {

using railyard::storage::snapshot::BlobChecksum;
using railyard::storage::snapshot::ChecksumPool;

uint64_t ParseBytes(const std::string& s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  if (*end == 'K') v <<= 10;
  if (*end == 'M') v <<= 20;
  if (*end == 'G') v <<= 30;
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
  int iters = 15;
  int helpers = railyard::storage::snapshot::DefaultChecksumHelpers(std::thread::hardware_concurrency());
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      const std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        sizes.push_back(ParseBytes(list.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--helpers" && i + 1 < argc) {
      helpers = std::max(0, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: railyard-checksum-bench [--sizes 1M,4M,16M,64M] [--iters 15] [--helpers N]\n");
      return 2;
    }
  }
  ChecksumPool pool(helpers);
  std::fprintf(stderr, "checksum-bench: XXH3 kernel %s, %d helpers\n", railyard::checksum::Xxh3Kernel(), helpers);
  for (uint64_t n : sizes) {
    std::vector<uint8_t> src(n), dst(n);
    for (uint64_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 13 + (i >> 12));
    std::vector<double> flat, leaves, pooled;
    uint64_t sink = 0;
    auto timed = [&](std::vector<double>& into, auto hash) {
      std::memcpy(dst.data(), src.data(), n);
      const auto t0 = std::chrono::steady_clock::now();
      sink ^= hash();
      into.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    };
    for (int r = 0; r < iters; ++r) {
      timed(flat, [&] { return railyard::checksum::Xxh3(dst.data(), n); });
      timed(leaves, [&] { return BlobChecksum(dst.data(), n); });
      timed(pooled, [&] { return pool.Checksum(dst.data(), n); });
    }
    if (pool.Checksum(dst.data(), n) != BlobChecksum(dst.data(), n)) {
      std::fprintf(stderr, "checksum-bench: the pool's checksum differs from BlobChecksum at %llu bytes\n",
                   static_cast<unsigned long long>(n));
      return 1;
    }
    std::printf("{\"size\": %llu, \"flat_us\": %.0f, \"leaves_us\": %.0f, \"pool_us\": %.0f, \"helpers\": %d}\n",
                static_cast<unsigned long long>(n), Median(flat), Median(leaves), Median(pooled), helpers);
    std::fprintf(stderr, "%s", sink == 42 ? " " : "");  // keeps the hashes
  }
  return 0;
}
