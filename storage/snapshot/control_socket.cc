#include "storage/snapshot/control_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace railyard::storage::snapshot {

Status SetTimeouts(int fd, int timeoutMs) {
  timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
    return SystemError("snapshot control: setsockopt timeouts: " + proxy::ErrnoText(errno));
  }
  return Status::Ok();
}

Status ConnectControl(const std::string& host, uint16_t port, int timeoutMs, proxy::Fd* out) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (host.find_first_of(":[]") != std::string::npos) {
    // Not handed to the resolver (new-user trial: an IPv6 address was "cannot resolve").
    return InvalidArgument("snapshot: peer host '" + host +
                           "' holds ':' or brackets: the tiers speak IPv4 (a dotted quad or a host name); the port is "
                           "its own argument");
  }
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    // A host name, as the expert tier takes ("localhost", an /etc/hosts name: new-user
    // trial), resolved to its first IPv4 address.
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0 || res == nullptr) {
      return InvalidArgument("snapshot: cannot resolve peer host '" + host + "' to an IPv4 address: " +
                             (rc != 0 ? std::string(::gai_strerror(rc)) : std::string("no address")));
    }
    sa.sin_addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
  }
  const std::string peer = host + ":" + std::to_string(port);
  proxy::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SystemError("snapshot: socket: " + proxy::ErrnoText(errno));
  RY_RETURN_IF_ERROR(proxy::SetNonBlocking(fd.get(), true));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return SystemError("snapshot: connect to " + peer + ": " + proxy::ErrnoText(errno));
    pollfd p{fd.get(), POLLOUT, 0};
    const int r = ::poll(&p, 1, timeoutMs);
    if (r == 0) return SystemError("snapshot: connect to " + peer + " timed out after " + std::to_string(timeoutMs) + " ms");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (r < 0 || err != 0) {
      return SystemError("snapshot: connect to " + peer + ": " + proxy::ErrnoText(r < 0 ? errno : err));
    }
  }
  RY_RETURN_IF_ERROR(proxy::SetNonBlocking(fd.get(), false));
  RY_RETURN_IF_ERROR(proxy::TuneTcpSocket(fd.get(), 0));
  RY_RETURN_IF_ERROR(SetTimeouts(fd.get(), timeoutMs));
  *out = std::move(fd);
  return Status::Ok();
}

Status ListenControl(const std::string& address, uint16_t port, proxy::Fd* out, uint16_t* bound) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return InvalidArgument("snapshot: listen address '" + address + "' is not an IPv4 address");
  }
  proxy::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SystemError("snapshot: socket: " + proxy::ErrnoText(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd.get(), 64) != 0) {
    return SystemError("snapshot: listen on " + address + ":" + std::to_string(port) + ": " + proxy::ErrnoText(errno));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  *bound = ntohs(sa.sin_port);
  *out = std::move(fd);
  return Status::Ok();
}

Status SetKeepalive(int fd, int timeoutMs) {
  const int on = 1, idle = std::max(timeoutMs / 1000, 10), interval = 5, count = 3;
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0) {
    return SystemError("snapshot control socket: keepalive: " + proxy::ErrnoText(errno));
  }
  return Status::Ok();
}

void SendOrSpill(int fd, const std::vector<uint8_t>& bytes, std::vector<uint8_t>* spilled) {
  size_t sent = 0;
  if (spilled->empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) sent = static_cast<size_t>(n);
  }
  spilled->insert(spilled->end(), bytes.begin() + static_cast<std::ptrdiff_t>(sent), bytes.end());
}

}  // namespace railyard::storage::snapshot
