#include "proxy/protocol/recv_table.h"

#include <string>

namespace railyard::proxy {

namespace {
std::string Describe(const ChunkHeader& h) {
  return "seq " + std::to_string(h.seq) + " slot " + std::to_string(h.slot) + " addr 0x" +
         [](uint64_t v) {
           char b[24];
           std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
           return std::string(b);
         }(h.addr) +
         " len " + std::to_string(h.len) + " rkey " + std::to_string(h.rkey);
}
}  // namespace

RecvTable::RecvTable(Comm* owner, const MrCache* cache) : cache_(cache) {
  for (Entry& e : entries_) e.owner = owner;
}

Status RecvTable::Post(int n, void* const* data, const size_t* sizes, const int* tags,
                       MemoryRegion* const* mrs, Entry** out, CtsRecord* cts) {
  if (n < 1 || n > kMaxRecvs) {
    return InvalidArgument("irecv with n = " + std::to_string(n) + ", expected 1.." +
                           std::to_string(kMaxRecvs));
  }
  Entry& e = entries_[nextSeq_ % kMaxRequests];
  if (e.seq.load(std::memory_order_acquire) != kFree) {
    return InternalError("more than " + std::to_string(kMaxRequests) +
                         " receives in flight on one comm (NCCL_NET_MAX_REQUESTS)");
  }
  for (int i = 0; i < n; ++i) {
    const uint64_t a = reinterpret_cast<uint64_t>(data[i]);
    if (mrs == nullptr || mrs[i] == nullptr || !cache_->IsRegistered(mrs[i])) {
      return InvalidArgument("irecv buffer " + std::to_string(i) +
                             " has no registered memory handle (call regMr first)");
    }
    if (!mrs[i]->Contains(a, sizes[i])) {
      return InvalidArgument("irecv buffer " + std::to_string(i) + " (" +
                             std::to_string(sizes[i]) +
                             " bytes) lies outside the region its memory handle registered");
    }
  }
  *cts = CtsRecord{};
  cts->header = MakeHeader(RecordKind::kCts);
  cts->seq = nextSeq_;
  cts->n = static_cast<uint32_t>(n);
  e.n = n;
  for (int i = 0; i < n; ++i) {
    e.addr[i] = reinterpret_cast<uint64_t>(data[i]);
    e.size[i] = sizes[i];
    e.rkey[i] = mrs[i]->rkey;
    e.tag[i] = tags[i];
    e.received[i].store(0, std::memory_order_relaxed);
    e.total[i].store(-1, std::memory_order_relaxed);
    e.complete[i].store(false, std::memory_order_relaxed);
    cts->entries[i] = CtsEntry{e.addr[i], e.size[i], e.rkey[i], tags[i]};
  }
  e.slotsDone.store(0, std::memory_order_relaxed);
  e.posted = Clock::now();
  e.seq.store(nextSeq_, std::memory_order_release);  // publish to data threads
  ++nextSeq_;
  *out = &e;
  return Status::Ok();
}

Status RecvTable::Validate(const ChunkHeader& h, char** dest) const {
  const Entry& e = entries_[h.seq % kMaxRequests];
  if (e.seq.load(std::memory_order_acquire) != h.seq) {
    return RemoteError("rejected remote write for a receive that is not posted: " + Describe(h));
  }
  if (h.slot >= static_cast<uint32_t>(e.n)) {
    return RemoteError("rejected remote write to a buffer index that was not posted: " +
                       Describe(h));
  }
  const uint64_t base = e.addr[h.slot], size = e.size[h.slot];
  if (h.total > size) {
    return RemoteError("rejected message of " + std::to_string(h.total) +
                       " bytes for a posted buffer of " + std::to_string(size) + " bytes: " +
                       Describe(h));
  }
  const bool inBuffer = h.addr >= base && h.len <= size && h.addr - base <= size - h.len;
  if (!inBuffer || h.rkey != e.rkey[h.slot] || (h.len == 0 && h.total != 0) ||
      !cache_->Contains(h.rkey, h.addr, h.len)) {
    return RemoteError("rejected remote write outside the posted, registered buffer: " +
                       Describe(h));
  }
  *dest = reinterpret_cast<char*>(h.addr);
  return Status::Ok();
}

Status RecvTable::Land(const ChunkHeader& h) {
  Entry& e = entries_[h.seq % kMaxRequests];
  int64_t expected = -1;
  const auto total = static_cast<int64_t>(h.total);
  if (!e.total[h.slot].compare_exchange_strong(expected, total, std::memory_order_acq_rel) &&
      expected != total) {
    return RemoteError("peer announced two different sizes (" + std::to_string(expected) +
                       " and " + std::to_string(total) + ") for " + Describe(h));
  }
  const uint64_t now = e.received[h.slot].fetch_add(h.len, std::memory_order_acq_rel) + h.len;
  if (now > h.total) {
    return RemoteError("peer sent more bytes than it announced for " + Describe(h));
  }
  if (now == h.total) {
    if (e.complete[h.slot].exchange(true, std::memory_order_acq_rel)) {
      return RemoteError("peer completed a buffer twice: " + Describe(h));
    }
    e.slotsDone.fetch_add(1, std::memory_order_acq_rel);
  }
  return Status::Ok();
}

std::string RecvTable::DescribeOldest() const {
  const Entry* oldest = nullptr;
  uint64_t best = kFree;
  for (const Entry& e : entries_) {
    const uint64_t s = e.seq.load(std::memory_order_acquire);
    if (s != kFree && s < best) {
      best = s;
      oldest = &e;
    }
  }
  if (oldest == nullptr) return "no receive posted";
  std::string tags;
  for (int i = 0; i < oldest->n; ++i) tags += (i ? "," : "") + std::to_string(oldest->tag[i]);
  const int me = LocalRank();
  return "seq " + std::to_string(best) + " (rank " + (me >= 0 ? std::to_string(me) : std::string("?")) +
         " from rank " + tags + ")";
}

int RecvTable::InFlight() const {
  int k = 0;
  for (const Entry& e : entries_) k += e.seq.load(std::memory_order_acquire) != kFree;
  return k;
}

}  // namespace railyard::proxy
