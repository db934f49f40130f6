// A receiver with posted buffers, for the fuzz targets that feed chunk headers
// (records, chunk_stream): a registered arena, a RecvTable with receives posted
// into it, and the harness's own note of every posted buffer, so a target can
// check that whatever RecvTable::Claim accepts lies inside one. Arena bytes that
// belong to no posted buffer (never posted, or released after their receive
// completed) are a canary: under ASan they are poisoned, so a byte landing there
// is reported at the write; without ASan CheckCanary finds it afterwards.
#pragma once

#include <cstdlib>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define RAILYARD_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RAILYARD_FUZZ_ASAN 1
#endif
#endif
#ifdef RAILYARD_FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include "proxy/mr_cache.h"
#include "proxy/protocol/recv_table.h"
#include "tests/fuzz/fuzz_target.h"

namespace railyard::fuzz {

class PostedBuffers {
 public:
  /// Bytes of the registered arena the posted buffers are cut from.
  static constexpr size_t kArenaBytes = 64 << 10;

  /// Registers the arena and posts 1..4 receives of 1..8 buffers, sizes read from
  /// `in` (8..4096 bytes each, multiples of 8, cut to what the arena has left).
  explicit PostedBuffers(Input& in) : table_(nullptr, &cache_) {
    arena_ = static_cast<char*>(std::aligned_alloc(4096, kArenaBytes));
    refs_.assign(kArenaBytes / 8, 0);
    std::memset(arena_, kCanary, kArenaBytes);
    Poison(0, kArenaBytes, true);
    FUZZ_CHECK(cache_.Register(arena_, kArenaBytes, 0, &mr_).ok());
    const int receives = 1 + in.Take<uint8_t>() % 4;
    for (int r = 0; r < receives; ++r) {
      Plan p;
      p.n = 1 + in.Take<uint8_t>() % kMaxRecvs;
      for (int i = 0; i < p.n; ++i) p.sizes.push_back(8 * (1 + in.Take<uint16_t>() % 512));
      plans_.push_back(p);
    }
    for (size_t r = 0; r < plans_.size(); ++r) Post(plans_[r]);
  }
  ~PostedBuffers() {
    Poison(0, kArenaBytes, false);
    std::free(arena_);
  }
  PostedBuffers(const PostedBuffers&) = delete;
  PostedBuffers& operator=(const PostedBuffers&) = delete;

  uint64_t ArenaBase() const { return reinterpret_cast<uint64_t>(arena_); }

  /// Checks that no byte outside the posted buffers changed (without ASan; with
  /// it the write itself was reported).
  void CheckCanary() const {
#ifndef RAILYARD_FUZZ_ASAN
    for (size_t g = 0; g < refs_.size(); ++g) {
      if (refs_[g] != 0) continue;
      for (size_t i = g * 8; i < g * 8 + 8; ++i) {
        if (static_cast<uint8_t>(arena_[i]) != kCanary) {
          CheckFailed(__FILE__, __LINE__, "a byte landed outside every posted buffer (or in a released one)");
        }
      }
    }
#endif
  }
  uint32_t Rkey() const { return mr_->rkey; }
  proxy::RecvTable& Table() { return table_; }

  /// Checks that `dest`, `len` accepted for (seq, slot) lie inside that posted buffer.
  void CheckInside(uint64_t seq, uint32_t slot, const char* dest, uint64_t len) const {
    for (const Posted& p : posted_) {
      if (p.seq != seq) continue;
      FUZZ_CHECK(slot < p.bufs.size());
      const char* b = p.bufs[slot].first;
      FUZZ_CHECK(dest >= b && len <= p.bufs[slot].second &&
                 static_cast<size_t>(dest - b) <= p.bufs[slot].second - len);
      return;
    }
    FUZZ_CHECK(!"RecvTable accepted a chunk for a receive that is not posted");
  }

  /// After chunks landed: releases every complete receive (as test() does once it
  /// reported done) and posts the next receive in its place.
  void ReleaseDone() {
    for (size_t i = 0; i < posted_.size();) {
      if (!proxy::RecvTable::Done(*posted_[i].entry)) {
        ++i;
        continue;
      }
      proxy::RecvTable::Release(*posted_[i].entry);
      for (const auto& [b, len] : posted_[i].bufs) Claim(static_cast<size_t>(b - arena_), len, -1);
      const Plan plan = posted_[i].plan;
      posted_.erase(posted_.begin() + static_cast<long>(i));
      Post(plan);
      ++completed_;
    }
  }
  /// Receives completed so far.
  int Completed() const { return completed_; }

 private:
  struct Plan {
    int n = 0;
    std::vector<size_t> sizes;
  };
  struct Posted {
    uint64_t seq = 0;
    proxy::RecvTable::Entry* entry = nullptr;
    std::vector<std::pair<char*, size_t>> bufs;
    Plan plan;
  };
  void Post(const Plan& plan) {
    void* data[kMaxRecvs];
    size_t sizes[kMaxRecvs];
    int tags[kMaxRecvs];
    proxy::MemoryRegion* mrs[kMaxRecvs];
    Posted p;
    p.plan = plan;
    for (int i = 0; i < plan.n; ++i) {
      if (used_ >= kArenaBytes) used_ = 0;  // reuse the arena from the start
      const size_t sz = std::min(plan.sizes[static_cast<size_t>(i)], kArenaBytes - used_);
      data[i] = arena_ + used_;
      sizes[i] = sz;
      tags[i] = i;
      mrs[i] = mr_;
      p.bufs.push_back({arena_ + used_, sz});
      Claim(used_, sz, +1);
      used_ += sz;
    }
    proxy::CtsRecord cts;
    p.seq = table_.NextSeq();
    FUZZ_CHECK(table_.Post(plan.n, data, sizes, tags, mrs, &p.entry, &cts).ok());
    posted_.push_back(std::move(p));
  }
  static constexpr int kMaxRecvs = proxy::kMaxRecvs;
  static constexpr uint8_t kCanary = 0xee;
  /// Counts posted buffers per 8-byte granule of [off, off+len); poisons granules
  /// no buffer holds and unpoisons held ones.
  void Claim(size_t off, size_t len, int delta) {
    for (size_t g = off / 8; g < (off + len) / 8; ++g) {
      refs_[g] = static_cast<uint16_t>(refs_[g] + delta);
      if (refs_[g] == 0) std::memset(arena_ + g * 8, kCanary, 8);  // released: a canary again
      Poison(g * 8, 8, refs_[g] == 0);
    }
  }
  void Poison(size_t off, size_t len, bool poison) {
#ifdef RAILYARD_FUZZ_ASAN
    if (poison) {
      ASAN_POISON_MEMORY_REGION(arena_ + off, len);
    } else {
      ASAN_UNPOISON_MEMORY_REGION(arena_ + off, len);
    }
#else
    (void)off, (void)len, (void)poison;
#endif
  }

  proxy::MrCache cache_;
  proxy::MemoryRegion* mr_ = nullptr;
  char* arena_ = nullptr;
  size_t used_ = 0;
  int completed_ = 0;
  std::vector<uint16_t> refs_;  ///< posted buffers holding each 8-byte granule
  proxy::RecvTable table_;
  std::vector<Plan> plans_;
  std::vector<Posted> posted_;
};

}  // namespace railyard::fuzz
