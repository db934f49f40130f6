#include "proxy/tcp/tcp_send_comm.h"

#include <algorithm>
#include <cstring>
#include <system_error>

#include "env/log.h"

namespace railyard::proxy {

TcpSendComm::TcpSendComm(TcpConnection conn, const TcpOptions& options)
    : conn_(std::move(conn)), options_(options) {
  free_.reserve(kMaxRequests);
  for (int i = kMaxRequests - 1; i >= 0; --i) {
    requests_[i].owner = this;
    free_.push_back(i);
  }
  busySinceNs_ = std::make_unique<std::atomic<int64_t>[]>(conn_.data.size());
  for (size_t i = 0; i < conn_.data.size(); ++i) busySinceNs_[i].store(0);
  const int nworkers = std::max(1, std::min<int>(options_.nthreads, static_cast<int>(conn_.data.size())));
  for (int i = 0; i < nworkers; ++i) workers_.push_back(std::make_unique<Worker>());
  try {
    for (auto& w : workers_) w->thread = std::thread([this, p = w.get()] { WorkerLoop(p); });
  } catch (const std::system_error& e) {
    // Out of threads: the comm exists but is failed, so the first isend/test says why.
    poison_.Set(SystemError("cannot start send helper threads for " + conn_.peer.ToString() + ": " +
                            e.what()));
  }
  Touch();
}

TcpSendComm::~TcpSendComm() { Close(); }

void TcpSendComm::Close() {
  if (closed_) return;
  closed_ = true;
  stop_.store(true, std::memory_order_release);
  conn_.control.Shutdown();
  for (const Fd& fd : conn_.data) fd.Shutdown();  // wakes workers blocked in send
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
    }
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  conn_.control.Reset();
  for (Fd& fd : conn_.data) fd.Reset();
}

void TcpSendComm::Enqueue(const Task& t) {
  Worker& w = *workers_[static_cast<size_t>(t.socket) % workers_.size()];
  {
    std::lock_guard lock(w.mu);
    w.tasks.push_back(t);
  }
  w.cv.notify_one();
}

void TcpSendComm::WorkerLoop(Worker* w) {
  for (;;) {
    Task t;
    {
      std::unique_lock lock(w->mu);
      w->cv.wait(lock, [&] { return stop_.load(std::memory_order_acquire) || !w->tasks.empty(); });
      if (stop_.load(std::memory_order_acquire)) return;
      t = w->tasks.front();
      w->tasks.pop_front();
    }
    if (poison_.IsSet()) {
      continue;  // the comm is dead; drop queued chunks
    }
    iovec iov[2] = {{&t.header, sizeof t.header},
                    {const_cast<char*>(t.payload), t.header.len}};
    busySinceNs_[static_cast<size_t>(t.socket)].store(Clock::now().time_since_epoch().count(),
                                                      std::memory_order_relaxed);
    Status s = SendAll(conn_.data[static_cast<size_t>(t.socket)].get(), iov, t.header.len ? 2 : 1,
                       "data socket " + std::to_string(t.socket + 1) + RailOf(t.socket));
    busySinceNs_[static_cast<size_t>(t.socket)].store(0, std::memory_order_relaxed);
    if (!s.ok()) {
      if (!stop_.load(std::memory_order_acquire)) {
        poison_.Set(SystemError("send of seq " + std::to_string(t.header.seq) + " (rank " +
                                std::to_string(t.req->tag) + " → " + conn_.peer.ToString() +
                                ") failed: " + s.message()));
      }
      continue;
    }
    Touch();
    t.req->chunksDone.fetch_add(1, std::memory_order_release);
  }
}

Status TcpSendComm::PollControl() {
  if (!conn_.control.valid()) return Status::Ok();
  for (;;) {
    const size_t want = controlIn_.size() < sizeof(RecordHeader)
                            ? sizeof(RecordHeader) - controlIn_.size()
                            : 0;
    size_t need = want;
    if (want == 0) {
      RecordHeader h;
      std::memcpy(&h, controlIn_.data(), sizeof h);
      RY_RETURN_IF_ERROR(CheckHeader(h, ("control record from " + conn_.peer.ToString()).c_str()));
      size_t full = 0;
      if (h.kind == static_cast<uint16_t>(RecordKind::kCts)) {
        full = sizeof(CtsRecord);
      } else if (h.kind == static_cast<uint16_t>(RecordKind::kReject)) {
        full = sizeof(RejectRecord);
      } else {
        return RemoteError("unexpected control record kind " + std::to_string(h.kind) +
                           " from " + conn_.peer.ToString());
      }
      if (controlIn_.size() == full) {
        if (h.kind == static_cast<uint16_t>(RecordKind::kReject)) {
          RejectRecord r;
          std::memcpy(&r, controlIn_.data(), sizeof r);
          r.reason[sizeof r.reason - 1] = '\0';
          return InvalidUsage(conn_.peer.ToString() + " refused the connection: " + r.reason);
        }
        CtsRecord rec;
        std::memcpy(&rec, controlIn_.data(), sizeof rec);
        controlIn_.clear();
        RY_RETURN_IF_ERROR(matcher_.Push(rec));
        continue;
      }
      need = full - controlIn_.size();
    }
    const size_t old = controlIn_.size();
    controlIn_.resize(old + need);
    size_t got = 0;
    bool closed = false;
    Status s = TryRecv(conn_.control.get(), controlIn_.data() + old, need, &got, &closed);
    controlIn_.resize(old + got);
    if (!s.ok()) return SystemError("control connection to " + conn_.peer.ToString() + " broke: " + s.message());
    if (closed) return SystemError(conn_.peer.ToString() + " closed the connection");
    if (got < need) return Status::Ok();  // nothing more for now
  }
}

std::string TcpSendComm::RailOf(int socket) const {
  const auto i = static_cast<size_t>(socket);
  return i < conn_.rails.size() && !conn_.rails[i].empty() ? " on rail " + conn_.rails[i] : "";
}

std::string TcpSendComm::StalledRail() const {
  int worst = -1;
  int64_t oldest = 0;
  for (size_t i = 0; i < conn_.data.size(); ++i) {
    const int64_t t = busySinceNs_[i].load(std::memory_order_relaxed);
    if (t != 0 && (worst < 0 || t < oldest)) {
      worst = static_cast<int>(i);
      oldest = t;
    }
  }
  if (worst < 0) return "";
  return "; data socket " + std::to_string(worst + 1) + RailOf(worst) + " is stalled in send";
}

Status TcpSendComm::TimedOut(const char* what, uint64_t seq, int tag, Clock::time_point since) const {
  const auto last = std::max(since, LastProgress());
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
  if (idle.count() <= options_.timeoutMs) return Status::Ok();
  return RemoteError(std::string(what) + " (rank " + std::to_string(tag) + " → " +
                     conn_.peer.ToString() + ", seq " + std::to_string(seq) +
                     ") made no progress for " + std::to_string(idle.count()) +
                     " ms (RAILYARD_TIMEOUT_MS=" + std::to_string(options_.timeoutMs) + ")" +
                     StalledRail());
}

Status TcpSendComm::Isend(const void* data, size_t size, int tag, MemoryRegion* /*mr*/,
                          Request** request) {
  *request = nullptr;
  NoteLocalRank(tag);
  if (poison_.IsSet()) return poison_.Get();
  if (Status s = PollControl(); !s.ok()) {
    s = Status(s.code(), s.message() + " (rank " + std::to_string(tag) + " sending seq " +
                             std::to_string(matcher_.NextSeq()) + ")");
    poison_.Set(s);
    return s;
  }
  if (free_.empty()) {
    return InternalError("more than " + std::to_string(kMaxRequests) +
                         " sends in flight on one comm");
  }
  SendMatch m;
  bool found = false;
  RY_RETURN_IF_ERROR(matcher_.Match(tag, size, &m, &found));
  if (!found) {
    const auto now = Clock::now();
    if (!waiting_) {
      waiting_ = true;
      waitingSince_ = now;
    }
    Status t = TimedOut("send waiting for a posted receive with a matching tag", 0, tag,
                        waitingSince_);
    if (!t.ok()) {
      t = RemoteError(t.message() + "; unmatched posted tags: " + matcher_.OldestUnmatchedTags());
      poison_.Set(t);
      return t;
    }
    return Status::Ok();  // not yet: NCCL calls again
  }
  waiting_ = false;

  SendRequest& r = requests_[static_cast<size_t>(free_.back())];
  free_.pop_back();
  r.inUse = true;
  r.size = size;
  r.tag = tag;
  r.seq = m.seq;
  r.slot = m.slot;
  r.started = Clock::now();

  const size_t nsocks = conn_.data.size();
  size_t chunk = (size + nsocks - 1) / nsocks;
  chunk = (chunk + 4095) & ~size_t{4095};
  chunk = std::clamp(chunk, options_.minChunkBytes, options_.chunkBytes);
  const int nchunks = size == 0 ? 1 : static_cast<int>((size + chunk - 1) / chunk);
  r.nchunks = nchunks;
  r.chunksDone.store(0, std::memory_order_relaxed);

  const char* src = static_cast<const char*>(data);
  for (int c = 0; c < nchunks; ++c) {
    const size_t off = static_cast<size_t>(c) * chunk;
    const size_t len = size == 0 ? 0 : std::min(chunk, size - off);
    Task t{};
    t.req = &r;
    t.header.header = MakeHeader(RecordKind::kChunk);
    t.header.seq = m.seq;
    t.header.slot = m.slot;
    t.header.len = static_cast<uint32_t>(len);
    t.header.addr = m.entry.addr + off;
    t.header.total = size;
    t.header.rkey = m.entry.rkey;
    t.payload = src + off;
    t.socket = static_cast<int>(nextSocket_++ % nsocks);
    Enqueue(t);
  }
  *request = &r;
  return Status::Ok();
}

Status TcpSendComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  auto* r = static_cast<SendRequest*>(request);
  if (r < requests_.data() || r >= requests_.data() + kMaxRequests || !r->inUse) {
    return InternalError("test of a send request that is not in flight");
  }
  if (r->chunksDone.load(std::memory_order_acquire) == r->nchunks) {
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(r->size);
    r->inUse = false;
    free_.push_back(static_cast<int>(r - requests_.data()));
    return Status::Ok();
  }
  if (poison_.IsSet()) return poison_.Get();
  if (Status s = PollControl(); !s.ok()) {
    s = Status(s.code(), s.message() + " (rank " + std::to_string(r->tag) + " sending seq " +
                             std::to_string(r->seq) + ")");
    poison_.Set(s);
    return s;
  }
  Status t = TimedOut("send", r->seq, r->tag, r->started);
  if (!t.ok()) poison_.Set(t);
  return t;
}

}  // namespace railyard::proxy
