#include "proxy/tcp/tcp_send_comm.h"

#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "env/log.h"

namespace railyard::proxy {
namespace {

/// Most bytes one progress pass writes to one socket before it serves the next.
constexpr size_t kSocketBudget = 2u << 20;

}  // namespace

TcpSendComm::TcpSendComm(TcpConnection conn, const TcpOptions& options)
    : conn_(std::move(conn)), options_(options) {
  free_.reserve(kMaxRequests);
  for (int i = kMaxRequests - 1; i >= 0; --i) {
    requests_[i].owner = this;
    free_.push_back(i);
  }
  const size_t nsocks = conn_.data.size();
  busySinceNs_ = std::make_unique<std::atomic<int64_t>[]>(nsocks);
  writers_.reserve(nsocks);
  for (size_t i = 0; i < nsocks; ++i) {
    busySinceNs_[i].store(0);
    writers_.emplace_back(conn_.data[i].get(), "data socket " + std::to_string(i + 1) + RailOf(static_cast<int>(i)));
  }
  const int ngroups = std::max(1, std::min<int>(options_.nthreads, static_cast<int>(nsocks)));
  for (int i = 0; i < ngroups; ++i) groups_.push_back(std::make_unique<Group>());
  for (size_t i = 0; i < nsocks; ++i) groups_[i % groups_.size()]->sockets.push_back(static_cast<int>(i));
  try {
    for (auto& g : groups_) g->thread = std::thread([this, p = g.get()] { HelperLoop(p); });
  } catch (const std::system_error& e) {
    // Out of threads: the comm exists but is failed, so the first isend/test says why.
    poison_.Set(SystemError("cannot start send helper threads for " + conn_.peer.ToString() + ": " +
                            e.what()));
  }
  Touch();
  ProgressRegistry::Get().Add(this);
}

TcpSendComm::~TcpSendComm() { Close(); }

void TcpSendComm::Close() {
  if (closed_) return;
  closed_ = true;
  ProgressRegistry::Get().Remove(this);  // no other thread's test() touches this comm after this
  stop_.store(true, std::memory_order_release);
  conn_.control.Shutdown();
  for (const Fd& fd : conn_.data) fd.Shutdown();  // wakes helpers waiting in poll
  for (auto& g : groups_) {
    {
      std::lock_guard lock(g->mu);
    }
    g->cv.notify_all();
  }
  for (auto& g : groups_) {
    if (g->thread.joinable()) g->thread.join();
  }
  conn_.control.Reset();
  for (Fd& fd : conn_.data) fd.Reset();
}

bool TcpSendComm::ProgressLocked(Group& g) {
  if (g.queued == 0) return false;
  const bool dead = poison_.IsSet();
  bool moved = false;
  for (int i : g.sockets) {
    ChunkWriter& w = writers_[static_cast<size_t>(i)];
    if (w.Idle()) continue;
    const size_t before = w.Queued();
    size_t bytes = 0;
    Status s = dead ? Status::Ok() : w.WriteSome(kSocketBudget, &bytes);
    if (dead || !s.ok()) {
      if (!s.ok() && !stop_.load(std::memory_order_acquire)) {
        poison_.Set(SystemError("send of seq " + std::to_string(w.Front().header.seq) + " (rank " +
                                std::to_string(w.Front().tag) + " → " + conn_.peer.ToString() +
                                ") failed: " + s.message()));
      }
      w.Drop();
    }
    g.queued -= before - w.Queued();
    auto& busy = busySinceNs_[static_cast<size_t>(i)];
    if (w.Idle()) {
      busy.store(0, std::memory_order_relaxed);
    } else if (bytes > 0 || busy.load(std::memory_order_relaxed) == 0) {
      busy.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    moved = moved || bytes > 0;
  }
  if (moved) Touch();
  return moved;
}

bool TcpSendComm::CallerPass() {
  gate_.NoteCall();
  bool moved = false;
  for (auto& g : groups_) {
    std::unique_lock lock(g->mu, std::try_to_lock);
    if (lock.owns_lock()) moved = ProgressLocked(*g) || moved;
  }
  return moved;
}

void TcpSendComm::HelperLoop(Group* g) {
  pthread_setname_np(pthread_self(), "ry-tcp-send");
  std::vector<pollfd> pfds;
  std::unique_lock lock(g->mu);
  while (!stop_.load(std::memory_order_acquire)) {
    if (g->queued == 0) {
      g->sleeping = true;
      g->cv.wait(lock, [&] { return stop_.load(std::memory_order_acquire) || g->queued > 0; });
      g->sleeping = false;
      continue;
    }
    if (const auto wait = gate_.StandBy(); wait > Clock::duration::zero()) {
      g->cv.wait_for(lock, wait);  // the caller is writing these sockets itself
      continue;
    }
    ProgressLocked(*g);
    if (g->queued == 0) continue;
    pfds.clear();
    for (int i : g->sockets) {
      if (!writers_[static_cast<size_t>(i)].Idle()) pfds.push_back({conn_.data[static_cast<size_t>(i)].get(), POLLOUT, 0});
    }
    lock.unlock();
    if (::poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) {
      poison_.Set(SystemError("poll on data sockets to " + conn_.peer.ToString() + " failed: " + ErrnoText(errno)));
    }
    lock.lock();
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
  gate_.NoteCall();
  NoteLocalRank(tag);
  if (options_.rank != nullptr) options_.rank->Note(tag);
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
    // The sequence is the receive this send waits for (the oldest pending, or the
    // next the peer has yet to post), never a constant.
    Status t = TimedOut("send waiting for a posted receive with a matching tag", matcher_.NextSeq(), tag,
                        waitingSince_);
    if (!t.ok()) {
      t = RemoteError(t.message() + (matcher_.Pending() == 0
                                         ? "; the peer has posted no receive for it (no clear-to-send arrived)"
                                         : "; the oldest posted receive wants tags " + matcher_.OldestUnmatchedTags()));
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
    OutChunk t{};
    t.header.header = MakeHeader(RecordKind::kChunk);
    t.header.seq = m.seq;
    t.header.slot = m.slot;
    t.header.len = static_cast<uint32_t>(len);
    t.header.addr = m.entry.addr + off;
    t.header.total = size;
    t.header.rkey = m.entry.rkey;
    t.payload = src + off;
    t.written = &r.chunksDone;
    t.tag = tag;
    const size_t i = nextSocket_++ % nsocks;
    Group& g = *groups_[i % groups_.size()];
    std::lock_guard lock(g.mu);
    if (writers_[i].Idle()) busySinceNs_[i].store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    writers_[i].Push(t);
    if (g.queued++ == 0 && g.sleeping) g.cv.notify_one();
  }
  ProgressRegistry::Get().Drive(this, [&] { return r.chunksDone.load(std::memory_order_acquire) == r.nchunks; });
  *request = &r;
  return Status::Ok();
}

Status TcpSendComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  auto* r = static_cast<SendRequest*>(request);
  if (r < requests_.data() || r >= requests_.data() + kMaxRequests || !r->inUse) {
    return InternalError("test of a send request that is not in flight");
  }
  gate_.NoteCall();
  auto finished = [&] {
    if (r->chunksDone.load(std::memory_order_acquire) != r->nchunks) return false;
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(r->size);
    r->inUse = false;
    free_.push_back(static_cast<int>(r - requests_.data()));
    return true;
  };
  if (finished()) return Status::Ok();
  if (poison_.IsSet()) return poison_.Get();
  ProgressRegistry::Get().Drive(this, [&] { return r->chunksDone.load(std::memory_order_acquire) == r->nchunks; });
  if (finished()) return Status::Ok();
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
