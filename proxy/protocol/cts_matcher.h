// Sender side of the receiver-posted-buffer protocol: the queue of clear-to-send
// records and the tag matching of sends against them. Transport-independent.
#pragma once

#include <cstdint>
#include <deque>

#include "env/status.h"
#include "proxy/wire.h"

namespace railyard::proxy {

/// Where one send goes: receive `seq`, buffer `slot`, described by `entry`.
struct SendMatch {
  uint64_t seq = 0;
  uint32_t slot = 0;
  CtsEntry entry{};
};

/// Queue of posted receives as announced by the receiver, oldest first.
/// Matching follows NCCL's rule (nccl-net-abi.md §2.5 "irecv"): receives match in
/// posting order; tags only choose the buffer inside the oldest pending grouped
/// receive. Not thread-safe: owned by the thread that calls isend/test.
class CtsMatcher {
 public:
  /// Most receives a peer may have posted and not yet matched (NCCL_NET_MAX_REQUESTS).
  static constexpr size_t kMaxPending = 32;

  /// Appends a CTS record. RemoteError when the record breaks the protocol: n outside
  /// 1..kMaxRecvs, a sequence number other than the next expected, or more than
  /// kMaxPending receives outstanding.
  Status Push(const CtsRecord& rec);

  /// Matches a send of `size` bytes tagged `tag` against the oldest pending receive.
  /// *found = false (Ok) when nothing is posted yet or the oldest receive has no
  /// unmatched buffer with that tag (a later isend may match after other tags have
  /// been sent). InvalidUsage when the matched buffer is smaller than `size`.
  Status Match(int tag, uint64_t size, SendMatch* out, bool* found);

  /// The receive sequence the next send will match: the oldest pending receive, or
  /// the next one the peer has yet to post (for error messages).
  uint64_t NextSeq() const { return queue_.empty() ? nextSeq_ : queue_.front().rec.seq; }
  /// Receives announced and not fully matched.
  size_t Pending() const { return queue_.size(); }
  /// Tags still unmatched in the oldest pending receive, e.g. "1,3" (for errors).
  std::string OldestUnmatchedTags() const;

 private:
  struct Posted {
    CtsRecord rec;
    uint32_t usedMask = 0;  ///< bit i set once entry i was matched
  };
  std::deque<Posted> queue_;
  uint64_t nextSeq_ = 0;
};

}  // namespace railyard::proxy
