#include "proxy/tcp/tcp_listen_comm.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "env/log.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_recv_comm.h"

namespace railyard::proxy {

namespace {
/// Most data sockets a hello may announce (RAILYARD_NSOCKS range).
constexpr int kMaxDataSockets = 64;
/// Refused sockets logged at WARN per listen comm; later ones at INFO.
constexpr uint64_t kStrayWarnings = 8;
}  // namespace

Status TcpListenComm::Create(const sockaddr_storage& bindAddr, socklen_t bindLen,
                             const TcpOptions& options, const std::string& host,
                             const MrCache* cache, std::unique_ptr<TcpListenComm>* out,
                             ListenAddress* handle) {
  std::unique_ptr<TcpListenComm> l(new TcpListenComm());
  l->options_ = options;
  l->cache_ = cache;
  l->listenId_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  l->fd_ = Fd(::socket(bindAddr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l->fd_.valid()) return SystemError("socket(): " + ErrnoText(errno));
  int one = 1;
  setsockopt(l->fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage addr = bindAddr;
  if (::bind(l->fd_.get(), reinterpret_cast<sockaddr*>(&addr), bindLen) != 0) {
    return SystemError("bind(" + SockaddrToString(addr) + ") on rail " + options.device + ": " +
                       ErrnoText(errno));
  }
  if (::listen(l->fd_.get(), 16384) != 0) return SystemError("listen(): " + ErrnoText(errno));
  RY_RETURN_IF_ERROR(SetNonBlocking(l->fd_.get(), true));
  l->epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!l->epoll_.valid()) return SystemError("epoll_create1(): " + ErrnoText(errno));
  socklen_t len = sizeof addr;
  if (::getsockname(l->fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return SystemError("getsockname(): " + ErrnoText(errno));
  }
  handle->addr = addr;
  handle->len = len;
  handle->listenId = l->listenId_;
  handle->pid = static_cast<uint32_t>(::getpid());
  handle->host = host;
  *out = std::move(l);
  return Status::Ok();
}

void TcpListenComm::Refuse(Fd& fd, const std::string& from, const Status& why) {
  RejectRecord r{};
  r.header = MakeHeader(RecordKind::kReject);
  std::strncpy(r.reason, why.message().c_str(), sizeof r.reason - 1);
  size_t sent = 0;
  (void)TrySend(fd.get(), &r, sizeof r, &sent);  // best effort, never blocks: the connector may be gone
  fd.Reset();
  ++strays_;
  if (strays_ <= kStrayWarnings) {
    RY_WARN("dropped a connection from %s on rail %s: %s (still waiting for the peer's connection)%s",
            from.c_str(), options_.device.c_str(), why.message().c_str(),
            strays_ == kStrayWarnings ? "; further ones are logged at INFO" : "");
  } else {
    RY_INFO(log::kNet, "dropped a connection from %s on rail %s: %s", from.c_str(), options_.device.c_str(),
            why.message().c_str());
  }
}

size_t TcpListenComm::PendingSockets() const { return incoming_.size() + groupSockets_; }

Fd TcpListenComm::TakeIncoming(int fd) {
  auto it = incoming_.find(fd);
  if (it == incoming_.end()) return Fd();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  Fd out = std::move(it->second.fd);
  incoming_.erase(it);
  return out;
}

void TcpListenComm::Sweep(Clock::time_point now) {
  const auto limit = std::chrono::milliseconds(options_.acceptTimeoutMs);
  // While the listener itself could not take more sockets (at the cap, or out of
  // descriptors) and holds sockets without a hello, a connection's missing sockets
  // may be waiting in the backlog behind them: its clock does not run. Those
  // sockets expire on their own deadline (below), so room always comes.
  const bool paused = acceptBlocked_ && !incoming_.empty();
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    if (now - it->second.since <= limit) {
      ++it;
      continue;
    }
    const std::string from = it->second.from;
    const size_t got = it->second.got;
    Fd fd = TakeIncoming((it++)->first);
    Refuse(fd, from,
           RemoteError("no complete connection record within " + std::to_string(options_.acceptTimeoutMs) +
                       " ms (" + std::to_string(got) + " of " + std::to_string(sizeof(HelloRecord)) +
                       " bytes; RAILYARD_ACCEPT_TIMEOUT_MS)"));
  }
  for (auto it = groups_.begin(); it != groups_.end();) {
    Group& g = it->second;
    if (paused) g.last = now;
    if (now - g.last <= limit) {
      ++it;
      continue;
    }
    std::string host(g.first.host, strnlen(g.first.host, sizeof g.first.host));
    RY_WARN("dropped a half-open connection from %s (pid %u%s%s) on rail %s: %d of %zu sockets arrived, none "
            "for %d ms (RAILYARD_ACCEPT_TIMEOUT_MS)",
            host.c_str(), g.first.pid, g.address.empty() ? "" : ", ", g.address.c_str(), options_.device.c_str(),
            g.have, g.socks.size(), options_.acceptTimeoutMs);
    groupSockets_ -= static_cast<size_t>(g.have);
    it = groups_.erase(it);  // closes its sockets
  }
}

void TcpListenComm::ReadHello(int fd, Clock::time_point now) {
  auto found = incoming_.find(fd);
  if (found == incoming_.end()) return;
  Incoming& in = found->second;
  bool closed = false;
  size_t got = 0;
  Status s = TryRecv(in.fd.get(), reinterpret_cast<char*>(&in.hello) + in.got, sizeof in.hello - in.got, &got,
                     &closed);
  in.got += got;
  if (!s.ok() || closed) {
    // A connector that went away before finishing its hello: nothing to keep.
    RY_INFO(log::kNet, "dropped an incoming socket from %s before its hello completed (%zu of %zu bytes)",
            in.from.c_str(), in.got, sizeof in.hello);
    TakeIncoming(fd);
    return;
  }
  if (in.got < sizeof in.hello) return;
  const HelloRecord h = in.hello;
  const std::string from = in.from;
  Fd sock = TakeIncoming(fd);

  Status bad = CheckHeader(h.header, "connection record");
  if (bad.ok() && h.header.kind != static_cast<uint16_t>(RecordKind::kHello)) {
    bad = InvalidUsage("connection record has kind " + std::to_string(h.header.kind) + ", expected a hello");
  }
  if (bad.ok() && h.listenId != listenId_) {
    bad = InvalidUsage("connection record is for another listener (stale handle?)");
  }
  if (bad.ok() && (h.nsocks == 0) != (options_.nsocks == 0) && !(h.nsocks == 0 && options_.acceptControlOnly)) {
    bad = InvalidUsage(std::string("transport mismatch: the connector uses ") + (h.nsocks == 0 ? "verbs" : "TCP") +
                       " and this listener " + (options_.nsocks == 0 ? "verbs" : "TCP") +
                       " (set RAILYARD_TRANSPORT the same on every host)");
  }
  if (bad.ok() && (h.nsocks > kMaxDataSockets || h.sockIndex > h.nsocks)) {
    bad = InvalidUsage("connection record announces socket " + std::to_string(h.sockIndex) + " of " +
                       std::to_string(h.nsocks) + " data sockets");
  }
  if (bad.ok()) {
    auto g = groups_.find(h.connId);
    if (g != groups_.end() && (g->second.first.nsocks != h.nsocks || g->second.socks[h.sockIndex].valid())) {
      bad = InvalidUsage("inconsistent connection records for one connection");
    }
  }
  if (!bad.ok()) {
    Refuse(sock, from, bad);
    return;
  }
  Group& g = groups_[h.connId];
  if (g.socks.empty()) {
    g.first = h;
    g.socks.resize(static_cast<size_t>(h.nsocks) + 1);
  }
  if (h.sockIndex == 0) g.address = from;
  g.socks[h.sockIndex] = std::move(sock);
  ++g.have;
  ++groupSockets_;
  g.last = now;
}

Status TcpListenComm::Accept(RecvComm** recvComm) {
  *recvComm = nullptr;
  TcpConnection conn;
  bool got = false;
  RY_RETURN_IF_ERROR(AcceptConnection(&conn, &got));
  if (!got) return Status::Ok();
  RY_INFO(log::kNet, "accepted a connection from %s with %zu data sockets",
          conn.peer.ToString().c_str(), conn.data.size());
  *recvComm = new TcpRecvComm(std::move(conn), options_, cache_);
  return Status::Ok();
}

Status TcpListenComm::AcceptConnection(TcpConnection* out, bool* ready) {
  *ready = false;
  const Clock::time_point now = Clock::now();
  Sweep(now);
  // New sockets while there is room; the rest wait in the kernel's backlog.
  acceptBlocked_ = false;
  for (;;) {
    if (PendingSockets() >= static_cast<size_t>(options_.maxPendingSockets)) {
      acceptBlocked_ = true;
      break;
    }
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) break;
      if (err == ECONNABORTED || err == EPROTO) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors: keep what is pending (the timeouts above free it) and
        // try again on the next call.
        if (!fdsExhausted_) {
          RY_WARN("accept() on rail %s: %s with %zu sockets pending; retrying on later calls",
                  options_.device.c_str(), ErrnoText(err).c_str(), PendingSockets());
        }
        fdsExhausted_ = true;
        acceptBlocked_ = true;
        break;
      }
      return SystemError("accept() on rail " + options_.device + ": " + ErrnoText(err));
    }
    fdsExhausted_ = false;
    Incoming in;
    in.fd = Fd(fd);
    in.since = now;
    in.from = SockaddrToString(peer);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      RY_WARN("accept() on rail %s: cannot watch a new socket (epoll_ctl: %s); dropped it",
              options_.device.c_str(), ErrnoText(errno).c_str());
      continue;  // in.fd closes it
    }
    incoming_.emplace(fd, std::move(in));
  }
  // Hellos that have arrived: only the sockets epoll reports are read.
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_.get(), events, 64, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("epoll_wait on incoming sockets on rail " + options_.device + ": " + ErrnoText(errno));
    }
    for (int i = 0; i < n; ++i) ReadHello(events[i].data.fd, now);
    if (n < 64) break;
  }

  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    Group& g = it->second;
    if (g.have != static_cast<int>(g.socks.size())) continue;
    TcpConnection conn;
    Status s = TuneTcpSocket(g.socks[0].get(), 0);
    for (size_t i = 1; i < g.socks.size() && s.ok(); ++i) {
      s = SetNonBlocking(g.socks[i].get(), false);
      if (s.ok()) s = TuneTcpSocket(g.socks[i].get(), 0);
    }
    conn.control = std::move(g.socks[0]);
    for (size_t i = 1; i < g.socks.size() && s.ok(); ++i) {
      conn.rails.push_back(LocalInterfaceOf(g.socks[i].get()));
      conn.data.push_back(std::move(g.socks[i]));
    }
    conn.peer.host.assign(g.first.host, strnlen(g.first.host, sizeof g.first.host));
    conn.peer.pid = g.first.pid;
    conn.peer.address = g.address;
    conn.peer.device = conn.RailsText(options_.device);
    groupSockets_ -= g.socks.size();
    groups_.erase(it);
    if (!s.ok()) return s;
    *out = std::move(conn);
    *ready = true;
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
