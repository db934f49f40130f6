// Receiver side of the receiver-posted-buffer protocol: the table of posted
// receives, the claim every incoming chunk takes before a byte lands, and the
// completion accounting. Transport-independent; data threads call
// Claim/BeginWrite/EndWrite/ClaimLanded concurrently with the owner thread's
// Post/Done/Release.
//
// The rules (docs/architecture.md, "The receiver-posted-buffer protocol"):
// a chunk claims its byte range when its header is accepted (ClaimLedger: claims
// never overlap and stay inside the message); a receive completes only when every
// claimed chunk has fully landed and the claims cover the whole message; each
// write into a posted buffer re-checks that the entry still holds the claim's
// seq, that the comm has not failed, and pins the registration so deregMr waits
// for it (MrCache::PinForWrite) and later writes are refused.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "env/status.h"
#include "proxy/comm.h"
#include "proxy/mr_cache.h"
#include "proxy/protocol/claim_ledger.h"
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
    /// Message size per buffer as the first claim announced it; -1 before (what
    /// test() reports once the receive is done).
    std::array<std::atomic<int64_t>, kMaxRecvs> total{};
    std::atomic<int> slotsDone{0};
    Clock::time_point posted{};
    /// Guards seq changes on the data side, n, and the ledgers.
    std::mutex mu;
    std::array<ClaimLedger, kMaxRecvs> ledger{};
    std::array<bool, kMaxRecvs> slotDone{};  ///< counted in slotsDone
  };

  /// A chunk's claim on a posted buffer, held by the reader from its header to the
  /// end of its payload. Plain data: every use re-checks it against the table.
  struct ChunkClaim {
    Entry* entry = nullptr;
    uint64_t seq = 0;
    uint32_t slot = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;    ///< first byte of the chunk in receiver memory
    uint64_t offset = 0;  ///< addr - buffer start
    uint64_t len = 0;     ///< bytes claimed
    uint64_t landed = 0;  ///< bytes of the chunk in place so far
    /// Where the next payload byte goes.
    char* Next() const { return reinterpret_cast<char*>(addr + landed); }
  };

  /// A write into a claimed range in progress (BeginWrite .. EndWrite): holds the
  /// registration pinned. Releasing it (or destroying it) ends the pin.
  class WritePin {
   public:
    WritePin() = default;
    WritePin(const WritePin&) = delete;
    WritePin& operator=(const WritePin&) = delete;
    ~WritePin() { Release(); }
    void Release() {
      if (region_ != nullptr) MrCache::Unpin(region_);
      region_ = nullptr;
    }

   private:
    friend class RecvTable;
    MemoryRegion* region_ = nullptr;
  };

  /// `owner` becomes every entry's Request::owner; `cache` validates rkeys and pins
  /// registrations; once `poison` (the owning comm's, may be NULL) is set, no more
  /// bytes are let into any buffer.
  RecvTable(Comm* owner, const MrCache* cache, const Poison* poison = nullptr);

  /// Posts the next receive (seq = previous + 1, from 0) and fills the CTS record
  /// that announces it. InvalidArgument for n outside 1..kMaxRecvs, a NULL or
  /// unregistered region, or a buffer outside its region; InternalError when the
  /// entry for this seq is still in flight (more than kMaxRequests outstanding).
  Status Post(int n, void* const* data, const size_t* sizes, const int* tags,
              MemoryRegion* const* mrs, Entry** out, CtsRecord* cts);

  /// Accepts a chunk header and claims its bytes, before any payload byte is
  /// placed: the receive `h.seq` is posted, the slot exists, the message fits the
  /// posted buffer, [addr, addr+len) lies inside the posted buffer, the message
  /// [0, total) and the registered region `rkey`, and overlaps no earlier claim
  /// (ClaimLedger). A zero-length chunk of an empty message completes its slot at
  /// once. RemoteError naming seq, slot, address, length and rkey otherwise: the
  /// caller poisons the comm (nothing was claimed).
  Status Claim(const ChunkHeader& h, ChunkClaim* out);

  /// Before writing up to `c.len - c.landed` bytes at c.Next(): checks that the
  /// entry still holds c.seq, the comm has not failed, and region c.rkey is still
  /// registered over the rest of the chunk, and pins it into *pin (MrCache::
  /// PinForWrite). RemoteError otherwise (the receive was completed or reused, the
  /// buffer was deregistered, or the comm failed): no byte may be written.
  Status BeginWrite(const ChunkClaim& c, WritePin* pin);

  /// Accounts `bytes` payload bytes written at c.Next() (call after the write, with
  /// the pin released). Completes the slot, and the receive with its last slot,
  /// when the slot's claims cover its message and all have landed. RemoteError when
  /// the entry no longer holds c.seq or the bytes overrun the claim.
  Status EndWrite(ChunkClaim* c, size_t bytes);

  /// Claim + land in one step, for a transport whose hardware placed the chunk
  /// before its header was seen (verbs: the immediate arrives after the data, and
  /// the HCA enforces the registration). Same checks and errors as Claim.
  Status ClaimLanded(const ChunkHeader& h);

  /// True once every buffer of `e` has its whole message.
  static bool Done(const Entry& e) {
    return e.slotsDone.load(std::memory_order_acquire) == e.n;
  }
  /// Returns `e` to the free pool (after test reported done, on close, or when
  /// irecv failed after Post). A claim still held on it is refused from then on.
  static void Release(Entry& e) {
    std::lock_guard lock(e.mu);
    e.seq.store(kFree, std::memory_order_release);
  }
  /// "seq S (from rank T[,T...])" for the oldest posted receive, or "no receive
  /// posted" (for error messages).
  std::string DescribeOldest() const { return DescribeOldest(LocalRank()); }
  /// As DescribeOldest(), naming `me` (-1: "?") as this process's rank.
  std::string DescribeOldest(int me) const;
  /// Entries currently posted (for diagnostics and tests).
  int InFlight() const;
  /// Next sequence number Post will use.
  uint64_t NextSeq() const { return nextSeq_; }

 private:
  /// Claim with e.mu held.
  Status ClaimLocked(Entry& e, const ChunkHeader& h, ChunkClaim* out);
  /// Marks slot `slot` of `e` complete when its ledger is; e.mu held.
  void SettleLocked(Entry& e, uint32_t slot);

  const MrCache* cache_;
  const Poison* poison_;
  std::array<Entry, kMaxRequests> entries_;
  uint64_t nextSeq_ = 0;
};

}  // namespace railyard::proxy
