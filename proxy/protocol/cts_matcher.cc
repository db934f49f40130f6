#include "proxy/protocol/cts_matcher.h"

#include <string>

namespace railyard::proxy {

Status CtsMatcher::Push(const CtsRecord& rec) {
  if (rec.n < 1 || rec.n > static_cast<uint32_t>(kMaxRecvs)) {
    return RemoteError("clear-to-send record for seq " + std::to_string(rec.seq) + " has " +
                       std::to_string(rec.n) + " buffers, expected 1.." +
                       std::to_string(kMaxRecvs));
  }
  if (rec.seq != nextSeq_) {
    return RemoteError("clear-to-send record has seq " + std::to_string(rec.seq) +
                       ", expected " + std::to_string(nextSeq_));
  }
  if (queue_.size() >= kMaxPending) {
    return RemoteError("peer posted more than " + std::to_string(kMaxPending) +
                       " receives without matching sends");
  }
  queue_.push_back(Posted{rec, 0});
  ++nextSeq_;
  return Status::Ok();
}

Status CtsMatcher::Match(int tag, uint64_t size, SendMatch* out, bool* found) {
  *found = false;
  if (queue_.empty()) return Status::Ok();
  Posted& p = queue_.front();
  for (uint32_t i = 0; i < p.rec.n; ++i) {
    if ((p.usedMask & (1u << i)) != 0 || p.rec.entries[i].tag != tag) continue;
    const CtsEntry& e = p.rec.entries[i];
    if (size > e.size) {
      return InvalidUsage("send of " + std::to_string(size) + " bytes with tag " +
                          std::to_string(tag) + " is larger than the posted receive buffer of " +
                          std::to_string(e.size) + " bytes (seq " + std::to_string(p.rec.seq) +
                          ")");
    }
    out->seq = p.rec.seq;
    out->slot = i;
    out->entry = e;
    *found = true;
    p.usedMask |= 1u << i;
    if (p.usedMask == (1u << p.rec.n) - 1) queue_.pop_front();
    return Status::Ok();
  }
  return Status::Ok();
}

std::string CtsMatcher::OldestUnmatchedTags() const {
  if (queue_.empty()) return "none posted";
  std::string s;
  const Posted& p = queue_.front();
  for (uint32_t i = 0; i < p.rec.n; ++i) {
    if ((p.usedMask & (1u << i)) != 0) continue;
    if (!s.empty()) s += ",";
    s += std::to_string(p.rec.entries[i].tag);
  }
  return s;
}

}  // namespace railyard::proxy
