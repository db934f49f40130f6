// Byte-range claims of one operation: a chunk's range is claimed when its header is
// accepted, overlapping claims are refused, and the operation is complete only when
// every byte of it was claimed and has landed (issue 9 item 1 and issue 10: "no byte
// may land after completion or outside a live registration").
//
// proxy/protocol/recv_table.* gets the same guarantees for the NCCL comms (the
// recv-guard work for issue 9); this small tracker is the fabric's own, so the
// fabric layer does not depend on the comms' protocol code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace railyard::fabric {

/// Claims over the byte offsets [0, total) of one operation. Not thread-safe (one
/// Worker thread owns it).
class ByteClaims {
 public:
  /// Default bound on claims per operation: 256 MiB in 4 KiB chunks. A peer that
  /// sends more, smaller chunks is refused instead of growing this map without bound.
  static constexpr size_t kDefaultMaxClaims = 65536;

  enum class Result {
    kOk,
    kOutOfRange,  ///< [offset, offset + bytes) is not inside [0, total)
    kOverlap,     ///< overlaps an earlier claim
    kTooMany,     ///< more claims than the bound
  };

  ByteClaims() : ByteClaims(0) {}
  explicit ByteClaims(uint64_t total, size_t maxClaims = kDefaultMaxClaims)
      : total_(total), maxClaims_(maxClaims) {}

  /// Claims [offset, offset + bytes). A 0-byte claim at offset <= total is accepted
  /// and claims nothing.
  Result Claim(uint64_t offset, uint64_t bytes);
  /// Records that `bytes` claimed bytes have fully landed. False (nothing recorded)
  /// when that would exceed the bytes claimed so far.
  bool Land(uint64_t bytes);
  /// Every byte claimed and landed (immediately true for total 0).
  bool Complete() const { return landed_ == total_; }
  /// Every byte claimed (it may still be landing).
  bool FullyClaimed() const { return claimed_ == total_; }

  uint64_t total() const { return total_; }
  uint64_t claimed() const { return claimed_; }
  uint64_t landed() const { return landed_; }
  size_t claims() const { return ranges_.size(); }

  static const char* ResultName(Result r);

 private:
  uint64_t total_;
  size_t maxClaims_;
  uint64_t claimed_ = 0;
  uint64_t landed_ = 0;
  std::map<uint64_t, uint64_t> ranges_;  ///< start -> end (exclusive); disjoint
};

}  // namespace railyard::fabric
