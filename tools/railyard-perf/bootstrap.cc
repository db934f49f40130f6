#include "tools/railyard-perf/bootstrap.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

namespace railyard::perf {
namespace {

constexpr std::uint32_t kMagic = 0x52595046;  // "RYPF"
constexpr std::uint32_t kOpHello = 1, kOpGather = 2, kOpBarrier = 3, kOpReduce = 4;
/// Rank 0's answer to a hello: welcome, or refused (the rank is out of range or taken,
/// or the --nranks differ); `bytes` carries rank 0's nranks.
constexpr std::uint32_t kOpWelcome = 5, kOpRefused = 6;

/// Frame header in front of every bootstrap message.
struct Header {
  std::uint32_t magic;
  std::uint32_t op;
  std::uint32_t seq;
  std::int32_t rank;    // sender's rank (hello: joining rank)
  std::uint64_t bytes;  // payload bytes (hello: nranks)
};

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

/// Milliseconds left before `deadline` (0 when past), capped for poll(); rounded up, so a
/// poll() that times out returns at or after the deadline (a timeout is then told apart from
/// a peer that went away by the clock: Bootstrap::deadline()).
int MsLeft(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return int(std::clamp<long long>(left.count(), 0, 1 << 30));
}

/// Waits for `events` on `fd` until `deadline`. With `noteMs` > 0, every `noteMs` of
/// waiting prints a note to stderr saying what it waits for (new-user trial: a rank
/// stopped with SIGSTOP between two sizes was waited for silently until -T).
Status WaitFd(int fd, short events, Deadline deadline, const std::string& what, int noteMs = 0) {
  const auto start = std::chrono::steady_clock::now();
  auto nextNote = start + std::chrono::milliseconds(noteMs);
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = MsLeft(deadline);
    if (noteMs > 0) ms = std::min(ms, MsLeft(nextNote));
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return Status::Ok();
    if (rc == 0 && std::chrono::steady_clock::now() >= deadline) return SystemError("bootstrap: the run's -T limit passed in " + what);
    if (rc == 0) {
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      std::fprintf(stderr,
                   "railyard-perf: bootstrap: %.0f s in %s: that rank is stopped, slow, or still busy with the "
                   "previous size; the run ends at its -T limit in %d s\n",
                   waited.count(), what.c_str(), MsLeft(deadline) / 1000);
      nextNote += std::chrono::milliseconds(noteMs);
      continue;
    }
    if (errno != EINTR) return SystemError(Errno(("bootstrap: poll while " + what).c_str()));
  }
}

Status SendAll(int fd, const void* buf, std::size_t bytes, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= std::size_t(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RY_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, what));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return SystemError(Errno(("bootstrap: send while " + what).c_str()));
    }
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* buf, std::size_t bytes, Deadline deadline, const std::string& what, int noteMs = 0) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= std::size_t(n);
    } else if (n == 0) {
      return SystemError("bootstrap: connection closed while " + what + " (the peer process exited)");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RY_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, what, noteMs));
    } else if (errno != EINTR) {
      return SystemError(Errno(("bootstrap: recv while " + what).c_str()));
    }
  }
  return Status::Ok();
}

void TuneSocket(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/// True when the peer of connected socket `fd` has closed it or reset it (nothing is
/// read: a joined rank sends nothing until rank 0 speaks).
bool ConnectionGone(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) return true;
  char c;
  return (p.revents & POLLIN) != 0 && ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

Status ResolveIpv4(const std::string& host, int port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(std::uint16_t(port));
  if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return Status::Ok();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidUsage("bootstrap: cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return Status::Ok();
}

std::string OpName(std::uint32_t op) {
  switch (op) {
    case kOpGather: return "allgather";
    case kOpBarrier: return "barrier";
    case kOpReduce: return "allreduce";
    default: return "op " + std::to_string(op);
  }
}

}  // namespace

Deadline DeadlineIn(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

void CloseFd(int fd) {
  if (fd >= 0) (void)close(fd);
}

Status ListenTcp(const std::string& host, int port, Listener* out) {
  sockaddr_in addr{};
  RY_RETURN_IF_ERROR(ResolveIpv4(host, port, &addr));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemError(Errno("bootstrap: socket"));
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = SystemError(Errno(("bootstrap: bind " + host + ":" + std::to_string(port)).c_str()));
    CloseFd(fd);
    return s;
  }
  if (listen(fd, SOMAXCONN) != 0) {
    Status s = SystemError(Errno("bootstrap: listen"));
    CloseFd(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Status s = SystemError(Errno("bootstrap: getsockname"));
    CloseFd(fd);
    return s;
  }
  out->fd = fd;
  out->port = ntohs(addr.sin_port);
  return Status::Ok();
}

Bootstrap::~Bootstrap() { CloseAll(); }

Bootstrap::Bootstrap(Bootstrap&& other) noexcept { *this = std::move(other); }

Bootstrap& Bootstrap::operator=(Bootstrap&& other) noexcept {
  if (this != &other) {
    CloseAll();
    rank_ = std::exchange(other.rank_, -1);
    nranks_ = std::exchange(other.nranks_, 0);
    deadline_ = other.deadline_;
    start_ = other.start_;
    seq_ = other.seq_;
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

void Bootstrap::CloseAll() {
  for (int fd : fds_) CloseFd(fd);
  fds_.clear();
}

void Bootstrap::Leave() {
  for (int& fd : fds_) {
    CloseFd(fd);
    fd = -1;
  }
}

Status Bootstrap::CreateRoot(int listenFd, int nranks, Deadline deadline, Bootstrap* out) {
  Bootstrap b;
  b.rank_ = 0;
  b.nranks_ = nranks;
  b.deadline_ = deadline;
  b.start_ = std::chrono::steady_clock::now();
  b.fds_.assign(std::size_t(nranks), -1);
  // Non-blocking: a connection that is reset between poll and accept (a port probe, a
  // stray process) leaves nothing to accept, and a blocking accept would wait past the
  // deadline (seen: rank 0 killed by its alarm instead of timing out).
  const int flags = fcntl(listenFd, F_GETFL);
  if (flags < 0 || fcntl(listenFd, F_SETFL, flags | O_NONBLOCK) != 0) {
    CloseFd(listenFd);
    return SystemError(Errno("bootstrap: making the listen socket non-blocking"));
  }
  Status status;
  int strays = 0;
  for (int joined = 1; joined < nranks && status.ok();) {
    status = WaitFd(listenFd, POLLIN, deadline,
                    "waiting for ranks to join (" + std::to_string(joined - 1) + " of " +
                        std::to_string(nranks - 1) + " joined)");
    if (!status.ok()) break;
    const int fd = accept(listenFd, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      status = SystemError(Errno("bootstrap: accept"));
      break;
    }
    TuneSocket(fd);
    Header h{};
    Status rs = RecvAll(fd, &h, sizeof(h), deadline, "reading a joining rank's hello");
    if (!rs.ok() || h.magic != kMagic || h.op != kOpHello) {
      // A stray connection (port scanner, stale rank): drop it and keep waiting; said
      // once (hostile-peer probe: garbage here was dropped without a word).
      if (strays++ == 0) {
        std::fprintf(stderr, "railyard-perf: rank 0: dropped a connection that sent no railyard-perf hello (%s); "
                     "still waiting for the ranks\n", rs.ok() ? "another program's bytes" : rs.message().c_str());
      }
      CloseFd(fd);
      continue;
    }
    const bool inRange = h.bytes == std::uint64_t(nranks) && h.rank > 0 && h.rank < nranks;
    if (inRange && b.fds_[std::size_t(h.rank)] >= 0 && ConnectionGone(b.fds_[std::size_t(h.rank)])) {
      // The process that joined as this rank has gone (stopped while rank 0 waited for
      // the others): its place is the newcomer's, a restart of that rank (review).
      CloseFd(b.fds_[std::size_t(h.rank)]);
      b.fds_[std::size_t(h.rank)] = -1;
      --joined;
    }
    const bool fits = inRange && b.fds_[std::size_t(h.rank)] < 0;
    // The joining rank hears the answer, so that a refused one says why (exit 2) instead
    // of failing later on a closed socket (new-user trial: --nranks 2 on rank 0 and 3
    // on rank 1 gave "Broken pipe", exit 4, on rank 1).
    const Header answer{kMagic, fits ? kOpWelcome : kOpRefused, 0, 0, std::uint64_t(nranks)};
    const Status said = SendAll(fd, &answer, sizeof(answer), deadline, "answering a joining rank");
    const bool duplicate = !fits && inRange;
    if (duplicate) {
      // Rank h.rank has joined already: this one is refused (it exits saying why) and
      // the job goes on with the first (new-user trial: "expects ranks 1..2" for a rank
      // 1, and the job was aborted, the first rank 1 failing on a reset connection).
      std::fprintf(stderr, "railyard-perf: rank 0: refused a second process joining as rank %u (rank %u has joined "
                   "already: two processes started with --rank %u?); still waiting for the others\n",
                   unsigned(h.rank), unsigned(h.rank), unsigned(h.rank));
      CloseFd(fd);
      continue;
    }
    if (!fits) {
      status = InvalidUsage("bootstrap: a process joined as rank " + std::to_string(h.rank) + " of " +
                            std::to_string(h.bytes) + ", but rank 0 runs --nranks " + std::to_string(nranks) +
                            " (ranks 1.." + std::to_string(nranks - 1) + " join it): mismatched --rank/--nranks");
      CloseFd(fd);
      break;
    }
    if (!said.ok()) {  // it went away already: let it join again
      CloseFd(fd);
      continue;
    }
    b.fds_[std::size_t(h.rank)] = fd;
    ++joined;
  }
  CloseFd(listenFd);
  if (!status.ok()) return status;
  *out = std::move(b);
  return Status::Ok();
}

Status Bootstrap::Join(const std::string& host, int port, int rank, int nranks, Deadline deadline,
                       Bootstrap* out) {
  if (rank <= 0 || rank >= nranks) {
    return InvalidArgument("bootstrap: Join needs 0 < rank < nranks, got rank " + std::to_string(rank) +
                           " of " + std::to_string(nranks));
  }
  sockaddr_in addr{};
  RY_RETURN_IF_ERROR(ResolveIpv4(host, port, &addr));
  const std::string where = host + ":" + std::to_string(port);
  int fd = -1;
  bool saidWaiting = false;
  for (;;) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return SystemError(Errno("bootstrap: socket"));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) break;
    const int err = errno;
    CloseFd(fd);
    fd = -1;
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EINTR && err != ENETUNREACH &&
        err != EHOSTUNREACH) {
      errno = err;
      return SystemError(Errno(("bootstrap: connect to rank 0 at " + where).c_str()));
    }
    // Rank 0 is not listening yet (multi-host start): retry with a short back-off
    // until the deadline. This is a retry delay, not a synchronisation point. Said once,
    // so that a rank started without (or before) its rank 0 is not silent until -T.
    if (!saidWaiting) {
      saidWaiting = true;
      std::fprintf(stderr, "railyard-perf: rank %d: waiting for rank 0 at %s (%s); retrying until the -T limit\n",
                   rank, where.c_str(), std::strerror(err));
    }
    const int ms = std::min(MsLeft(deadline), 100);
    if (ms <= 0) return SystemError("bootstrap: timed out connecting to rank 0 at " + where);
    (void)poll(nullptr, 0, ms);
  }
  TuneSocket(fd);
  const Header hello{kMagic, kOpHello, 0, rank, std::uint64_t(nranks)};
  Status s = SendAll(fd, &hello, sizeof(hello), deadline, "sending hello to rank 0 at " + where);
  Header answer{};
  if (s.ok()) s = RecvAll(fd, &answer, sizeof(answer), deadline, "waiting for rank 0 at " + where + " to answer");
  if (s.ok() && (answer.magic != kMagic || (answer.op != kOpWelcome && answer.op != kOpRefused))) {
    s = SystemError("bootstrap: " + where + " answered with something else than a railyard-perf rank 0 would");
  }
  if (s.ok() && answer.op == kOpRefused) {
    s = InvalidUsage("bootstrap: rank 0 at " + where + " refused this process as rank " + std::to_string(rank) +
                     " of " + std::to_string(nranks) + ": it runs --nranks " + std::to_string(answer.bytes) +
                     (answer.bytes == std::uint64_t(nranks) ? " too, and another process joined as this rank first"
                                                            : ""));
  }
  if (!s.ok()) {
    CloseFd(fd);
    return s;
  }
  Bootstrap b;
  b.rank_ = rank;
  b.nranks_ = nranks;
  b.deadline_ = deadline;
  b.start_ = std::chrono::steady_clock::now();
  b.fds_.assign(1, fd);
  *out = std::move(b);
  return Status::Ok();
}

int Bootstrap::NoteMs() const {
  // A quarter of the run's limit, 1-30 s: -T 600 notes every 30 s, a test's -T 4 every 1 s.
  const auto total = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - start_).count();
  return int(std::clamp<long long>((total / 4 + 500) / 1000 * 1000, 1000, 30000));  // whole seconds
}

Status Bootstrap::Exchange(std::uint32_t op, const void* mine, std::size_t bytes, std::vector<char>* all) {
  if (nranks_ <= 0) return InternalError("bootstrap: not connected");
  const std::uint32_t seq = ++seq_;
  all->assign(bytes * std::size_t(nranks_), 0);
  if (bytes > 0) std::memcpy(all->data() + std::size_t(rank_) * bytes, mine, bytes);
  const std::string name = OpName(op) + " #" + std::to_string(seq);
  if (rank_ == 0) {
    for (int r = 1; r < nranks_; ++r) {
      const int fd = fds_[std::size_t(r)];
      const std::string what = name + " (receiving from rank " + std::to_string(r) + ")";
      Header h{};
      RY_RETURN_IF_ERROR(RecvAll(fd, &h, sizeof(h), deadline_, what, NoteMs()));
      if (h.magic != kMagic || h.op != op || h.seq != seq || h.rank != r || h.bytes != bytes) {
        return InternalError("bootstrap: rank " + std::to_string(r) + " is out of step in " + name +
                             " (it sent " + OpName(h.op) + " #" + std::to_string(h.seq) + " of " +
                             std::to_string(h.bytes) + " bytes)");
      }
      RY_RETURN_IF_ERROR(RecvAll(fd, all->data() + std::size_t(r) * bytes, bytes, deadline_, what));
    }
    const Header reply{kMagic, op, seq, 0, std::uint64_t(all->size())};
    for (int r = 1; r < nranks_; ++r) {
      const int fd = fds_[std::size_t(r)];
      const std::string what = name + " (sending to rank " + std::to_string(r) + ")";
      RY_RETURN_IF_ERROR(SendAll(fd, &reply, sizeof(reply), deadline_, what));
      RY_RETURN_IF_ERROR(SendAll(fd, all->data(), all->size(), deadline_, what));
    }
    return Status::Ok();
  }
  const int fd = fds_[0];
  const Header h{kMagic, op, seq, rank_, std::uint64_t(bytes)};
  RY_RETURN_IF_ERROR(SendAll(fd, &h, sizeof(h), deadline_, name + " (sending to rank 0)"));
  RY_RETURN_IF_ERROR(SendAll(fd, mine, bytes, deadline_, name + " (sending to rank 0)"));
  Header reply{};
  RY_RETURN_IF_ERROR(RecvAll(fd, &reply, sizeof(reply), deadline_, name + " (waiting for rank 0)", NoteMs()));
  if (reply.magic != kMagic || reply.op != op || reply.seq != seq || reply.bytes != all->size()) {
    return InternalError("bootstrap: rank 0 is out of step in " + name);
  }
  return RecvAll(fd, all->data(), all->size(), deadline_, name + " (receiving from rank 0)");
}

bool Bootstrap::PeerGoneWithin(std::chrono::milliseconds grace, std::string* why) const {
  if (nranks_ < 2) return false;
  const auto until = std::chrono::steady_clock::now() + grace;
  for (;;) {
    if (Status s = CheckPeers(); !s.ok()) {
      *why = s.message();
      return true;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the sockets, not a barrier
  }
}

Status Bootstrap::CheckPeers() const {
  for (std::size_t i = 0; i < fds_.size(); ++i) {
    const int fd = fds_[i];
    if (fd < 0) continue;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) continue;
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) continue;
    const int peer = rank_ == 0 ? int(i) : 0;
    return SystemError("bootstrap: rank " + std::to_string(peer) + " has gone away (its process exited or failed)");
  }
  return Status::Ok();
}

Status Bootstrap::AllGather(const void* mine, std::size_t bytes, void* all) {
  std::vector<char> buf;
  RY_RETURN_IF_ERROR(Exchange(kOpGather, mine, bytes, &buf));
  if (!buf.empty()) std::memcpy(all, buf.data(), buf.size());
  return Status::Ok();
}

Status Bootstrap::Barrier() {
  std::vector<char> buf;
  const char token = 0;
  return Exchange(kOpBarrier, &token, 1, &buf);
}

Status Bootstrap::AllReduce(std::span<double> values, ReduceOp op) {
  std::vector<char> buf;
  RY_RETURN_IF_ERROR(Exchange(kOpReduce, values.data(), values.size_bytes(), &buf));
  auto at = [&](std::size_t index) {
    double v;
    std::memcpy(&v, buf.data() + index * sizeof(double), sizeof(double));
    return v;
  };
  for (std::size_t i = 0; i < values.size(); ++i) {
    double acc = at(i);
    for (int r = 1; r < nranks_; ++r) {
      const double v = at(std::size_t(r) * values.size() + i);
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    values[i] = acc;
  }
  return Status::Ok();
}

}  // namespace railyard::perf
