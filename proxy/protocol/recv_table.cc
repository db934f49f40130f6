#include "proxy/protocol/recv_table.h"

#include <cstdio>
#include <string>

namespace railyard::proxy {

namespace {
std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
std::string DescribeRecv(uint64_t seq, uint32_t slot, uint64_t addr, uint64_t len, uint32_t rkey) {
  return "seq " + std::to_string(seq) + " slot " + std::to_string(slot) + " addr " + Hex(addr) +
         " len " + std::to_string(len) + " rkey " + std::to_string(rkey);
}
std::string DescribeRecv(const ChunkHeader& h) { return DescribeRecv(h.seq, h.slot, h.addr, h.len, h.rkey); }
std::string DescribeRecv(const RecvTable::ChunkClaim& c) {
  return DescribeRecv(c.seq, c.slot, c.addr, c.len, c.rkey);
}
}  // namespace

RecvTable::RecvTable(Comm* owner, const MrCache* cache, const Poison* poison)
    : cache_(cache), poison_(poison) {
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
  {
    std::lock_guard lock(e.mu);
    e.n = n;
    for (int i = 0; i < n; ++i) {
      e.addr[i] = reinterpret_cast<uint64_t>(data[i]);
      e.size[i] = sizes[i];
      e.rkey[i] = mrs[i]->rkey;
      e.tag[i] = tags[i];
      e.total[i].store(-1, std::memory_order_relaxed);
      e.ledger[i].Reset(sizes[i]);
      e.slotDone[i] = false;
      cts->entries[i] = CtsEntry{e.addr[i], e.size[i], e.rkey[i], tags[i]};
    }
    e.slotsDone.store(0, std::memory_order_relaxed);
    e.posted = Clock::now();
    e.seq.store(nextSeq_, std::memory_order_release);  // publish to data threads
  }
  ++nextSeq_;
  *out = &e;
  return Status::Ok();
}

Status RecvTable::ClaimLocked(Entry& e, const ChunkHeader& h, ChunkClaim* out) {
  if (e.seq.load(std::memory_order_acquire) != h.seq) {
    return RemoteError("rejected remote write for a receive that is not posted: " + DescribeRecv(h));
  }
  if (h.slot >= static_cast<uint32_t>(e.n)) {
    return RemoteError("rejected remote write to a buffer index that was not posted: " +
                       DescribeRecv(h));
  }
  const uint64_t base = e.addr[h.slot], size = e.size[h.slot];
  if (h.total > size) {
    return RemoteError("rejected message of " + std::to_string(h.total) +
                       " bytes for a posted buffer of " + std::to_string(size) + " bytes: " +
                       DescribeRecv(h));
  }
  const bool inBuffer = h.addr >= base && h.len <= size && h.addr - base <= size - h.len;
  if (!inBuffer || h.rkey != e.rkey[h.slot] || !cache_->Contains(h.rkey, h.addr, h.len)) {
    return RemoteError("rejected remote write outside the posted, registered buffer: " +
                       DescribeRecv(h));
  }
  if (Status s = e.ledger[h.slot].Claim(h.addr - base, h.len, h.total); !s.ok()) {
    return RemoteError("rejected chunk: " + s.message() + ": " + DescribeRecv(h));
  }
  e.total[h.slot].store(static_cast<int64_t>(h.total), std::memory_order_release);
  if (out != nullptr) {
    *out = ChunkClaim{&e, h.seq, h.slot, h.rkey, h.addr, h.addr - base, h.len, 0};
  }
  SettleLocked(e, h.slot);  // an empty message is complete with its header
  return Status::Ok();
}

void RecvTable::SettleLocked(Entry& e, uint32_t slot) {
  if (e.slotDone[slot] || !e.ledger[slot].Complete()) return;
  e.slotDone[slot] = true;
  e.slotsDone.fetch_add(1, std::memory_order_acq_rel);
}

Status RecvTable::Claim(const ChunkHeader& h, ChunkClaim* out) {
  if (poison_ != nullptr && poison_->IsSet()) {
    return RemoteError("rejected remote write after the comm failed: " + DescribeRecv(h));
  }
  Entry& e = entries_[h.seq % kMaxRequests];
  std::lock_guard lock(e.mu);
  return ClaimLocked(e, h, out);
}

Status RecvTable::ClaimLanded(const ChunkHeader& h) {
  Entry& e = entries_[h.seq % kMaxRequests];
  std::lock_guard lock(e.mu);
  ChunkClaim c;
  RY_RETURN_IF_ERROR(ClaimLocked(e, h, &c));
  if (c.len == 0) return Status::Ok();
  bool whole = false;
  RY_RETURN_IF_ERROR(e.ledger[c.slot].Land(c.offset, c.len, &whole));
  SettleLocked(e, c.slot);
  return Status::Ok();
}

Status RecvTable::BeginWrite(const ChunkClaim& c, WritePin* pin) {
  pin->Release();
  if (c.entry == nullptr || c.landed >= c.len) {
    return InternalError("write without an outstanding claim: " + DescribeRecv(c));
  }
  if (poison_ != nullptr && poison_->IsSet()) {
    return RemoteError("refused the rest of a chunk after the comm failed (" +
                       std::to_string(c.landed) + " of " + std::to_string(c.len) +
                       " bytes had landed): " + DescribeRecv(c));
  }
  std::lock_guard lock(c.entry->mu);
  if (c.entry->seq.load(std::memory_order_acquire) != c.seq) {
    return RemoteError("refused the rest of a chunk whose receive is no longer posted: " + DescribeRecv(c));
  }
  const uint64_t at = c.addr + c.landed;
  if (!cache_->PinForWrite(c.rkey, at, c.len - c.landed, &pin->region_)) {
    return RemoteError("refused the rest of a chunk: its buffer was deregistered (deregMr) while " +
                       std::to_string(c.len - c.landed) + " bytes were still to land: " + DescribeRecv(c));
  }
  return Status::Ok();
}

Status RecvTable::EndWrite(ChunkClaim* c, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  std::lock_guard lock(c->entry->mu);
  if (c->entry->seq.load(std::memory_order_acquire) != c->seq || c->slot >= static_cast<uint32_t>(c->entry->n)) {
    return RemoteError("bytes landed for a receive that is no longer posted: " + DescribeRecv(*c));
  }
  bool whole = false;
  if (Status s = c->entry->ledger[c->slot].Land(c->offset, bytes, &whole); !s.ok()) {
    return RemoteError(s.message() + ": " + DescribeRecv(*c));
  }
  c->landed += bytes;
  SettleLocked(*c->entry, c->slot);
  return Status::Ok();
}

std::string RecvTable::DescribeOldest(int me) const {
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
  return "seq " + std::to_string(best) + " (rank " + (me >= 0 ? std::to_string(me) : std::string("?")) +
         " from rank " + tags + ")";
}

int RecvTable::InFlight() const {
  int k = 0;
  for (const Entry& e : entries_) k += e.seq.load(std::memory_order_acquire) != kFree;
  return k;
}

}  // namespace railyard::proxy
