#include "proxy/protocol/claim_ledger.h"

#include <iterator>
#include <string>

namespace railyard::proxy {

namespace {
std::string RangeText(uint64_t lo, uint64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}
}  // namespace

void ClaimLedger::Reset(uint64_t capacity) {
  capacity_ = capacity;
  total_ = -1;
  claimed_ = 0;
  landed_ = 0;
  outstanding_ = 0;
  ranges_.clear();
}

Status ClaimLedger::Claim(uint64_t offset, uint64_t len, uint64_t total) {
  if (Complete()) {
    return RemoteError("bytes " + RangeText(offset, offset + len) +
                       " claimed for a message that is already complete");
  }
  if (total > capacity_) {
    return RemoteError("message of " + std::to_string(total) + " bytes for a buffer of " +
                       std::to_string(capacity_) + " bytes");
  }
  if (total_ >= 0 && static_cast<uint64_t>(total_) != total) {
    return RemoteError("message size " + std::to_string(total) + " differs from the " +
                       std::to_string(total_) + " bytes announced before");
  }
  if (len > total || offset > total - len || (len == 0 && total != 0)) {
    return RemoteError("bytes " + RangeText(offset, offset + len) + " lie outside the message [0, " +
                       std::to_string(total) + ")");
  }
  if (len > 0) {
    // The first range starting at or after `offset`, and the one before it.
    auto next = ranges_.lower_bound(offset);
    if (next != ranges_.end() && next->first < offset + len) {
      return RemoteError("bytes " + RangeText(offset, offset + len) + " overlap bytes " +
                         RangeText(next->first, next->second.end) + " already claimed");
    }
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.end > offset) {
        return RemoteError("bytes " + RangeText(offset, offset + len) + " overlap bytes " +
                           RangeText(prev->first, prev->second.end) + " already claimed");
      }
    }
    ranges_.emplace_hint(next, offset, Range{offset + len, 0});
    ++outstanding_;
  }
  total_ = static_cast<int64_t>(total);
  claimed_ += len;
  return Status::Ok();
}

Status ClaimLedger::Land(uint64_t offset, uint64_t bytes, bool* whole) {
  *whole = false;
  auto it = ranges_.find(offset);
  if (it == ranges_.end() || it->second.landed == it->second.end - it->first) {
    return RemoteError("bytes landed at offset " + std::to_string(offset) +
                       " without an outstanding claim there");
  }
  Range& r = it->second;
  if (bytes > r.end - it->first - r.landed) {
    return RemoteError(std::to_string(bytes) + " bytes landed past the end of claim " +
                       RangeText(it->first, r.end) + " (" + std::to_string(r.landed) +
                       " landed before)");
  }
  r.landed += bytes;
  landed_ += bytes;
  if (r.landed == r.end - it->first) {
    *whole = true;
    --outstanding_;
    Merge(it);
  }
  return Status::Ok();
}

void ClaimLedger::Merge(std::map<uint64_t, Range>::iterator it) {
  auto isWhole = [](const std::map<uint64_t, Range>::iterator& i) {
    return i->second.landed == i->second.end - i->first;
  };
  auto next = std::next(it);
  if (next != ranges_.end() && next->first == it->second.end && isWhole(next)) {
    it->second.end = next->second.end;
    it->second.landed = it->second.end - it->first;
    ranges_.erase(next);
  }
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end == it->first && isWhole(prev)) {
      prev->second.end = it->second.end;
      prev->second.landed = prev->second.end - prev->first;
      ranges_.erase(it);
    }
  }
}

}  // namespace railyard::proxy
