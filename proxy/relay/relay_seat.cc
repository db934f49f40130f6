#include "proxy/relay/relay_seat.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "env/log.h"

namespace railyard::proxy {

namespace {

/// "RYSE": first bytes of every seat message.
constexpr uint32_t kSeatMagic = 0x45535952u;
constexpr uint16_t kSeatVersion = 1;
/// Most descriptors one handover carries (the seat socket + resources).
constexpr size_t kMaxSeatFds = 8;
/// Claims retried while the seat changes hands under us.
constexpr int kClaimTries = 200;

enum class Kind : uint8_t { kRequest = 1, kStandby = 2, kRefused = 3, kHandover = 4 };

/// Every message on a seat connection, both ways (16 bytes, host byte order: local only).
struct SeatMsg {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;   ///< Kind
  uint8_t role;   ///< sender's RelaySeat::Role
  uint32_t pid;   ///< sender's pid
  uint32_t nfds;  ///< descriptors passed with a handover (seat socket first)
};
static_assert(sizeof(SeatMsg) == 16);

SeatMsg Make(Kind k, RelaySeat::Role role, uint32_t nfds = 0) {
  return SeatMsg{kSeatMagic, kSeatVersion, static_cast<uint8_t>(k), static_cast<uint8_t>(role),
                 static_cast<uint32_t>(::getpid()), nfds};
}

socklen_t Address(const std::string& key, sockaddr_un* a) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  const std::string name = SeatName(key);
  const size_t n = std::min(name.size(), sizeof a->sun_path - 1);
  std::memcpy(a->sun_path + 1, name.data(), n);  // sun_path[0] = '\0': abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/// Sends `m` with `fds` attached (SCM_RIGHTS). False when the peer is gone.
bool Send(int fd, const SeatMsg& m, const std::vector<int>& fds = {}) {
  iovec iov{const_cast<SeatMsg*>(&m), sizeof m};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxSeatFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = ctl;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m);
}

/// Receives one message and the descriptors that came with it. False on EOF,
/// error, timeout or a malformed message (descriptors received are closed then).
bool Recv(int fd, SeatMsg* m, std::vector<Fd>* fds) {
  iovec iov{m, sizeof *m};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxSeatFds)] = {};
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof ctl;
  const ssize_t n = ::recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  fds->clear();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int d;
      std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
      fds->emplace_back(d);
    }
  }
  if (n != static_cast<ssize_t>(sizeof *m) || (msg.msg_flags & MSG_CTRUNC) != 0) return false;
  if (m->magic != kSeatMagic || m->version != kSeatVersion) return false;
  return fds->size() == m->nfds;
}

const char* RoleText(RelaySeat::Role r) { return r == RelaySeat::Role::kDaemon ? "railyardd" : "a rank process"; }

}  // namespace

/// A standby connected to this holder.
struct RelaySeat::Peer {
  Fd fd;
  pid_t pid = 0;
  bool trusted = false;  ///< same user as this process, or root: may be handed the seat
};

std::string SeatName(const std::string& key) { return "railyard-seat:" + key; }

Status RelaySeat::Claim(const std::string& key, Role role, OpenFn open, std::unique_ptr<RelaySeat>* out) {
  std::unique_ptr<RelaySeat> s(new RelaySeat());
  s->key_ = key;
  s->role_ = role;
  s->open_ = std::move(open);
  Change c = Change::kNone;
  RY_RETURN_IF_ERROR(s->ClaimAgain(&c));
  *out = std::move(s);
  return Status::Ok();
}

RelaySeat::~RelaySeat() { HandOff(); }

std::string RelaySeat::HolderText() const {
  return std::string(RoleText(holderRole_)) + " (pid " + std::to_string(holderPid_) + ")";
}

Status RelaySeat::Adopt(std::vector<Fd> fds) {
  if (fds.empty()) return SystemError(SeatName(key_) + ": a handover without the seat socket");
  seat_ = std::move(fds[0]);
  resources_.clear();
  for (size_t i = 1; i < fds.size(); ++i) resources_.push_back(std::move(fds[i]));
  (void)SetNonBlocking(seat_.get(), true);
  holder_.Reset();
  state_ = State::kHolding;
  holderRole_ = role_;
  holderPid_ = ::getpid();
  return Status::Ok();
}

Status RelaySeat::ClaimAgain(Change* change) {
  *change = Change::kNone;
  sockaddr_un a;
  const socklen_t len = Address(key_, &a);
  for (int attempt = 0; attempt < kClaimTries; ++attempt) {
    Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return SystemError(SeatName(key_) + ": socket(): " + ErrnoText(errno));
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0) {
      if (::listen(s.get(), 64) != 0) return SystemError(SeatName(key_) + ": listen(): " + ErrnoText(errno));
      std::vector<Fd> res;
      RY_RETURN_IF_ERROR(open_(&res));  // on failure `s` closes: the seat is free again
      seat_ = std::move(s);
      resources_ = std::move(res);
      holder_.Reset();
      state_ = State::kHolding;
      holderRole_ = role_;
      holderPid_ = ::getpid();
      *change = Change::kTaken;
      return Status::Ok();
    }
    if (errno != EADDRINUSE) return SystemError(SeatName(key_) + ": bind(): " + ErrnoText(errno));
    // Held: ask the holder.
    Fd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!c.valid()) return SystemError(SeatName(key_) + ": socket(): " + ErrnoText(errno));
    SetTimeouts(c.get(), 1000);
    if (::connect(c.get(), reinterpret_cast<sockaddr*>(&a), len) != 0) {
      // ECONNREFUSED: bound but not listening yet, or its holder is closing. Next try
      // finds it listening or free; yield so the other process gets there.
      if (errno != ECONNREFUSED && errno != EAGAIN && errno != ENOENT) {
        return SystemError(SeatName(key_) + ": connect(): " + ErrnoText(errno));
      }
      ::usleep(1000);
      continue;
    }
    ucred cred{};
    socklen_t cl = sizeof cred;
    getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    if (!Send(c.get(), Make(Kind::kRequest, role_))) continue;  // holder went away: try again
    SeatMsg m{};
    std::vector<Fd> fds;
    if (!Recv(c.get(), &m, &fds)) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return SystemError(SeatName(key_) + ": its holder (pid " + std::to_string(cred.pid) +
                           ") did not answer within 1 s");
      }
      continue;  // the holder left while we asked
    }
    switch (static_cast<Kind>(m.kind)) {
      case Kind::kRefused:
        return InvalidUsage("another railyardd (pid " + std::to_string(m.pid) + ") already runs on this host (" +
                            SeatName(key_) + "); stop it first, or give this one other ports");
      case Kind::kStandby:
        (void)SetNonBlocking(c.get(), true);
        seat_.Reset();
        resources_.clear();
        holder_ = std::move(c);
        state_ = State::kStandby;
        holderRole_ = static_cast<Role>(m.role);
        holderPid_ = static_cast<pid_t>(m.pid);
        return Status::Ok();
      case Kind::kHandover:
        RY_RETURN_IF_ERROR(Adopt(std::move(fds)));
        RY_INFO(log::kInit | log::kNet, "%s: taken over from %s (pid %u)", SeatName(key_).c_str(),
                RoleText(static_cast<Role>(m.role)), m.pid);
        *change = Change::kTaken;
        return Status::Ok();
      default:
        continue;
    }
  }
  return SystemError(SeatName(key_) + ": changed hands " + std::to_string(kClaimTries) +
                     " times while claiming it");
}

std::vector<int> RelaySeat::WatchFds() const {
  std::vector<int> out;
  if (seat_.valid()) out.push_back(seat_.get());
  for (const auto& p : standbys_) out.push_back(p->fd.get());
  if (holder_.valid()) out.push_back(holder_.get());
  return out;
}

Status RelaySeat::OnReadable(int fd, Change* change) {
  *change = Change::kNone;
  if (state_ == State::kHolding && fd == seat_.get()) {
    for (;;) {
      Fd c(::accept4(seat_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) break;
      SetTimeouts(c.get(), 1000);
      ucred cred{};
      socklen_t cl = sizeof cred;
      getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cl);
      SeatMsg m{};
      std::vector<Fd> ignored;
      if (!Recv(c.get(), &m, &ignored) || static_cast<Kind>(m.kind) != Kind::kRequest) continue;
      const auto role = static_cast<Role>(m.role);
      const bool trusted = cred.uid == ::geteuid() || cred.uid == 0;
      if (role == Role::kDaemon && role_ == Role::kDaemon) {
        RY_WARN("%s: refused a second railyardd (pid %d): this one (pid %d) holds the seat",
                SeatName(key_).c_str(), static_cast<int>(cred.pid), static_cast<int>(::getpid()));
        (void)Send(c.get(), Make(Kind::kRefused, role_));
        continue;
      }
      if (role == Role::kDaemon && trusted) {
        std::vector<int> fds{seat_.get()};
        for (const Fd& r : resources_) fds.push_back(r.get());
        if (!Send(c.get(), Make(Kind::kHandover, role_, static_cast<uint32_t>(fds.size())), fds)) continue;
        RY_INFO(log::kInit | log::kNet, "%s: handed to railyardd (pid %d); this process stands by",
                SeatName(key_).c_str(), static_cast<int>(cred.pid));
        seat_.Reset();
        resources_.clear();
        standbys_.clear();  // they ask the new holder
        state_ = State::kStandby;
        *change = Change::kGivenAway;
        Change again = Change::kNone;
        if (Status s = ClaimAgain(&again); !s.ok()) {
          RY_INFO(log::kNet, "%s: cannot stand by: %s", SeatName(key_).c_str(), s.message().c_str());
        }
        if (again == Change::kTaken) *change = Change::kNone;  // the daemon left already: ours again
        return Status::Ok();
      }
      // A rank (or a daemon of another user): it stands by.
      (void)Send(c.get(), Make(Kind::kStandby, role_));
      (void)SetNonBlocking(c.get(), true);
      auto p = std::make_unique<Peer>();
      p->fd = std::move(c);
      p->pid = cred.pid;
      p->trusted = trusted;
      standbys_.push_back(std::move(p));
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < standbys_.size(); ++i) {
    if (standbys_[i]->fd.get() != fd) continue;
    char b;
    const ssize_t n = ::recv(fd, &b, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) standbys_.erase(standbys_.begin() + static_cast<long>(i));
    return Status::Ok();
  }
  if (state_ == State::kStandby && fd == holder_.get()) {
    SeatMsg m{};
    std::vector<Fd> fds;
    (void)SetNonBlocking(fd, false);
    const bool got = Recv(fd, &m, &fds);
    (void)SetNonBlocking(fd, true);
    if (got && static_cast<Kind>(m.kind) == Kind::kHandover) {
      RY_RETURN_IF_ERROR(Adopt(std::move(fds)));
      RY_INFO(log::kNet, "%s: handed over by %s (pid %u) as it left", SeatName(key_).c_str(),
              RoleText(static_cast<Role>(m.role)), m.pid);
      *change = Change::kTaken;
      return Status::Ok();
    }
    // The holder is gone (exited, killed, or handed the seat to someone else).
    holder_.Reset();
    return ClaimAgain(change);
  }
  return Status::Ok();
}

bool RelaySeat::HandOff() {
  bool handed = false;
  if (state_ == State::kHolding && seat_.valid()) {
    std::vector<int> fds{seat_.get()};
    for (const Fd& r : resources_) fds.push_back(r.get());
    for (const auto& p : standbys_) {
      if (p->trusted && Send(p->fd.get(), Make(Kind::kHandover, role_, static_cast<uint32_t>(fds.size())), fds)) {
        RY_INFO(log::kNet, "%s: handed to the process %d standing by", SeatName(key_).c_str(),
                static_cast<int>(p->pid));
        handed = true;
        break;
      }
    }
  }
  standbys_.clear();
  seat_.Reset();
  resources_.clear();
  holder_.Reset();
  state_ = State::kStandby;
  return handed;
}

}  // namespace railyard::proxy
