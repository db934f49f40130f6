// A TCP port for a test's listener, found the one way the tests share, and a
// listener on loopback at an ephemeral port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace railyard::test_support {

/// A TCP port free right now on every IPv4 address of `ips` (loopback addresses: each
/// bound with it, then closed at once; the first address picks it). Another process
/// may take it before the test binds it, which tests accept. 0 when 50 tries found
/// none free on all of them.
inline uint16_t FreePort(const std::vector<const char*>& ips = {"127.0.0.1"}) {
  for (int tries = 0; tries < 50; ++tries) {
    uint16_t port = 0;
    bool ok = !ips.empty();
    for (const char* ip : ips) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      ok = ok && fd >= 0 && ::inet_pton(AF_INET, ip, &a.sin_addr) == 1;
      a.sin_port = htons(port);
      socklen_t len = sizeof a;
      ok = ok && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
           ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
      port = ntohs(a.sin_port);
      if (fd >= 0) ::close(fd);
    }
    if (ok && port != 0) return port;
  }
  return 0;
}

/// A listening TCP socket on 127.0.0.1 at an ephemeral port (backlog `backlog`); its
/// port in `*port`. -1 (and *port 0) when socket, bind, listen or getsockname fails.
/// The caller closes it.
inline int ListenLoopback(uint16_t* port, int backlog = 16) {
  *port = 0;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace railyard::test_support
