// Byte-range claims on one posted buffer. A remote writer claims a range before
// any byte of it lands; claims never overlap; the buffer holds a whole message
// only when the claims cover exactly [0, total) and every claimed byte has
// landed. The rule that keeps a late payload out of a completed, reused or
// deregistered receive: a receive with a claim still arriving cannot complete.
//
// Used by RecvTable for every transport (TCP: a claim lives from a chunk header to
// the end of its payload; verbs: claimed and landed at once, when the immediate
// arrives after the data) and meant for the TCP emulation of one-sided writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "env/status.h"

namespace railyard::proxy {

/// Claims on one buffer of `capacity` bytes, offsets relative to the buffer start.
/// Not thread-safe: the caller serialises every call (RecvTable holds the entry's
/// mutex). A refused call changes nothing.
class ClaimLedger {
 public:
  /// Forgets every claim and the message size; the buffer now holds `capacity` bytes.
  void Reset(uint64_t capacity);

  /// Claims [offset, offset+len) of a message of `total` bytes. RemoteError (saying
  /// which rule, with the ranges in bytes) when: the message is larger than the
  /// buffer; `total` differs from an earlier claim's; the range is not inside
  /// [0, total) (len 0 only for an empty message); it overlaps an earlier claim,
  /// landed or not; or the message is already complete.
  Status Claim(uint64_t offset, uint64_t len, uint64_t total);

  /// Records `bytes` more landed bytes of the claim that starts at `offset` (a
  /// claim lands front to back, possibly in many steps). RemoteError when no
  /// claim starts there or the bytes overrun it. *whole = true once that claim
  /// has every byte.
  Status Land(uint64_t offset, uint64_t bytes, bool* whole);

  /// True when a message size is known and claimed == landed == total bytes.
  bool Complete() const {
    return total_ >= 0 && claimed_ == static_cast<uint64_t>(total_) && landed_ == claimed_;
  }
  /// Message size announced by the first claim; -1 before it.
  int64_t total() const { return total_; }
  /// Bytes claimed so far (sum of the claim lengths).
  uint64_t claimed() const { return claimed_; }
  /// Bytes landed so far.
  uint64_t landed() const { return landed_; }
  /// Claims whose bytes have not all landed.
  size_t outstanding() const { return outstanding_; }

 private:
  struct Range {
    uint64_t end;     ///< one past the last byte
    uint64_t landed;  ///< bytes landed from the start of the range
  };
  /// Merges whole range `it` with whole neighbours that touch it (keeps the map short).
  void Merge(std::map<uint64_t, Range>::iterator it);

  uint64_t capacity_ = 0;
  int64_t total_ = -1;
  uint64_t claimed_ = 0;
  uint64_t landed_ = 0;
  size_t outstanding_ = 0;
  std::map<uint64_t, Range> ranges_;  ///< key = first byte; disjoint
};

}  // namespace railyard::proxy
