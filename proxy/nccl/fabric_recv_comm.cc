#include "proxy/nccl/fabric_recv_comm.h"

#include <algorithm>
#include <cstring>

#include "env/log.h"

namespace railyard::proxy::nccl {

namespace {
/// Cookie bits: the CTS Write of slot (low bits), and the close notice.
constexpr uint64_t kCtsCookie = 1ull << 39;
constexpr uint64_t kRecvControlCookie = 1ull << 38;
/// Cookie bit of a flush READ (low bits: its FlushRequest).
constexpr uint64_t kFlushCookie = 1ull << 37;
}  // namespace

FabricRecvComm::FabricRecvComm(CommWorker* cw, size_t deviceIndex, const MrCache* cache)
    : cw_(cw), dev_(deviceIndex), outbox_(RecvTable::kMaxRequests), table_(this, cache, &poison_) {
  for (FlushRequest& f : flushes_) f.owner = this;
}

FabricRecvComm::FlushRequest* FabricRecvComm::AsFlush(Request* r) {
  for (FlushRequest& f : flushes_) {
    if (&f == r) return &f;
  }
  return nullptr;
}

Status FabricRecvComm::IflushFabric(int n, void** data, const int* sizes, MemHandle* const* mhs, Request** request) {
  *request = nullptr;
  auto lock = cw_->Lock();
  if (closed_) return InvalidUsage("iflush on a closed comm");
  RY_RETURN_IF_ERROR(CheckEndpoint());
  int last = -1;
  for (int i = 0; i < n && i < kMaxRecvs; ++i) {
    if (sizes[i] > 0 && mhs != nullptr && mhs[i] != nullptr && mhs[i]->magic == MemHandle::kMagic) last = i;
  }
  if (last < 0) return Status::Ok();
  const uint64_t addr = reinterpret_cast<uint64_t>(data[last]);
  const fabric::Region* region = mhs[last]->RegionFor(dev_, addr, 1);
  if (region == nullptr || region->kind != fabric::MemoryKind::kDevice) return Status::Ok();  // host: nothing to flush
  FlushRequest* f = nullptr;
  for (FlushRequest& c : flushes_) {
    if (!c.inUse) {
      f = &c;
      break;
    }
  }
  if (f == nullptr) return InternalError("more than " + std::to_string(flushes_.size()) + " flushes in flight");
  fabric::Endpoint* loop = nullptr;
  fabric::LocalSlice word;
  RY_RETURN_IF_ERROR(cw_->LoopbackLocked(&loop, &word));
  const uint64_t idx = static_cast<uint64_t>(f - flushes_.data());
  RY_RETURN_IF_ERROR(loop->Read(word, region->Key(), addr, (uint64_t{id_} << kCookieCommShift) | kFlushCookie | idx));
  f->inUse = true;
  f->done = false;
  f->error = Status::Ok();
  cw_->DriveLocked();
  *request = f;
  return Status::Ok();
}

Status FabricRecvComm::CreateLocked(CommWorker* cw, size_t deviceIndex, Hello hello, fabric::RemoteKey fifoKey,
                                    uint64_t peerWorker, const MrCache* cache, std::shared_ptr<RankSource> rank,
                                    std::unique_ptr<FabricRecvComm>* out) {
  std::unique_ptr<FabricRecvComm> c(new FabricRecvComm(cw, deviceIndex, cache));
  c->rank_ = rank != nullptr ? std::move(rank) : std::make_shared<RankSource>();
  c->peer_.host = hello.host;
  c->peer_.pid = hello.pid;
  c->peer_.device = cw->device();
  c->peerCommId_ = hello.sendCommId;
  c->fifoKey_ = std::move(fifoKey);
  std::memset(c->outbox_.data(), 0, c->outbox_.size() * sizeof(FabricCts));
  RY_RETURN_IF_ERROR(cw->domain().Register(c->outbox_.data(), c->outbox_.size() * sizeof(FabricCts),
                                           fabric::kAccessLocal, fabric::MemoryKind::kHost, &c->outboxRegion_));
  if (Status s = cw->worker().Connect(hello.address, &c->ep_); !s.ok()) {
    return RemoteError("accept from " + c->peer_.ToString() + ": its hello's worker address: " + s.message());
  }
  // This comm's own Endpoint back to the sender carries its clear-to-sends; relayed, its
  // route may differ from the one the sender's data takes (a ring's opposite host:
  // each side's lowest first hop), so the name says whose route it is.
  c->peer_.address = c->ep_->PeerName();
  if (c->peer_.address.find(" via ") != std::string::npos) c->peer_.address = "clear-to-sends to " + c->peer_.address;
  c->peerWorkers_.SetLimit(c->ep_->Routes());
  (void)c->peerWorkers_.Admit(peerWorker);
  RY_RETURN_IF_ERROR(cw->AddClient(c.get(), &c->id_));
  c->registered_ = true;
  *out = std::move(c);
  return Status::Ok();
}

FabricRecvComm::~FabricRecvComm() { Close(); }

std::string FabricRecvComm::Who() const {
  const int peer = peerRank_.load(std::memory_order_relaxed);
  return "receive comm (" + rank_->Text() + (peer >= 0 ? ", from rank " + std::to_string(peer) : "") + ")";
}

void FabricRecvComm::Poisoned(const Status& s) {
  // The message sequence the comm was at: the oldest receive posted, else the next.
  // Named in every comm error, as the transport's own seq is absent when the fault
  // came as a broken connection with none of this comm's ops on it.
  uint64_t seq = table_.NextSeq();
  for (size_t i = 0; i < posted_.size(); ++i) {
    if (posted_[i] != nullptr) seq = std::min(seq, postedSeq_[i]);
  }
  poison_.Set(Status(s.code(), Who() + " from " + peer_.ToString() + ", message seq " +
                                   std::to_string(seq) + ": " + s.message()),
              table_.InFlight() > 0);
}

Status FabricRecvComm::CheckEndpoint() {
  if (!poison_.IsSet() && ep_ != nullptr && !ep_->status().ok()) Poisoned(ep_->status());
  return poison_.Get();
}

Status FabricRecvComm::Irecv(int, void**, const size_t*, const int*, MemoryRegion**, Request**) {
  return InternalError("fabric receive comm: irecv without MemHandles (plugin routing bug)");
}

Status FabricRecvComm::IrecvFabric(int n, void** data, const size_t* sizes, const int* tags, MemHandle* const* mhs,
                                   Request** request) {
  *request = nullptr;
  auto lock = cw_->Lock();
  if (closed_) return InvalidUsage("irecv on a closed comm");
  if (n < 1 || n > kMaxRecvs) {
    return InvalidArgument("irecv of " + std::to_string(n) + " buffers (1.." + std::to_string(kMaxRecvs) + ")");
  }
  // No Progress pass before the post: the clear-to-send leaves first, the pass
  // after it takes in whatever arrived meanwhile.
  RY_RETURN_IF_ERROR(CheckEndpoint());
  MemoryRegion* legacy[kMaxRecvs] = {};
  for (int i = 0; i < n; ++i) {
    if (mhs == nullptr || mhs[i] == nullptr || mhs[i]->magic != MemHandle::kMagic) {
      return InvalidArgument("irecv buffer " + std::to_string(i) + " has no registration (regMr it first)");
    }
    legacy[i] = mhs[i]->legacy;
  }
  if (tags != nullptr && tags[0] >= 0) peerRank_.store(tags[0], std::memory_order_relaxed);
  const uint64_t seq = table_.NextSeq();
  FabricCts& rec = outbox_[seq % RecvTable::kMaxRequests];
  // Every key first: a refused buffer must leave nothing posted.
  for (int i = 0; i < n; ++i) {
    const uint64_t a = reinterpret_cast<uint64_t>(data[i]);
    FabricCtsEntry& e = rec.entries[i];
    e = FabricCtsEntry{};
    e.addr = a;
    e.size = sizes[i];
    e.tag = tags[i];
    const fabric::Region* region = mhs[i]->RegionFor(dev_, a, sizes[i]);
    const std::vector<uint8_t>* key = region != nullptr ? &mhs[i]->devices[dev_].packedKey : nullptr;
    if (region == nullptr && sizes[i] == 0) {
      // A 0-byte buffer outside any fabric registration: the sender writes nothing;
      // name the outbox so its key unpacks (the Write of 0 bytes lands nowhere).
      e.addr = outboxRegion_->base;
      static thread_local std::vector<uint8_t> outboxKey;
      outboxKey = outboxRegion_->Key().Pack();
      key = &outboxKey;
    }
    if (key == nullptr) {
      return InvalidArgument("irecv buffer " + std::to_string(i) + " of " + std::to_string(sizes[i]) +
                             " bytes is outside its registration");
    }
    e.keyBytes = static_cast<uint16_t>(key->size());
    std::memcpy(e.key, key->data(), key->size());
  }
  RecvTable::Entry* entry = nullptr;
  CtsRecord plain;
  RY_RETURN_IF_ERROR(table_.Post(n, data, sizes, tags, legacy, &entry, &plain));
  rec.header = MakeHeader(RecordKind::kFabricCts);
  rec.seq = seq;
  rec.n = static_cast<uint32_t>(n);
  rec.recvCommId = id_;
  const uint32_t idx = static_cast<uint32_t>(seq % RecvTable::kMaxRequests);
  posted_[idx] = entry;
  postedSeq_[idx] = seq;
  fabric::LocalSlice src{outboxRegion_, idx * sizeof(FabricCts), FabricCtsBytes(rec.n)};
  // Nothing waits for a clear-to-send's kDone (only its error counts): WriteLazy, so
  // its completion costs the target no ack of its own.
  if (Status s = ep_->WriteLazy(src, fifoKey_, fifoKey_.base + idx * sizeof(FabricCts),
                            (uint64_t{id_} << kCookieCommShift) | kCtsCookie | idx,
                            (peerCommId_ << kImmCommShift) | idx);
      !s.ok()) {
    RecvTable::Release(*entry);
    posted_[idx] = nullptr;
    Poisoned(s);
    return poison_.Get();
  }
  cw_->DriveLocked();  // the record goes out now, not at the next call
  *request = entry;
  return Status::Ok();
}

Status FabricRecvComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  if (FlushRequest* f = AsFlush(request)) {
    auto lock = cw_->Lock();
    if (!f->inUse) return InternalError("test of a flush request that is not in flight");
    if (!f->done) cw_->DriveLocked();
    if (!f->done) return Status::Ok();
    f->inUse = false;
    if (!f->error.ok()) return f->error;
    *done = 1;
    (void)sizes;  // a flush reports no sizes
    return Status::Ok();
  }
  auto* e = static_cast<RecvTable::Entry*>(request);
  if (e->seq.load(std::memory_order_acquire) == RecvTable::kFree) {
    return InternalError("test of a receive request that is not in flight");
  }
  auto lock = cw_->Lock();
  if (!RecvTable::Done(*e)) cw_->DriveLocked();
  if (RecvTable::Done(*e)) {
    *done = 1;
    if (sizes != nullptr) {
      for (int i = 0; i < e->n; ++i) sizes[i] = static_cast<int>(e->total[i].load(std::memory_order_acquire));
    }
    const uint64_t seq = e->seq.load(std::memory_order_acquire);
    posted_[seq % RecvTable::kMaxRequests] = nullptr;
    RecvTable::Release(*e);
    return Status::Ok();
  }
  return CheckEndpoint();
}

void FabricRecvComm::OnEvent(const fabric::Event& e) {
  using fabric::EventKind;
  if (e.kind == EventKind::kImmediate) {
    if (!peerWorkers_.Admit(e.peer)) {
      Poisoned(RemoteError("a data immediate for this comm came from another worker (" +
                           std::to_string(peerWorkers_.size()) + " of the sender's " +
                           std::to_string(peerWorkers_.limit()) + " routes heard from already; in fabric mode, "
                           "RAILYARD_FABRIC_TCP_RELAY must be the same on every host)"));
      return;
    }
    const uint32_t cell = static_cast<uint32_t>(e.value & 0xff);
    const uint32_t idx = cell / kMaxRecvs;
    RecvTable::Entry* entry = posted_[idx];
    if (entry == nullptr) {
      Poisoned(RemoteError("data for receive cell " + std::to_string(cell) + ", which has no receive posted"));
      return;
    }
    ChunkHeader h{};
    h.header = MakeHeader(RecordKind::kChunk);
    h.seq = postedSeq_[idx];
    h.slot = cell % kMaxRecvs;
    h.len = static_cast<uint32_t>(std::min<uint64_t>(e.bytes, UINT32_MAX));
    if (h.slot >= static_cast<uint32_t>(entry->n) || e.bytes > UINT32_MAX) {
      Poisoned(RemoteError("data of " + std::to_string(e.bytes) + " bytes for seq " + std::to_string(h.seq) +
                           " slot " + std::to_string(h.slot) + ", which was not posted"));
      return;
    }
    h.addr = entry->addr[h.slot];
    h.total = e.bytes;
    h.rkey = entry->rkey[h.slot];
    if (Status s = table_.ClaimLanded(h); !s.ok()) Poisoned(s);
    return;
  }
  if (e.kind == EventKind::kRecord) {
    peerClosed_ = true;
    Poisoned(SystemError("the sender closed the comm"));
    return;
  }
  if (e.op == fabric::OpType::kNone) {
    Poisoned(e.error.ToStatus());
    return;
  }
  if ((e.cookie & kFlushCookie) != 0 && (e.cookie & kCtsCookie) == 0) {
    const uint64_t idx = e.cookie & 0xff;
    if (idx < flushes_.size() && flushes_[idx].inUse) {
      flushes_[idx].done = true;
      if (e.kind == EventKind::kError) {
        flushes_[idx].error = Status(e.error.ToStatus().code(), Who() + " from " +
                                                                    peer_.ToString() + ": flush READ: " +
                                                                    e.error.ToString());
      }
    }
    return;
  }
  if (e.kind == EventKind::kError) Poisoned(e.error.ToStatus());
}

void FabricRecvComm::Close() {
  auto lock = cw_->Lock();
  if (closed_) return;
  closed_ = true;
  if (ep_ != nullptr && cw_->running()) ep_->QuietPeerClose();  // the sender may close at the same moment
  if (ep_ != nullptr && cw_->running() && peerClosed_) {
    // The sender closed first and is tearing down: no notice it may leave unread (see
    // FabricSendComm::Close).
    RY_INFO(log::kNet, "%s from %s: the sender closed first; no close notice sent", Who().c_str(),
            peer_.ToString().c_str());
  } else if (ep_ != nullptr && cw_->running() && ep_->status().ok()) {
    (void)ep_->Send(EncodeClose({peerCommId_}), (uint64_t{id_} << kCookieCommShift) | kRecvControlCookie);
    const auto until = Clock::now() + std::chrono::milliseconds(50);
    while (ep_->status().ok() && ep_->Outstanding() > 0 && !peerClosed_ && Clock::now() < until) cw_->DriveLocked();
  }
  for (auto*& p : posted_) {
    if (p != nullptr) RecvTable::Release(*p);
    p = nullptr;
  }
  if (registered_) cw_->RemoveClient(id_);
  registered_ = false;
  ep_.reset();
  if (outboxRegion_ != nullptr) (void)cw_->domain().Deregister(outboxRegion_);
  outboxRegion_ = nullptr;
}

}  // namespace railyard::proxy::nccl
