// GinComm: construction, the collective connect, symmetric registration, the event
// pump and poisoning. The data operations are in gin_comm_ops.cc.
#include <algorithm>
#include <thread>

#include "env/log.h"
#include "proxy/gin/gin_comm.h"

namespace railyard::gin {

using Clock = std::chrono::steady_clock;

const char* RequestKindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kPut: return "iput";
    case RequestKind::kPutSignal: return "iputSignal";
    case RequestKind::kGet: return "iget";
    case RequestKind::kFlush: return "iflush";
  }
  return "request";
}

GinComm::GinComm(const GinOptions& options, fabric::RegistrationCache& cache, fabric::Worker& worker,
                 int rank, int nranks, uint64_t meshId)
    : options_(options), cache_(cache), worker_(worker), rank_(rank), nranks_(nranks), meshId_(meshId),
      endpoints_(static_cast<size_t>(nranks)), peerSeq_(static_cast<size_t>(nranks), 0),
      unorderedOutstanding_(static_cast<size_t>(nranks), 0) {}

GinComm::~GinComm() {
  std::lock_guard lock(mu_);
  for (auto& [id, w] : windows_) (void)cache_.Release(w.region);
  windows_.clear();
  for (Request* r : live_) {
    r->magic = 0;
    delete r;
  }
  live_.clear();
  endpoints_.clear();  // before the Worker (the glue destroys it after the comm)
}

Status GinComm::Connect(const GinOptions& options, fabric::RegistrationCache& cache,
                        fabric::Worker& worker, std::span<const uint8_t* const> handles, int rank,
                        std::unique_ptr<GinComm>* out) {
  if (out == nullptr) return InvalidArgument("GIN connect: collComm out-pointer is NULL");
  const int nranks = static_cast<int>(handles.size());
  if (nranks < 1) return InvalidArgument("GIN connect: no ranks");
  if (rank < 0 || rank >= nranks) {
    return InvalidArgument("GIN connect: rank " + std::to_string(rank) + " outside 0.." +
                           std::to_string(nranks - 1));
  }
  // Everything checkable first: every handle, and that ours is ours.
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    RY_RETURN_IF_ERROR(UnpackHandle(handles[static_cast<size_t>(r)], r, &addresses[static_cast<size_t>(r)]));
  }
  if (addresses[static_cast<size_t>(rank)] != worker.Address()) {
    return InvalidArgument("GIN connect: handles[" + std::to_string(rank) +
                           "] is not this rank's listen handle (handles out of rank order?)");
  }
  std::unique_ptr<GinComm> comm(new GinComm(options, cache, worker, rank, nranks, MeshId(addresses)));
  std::lock_guard lock(comm->mu_);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options.timeoutMs);
  for (int r = 0; r < nranks; ++r) {
    const auto first = Clock::now();
    while (true) {
      Status s = worker.Connect(addresses[static_cast<size_t>(r)], &comm->endpoints_[static_cast<size_t>(r)]);
      if (s.ok()) break;
      const bool retry = options.routeMayCome && options.routeMayCome(s);
      if (!retry || Clock::now() > deadline) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - first).count();
        return Status(s.code(), "GIN connect: rank " + std::to_string(rank) + " to peer rank " + std::to_string(r) +
                                    ": " + s.message() +
                                    (retry ? " (no route after " + std::to_string(waited) +
                                                 " ms, RAILYARD_TIMEOUT_MS: the peer's host is not cabled to this "
                                                 "host or to any host that relays)"
                                           : std::string()));
      }
      comm->PumpLocked();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  Record hello;
  hello.kind = RecordKind::kHello;
  hello.rank = uint32_t(rank);
  hello.nranks = uint32_t(nranks);
  hello.meshId = comm->meshId_;
  for (int r = 0; r < nranks; ++r) RY_RETURN_IF_ERROR(comm->SendRecordLocked(uint32_t(r), hello));
  std::vector<Record> hellos;
  RY_RETURN_IF_ERROR(comm->WaitRecordsLocked(RecordKind::kHello, 0, "connect", &hellos));
  *out = std::move(comm);
  return Status::Ok();
}

Status CheckWindowMemory(const fabric::Domain& domain, fabric::MemoryKind kind, const std::string& call) {
  if (kind == fabric::MemoryKind::kHost || domain.capabilities().Has(fabric::kCapDeviceMemory)) {
    return Status::Ok();
  }
  const std::string t = domain.TransportName();
  return InvalidUsage(call + ": a device (CUDA) buffer cannot be registered on the " + t +
                      " fabric transport: it has no kCapDeviceMemory (" +
                      (t == "verbs" ? std::string("the HCA reads GPU memory only with a GPUDirect peer-memory "
                                                  "module such as nvidia_peermem loaded")
                                    : std::string("its CPU copies cannot read GPU memory; use "
                                                  "RAILYARD_TRANSPORT=verbs on RDMA ports")) +
                      "); register host memory, or keep NCCL's GIN off");
}

Status GinComm::CheckWindowArgs(const char* call, void* data, uint64_t bytes, uint64_t mrFlags, uint64_t* handle) {
  const std::string c = std::string("GIN ") + call;
  if (handle == nullptr) return InvalidArgument(c + ": mhandle out-pointer is NULL");
  if (data == nullptr || bytes == 0) return InvalidArgument(c + ": " + (data == nullptr ? "NULL data" : "0 bytes"));
  if ((mrFlags & ~(kMrFlagForceSo | kMrFlagSignalNeverReset)) != 0) {
    return InvalidArgument(c + ": unknown MR flags 0x" + std::to_string(mrFlags));
  }
  return Status::Ok();
}

Status GinComm::RegisterWindow(void* data, uint64_t bytes, fabric::MemoryKind kind, uint64_t mrFlags,
                               uint64_t* handle) {
  RY_RETURN_IF_ERROR(CheckWindowArgs("regMrSym", data, bytes, mrFlags, handle));
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  RY_RETURN_IF_ERROR(CheckWindowMemory(cache_.domain(), kind, "GIN regMrSym on rank " + std::to_string(rank_)));
  const fabric::Region* region = nullptr;
  RY_RETURN_IF_ERROR(cache_.Acquire(data, bytes, fabric::kAccessAll, kind, &region));
  return ExchangeWindowLocked(region, data, bytes, mrFlags, handle);
}

Status GinComm::RegisterWindowDmaBuf(void* data, uint64_t bytes, int fd, uint64_t offset, fabric::MemoryKind kind,
                                     uint64_t mrFlags, uint64_t* handle) {
  RY_RETURN_IF_ERROR(CheckWindowArgs("regMrSymDmaBuf", data, bytes, mrFlags, handle));
  const std::string call = "GIN regMrSymDmaBuf on rank " + std::to_string(rank_);
  if (fd < 0) return InvalidArgument(call + ": DMA-BUF fd " + std::to_string(fd));
  if (offset + bytes < offset) return InvalidArgument(call + ": offset + size wraps");
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  RY_RETURN_IF_ERROR(CheckWindowMemory(cache_.domain(), kind, call));
  if (!options_.acquireDmaBuf) {
    return InvalidUsage(call + ": the " + std::string(cache_.domain().TransportName()) +
                        " fabric transport cannot register DMA-BUF fd " + std::to_string(fd) +
                        " (no DMA-BUF registration in this Domain); register the buffer with regMrSym");
  }
  const fabric::Region* region = nullptr;
  RY_RETURN_IF_ERROR(options_.acquireDmaBuf(data, bytes, fd, offset, kind, &region));
  return ExchangeWindowLocked(region, data, bytes, mrFlags, handle);
}

Status GinComm::ExchangeWindowLocked(const fabric::Region* region, void* data, uint64_t bytes, uint64_t mrFlags,
                                     uint64_t* handle) {
  Window w;
  w.seq = ++nextWindowSeq_;
  w.localBase = reinterpret_cast<uint64_t>(data);
  w.bytes = bytes;
  w.mrFlags = mrFlags;
  w.region = region;
  Record rec;
  rec.kind = RecordKind::kWindow;
  rec.rank = uint32_t(rank_);
  rec.nranks = uint32_t(nranks_);
  rec.meshId = meshId_;
  rec.seq = w.seq;
  rec.bytes = bytes;
  rec.mrFlags = mrFlags;
  rec.key = region->Key();
  // The key names the whole cached region; narrow it to this window (base, length).
  rec.key.base = w.localBase;
  rec.key.length = bytes;
  Status s = Status::Ok();
  for (int r = 0; r < nranks_ && s.ok(); ++r) s = SendRecordLocked(uint32_t(r), rec);
  std::vector<Record> recs;
  if (s.ok()) s = WaitRecordsLocked(RecordKind::kWindow, w.seq, "regMrSym", &recs);
  if (!s.ok()) {
    (void)cache_.Release(region);
    return s;
  }
  for (const Record& r : recs) w.keys.push_back(r.key);
  w.id = ++nextWindowId_;
  *handle = w.id;
  windows_.emplace(w.id, std::move(w));
  return Status::Ok();
}

Status GinComm::DeregisterWindow(uint64_t handle) {
  std::lock_guard lock(mu_);
  auto it = windows_.find(handle);
  if (it == windows_.end()) {
    return InvalidArgument("GIN deregMrSym: unknown handle " + std::to_string(handle) + " on rank " +
                           std::to_string(rank_));
  }
  Status s = cache_.Release(it->second.region);
  windows_.erase(it);
  return s;
}

Status GinComm::SendRecordLocked(uint32_t peer, const Record& r) {
  const uint64_t cookie = NextCookieLocked();
  std::vector<uint8_t> bytes = r.Pack();
  Status s = endpoints_[peer]->Send(bytes, cookie);
  if (!s.ok()) return PoisonLocked(Status(s.code(), Where(peer) + ": record send: " + s.message()));
  ops_[cookie] = OpInfo{nullptr, fabric::OpType::kSend, peer};
  ++recordSendsOutstanding_;
  return Status::Ok();
}

Status GinComm::WaitRecordsLocked(RecordKind kind, uint64_t seq, const char* what,
                                  std::vector<Record>* byRank) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeoutMs);
  std::vector<bool> have(static_cast<size_t>(nranks_), false);
  std::vector<Record> got(static_cast<size_t>(nranks_));
  int count = 0;
  while (true) {
    // Take matching records out of the inbox, checking each.
    for (auto it = inbox_.begin(); it != inbox_.end();) {
      const Record& r = it->record;
      if (r.kind != kind || r.seq != seq) {
        ++it;
        continue;
      }
      if (r.meshId != meshId_ || r.nranks != uint32_t(nranks_) || r.rank >= uint32_t(nranks_)) {
        return PoisonLocked(RemoteError(
            "GIN " + std::string(what) + " on rank " + std::to_string(rank_) + ": a record from rank " +
            std::to_string(r.rank) + " of " + std::to_string(r.nranks) + " ranks belongs to another comm " +
            "(mesh id or size differs; this rank has " + std::to_string(nranks_) + ")"));
      }
      if (have[r.rank]) {
        return PoisonLocked(RemoteError("GIN " + std::string(what) + " on rank " + std::to_string(rank_) +
                                        ": rank " + std::to_string(r.rank) + " sent its record twice"));
      }
      have[r.rank] = true;
      got[r.rank] = r;
      ++count;
      it = inbox_.erase(it);
    }
    // Done once every rank's record is here and this rank's own records have been
    // delivered: a relayed route opens (and a TCP connection completes) only while its
    // source progresses, and the caller may not progress again for a while after a
    // collective call returns, while a peer still waits for this rank's record.
    if (count == nranks_ && recordSendsOutstanding_ == 0) break;
    RY_RETURN_IF_ERROR(CheckUsableLocked());
    if (Clock::now() > deadline) {
      std::string missing;
      for (int r = 0; r < nranks_; ++r) {
        if (!have[size_t(r)]) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      std::string undelivered;
      for (const auto& [cookie, info] : ops_) {
        if (info.request == nullptr && info.type == fabric::OpType::kSend) {
          undelivered += (undelivered.empty() ? "" : ",") + std::to_string(info.peer);
        }
      }
      const std::string why = !missing.empty() ? "no record from peer rank(s) " + missing
                                               : "this rank's record to peer rank(s) " + undelivered +
                                                     " not delivered";
      return PoisonLocked(SystemError("GIN " + std::string(what) + " timed out on rank " +
                                      std::to_string(rank_) + " after " + std::to_string(options_.timeoutMs) +
                                      " ms: " + why + " (rails " + RailsText() + ", registration seq " +
                                      std::to_string(seq) + ")"));
    }
    PumpLocked();
    if (events_.empty()) std::this_thread::yield();
  }
  // A few more rounds, so the acks of the records this rank received last leave
  // before the call returns (bounded work).
  for (int i = 0; i < 4; ++i) PumpLocked();
  *byRank = std::move(got);
  return Status::Ok();
}

void GinComm::PumpLocked() {
  for (int round = 0; round < 4; ++round) {
    events_.clear();
    if (worker_.Progress(&events_) == 0) break;
    for (fabric::Event& e : events_) DispatchLocked(e);
  }
  events_.clear();
}

void GinComm::DispatchLocked(fabric::Event& e) {
  switch (e.kind) {
    case fabric::EventKind::kRecord: {
      Inbound in;
      in.fromWorker = e.peer;
      Status s = Record::Unpack(e.record, &in.record);
      if (!s.ok()) {
        (void)PoisonLocked(Status(s.code(), "GIN rank " + std::to_string(rank_) + ": " + s.message()));
        return;
      }
      inbox_.push_back(std::move(in));
      return;
    }
    case fabric::EventKind::kImmediate: return;
    case fabric::EventKind::kDone:
    case fabric::EventKind::kError: {
      auto it = ops_.find(e.cookie);
      if (it == ops_.end()) {
        // A peer's connection failed here (op kNone): the ops this rank has
        // outstanding to that peer fail on their own Endpoint.
        if (e.kind == fabric::EventKind::kError) {
          RY_INFO(log::kNet, "GIN rank %d: %s", rank_, e.error.ToString().c_str());
        }
        return;
      }
      const OpInfo info = it->second;
      ops_.erase(it);
      if (info.request == nullptr && info.type == fabric::OpType::kSend) --recordSendsOutstanding_;
      if (info.type == fabric::OpType::kRead || info.type == fabric::OpType::kFetchAdd) {
        --unorderedOutstanding_[info.peer];
      }
      if (e.kind == fabric::EventKind::kError) {
        const std::string what = info.request != nullptr ? RequestKindName(info.request->kind) : "record send";
        const std::string seq = info.request != nullptr ? " seq " + std::to_string(info.request->seq) : "";
        (void)PoisonLocked(e.error.ToStatus().code() == Code::kOk
                               ? SystemError(Where(info.peer) + ": " + what + " failed")
                               : Status(e.error.ToStatus().code(),
                                        Where(info.peer) + ": " + what + seq + " failed: " + e.error.ToString()));
      }
      if (info.request != nullptr && --info.request->pendingOps == 0) {
        outstandingNumbers_.erase(info.request->number);
      }
      return;
    }
  }
}

Status GinComm::PoisonLocked(Status s) {
  if (poison_.ok()) {
    poison_ = s;
    RY_WARN("%s", s.message().c_str());
  }
  return poison_;
}

Status GinComm::CheckUsableLocked() const { return poison_; }

Status GinComm::status() const {
  std::lock_guard lock(mu_);
  return poison_;
}

size_t GinComm::Outstanding() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

std::string GinComm::RailsText() const {
  const auto& rails = cache_.domain().rails();
  std::string t;
  for (size_t i = 0; i < rails.size(); ++i) {
    t += (i ? "," : "") + std::to_string(i) + "(" + rails[i].device + ")";
  }
  return t.empty() ? "none" : t;
}

std::string GinComm::Where(uint32_t peer) const {
  return "GIN rank " + std::to_string(rank_) + " to peer rank " + std::to_string(peer) +
         (peer < endpoints_.size() && endpoints_[peer] ? " (" + endpoints_[peer]->PeerName() + ")" : "");
}

}  // namespace railyard::gin
