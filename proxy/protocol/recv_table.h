// Receiver side of the receiver-posted-buffer protocol: the table of posted
// receives, the check every incoming chunk passes before a byte lands, and the
// completion accounting. Transport-independent; data threads call Validate/Land
// concurrently with the owner thread's Post/Poll/Release.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "env/status.h"
#include "proxy/comm.h"
#include "proxy/mr_cache.h"
#include "proxy/wire.h"

namespace railyard::proxy {

/// Posted receives of one connection, indexed by seq % kMaxRequests.
class RecvTable {
 public:
  /// Receives in flight per comm (NCCL_NET_MAX_REQUESTS, nccl-net-abi.md §2.1).
  static constexpr int kMaxRequests = 32;
  static constexpr uint64_t kFree = ~0ull;

  /// One posted receive. Its Request base is what NCCL holds.
  struct Entry : Request {
    std::atomic<uint64_t> seq{kFree};  ///< posted sequence; kFree when unused
    int n = 0;
    std::array<uint64_t, kMaxRecvs> addr{};
    std::array<uint64_t, kMaxRecvs> size{};
    std::array<uint32_t, kMaxRecvs> rkey{};
    std::array<int, kMaxRecvs> tag{};
    std::array<std::atomic<uint64_t>, kMaxRecvs> received{};
    std::array<std::atomic<int64_t>, kMaxRecvs> total{};
    std::array<std::atomic<bool>, kMaxRecvs> complete{};
    std::atomic<int> slotsDone{0};
    Clock::time_point posted{};
  };

  /// `owner` becomes every entry's Request::owner; `cache` validates rkeys.
  RecvTable(Comm* owner, const MrCache* cache);

  /// Posts the next receive (seq = previous + 1, from 0) and fills the CTS record
  /// that announces it. InvalidArgument for n outside 1..kMaxRecvs, a NULL or
  /// unregistered region, or a buffer outside its region; InternalError when the
  /// entry for this seq is still in flight (more than kMaxRequests outstanding).
  Status Post(int n, void* const* data, const size_t* sizes, const int* tags,
              MemoryRegion* const* mrs, Entry** out, CtsRecord* cts);

  /// Checks an incoming chunk before any payload byte is placed: the receive is
  /// posted, the slot exists, the message fits the posted buffer, and
  /// [addr, addr+len) lies inside both the posted buffer and region rkey.
  /// On success *dest is where the payload goes. RemoteError (naming seq, slot,
  /// address, length and rkey) otherwise: the caller drains the payload and poisons.
  Status Validate(const ChunkHeader& h, char** dest) const;

  /// Accounts `h.len` landed bytes (after the payload is in place). RemoteError when
  /// the peer sends more than it announced, disagrees on the total, or repeats a slot.
  Status Land(const ChunkHeader& h);

  /// True once every buffer of `e` has its whole message.
  static bool Done(const Entry& e) {
    return e.slotsDone.load(std::memory_order_acquire) == e.n;
  }
  /// Returns `e` to the free pool (after test reported done, or on close).
  static void Release(Entry& e) { e.seq.store(kFree, std::memory_order_release); }
  /// "seq S (from rank T[,T...])" for the oldest posted receive, or "no receive
  /// posted" (for error messages).
  std::string DescribeOldest() const;
  /// Entries currently posted (for diagnostics and tests).
  int InFlight() const;
  /// Next sequence number Post will use.
  uint64_t NextSeq() const { return nextSeq_; }

 private:
  const MrCache* cache_;
  std::array<Entry, kMaxRequests> entries_;
  uint64_t nextSeq_ = 0;
};

}  // namespace railyard::proxy
