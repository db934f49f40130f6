// Thin POSIX socket helpers for the TCP transport: an owning fd and whole-buffer
// send/receive loops that report errors as Status.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>
#include <utility>

#include "env/status.h"

namespace railyard::proxy {

/// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Closes the descriptor (if any).
  void Reset();
  /// shutdown(SHUT_RDWR): wakes any thread blocked on the socket; keeps the fd.
  void Shutdown() const;

 private:
  int fd_ = -1;
};

/// Sets O_NONBLOCK on or off. SystemError on failure.
Status SetNonBlocking(int fd, bool on);
/// Sets TCP_NODELAY and, where given (> 0), SO_SNDBUF/SO_RCVBUF in bytes.
Status TuneTcpSocket(int fd, int bufferBytes);
/// Makes a silent connection notice a peer host that stopped answering (a cut cable,
/// a host powered off: no FIN or RST ever comes) within about `timeoutMs`
/// (RAILYARD_TIMEOUT_MS), in whole seconds: the first TCP keepalive probe after about
/// half of it idle (at least 1 s), then one every (rest)/3 s (at least 1 s), 3 in all;
/// TCP_USER_TIMEOUT = max(`timeoutMs`, 1000) ms, which (tcp(7)) closes the connection
/// once that long passed with probes or data unanswered. Under 2000 ms gives about
/// 2 s. The peer's kernel answers the probes, so a stopped (SIGSTOP) or busy process
/// still counts as alive. After that a read fails with ETIMEDOUT (IsPeerUnreachable).
/// SystemError when a setsockopt fails.
Status SetPeerLiveness(int fd, int timeoutMs);
/// Whether `err` (an errno from a socket call) means the peer's host stopped answering
/// or cannot be reached (ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, EHOSTDOWN), not that it
/// closed the connection.
bool IsPeerUnreachable(int err);

/// Blocking: writes every byte of the iovecs (MSG_NOSIGNAL, restarts on EINTR).
/// SystemError naming `what` and errno when the connection breaks; on a socket with
/// SO_SNDTIMEO, "send timed out: the peer was silent for N ms ..." when that passes.
Status SendAll(int fd, iovec* iov, int iovcnt, const std::string& what);
/// Blocking: reads exactly `bytes` into `buf`. An orderly EOF before the first byte
/// returns Ok with *eof = true (when `eof` is given; `buf` untouched) so callers can tell
/// a clean close from a break; without `eof`, or after some bytes, it is a SystemError.
/// On a socket with SO_RCVTIMEO, "receive timed out: the peer was silent for N ms ..."
/// (SystemError) when that passes with nothing read.
Status RecvAll(int fd, void* buf, size_t bytes, const std::string& what, bool* eof = nullptr);
/// RecvAll with a bound on the whole read: SystemError ("... N of M bytes in T ms: too
/// slow") once `totalMs` has passed with bytes still missing (bytes already waiting
/// are read whatever the bound). For what a peer sends before it is
/// trusted (a handshake): SO_RCVTIMEO alone restarts with every byte, so a peer sending
/// one byte a little within it held the connection for ever (hostile-peer probe).
Status RecvAllWithin(int fd, void* buf, size_t bytes, const std::string& what, int totalMs, bool* eof = nullptr);

/// Non-blocking read of up to `bytes`; adds to *got. *closed = true on orderly EOF.
/// SystemError on a broken connection; EAGAIN is not an error.
Status TryRecv(int fd, void* buf, size_t bytes, size_t* got, bool* closed);
/// Non-blocking write of up to `bytes`; adds to *sent. SystemError on a broken connection.
Status TrySend(int fd, const void* buf, size_t bytes, size_t* sent);

/// Name of the local interface whose address the connected socket `fd` uses
/// (getsockname + getifaddrs), e.g. "p0r1"; "" when unknown.
std::string LocalInterfaceOf(int fd);

/// "strerror(errno) (errno N)".
std::string ErrnoText(int err);

}  // namespace railyard::proxy
