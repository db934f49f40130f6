#include "proxy/tcp/tcp_listen_comm.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "env/log.h"
#include "proxy/routing/relay_hop_names.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_recv_comm.h"

namespace railyard::proxy {

namespace {
/// Most data sockets a hello may announce (RAILYARD_NSOCKS range).
constexpr int kMaxDataSockets = 64;
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

Status TcpListenComm::Refuse(Fd& fd, const Status& why) {
  RejectRecord r{};
  r.header = MakeHeader(RecordKind::kReject);
  std::strncpy(r.reason, why.message().c_str(), sizeof r.reason - 1);
  size_t sent = 0;
  (void)TrySend(fd.get(), &r, sizeof r, &sent);  // best effort: the connector may be gone
  fd.Reset();
  RY_WARN("refused a connection on rail %s: %s", options_.device.c_str(), why.message().c_str());
  return why;
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
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      if (errno == ECONNABORTED) continue;
      return SystemError("accept() on rail " + options_.device + ": " + ErrnoText(errno));
    }
    Incoming in;
    in.fd = Fd(fd);
    in.since = Clock::now();
    incoming_.push_back(std::move(in));
  }

  for (size_t k = 0; k < incoming_.size();) {
    Incoming& in = incoming_[k];
    bool closed = false;
    size_t got = 0;
    Status s = TryRecv(in.fd.get(), reinterpret_cast<char*>(&in.hello) + in.got,
                       sizeof in.hello - in.got, &got, &closed);
    in.got += got;
    if (!s.ok() || closed) {
      // A connector that went away before finishing its hello: nothing to keep.
      RY_INFO(log::kNet, "dropped an incoming socket before its hello completed");
      incoming_.erase(incoming_.begin() + static_cast<long>(k));
      continue;
    }
    if (in.got < sizeof in.hello) {
      ++k;
      continue;
    }
    Fd fd = std::move(in.fd);
    HelloRecord h = in.hello;
    incoming_.erase(incoming_.begin() + static_cast<long>(k));

    Status bad = CheckHeader(h.header, "connection record");
    if (bad.ok() && h.header.kind != static_cast<uint16_t>(RecordKind::kHello)) {
      bad = InvalidUsage("connection record has kind " + std::to_string(h.header.kind) +
                         ", expected a hello");
    }
    if (bad.ok() && h.listenId != listenId_) {
      bad = InvalidUsage("connection record is for another listener (stale handle?)");
    }
    if (bad.ok() && (h.nsocks == 0) != (options_.nsocks == 0) &&
        !(h.nsocks == 0 && options_.acceptControlOnly)) {
      bad = InvalidUsage(std::string("transport mismatch: the connector uses ") +
                         (h.nsocks == 0 ? "verbs" : "TCP") + " and this listener " +
                         (options_.nsocks == 0 ? "verbs" : "TCP") +
                         " (set RAILYARD_TRANSPORT the same on every host)");
    }
    if (bad.ok() && (h.nsocks > kMaxDataSockets || h.sockIndex > h.nsocks)) {
      bad = InvalidUsage("connection record announces socket " + std::to_string(h.sockIndex) +
                         " of " + std::to_string(h.nsocks) + " data sockets");
    }
    if (!bad.ok()) return Refuse(fd, bad);

    Group& g = groups_[h.connId];
    if (g.socks.empty()) {
      g.first = h;
      g.socks.resize(static_cast<size_t>(h.nsocks) + 1);
    } else if (g.first.nsocks != h.nsocks || g.socks[h.sockIndex].valid()) {
      return Refuse(fd, InvalidUsage("inconsistent connection records for one connection"));
    }
    if (h.sockIndex == 0) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer), &len) == 0) {
        // A relayed control socket comes from the relay: say so, not just its address.
        const std::string via = ViaRelay(fd.get(), std::string(h.host, strnlen(h.host, sizeof h.host)));
        g.address = via.empty() ? SockaddrToString(peer) : "control socket" + via;
      }
    }
    g.socks[h.sockIndex] = std::move(fd);
    ++g.have;
  }

  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    Group& g = it->second;
    if (g.have != static_cast<int>(g.socks.size())) continue;
    TcpConnection conn;
    conn.control = std::move(g.socks[0]);
    for (size_t i = 1; i < g.socks.size(); ++i) {
      RY_RETURN_IF_ERROR(SetNonBlocking(g.socks[i].get(), false));
      RY_RETURN_IF_ERROR(TuneTcpSocket(g.socks[i].get(), 0));
      conn.rails.push_back(LocalInterfaceOf(g.socks[i].get()) +
                           ViaRelay(g.socks[i].get(), std::string(g.first.host, strnlen(g.first.host, sizeof g.first.host))));
      conn.data.push_back(std::move(g.socks[i]));
    }
    RY_RETURN_IF_ERROR(TuneTcpSocket(conn.control.get(), 0));
    conn.peer.host.assign(g.first.host, strnlen(g.first.host, sizeof g.first.host));
    conn.peer.pid = g.first.pid;
    conn.peer.address = g.address;
    conn.peer.device = conn.RailsText(options_.device);
    groups_.erase(it);
    *out = std::move(conn);
    *ready = true;
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
