#include "proxy/fabric/tcp/tcp_worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <unordered_map>

#include "env/log.h"
#include "proxy/fabric/hello_admission.h"
#include "proxy/fabric/random_id.h"
#include "proxy/fabric/tcp/tcp_endpoint.h"
#include "proxy/fabric/tcp/tcp_target.h"

namespace railyard::fabric::tcp {
namespace {

/// Accepted sockets waiting for a hello, at most. When full, the source holding the
/// most gives way (AdmitPending): no cap per source below it, since one host's ranks,
/// rails and sockets per rail (NCCL_NSOCKS_PERTHREAD, up to 16) open dozens at once,
/// and a refused one fails its connection (a CI run: 4 processes on 2 rails x 2 sockets
/// through a relay met the old cap of 16 per source, and a child's FetchAdds failed).
constexpr size_t kMaxPending = 256;
/// Sockets accepted per rail in one Progress, at most: a flood of connects cannot keep
/// Progress in accept() (the listener stays readable; the rest come next pass).
constexpr int kMaxAcceptsPerPass = 64;

/// True for the 1st, 1025th, 2049th, ... call on `count` (which it increments): a
/// refusal logged so under a flood writes little.
bool FirstOfEach1024(uint64_t* count) { return (*count)++ % 1024 == 0; }

/// The IPv4 source of accepted socket `fd` (network order), 0 when unknown.
uint32_t AcceptedFrom(int fd) {
  sockaddr_in from{};
  socklen_t len = sizeof from;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &len) != 0 || from.sin_family != AF_INET) return 0;
  return from.sin_addr.s_addr;
}

/// Dotted text of `addr` (network order); "?" for 0.
std::string DottedOrUnknown(uint32_t addr) {
  if (addr == 0) return "?";
  char ip[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr;
  inet_ntop(AF_INET, &a, ip, sizeof ip);
  return ip;
}
/// Tells a peer whose hello is of another wire version why its socket closes: one
/// NACK (errc kVersion, `why` as text) in this build's version, which the peer's
/// DecodeFrameHeader refuses as a version error naming both versions. Best effort: a
/// fresh socket's buffer takes 64 + 1024 bytes without blocking.
void SendVersionNack(int fd, const std::string& why) {
  FrameHeader h = MakeHeader(FrameType::kNack);
  h.value = static_cast<uint64_t>(FabricErrc::kVersion);
  const std::string text = why.substr(0, kMaxNackText);
  h.payloadBytes = static_cast<uint32_t>(text.size());
  iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(text.data()), text.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  (void)::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

TcpWorker::TcpWorker(TcpDomain* domain) : domain_(domain) {}

Status TcpWorker::Create(TcpDomain* domain, std::unique_ptr<Worker>* out) {
  std::unique_ptr<TcpWorker> w(new TcpWorker(domain));
  w->address_.workerId = RandomNonZeroId();
  RY_RETURN_IF_ERROR(AcceptSources::Parse(domain->options().acceptOnlyFrom, "TCP fabric", &w->acceptOnlyFrom_));
  w->epoll_ = proxy::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!w->epoll_.valid()) return SystemError("fabric worker: epoll_create1: " + proxy::ErrnoText(errno));
  const auto& rails = domain->rails();
  for (size_t i = 0; i < rails.size(); ++i) {
    const std::string where = "fabric rail " + std::to_string(i) + " (" + rails[i].device + " " + rails[i].address + ")";
    proxy::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return SystemError(where + ": socket: " + proxy::ErrnoText(errno));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, rails[i].address.c_str(), &sa.sin_addr);
    sa.sin_port = htons(domain->options().listenPort);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return SystemError(where + ": bind: " + proxy::ErrnoText(errno));
    }
    if (::listen(fd.get(), 128) != 0) return SystemError(where + ": listen: " + proxy::ErrnoText(errno));
    socklen_t len = sizeof sa;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      return SystemError(where + ": getsockname: " + proxy::ErrnoText(errno));
    }
    w->address_.rails.push_back({sa.sin_addr.s_addr, ntohs(sa.sin_port), rails[i].speedMbps});
    w->Watch(fd.get());
    w->listeners_.push_back(std::move(fd));
  }
  *out = std::move(w);
  return Status::Ok();
}

TcpWorker::~TcpWorker() {
  if (!endpoints_.empty()) {
    RY_WARN("fabric worker destroyed with %zu endpoints still alive (destroy them first)", endpoints_.size());
  }
}

Status TcpWorker::Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) {
  WorkerAddress peer;
  RY_RETURN_IF_ERROR(WorkerAddress::Unpack(peerAddress, &peer));
  std::unique_ptr<TcpEndpoint> ep;
  RY_RETURN_IF_ERROR(TcpEndpoint::Create(this, peer, nextConnection_++, &ep));
  endpoints_.push_back(ep.get());
  *out = std::move(ep);
  return Status::Ok();
}

Status TcpWorker::ConnectSpliced(std::span<const uint8_t> peerAddress, const SpliceRoute& splice,
                                 std::unique_ptr<Endpoint>* out) {
  WorkerAddress peer;
  RY_RETURN_IF_ERROR(WorkerAddress::Unpack(peerAddress, &peer));
  std::unique_ptr<TcpEndpoint> ep;
  RY_RETURN_IF_ERROR(TcpEndpoint::Create(this, peer, nextConnection_++, &ep, &splice));
  endpoints_.push_back(ep.get());
  *out = std::move(ep);
  return Status::Ok();
}

void TcpWorker::Detach(TcpEndpoint* ep) {
  endpoints_.erase(std::remove(endpoints_.begin(), endpoints_.end(), ep), endpoints_.end());
}

void TcpWorker::Watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    // Not watched: fall back to trying every socket on every Progress.
    RY_WARN("fabric worker: epoll_ctl(ADD, fd %d): %s; polling every socket", fd, proxy::ErrnoText(errno).c_str());
    watchFailed_ = true;
  }
}

void TcpWorker::PollReadiness() {
  for (int fd : readyList_) ready_[static_cast<size_t>(fd)] = 0;
  readyList_.clear();
  constexpr int kBatch = 256;
  epoll_event evs[kBatch];
  int n;
  do {
    n = ::epoll_wait(epoll_.get(), evs, kBatch, 0);
  } while (n < 0 && errno == EINTR);
  // A full batch may leave sockets out: this pass tries them all (as without epoll).
  allReadable_ = watchFailed_ || n < 0 || n == kBatch;
  for (int i = 0; i < n; ++i) {
    const int fd = evs[i].data.fd;
    if (fd < 0) continue;
    if (static_cast<size_t>(fd) >= ready_.size()) ready_.resize(static_cast<size_t>(fd) + 1, 0);
    ready_[static_cast<size_t>(fd)] = 1;
    readyList_.push_back(fd);
  }
}

void TcpWorker::AcceptNew() {
  for (size_t rail = 0; rail < listeners_.size(); ++rail) {
    if (!Readable(listeners_[rail].get())) continue;
    bool hellosRead = false;  // ReadHellos ran in this pass (at most once: it recv()s every waiting socket)
    for (int accepted = 0; accepted < kMaxAcceptsPerPass; ++accepted) {
      const int fd = ::accept4(listeners_[rail].get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK && FirstOfEach1024(&acceptErrors_)) {
          RY_WARN("fabric rail %zu: accept: %s (%llu so far, logged every 1024th)", rail,
                  proxy::ErrnoText(errno).c_str(), static_cast<unsigned long long>(acceptErrors_));
        }
        break;
      }
      proxy::Fd owned(fd);
      if (!acceptOnlyFrom_.Allows(fd)) {
        // Logged for the first and then every 1024th: a flood of them writes little.
        if (offSource_++ % 1024 == 0) {
          RY_WARN("fabric rail %zu: closed a socket from a source off this rail's cable (%llu so far)", rail,
                  static_cast<unsigned long long>(offSource_));
        }
        continue;
      }
      const uint32_t source = AcceptedFrom(fd);
      Admission a;
      if (pending_.size() >= kMaxPending && !hellosRead) {
        // Full: first take the hellos that have arrived (accept() ran before any was
        // read), so no socket whose hello waits in its buffer is evicted for a flood.
        hellosRead = true;
        ReadHellos();
      }
      if (pending_.size() >= kMaxPending) {
        waiting_.resize(pending_.size());
        for (size_t i = 0; i < pending_.size(); ++i) waiting_[i] = pending_[i].source;
        a = AdmitPending(waiting_, source, kMaxPending);
      }
      if (!a.admit || a.evict != Admission::kNone) {
        const uint32_t closed = a.admit ? pending_[a.evict].source : source;
        if (FirstOfEach1024(&refusedAtAccept_)) {
          RY_WARN("fabric rail %zu: %zu sockets wait for a hello (at most %zu); closed %s socket from %s, the source "
                  "holding the most (%llu closed so, logged every 1024th)",
                  rail, pending_.size(), kMaxPending, a.admit ? "the oldest waiting" : "a new",
                  DottedOrUnknown(closed).c_str(), static_cast<unsigned long long>(refusedAtAccept_));
        }
        if (!a.admit) continue;
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(a.evict));
      }
      (void)proxy::TuneTcpSocket(fd, 0);
      Pending p;
      p.fd = std::move(owned);
      p.rail = static_cast<int>(rail);
      p.source = source;
      p.since = Clock::now();
      pending_.push_back(std::move(p));
    }
  }
}

void TcpWorker::ReadHellos() {
  const auto now = Clock::now();
  const auto deadline = std::chrono::milliseconds(options().helloTimeoutMs);
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool drop = false;
    ssize_t n;
    do {
      n = ::recv(p.fd.get(), p.hello + p.got, sizeof p.hello - p.got, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) drop = true;
    if (n > 0) p.got += static_cast<size_t>(n);
    if (!drop && p.got == sizeof p.hello) {
      FrameHeader h;
      Status s = DecodeFrameHeader(p.hello, Direction::kToTarget, &h);
      if (s.ok() && h.frameType() != FrameType::kHello) s = InvalidArgument("first frame is not a hello");
      if (s.ok() && h.value != static_cast<uint64_t>(p.rail)) {
        s = InvalidArgument("hello for rail " + std::to_string(h.value) + " arrived on rail " + std::to_string(p.rail));
      }
      if (!s.ok()) {
        if (FirstOfEach1024(&refusedHellos_)) {
          RY_WARN("fabric rail %d: refused a connection from %s: %s (%llu refused so, logged every 1024th)", p.rail,
                  DottedOrUnknown(p.source).c_str(), s.message().c_str(), static_cast<unsigned long long>(refusedHellos_));
        }
        if (s.code() == Code::kInvalidUsage) SendVersionNack(p.fd.get(), s.message());  // another wire version
        ++stats_.framesRefused;
        drop = true;
      } else {
        auto key = std::make_pair(h.addr, h.seq);
        auto it = targets_.find(key);
        if (it == targets_.end() && targets_.size() >= options().maxPeerConnections &&
            !MakeRoomForConnection(p.source, p.rail)) {
          if (FirstOfEach1024(&refusedHellos_)) {
            RY_WARN("fabric rail %d: %zu peer connections already (at most %zu), and %s holds as many as any source "
                    "(or the source holding the most has none idle); refused a new one from it (%llu refused so, "
                    "logged every 1024th)",
                    p.rail, targets_.size(), options().maxPeerConnections, DottedOrUnknown(p.source).c_str(),
                    static_cast<unsigned long long>(refusedHellos_));
          }
          ++stats_.framesRefused;
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          continue;
        }
        if (it == targets_.end()) {
          it = targets_
                   .emplace(key, std::make_unique<TcpTarget>(this, h.addr, h.seq, static_cast<int>(h.opBytes), p.source,
                                                             h.key))
                   .first;
        }
        FabricError e = it->second->AddSocket(std::move(p.fd), static_cast<int>(h.offset), p.rail,
                                              static_cast<int>(h.opBytes), (h.flags & kFlagRelayed) != 0);
        if (!e.ok()) it->second->Fail(e);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
    }
    if (!drop && now - p.since > deadline) {
      if (FirstOfEach1024(&refusedHellos_)) {
        RY_WARN("fabric rail %d: a connection from %s sent no hello for %d ms (RAILYARD_ACCEPT_TIMEOUT_MS); closed",
                p.rail, DottedOrUnknown(p.source).c_str(), options().helloTimeoutMs);
      }
      drop = true;
    }
    if (drop) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

bool TcpWorker::MakeRoomForConnection(uint32_t source, int rail) {
  // Shares count every connection of a source, busy or idle; only an idle one is closed.
  // (Review: counting idle ones only, a source that kept its own connections busy, a byte
  // of a record now and then, held no share and could close everyone else's.)
  std::unordered_map<uint32_t, size_t> held;
  for (const auto& [key, t] : targets_) {
    if (t->Dead()) {  // failed since the last pass: reaped now
      const auto dead = key;
      targets_.erase(dead);
      return true;
    }
    ++held[t->source()];
  }
  uint32_t biggest = 0;
  size_t most = 0;
  for (const auto& [s, n] : held) {
    if (n > most || (n == most && s < biggest)) {
      most = n;
      biggest = s;
    }
  }
  const auto mine = held.find(source);
  if (mine != held.end() && mine->second >= most) return false;  // the newcomer's source holds the most
  auto victim = targets_.end();
  for (auto it = targets_.begin(); it != targets_.end(); ++it) {
    if (it->second->source() != biggest || !it->second->Idle()) continue;
    if (victim == targets_.end() || it->second->created() < victim->second->created()) victim = it;
  }
  if (victim == targets_.end()) return false;  // every connection of that source is under way
  if (FirstOfEach1024(&closedForRoom_)) {
    RY_WARN("fabric rail %d: %zu peer connections already (at most %zu); closed the oldest idle one from %s, the "
            "source holding the most (%zu), for a new one from %s (%llu closed so, logged every 1024th)",
            rail, targets_.size(), options().maxPeerConnections, DottedOrUnknown(biggest).c_str(), most,
            DottedOrUnknown(source).c_str(), static_cast<unsigned long long>(closedForRoom_));
  }
  targets_.erase(victim);  // its sockets close: the peer's next op fails PEER_CLOSED
  return true;
}

size_t TcpWorker::Progress(std::vector<Event>* events) {
  if (peerWarnsSuppressed_) {
    const auto now = log::LogBudget::Clock::now();
    const uint64_t refusals = refusalWarns_.TakeSuppressed(now);
    const uint64_t failures = failureWarns_.TakeSuppressed(now);
    if (refusals > 0 || failures > 0) {
      peerWarnsSuppressed_ = false;
      RY_WARN("fabric: %llu more refused frames and %llu more failed peer connections were logged at INFO only (at "
              "most 20 of each per %lld s at WARN)",
              static_cast<unsigned long long>(refusals), static_cast<unsigned long long>(failures),
              static_cast<long long>(refusalWarns_.window().count() / 1000));
    }
  }
  PollReadiness();
  AcceptNew();
  if (!pending_.empty()) ReadHellos();
  for (auto it = targets_.begin(); it != targets_.end();) {
    it->second->Progress();
    if (it->second->Dead()) {
      it = targets_.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoints_[i]->Progress();
  const size_t n = events_.size();
  if (n > 0) {
    if (events->empty()) {
      events->swap(events_);
    } else {
      std::move(events_.begin(), events_.end(), std::back_inserter(*events));
      events_.clear();
    }
  }
  return n;
}

bool TcpWorker::Quiet() const {
  if (!pending_.empty() || !events_.empty()) return false;
  for (const TcpEndpoint* ep : endpoints_) {
    if (!ep->Quiet()) return false;
  }
  for (const auto& [key, t] : targets_) {
    if (!t->Quiet()) return false;
  }
  return true;
}

WorkerStats TcpWorker::stats() const {
  WorkerStats s = stats_;
  s.peerConnections = targets_.size();
  return s;
}

}  // namespace railyard::fabric::tcp
