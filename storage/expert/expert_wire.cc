#include "storage/expert/expert_wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>

#include "storage/expert/expert_error.h"

namespace railyard::expert {

const char* TransportName(uint8_t t) {
  return t == kTransportTcp ? "tcp" : t == kTransportRead ? "read" : "unknown";
}

Status SetSocketTimeouts(int fd, int timeoutMs) {
  timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
    return ExpertError(ExpertErrc::kSystem, std::string("setsockopt timeouts: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status WireSend(int fd, const void* data, uint64_t bytes, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const bool timeout = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      return ExpertError(ExpertErrc::kPeerLost, what + (timeout ? ": peer stopped reading (timeout)" : std::string(": ") + std::strerror(errno)));
    }
    p += n;
    bytes -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status WireRecv(int fd, void* data, uint64_t bytes, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return ExpertError(ExpertErrc::kPeerLost, what + ": the peer closed the connection");
    if (n < 0 && errno == EFAULT) {
      // The buffer, not the peer (C API trial: a read-only arena was PEER_LOST).
      return ExpertError(ExpertErrc::kSystem, what + ": the destination is not writable memory of this process (" +
                                                  std::strerror(errno) + ")");
    }
    if (n < 0) {
      const bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
      return ExpertError(ExpertErrc::kPeerLost, what + (timeout ? ": peer silent (timeout)" : std::string(": ") + std::strerror(errno)));
    }
    p += n;
    bytes -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status ParseHostPort(const std::string& peer, std::string* host, uint16_t* port, bool allowZero) {
  const size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == peer.size()) {
    return ExpertError(ExpertErrc::kInvalidArgument, "peer '" + peer + "' is not host:port");
  }
  unsigned long v = 0;
  for (size_t i = colon + 1; i < peer.size(); ++i) {
    if (peer[i] < '0' || peer[i] > '9' || v > 65535) return ExpertError(ExpertErrc::kInvalidArgument, "peer '" + peer + "' has a bad port");
    v = v * 10 + static_cast<unsigned long>(peer[i] - '0');
  }
  if ((v == 0 && !allowZero) || v > 65535) return ExpertError(ExpertErrc::kInvalidArgument, "peer '" + peer + "' port outside 1..65535");
  *host = peer.substr(0, colon);
  if (host->find_first_of(":[]") != std::string::npos) {
    // Not handed to the resolver (new-user trial: "[::1]:7000" and "a:7000:5" were
    // "cannot resolve peer host").
    return ExpertError(ExpertErrc::kInvalidArgument,
                       "peer '" + peer + "' is not host:port: its host '" + *host +
                           "' holds ':' or brackets (the tiers speak IPv4: a dotted quad or a host name)");
  }
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

Status WireConnect(const std::string& host, uint16_t port, int timeoutMs, int* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) {
    return ExpertError(ExpertErrc::kInvalidArgument, "cannot resolve peer host '" + host + "'");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return ExpertError(ExpertErrc::kSystem, std::string("socket: ") + std::strerror(errno));
  }
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  const std::string name = host + ":" + std::to_string(port);
  if (rc != 0 && errno != EINPROGRESS) {
    const int e = errno;
    ::close(fd);
    return ExpertError(ExpertErrc::kPeerLost, "connect to " + name + ": " + std::strerror(e));
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, timeoutMs > 0 ? timeoutMs : -1);
    int err = 0;
    socklen_t len = sizeof err;
    if (rc <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      return ExpertError(ExpertErrc::kPeerLost, "connect to " + name + ": " + (rc == 0 ? "timeout" : std::strerror(err)));
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (Status s = SetSocketTimeouts(fd, timeoutMs); !s.ok()) {
    ::close(fd);
    return s;
  }
  *out = fd;
  return Status::Ok();
}

}  // namespace railyard::expert
