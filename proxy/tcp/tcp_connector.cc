#include "proxy/tcp/tcp_connector.h"

#include <poll.h>
#include <unistd.h>

#include <random>

#include "env/log.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_send_comm.h"

namespace railyard::proxy {

Status TcpConnector::Start(const ListenAddress& to, const TcpOptions& options,
                           const std::string& host, std::unique_ptr<TcpConnector>* out) {
  std::vector<SocketTarget> targets(static_cast<size_t>(options.nsocks) + 1);
  for (SocketTarget& t : targets) {
    t.remote = to.addr;
    t.remoteLen = to.len;
    t.rail = options.device;
  }
  return Start(to, std::move(targets), options, host, out);
}

Status TcpConnector::Start(const ListenAddress& to, std::vector<SocketTarget> targets,
                           const TcpOptions& options, const std::string& host,
                           std::unique_ptr<TcpConnector>* out) {
  if (targets.size() != static_cast<size_t>(options.nsocks) + 1) {
    return InternalError("connector given " + std::to_string(targets.size()) + " socket targets for " +
                         std::to_string(options.nsocks) + " data sockets");
  }
  std::unique_ptr<TcpConnector> c(new TcpConnector());
  c->to_ = to;
  c->options_ = options;
  c->started_ = Clock::now();
  const uint64_t connId = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  const int nsocks = options.nsocks;
  c->socks_.resize(static_cast<size_t>(nsocks) + 1);
  for (int i = 0; i <= nsocks; ++i) {
    Sock& s = c->socks_[static_cast<size_t>(i)];
    SocketTarget& t = targets[static_cast<size_t>(i)];
    s.rail = t.rail;
    s.fd = Fd(::socket(t.remote.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.fd.valid()) return SystemError("socket(): " + ErrnoText(errno));
    RY_RETURN_IF_ERROR(TuneTcpSocket(s.fd.get(), 0));
    HelloRecord hello{};
    hello.header = MakeHeader(RecordKind::kHello);
    hello.listenId = to.listenId;
    hello.connId = connId;
    hello.sockIndex = static_cast<uint16_t>(i);
    hello.nsocks = static_cast<uint16_t>(nsocks);
    hello.pid = static_cast<uint32_t>(::getpid());
    CopyHostName(host, hello.host);
    s.out = std::move(t.prefix);
    const char* h = reinterpret_cast<const char*>(&hello);
    s.out.insert(s.out.end(), h, h + sizeof hello);
    if (t.local.ss_family != AF_UNSPEC &&
        ::bind(s.fd.get(), reinterpret_cast<const sockaddr*>(&t.local), t.localLen) != 0) {
      return SystemError("bind to " + SockaddrToString(t.local) + " on rail " + t.rail + ": " +
                         ErrnoText(errno));
    }
    if (::connect(s.fd.get(), reinterpret_cast<const sockaddr*>(&t.remote), t.remoteLen) == 0) {
      s.connected = true;
    } else if (errno != EINPROGRESS) {
      return SystemError("connect to " + SockaddrToString(t.remote) + " on rail " + t.rail + " (for " +
                         to.ToString() + "): " + ErrnoText(errno));
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

Status TcpConnector::Progress(SendComm** sendComm) {
  *sendComm = nullptr;
  TcpConnection conn;
  bool done = false;
  RY_RETURN_IF_ERROR(ProgressConnection(&conn, &done));
  if (!done) return Status::Ok();
  RY_INFO(log::kNet, "connected to %s with %zu data sockets", conn.peer.ToString().c_str(),
          conn.data.size());
  *sendComm = new TcpSendComm(std::move(conn), options_);
  return Status::Ok();
}

Status TcpConnector::ProgressConnection(TcpConnection* out, bool* done) {
  *done = false;
  bool all = true;
  for (Sock& s : socks_) {
    if (!s.connected) {
      pollfd p{s.fd.get(), POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) {
        all = false;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        return SystemError("connect to " + to_.ToString() + " on rail " + s.rail + " failed: " +
                           ErrnoText(err) + " (is the peer still listening?)");
      }
      s.connected = true;
    }
    if (s.sent < s.out.size()) {
      Status st = TrySend(s.fd.get(), s.out.data() + s.sent, s.out.size() - s.sent, &s.sent);
      if (!st.ok()) {
        return SystemError("connect to " + to_.ToString() + " on rail " + s.rail + ": " + st.message());
      }
      if (s.sent < s.out.size()) all = false;
    }
  }
  if (!all) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
    if (waited.count() > options_.timeoutMs) {
      return RemoteError("connect to " + to_.ToString() + " did not complete within " +
                         std::to_string(options_.timeoutMs) + " ms (RAILYARD_TIMEOUT_MS)");
    }
    return Status::Ok();
  }
  TcpConnection conn;
  conn.control = std::move(socks_[0].fd);
  for (size_t i = 1; i < socks_.size(); ++i) {
    RY_RETURN_IF_ERROR(SetNonBlocking(socks_[i].fd.get(), false));
    conn.data.push_back(std::move(socks_[i].fd));
    conn.rails.push_back(socks_[i].rail);
  }
  conn.peer.host = to_.host;
  conn.peer.pid = to_.pid;
  conn.peer.address = SockaddrToString(to_.addr);
  conn.peer.device = conn.RailsText(options_.device);
  *out = std::move(conn);
  *done = true;
  return Status::Ok();
}

}  // namespace railyard::proxy
