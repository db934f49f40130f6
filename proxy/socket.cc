#include "proxy/socket.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace railyard::proxy {

std::string ErrnoText(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

std::string LocalInterfaceOf(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return "";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != local.ss_family) continue;
    if (local.ss_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr ==
            reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr) {
      name = i->ifa_name;
    } else if (local.ss_family == AF_INET6 &&
               std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                           &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, 16) == 0) {
      name = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return name;
}

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Fd::Shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return SystemError("fcntl(F_GETFL): " + ErrnoText(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) < 0) return SystemError("fcntl(F_SETFL): " + ErrnoText(errno));
  return Status::Ok();
}

Status TuneTcpSocket(int fd, int bufferBytes) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return SystemError("setsockopt(TCP_NODELAY): " + ErrnoText(errno));
  }
  if (bufferBytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferBytes, sizeof bufferBytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferBytes, sizeof bufferBytes);
  }
  return Status::Ok();
}

Status SetPeerLiveness(int fd, int timeoutMs) {
  const int totalS = std::max(2, timeoutMs / 1000);
  const int idleS = std::max(1, totalS / 2);
  const int count = 3;
  const int intervalS = std::max(1, (totalS - idleS) / count);
  const unsigned userMs = static_cast<unsigned>(std::max(timeoutMs, 1000));
  const int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idleS, sizeof idleS) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intervalS, sizeof intervalS) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &userMs, sizeof userMs) != 0) {
    return SystemError("setsockopt(TCP keepalive): " + ErrnoText(errno));
  }
  return Status::Ok();
}

bool IsPeerUnreachable(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN;
}

namespace {

/// The text of a blocking send/recv that failed with `err`: on a socket with a send or
/// receive timeout (SO_SNDTIMEO / SO_RCVTIMEO, `opt`), EAGAIN means that timeout passed
/// with the peer silent, said so with its length instead of as "Resource temporarily
/// unavailable".
std::string TransferFailure(int fd, int opt, int err, const char* verb) {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    timeval tv{};
    socklen_t len = sizeof tv;
    if (::getsockopt(fd, SOL_SOCKET, opt, &tv, &len) == 0 && (tv.tv_sec != 0 || tv.tv_usec != 0)) {
      const long long ms = static_cast<long long>(tv.tv_sec) * 1000 + tv.tv_usec / 1000;
      return std::string(verb) + " timed out: the peer was silent for " + std::to_string(ms) +
             " ms (the connection's timeout: stopped, frozen or cut off)";
    }
  }
  return std::string(verb) + " failed: " + ErrnoText(err);
}

}  // namespace

Status SendAll(int fd, iovec* iov, int iovcnt, const std::string& what) {
  msghdr msg{};
  while (iovcnt > 0) {
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError(what + ": " + TransferFailure(fd, SO_SNDTIMEO, errno, "send"));
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

namespace {

/// RecvAll and RecvAllWithin: `totalMs` < 0 is no bound (then MSG_WAITALL: one call
/// per SO_RCVTIMEO); else the bound on the whole read (each receive waits in poll for
/// what is left of it).
Status RecvExactly(int fd, void* buf, size_t bytes, const std::string& what, int totalMs, bool* eof) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(totalMs, 0));
  char* p = static_cast<char*>(buf);
  size_t got = 0;
  if (eof != nullptr) *eof = false;
  while (got < bytes) {
    if (totalMs >= 0) {
      // Waits only as long as the bound has left (review: a receive after the check
      // could block one more SO_RCVTIMEO); bytes already there are read at once.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd pfd{fd, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        return SystemError(what + ": the peer sent " + std::to_string(got) + " of " + std::to_string(bytes) +
                           " bytes in " + std::to_string(totalMs) + " ms: too slow");
      }
    }
    const ssize_t n = ::recv(fd, p + got, bytes - got, totalMs < 0 ? MSG_WAITALL : 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError(what + ": " + TransferFailure(fd, SO_RCVTIMEO, errno, "receive"));
    }
    if (n == 0) {
      if (got == 0 && eof != nullptr) {
        *eof = true;
        return Status::Ok();
      }
      return SystemError(what + ": connection closed by peer after " + std::to_string(got) + " of " +
                         std::to_string(bytes) + " bytes");
    }
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status RecvAll(int fd, void* buf, size_t bytes, const std::string& what, bool* eof) {
  return RecvExactly(fd, buf, bytes, what, -1, eof);
}

Status RecvAllWithin(int fd, void* buf, size_t bytes, const std::string& what, int totalMs, bool* eof) {
  return RecvExactly(fd, buf, bytes, what, std::max(totalMs, 0), eof);
}

Status TryRecv(int fd, void* buf, size_t bytes, size_t* got, bool* closed) {
  *closed = false;
  while (bytes > 0) {
    ssize_t n = ::recv(fd, buf, bytes, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return SystemError("receive failed: " + ErrnoText(errno));
    }
    if (n == 0) {
      *closed = true;
      return Status::Ok();
    }
    *got += static_cast<size_t>(n);
    buf = static_cast<char*>(buf) + n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status TrySend(int fd, const void* buf, size_t bytes, size_t* sent) {
  while (bytes > 0) {
    ssize_t n = ::send(fd, buf, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return SystemError("send failed: " + ErrnoText(errno));
    }
    *sent += static_cast<size_t>(n);
    buf = static_cast<const char*>(buf) + n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
