// A raw TCP peer of a TCP fabric Worker, for tests that speak the wire format by hand
// (hostile frames, acks, accept rules): a socket connected to the Worker's rail 0
// listener, and a check for the Worker having closed it. Header-only, test-side.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_frame.h"

namespace railyard::fabric::tcp::raw_peer {

/// A blocking socket connected to `worker`'s rail 0 listener, bound first to
/// `source` (IPv4 text, port 0) when given; -1 (and a test failure) if it cannot be.
inline int ConnectToRail0(const Worker& worker, const char* source = nullptr) {
  WorkerAddress a;
  EXPECT_TRUE(WorkerAddress::Unpack(worker.Address(), &a).ok());
  if (a.rails.empty()) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  bool ok = fd >= 0;
  if (ok && source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ok = inet_pton(AF_INET, source, &from.sin_addr) == 1 &&
         bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0;
    EXPECT_TRUE(ok) << "bind to " << source;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = a.rails[0].ipv4;
  to.sin_port = htons(a.rails[0].port);
  ok = ok && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  EXPECT_TRUE(ok) << "connect to the Worker's rail 0 listener";
  if (!ok && fd >= 0) close(fd);
  return ok ? fd : -1;
}

/// The hello a peer Worker sends first on each socket of a connection (tcp_frame.h,
/// FrameType::kHello): from Worker `peerWorker`, connection 1, socket `index` of
/// `sockets`, rail 0.
inline FrameHeader Hello(uint64_t peerWorker = 123, uint64_t index = 0, uint64_t sockets = 1) {
  FrameHeader h = MakeHeader(FrameType::kHello);
  h.addr = peerWorker;
  h.seq = 1;
  h.offset = index;
  h.opBytes = sockets;
  h.value = 0;
  return h;
}

/// True when the other end has closed `fd` (EOF or a reset is waiting); does not block.
inline bool SawClose(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

}  // namespace railyard::fabric::tcp::raw_peer
