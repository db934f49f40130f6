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
  std::unique_ptr<TcpConnector> c(new TcpConnector());
  c->to_ = to;
  c->options_ = options;
  c->started_ = Clock::now();
  const uint64_t connId = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  const int nsocks = options.nsocks;
  c->socks_.resize(static_cast<size_t>(nsocks) + 1);
  for (int i = 0; i <= nsocks; ++i) {
    Sock& s = c->socks_[static_cast<size_t>(i)];
    s.fd = Fd(::socket(to.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.fd.valid()) return SystemError("socket(): " + ErrnoText(errno));
    RY_RETURN_IF_ERROR(TuneTcpSocket(s.fd.get(), 0));
    s.hello.header = MakeHeader(RecordKind::kHello);
    s.hello.listenId = to.listenId;
    s.hello.connId = connId;
    s.hello.sockIndex = static_cast<uint16_t>(i);
    s.hello.nsocks = static_cast<uint16_t>(nsocks);
    s.hello.pid = static_cast<uint32_t>(::getpid());
    CopyHostName(host, s.hello.host);
    if (::connect(s.fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), to.len) == 0) {
      s.connected = true;
    } else if (errno != EINPROGRESS) {
      return SystemError("connect to " + to.ToString() + ": " + ErrnoText(errno));
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

Status TcpConnector::Progress(SendComm** sendComm) {
  *sendComm = nullptr;
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
        return SystemError("connect to " + to_.ToString() + " failed: " + ErrnoText(err) +
                           " (is the peer still listening?)");
      }
      s.connected = true;
    }
    if (s.sent < sizeof s.hello) {
      RY_RETURN_IF_ERROR(TrySend(s.fd.get(), reinterpret_cast<const char*>(&s.hello) + s.sent,
                                 sizeof s.hello - s.sent, &s.sent));
      if (s.sent < sizeof s.hello) all = false;
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
  }
  conn.peer.host = to_.host;
  conn.peer.pid = to_.pid;
  conn.peer.address = SockaddrToString(to_.addr);
  conn.peer.device = options_.device;
  RY_INFO(log::kNet, "connected to %s with %zu data sockets", conn.peer.ToString().c_str(),
          conn.data.size());
  *sendComm = new TcpSendComm(std::move(conn), options_);
  return Status::Ok();
}

}  // namespace railyard::proxy
