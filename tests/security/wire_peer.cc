#include "tests/security/wire_peer.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace railyard::security {

namespace {
int LeftMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

/// tx_queue and rx_queue of the TCP socket local:port -> remote:port (host order
/// ports, any loopback address); false when not listed.
bool Queues(bool v6, uint16_t localPort, uint16_t remotePort, long* tx, long* rx) {
  std::ifstream in(v6 ? "/proc/net/tcp6" : "/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // column titles
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string slot, local, remote, state, queues;
    if (!(ls >> slot >> local >> remote >> state >> queues)) continue;
    const auto port = [](const std::string& a) {
      const size_t colon = a.rfind(':');
      return colon == std::string::npos ? -1L : std::strtol(a.c_str() + colon + 1, nullptr, 16);
    };
    if (port(local) != localPort || port(remote) != remotePort) continue;
    const size_t colon = queues.find(':');
    if (colon == std::string::npos) continue;
    *tx = std::strtol(queues.substr(0, colon).c_str(), nullptr, 16);
    *rx = std::strtol(queues.c_str() + colon + 1, nullptr, 16);
    return true;
  }
  return false;
}
}  // namespace

bool DecodeListenHandle(const void* handle, proxy::ListenAddress* out) {
  const Status s = proxy::DecodeHandle(handle, out);
  if (!s.ok()) ADD_FAILURE() << "listen handle: " << s.message();
  return s.ok();
}

RawSocket Dial(const proxy::ListenAddress& to) {
  RawSocket s;
  s.fd = ::socket(to.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.fd < 0) {
    ADD_FAILURE() << "socket(): " << std::strerror(errno);
    return s;
  }
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&to.addr), to.len) != 0) {
    ADD_FAILURE() << "connect to " << to.ToString() << ": " << std::strerror(errno);
    ::close(s.fd);
    s.fd = -1;
    return s;
  }
  int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len);
  s.v6 = local.ss_family == AF_INET6;
  s.localPort = ntohs(s.v6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                           : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  s.remotePort = ntohs(to.addr.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&to.addr)->sin6_port
                                                     : reinterpret_cast<const sockaddr_in*>(&to.addr)->sin_port);
  return s;
}

void CloseSocket(RawSocket* s) {
  if (s->fd >= 0) ::close(s->fd);
  s->fd = -1;
}

bool SendAll(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd, POLLOUT, 0};
    if (::poll(&pfd, 1, LeftMs(deadline)) <= 0) return false;
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, LeftMs(deadline)) <= 0) return false;
    const ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool WaitClosed(int fd, Clock::time_point deadline) {
  char buf[512];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, LeftMs(deadline)) <= 0) return false;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

proxy::HelloRecord Hello(const proxy::ListenAddress& to, uint64_t connId, uint16_t index, uint16_t nsocks) {
  proxy::HelloRecord h{};
  h.header = proxy::MakeHeader(proxy::RecordKind::kHello);
  h.listenId = to.listenId;
  h.connId = connId;
  h.sockIndex = index;
  h.nsocks = nsocks;
  h.pid = static_cast<uint32_t>(::getpid());
  proxy::CopyHostName("hostile-peer", h.host);
  return h;
}

RawConnection::~RawConnection() {
  for (RawSocket& s : socks) CloseSocket(&s);
}

void OpenConnection(const proxy::ListenAddress& to, int nsocks, Clock::time_point deadline, RawConnection* out) {
  const uint64_t connId = 0x5ec0000000000000ull | static_cast<uint64_t>(::getpid());
  for (int i = 0; i <= nsocks; ++i) {
    RawSocket s = Dial(to);
    if (s.fd < 0) break;
    const proxy::HelloRecord h = Hello(to, connId, static_cast<uint16_t>(i), static_cast<uint16_t>(nsocks));
    out->socks.push_back(s);
    if (!SendAll(s.fd, &h, sizeof h, deadline)) {
      ADD_FAILURE() << "sending hello " << i;
      break;
    }
  }
  if (out->socks.size() != static_cast<size_t>(nsocks) + 1) {
    for (RawSocket& s : out->socks) CloseSocket(&s);
    out->socks.clear();
  }
}

bool ReadCts(const RawConnection& c, proxy::CtsRecord* cts, Clock::time_point deadline) {
  if (!RecvAll(c.socks[0].fd, cts, sizeof *cts, deadline)) {
    ADD_FAILURE() << "no clear-to-send record arrived on the control socket";
    return false;
  }
  const Status s = proxy::CheckHeader(cts->header, "clear-to-send");
  if (!s.ok() || cts->header.kind != static_cast<uint16_t>(proxy::RecordKind::kCts)) {
    ADD_FAILURE() << "bad clear-to-send record: " << s.message();
    return false;
  }
  return true;
}

proxy::ChunkHeader Chunk(const proxy::CtsRecord& cts, uint32_t slot, uint64_t off, uint32_t len, uint64_t total) {
  proxy::ChunkHeader h{};
  h.header = proxy::MakeHeader(proxy::RecordKind::kChunk);
  h.seq = cts.seq;
  h.slot = slot;
  h.len = len;
  h.addr = cts.entries[slot].addr + off;
  h.total = total;
  h.rkey = cts.entries[slot].rkey;
  return h;
}

bool WaitConsumed(const RawSocket& s, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    long tx = -1, rx = -1, rtx = -1, rrx = -1;
    const bool mine = Queues(s.v6, s.localPort, s.remotePort, &tx, &rx);
    const bool theirs = Queues(s.v6, s.remotePort, s.localPort, &rtx, &rrx);
    if (mine && theirs && tx == 0 && rrx == 0) return true;
    std::this_thread::sleep_for(Ms(2));  // polling interval of a bounded wait, not a barrier
  }
  return false;
}

int OpenFds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace railyard::security
