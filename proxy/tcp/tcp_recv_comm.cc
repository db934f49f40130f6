#include "proxy/tcp/tcp_recv_comm.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "env/log.h"
#include "proxy/handle.h"

namespace railyard::proxy {
namespace {

/// Most bytes one progress pass reads from one socket before it serves the next.
constexpr size_t kRecvSocketBudget = 2u << 20;

}  // namespace

TcpRecvComm::TcpRecvComm(TcpConnection conn, const TcpOptions& options, const MrCache* cache)
    : conn_(std::move(conn)), options_(options), table_(this, cache, &poison_) {
  const size_t nsocks = conn_.data.size();
  readers_.reserve(nsocks);
  for (size_t i = 0; i < nsocks; ++i) {
    const std::string rail = i < conn_.rails.size() && !conn_.rails[i].empty() ? " on rail " + conn_.rails[i] : "";
    // Name the peer with the address this socket really uses: its own peer address,
    // or none when a relay carried it (the rail then says "via RELAY (ADDR)").
    std::string address;
    if (rail.find(" via ") == std::string::npos) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      if (::getpeername(conn_.data[i].get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        address = ", " + SockaddrToString(ss);
      }
    }
    readers_.emplace_back(conn_.data[i].get(),
                          "data socket " + std::to_string(i + 1) + rail + " from peer " +
                              (conn_.peer.host.empty() ? std::string("?") : conn_.peer.host) + " (pid " +
                              std::to_string(conn_.peer.pid) + address + ")",
                          conn_.peer.ToString());
  }
  const int ngroups = std::max(1, std::min(options_.nthreads, static_cast<int>(nsocks)));
  for (int i = 0; i < ngroups; ++i) groups_.push_back(std::make_unique<Group>());
  for (size_t i = 0; i < nsocks; ++i) groups_[i % groups_.size()]->sockets.push_back(static_cast<int>(i));
  Touch();
  try {
    for (auto& g : groups_) g->thread = std::thread([this, p = g.get()] { HelperLoop(p); });
  } catch (const std::system_error& e) {
    // Out of threads: the comm exists but is failed, so the first irecv/test says why.
    poison_.Set(SystemError("cannot start receive helper threads for " + conn_.peer.ToString() + ": " +
                            e.what()));
  }
  ProgressRegistry::Get().Add(this);
}

TcpRecvComm::~TcpRecvComm() { Close(); }

void TcpRecvComm::Close() {
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

size_t TcpRecvComm::OpenSockets(const Group& g) const {
  size_t n = 0;
  for (int i : g.sockets) n += readers_[static_cast<size_t>(i)].open() ? 1 : 0;
  return n;
}

bool TcpRecvComm::ProgressLocked(Group& g) {
  if (g.dead || stop_.load(std::memory_order_acquire)) return false;
  bool moved = false;
  for (int i : g.sockets) {
    ChunkReader& r = readers_[static_cast<size_t>(i)];
    if (!r.open()) continue;
    size_t bytes = 0;
    bool eof = false;
    Status s = r.ReadSome(table_, kRecvSocketBudget, &bytes, &eof);
    moved = moved || bytes > 0;
    if (stop_.load(std::memory_order_acquire)) return moved;
    if (!s.ok()) {
      g.dead = true;
      // A break with nothing posted loses nothing yet (a relay that exited at a job's end
      // resets its sockets): WARN only once a receive runs into it.
      PoisonQuietly(Status(s.code(), s.message() + "; waiting for " + table_.DescribeOldest(RankFor(options_.rank.get()))),
                    /*matters=*/table_.InFlight() > 0);
      break;
    }
    if (eof) {
      int64_t none = 0;
      firstEofNs_.compare_exchange_strong(none, Clock::now().time_since_epoch().count());
      int nobody = -1;
      firstEofSocket_.compare_exchange_strong(nobody, i);
      // All data precedes a clean EOF on each socket, so only once every data
      // socket is closed is the peer gone with nothing left in flight.
      if (cleanEofs_.fetch_add(1) + 1 == static_cast<int>(conn_.data.size())) {
        // A clean close of every data socket is how a job ends, even with receives still
        // posted: INFO. Only when someone then waits for one of them (test()) is it a fault
        // (a sender that exited or died first), logged at WARN there.
        PoisonQuietly(SystemError(conn_.peer.ToString() + " closed the connection; waiting for " +
                                  table_.DescribeOldest(RankFor(options_.rank.get()))),
                      /*matters=*/false);
      }
    }
  }
  if (moved) Touch();
  return moved;
}

bool TcpRecvComm::CallerPass() {
  // Nothing posted: nothing can arrive but a close, which the helpers watch for.
  if (poison_.IsSet() || table_.InFlight() == 0) return false;
  gate_.NoteCall();
  bool moved = false;
  for (auto& g : groups_) {
    std::unique_lock lock(g->mu, std::try_to_lock);
    if (lock.owns_lock()) moved = ProgressLocked(*g) || moved;
  }
  return moved;
}

void TcpRecvComm::HelperLoop(Group* g) {
  pthread_setname_np(pthread_self(), "ry-tcp-recv");
  std::vector<pollfd> pfds;
  std::unique_lock lock(g->mu);
  while (!stop_.load(std::memory_order_acquire)) {
    if (g->dead || OpenSockets(*g) == 0) {
      g->cv.wait(lock, [&] { return stop_.load(std::memory_order_acquire); });
      continue;
    }
    if (const auto wait = gate_.StandBy(); wait > Clock::duration::zero()) {
      g->cv.wait_for(lock, wait);  // the caller is reading these sockets itself
      continue;
    }
    ProgressLocked(*g);
    pfds.clear();
    for (int i : g->sockets) {
      const ChunkReader& r = readers_[static_cast<size_t>(i)];
      if (r.open()) pfds.push_back({r.fd(), POLLIN, 0});
    }
    if (g->dead || pfds.empty()) continue;
    lock.unlock();
    if (::poll(pfds.data(), pfds.size(), -1) < 0 && errno != EINTR) {
      poison_.Set(SystemError("poll on data sockets from " + conn_.peer.ToString() + " failed: " + ErrnoText(errno)));
    }
    lock.lock();
  }
}

Status TcpRecvComm::FlushControl() {
  while (!controlOut_.empty()) {
    size_t sent = 0;
    Status s = TrySend(conn_.control.get(), controlOut_.data(), controlOut_.size(), &sent);
    controlOut_.erase(0, sent);
    if (!s.ok()) {
      return SystemError("control connection to " + conn_.peer.ToString() + " broke: " + s.message());
    }
    if (sent == 0) break;
  }
  return Status::Ok();
}

void TcpRecvComm::PoisonQuietly(const Status& s, bool matters) {
  if (matters) {
    poison_.Set(s);
    return;
  }
  // The flag goes first, so an irecv/test that sees the poison also sees it; when an earlier
  // fault won, its own flag is put back.
  const bool before = warnPending_.exchange(true, std::memory_order_acq_rel);
  if (!poison_.Set(s, /*warn=*/false)) warnPending_.store(before, std::memory_order_release);
}

Status TcpRecvComm::PoisonedStatus() {
  Status s = poison_.Get();
  if (warnPending_.exchange(false, std::memory_order_acq_rel)) RY_WARN("%s", s.message().c_str());
  return s;
}

Status TcpRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags,
                          MemoryRegion** mrs, Request** request) {
  *request = nullptr;
  gate_.NoteCall();
  if (poison_.IsSet()) return PoisonedStatus();
  RecvTable::Entry* e = nullptr;
  CtsRecord cts;
  RY_RETURN_IF_ERROR(table_.Post(n, data, sizes, tags, mrs, &e, &cts));
  controlOut_.append(reinterpret_cast<const char*>(&cts), sizeof cts);
  if (Status s = FlushControl(); !s.ok()) {
    poison_.Set(s);
    RecvTable::Release(*e);
    return s;
  }
  *request = e;
  return Status::Ok();
}

Status TcpRecvComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  auto* e = static_cast<RecvTable::Entry*>(request);
  if (e->seq.load(std::memory_order_acquire) == RecvTable::kFree) {
    return InternalError("test of a receive request that is not in flight");
  }
  gate_.NoteCall();
  auto finished = [&] {
    if (!RecvTable::Done(*e)) return false;
    *done = 1;
    if (sizes != nullptr) {
      for (int i = 0; i < e->n; ++i) sizes[i] = static_cast<int>(e->total[i].load(std::memory_order_acquire));
    }
    RecvTable::Release(*e);
    return true;
  };
  if (finished()) return Status::Ok();
  if (!poison_.IsSet()) ProgressRegistry::Get().Drive(this, [&] { return RecvTable::Done(*e); });
  if (finished()) return Status::Ok();
  if (poison_.IsSet()) return PoisonedStatus();
  if (const int64_t eof = firstEofNs_.load(std::memory_order_relaxed); eof != 0) {
    // Data already in the kernel still lands after a clean close; give the other
    // sockets a moment, then call the receive lost.
    const auto since = Clock::now() - Clock::time_point(Clock::duration(eof));
    if (since > std::chrono::milliseconds(kEofGraceMs)) {
      const int k = firstEofSocket_.load(std::memory_order_relaxed);
      const int closed = cleanEofs_.load(std::memory_order_relaxed);
      const std::string which = k >= 0 ? readers_[static_cast<size_t>(k)].what() : conn_.peer.ToString();
      Status lost = SystemError(which + " closed" +
                                (closed > 1 ? " (with " + std::to_string(closed - 1) + " more data socket(s))" : "") +
                                " while " + table_.DescribeOldest(RankFor(options_.rank.get())) + " was pending");
      poison_.Set(lost);
      return lost;
    }
  }
  if (Status s = FlushControl(); !s.ok()) {
    poison_.Set(s);
    return s;
  }
  const auto last = std::max(e->posted, Clock::time_point(Clock::duration(lastProgressNs_.load(std::memory_order_relaxed))));
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
  if (idle.count() > options_.timeoutMs) {
    std::string tags;
    for (int i = 0; i < e->n; ++i) tags += (i ? "," : "") + std::to_string(e->tag[i]);
    const int me = RankFor(options_.rank.get());
    Status t = RemoteError("receive (rank " + (me >= 0 ? std::to_string(me) : std::string("?")) +
                           " from rank " + tags + ", " + conn_.peer.ToString() + ", seq " +
                           std::to_string(e->seq.load()) + ") made no progress for " +
                           std::to_string(idle.count()) + " ms (RAILYARD_TIMEOUT_MS=" +
                           std::to_string(options_.timeoutMs) + ")");
    poison_.Set(t);
    return t;
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
