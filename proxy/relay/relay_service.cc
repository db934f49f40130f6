#include "proxy/relay/relay_service.h"

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "env/log.h"
#include "proxy/wire.h"
#include "topology/graph_json.h"

namespace railyard::proxy {

namespace {

/// A bounded ring buffer of bytes flowing one way.
struct Ring {
  std::vector<char> buf;
  size_t head = 0;  ///< first byte
  size_t len = 0;   ///< bytes held
  bool eof = false; ///< the source closed its sending side
  bool shut = false;///< we passed the close on (shutdown(SHUT_WR) of the sink)

  size_t Space() const { return buf.size() - len; }
  /// Up to two iovecs describing the free space (for readv).
  int FreeIov(iovec* iov) {
    const size_t cap = buf.size(), tail = (head + len) % cap, free = Space();
    if (free == 0) return 0;
    const size_t first = std::min(free, cap - tail);
    iov[0] = {buf.data() + tail, first};
    if (first == free) return 1;
    iov[1] = {buf.data(), free - first};
    return 2;
  }
  /// Up to two iovecs describing the held bytes (for writev).
  int DataIov(iovec* iov) {
    const size_t cap = buf.size();
    if (len == 0) return 0;
    const size_t first = std::min(len, cap - head);
    iov[0] = {buf.data() + head, first};
    if (first == len) return 1;
    iov[1] = {buf.data(), len - first};
    return 2;
  }
  void Consumed(size_t n) {
    head = (head + n) % buf.size();
    len -= n;
  }
};

void Abort(int fd) {
  // Close with RST so the far end learns of the break at once, not at a timeout.
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

}  // namespace

Status CheckRelayRecord(RelayRecord* rec) {
  RY_RETURN_IF_ERROR(CheckHeader(rec->header, "relay record"));
  if (rec->header.kind != static_cast<uint16_t>(RecordKind::kRelay)) {
    return InvalidUsage("expected a relay record, got kind " + std::to_string(rec->header.kind));
  }
  rec->originName[sizeof rec->originName - 1] = '\0';
  return Status::Ok();
}

/// One relayed socket: the incoming side, the onward side and the two directions.
struct RelayService::Leg {
  enum class State { kRequest, kConnecting, kSplicing };
  State state = State::kRequest;
  Fd in, out;
  RelayRecord req{};
  size_t reqGot = 0;
  std::vector<char> forward;  ///< record for the next relay, sent before any data
  size_t forwarded = 0;
  Ring up, down;              ///< in → out, out → in
  std::string desc;
};

Status RelayService::Start(const Router* router, const RelayOptions& options,
                           std::unique_ptr<RelayService>* out) {
  std::unique_ptr<RelayService> r(new RelayService());
  r->router_ = router;
  r->options_ = options;
  r->listen_ = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!r->listen_.valid()) return SystemError("relay: socket(): " + ErrnoText(errno));
  int one = 1;
  setsockopt(r->listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(r->listen_.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(options.port);
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(r->listen_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return SystemError("relay: bind(*:" + std::to_string(options.port) + "): " + ErrnoText(errno));
  }
  if (::listen(r->listen_.get(), 4096) != 0) return SystemError("relay: listen(): " + ErrnoText(errno));
  r->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  r->wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->epoll_ < 0 || r->wake_ < 0) return SystemError("relay: epoll/eventfd: " + ErrnoText(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = r->listen_.get();
  epoll_ctl(r->epoll_, EPOLL_CTL_ADD, r->listen_.get(), &ev);
  ev.data.fd = r->wake_;
  epoll_ctl(r->epoll_, EPOLL_CTL_ADD, r->wake_, &ev);
  try {
    r->thread_ = std::thread([p = r.get()] { p->Run(); });
  } catch (const std::system_error& e) {
    return SystemError(std::string("relay: cannot start its thread: ") + e.what());
  }
  RY_INFO(log::kInit | log::kNet, "relay listening on port %u", unsigned{options.port});
  *out = std::move(r);
  return Status::Ok();
}

RelayService::~RelayService() {
  if (wake_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (epoll_ >= 0) ::close(epoll_);
  if (wake_ >= 0) ::close(wake_);
}

void RelayService::Run() {
  std::map<int, std::shared_ptr<Leg>> legs;  // by both of a leg's fds

  auto interest = [&](Leg& l) {
    epoll_event ev{};
    ev.data.fd = l.in.get();
    ev.events = 0;
    if (l.state == Leg::State::kRequest) ev.events |= EPOLLIN;
    if (l.state == Leg::State::kSplicing && !l.up.eof && l.up.Space() > 0) ev.events |= EPOLLIN;
    if (l.down.len > 0) ev.events |= EPOLLOUT;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, l.in.get(), &ev);
    if (!l.out.valid()) return;
    ev.data.fd = l.out.get();
    ev.events = 0;
    if (l.state == Leg::State::kConnecting || l.up.len > 0 || l.forwarded < l.forward.size()) ev.events |= EPOLLOUT;
    if (l.state == Leg::State::kSplicing && !l.down.eof && l.down.Space() > 0) ev.events |= EPOLLIN;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, l.out.get(), &ev);
  };
  auto drop = [&](const std::shared_ptr<Leg>& l, const std::string& why, bool abort) {
    if (!why.empty()) RY_WARN("relay: %s: %s", l->desc.c_str(), why.c_str());
    for (Fd* fd : {&l->in, &l->out}) {
      if (!fd->valid()) continue;
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd->get(), nullptr);
      if (abort) Abort(fd->get());
      legs.erase(fd->get());
      fd->Reset();
    }
    if (l->state == Leg::State::kSplicing) active_.fetch_sub(1);
  };
  auto refuse = [&](const std::shared_ptr<Leg>& l, const std::string& why) {
    RejectRecord r{};
    r.header = MakeHeader(RecordKind::kReject);
    std::snprintf(r.reason, sizeof r.reason, "relay on %s: %s", router_->HostName().c_str(), why.c_str());
    size_t sent = 0;
    (void)TrySend(l->in.get(), &r, sizeof r, &sent);
    drop(l, why, false);
  };

  std::vector<epoll_event> events(64);
  for (;;) {
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      RY_WARN("relay: epoll_wait: %s", ErrnoText(errno).c_str());
      break;
    }
    bool stop = false;
    for (int e = 0; e < n; ++e) {
      const int fd = events[e].data.fd;
      if (fd == wake_) {
        stop = true;
        break;
      }
      if (fd == listen_.get()) {
        for (;;) {
          const int c = ::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          auto l = std::make_shared<Leg>();
          l->in = Fd(c);
          (void)TuneTcpSocket(c, 0);
          l->desc = "incoming socket";
          l->up.buf.resize(options_.bufferBytes);
          l->down.buf.resize(options_.bufferBytes);
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = c;
          epoll_ctl(epoll_, EPOLL_CTL_ADD, c, &ev);
          legs[c] = l;
        }
        continue;
      }
      auto it = legs.find(fd);
      if (it == legs.end()) continue;
      std::shared_ptr<Leg> l = it->second;
      const bool isIn = fd == l->in.get();

      if (l->state == Leg::State::kRequest) {
        size_t got = 0;
        bool closed = false;
        Status s = TryRecv(fd, reinterpret_cast<char*>(&l->req) + l->reqGot, sizeof l->req - l->reqGot, &got, &closed);
        l->reqGot += got;
        if (!s.ok() || closed) {
          drop(l, "", false);
          continue;
        }
        if (l->reqGot < sizeof l->req) continue;
        if (Status h = CheckRelayRecord(&l->req); !h.ok()) {
          refuse(l, h.message());
          continue;
        }
        SocketTarget t;
        bool ready = false;
        Status p = router_->PlanSocket(l->req.destHost, l->req.destPort, l->req.sockIndex, l->req.hops + 1,
                                       l->req.originName, l->req.originHost, &t, &ready);
        if (!p.ok() || !ready) {
          refuse(l, p.ok() ? "no route to host " + topology::HostIdText(l->req.destHost) : p.message());
          continue;
        }
        l->desc = "socket " + std::to_string(l->req.sockIndex) + " from " + l->req.originName +
                  " to host " + router_->Agent().Graph().HostName(l->req.destHost) + " over " + t.rail;
        l->forward = std::move(t.prefix);
        l->out = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        (void)TuneTcpSocket(l->out.get(), 0);
        if (t.local.ss_family != AF_UNSPEC) {
          (void)::bind(l->out.get(), reinterpret_cast<const sockaddr*>(&t.local), t.localLen);
        }
        if (::connect(l->out.get(), reinterpret_cast<const sockaddr*>(&t.remote), t.remoteLen) != 0 &&
            errno != EINPROGRESS) {
          refuse(l, "connect onward over " + t.rail + ": " + ErrnoText(errno));
          continue;
        }
        l->state = Leg::State::kConnecting;
        epoll_event ev{};
        ev.events = EPOLLOUT;
        ev.data.fd = l->out.get();
        epoll_ctl(epoll_, EPOLL_CTL_ADD, l->out.get(), &ev);
        legs[l->out.get()] = l;
        interest(*l);
        continue;
      }

      if (l->state == Leg::State::kConnecting) {
        if (isIn) continue;  // nothing to read from the connector until we splice
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          refuse(l, "connect onward: " + ErrnoText(err));
          continue;
        }
        l->state = Leg::State::kSplicing;
        active_.fetch_add(1);
        RY_INFO(log::kNet, "relay: carrying %s", l->desc.c_str());
        interest(*l);
        continue;
      }

      // Splicing: move what can move, both ways, without blocking.
      bool broken = false;
      std::string why;
      auto pump = [&](int from, Ring& ring) {
        iovec iov[2];
        const int k = ring.FreeIov(iov);
        if (k == 0 || ring.eof) return;
        const ssize_t r = ::readv(from, iov, k);
        if (r > 0) {
          ring.len += static_cast<size_t>(r);
        } else if (r == 0) {
          ring.eof = true;
        } else if (errno != EAGAIN && errno != EINTR) {
          broken = true;
          why = "read: " + ErrnoText(errno);
        }
      };
      auto drain = [&](int to, Ring& ring) {
        iovec iov[2];
        const int k = ring.DataIov(iov);
        if (k > 0) {
          msghdr msg{};
          msg.msg_iov = iov;
          msg.msg_iovlen = static_cast<size_t>(k);
          const ssize_t w = ::sendmsg(to, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (w > 0) {
            ring.Consumed(static_cast<size_t>(w));
            bytes_.fetch_add(static_cast<uint64_t>(w), std::memory_order_relaxed);
          } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            broken = true;
            why = "write: " + ErrnoText(errno);
          }
        }
        if (ring.eof && ring.len == 0 && !ring.shut) {
          ::shutdown(to, SHUT_WR);
          ring.shut = true;
        }
      };
      if (!isIn && l->forwarded < l->forward.size()) {
        size_t sent = 0;
        if (!TrySend(fd, l->forward.data() + l->forwarded, l->forward.size() - l->forwarded, &sent).ok()) {
          broken = true;
          why = "forwarding the relay record failed";
        }
        l->forwarded += sent;
      }
      const bool forwardDone = l->forwarded == l->forward.size();
      if (isIn) {
        if (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) pump(fd, l->up);
        if (forwardDone) drain(l->out.get(), l->up);
        drain(fd, l->down);
      } else {
        if (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) pump(fd, l->down);
        drain(l->in.get(), l->down);
        if (forwardDone) drain(fd, l->up);
      }
      if (broken) {
        drop(l, why, true);
        continue;
      }
      if (l->up.shut && l->down.shut) {
        drop(l, "", false);  // both ends closed cleanly
        continue;
      }
      interest(*l);
    }
    if (stop) break;
  }
  // Stopping: every relayed socket breaks, so its ends learn at once.
  std::vector<std::shared_ptr<Leg>> all;
  for (auto& [fd, l] : legs) all.push_back(l);
  for (auto& l : all) {
    if (l->in.valid() || l->out.valid()) drop(l, "", true);
  }
}

}  // namespace railyard::proxy
