#include "proxy/fabric/byte_claims.h"

namespace railyard::fabric {

ByteClaims::Result ByteClaims::Claim(uint64_t offset, uint64_t bytes) {
  if (offset > total_ || bytes > total_ - offset) return Result::kOutOfRange;
  if (bytes == 0) return Result::kOk;
  const uint64_t end = offset + bytes;
  auto next = ranges_.lower_bound(offset);  // first range starting at or after offset
  if (next != ranges_.end() && next->first < end) return Result::kOverlap;
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second > offset) return Result::kOverlap;
  }
  if (ranges_.size() >= maxClaims_) return Result::kTooMany;
  ranges_.emplace_hint(next, offset, end);
  claimed_ += bytes;
  return Result::kOk;
}

bool ByteClaims::Land(uint64_t bytes) {
  if (bytes > claimed_ - landed_) return false;
  landed_ += bytes;
  return true;
}

const char* ByteClaims::ResultName(Result r) {
  switch (r) {
    case Result::kOk: return "ok";
    case Result::kOutOfRange: return "outside the operation";
    case Result::kOverlap: return "overlaps an earlier chunk";
    case Result::kTooMany: return "too many chunks";
  }
  return "unknown";
}

}  // namespace railyard::fabric
