#include "proxy/relay/relay_service.h"

#include <pthread.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <vector>

#include "env/log.h"
#include "proxy/handle.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "env/log_budget.h"
#include "proxy/relay/relay_policy.h"
#include "proxy/relay/relay_ring.h"
#include "proxy/wire.h"
#include "topology/graph_json.h"
#include "topology/utf8_name.h"

namespace railyard::proxy {

namespace {

using SteadyClock = std::chrono::steady_clock;

/// What an epoll event's data.u64 carries in its high 32 bits (the fd is the low 32).
enum Tag : uint32_t { kWake = 1, kListen = 2, kSeat = 3, kLeg = 4 };

uint64_t Key(int fd, uint32_t tag) { return (uint64_t{tag} << 32) | static_cast<uint32_t>(fd); }

void Abort(int fd) {
  // Close with RST so the far end learns of the break at once, not at a timeout.
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

/// The source IPv4 address of an accepted socket (0 when not IPv4).
uint32_t SourceOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_INET) return 0;
  return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr;
}

/// The local IPv4 address an accepted socket arrived at (0 when not IPv4).
uint32_t ArrivedAt(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_INET) return 0;
  return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr;
}

std::string AddressText(uint32_t a) {
  in_addr x{a};
  char b[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &x, b, sizeof b);
  return b;
}

/// Sockets refused over RAILYARD_RELAY_MAX_PER_PEER that may wait at once for their
/// origin to read the refusal and close (each holds one fd, no buffer, for at most
/// RAILYARD_RELAY_IDLE_MS); refusals beyond it are reset at once, unexplained.
constexpr int kMaxRefusing = 64;

/// Sockets accepted and not yet relayed (waiting for their record, or their onward
/// connect), from every source together: a bound on the fds hostile sockets can hold
/// whatever addresses they come from (RAILYARD_RELAY_MAX_PER_PEER bounds one address).
/// A quarter of the fd limit, within [64, 4096]; more are reset at once.
int MaxPendingSockets() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<int>(std::clamp<rlim_t>(l.rlim_cur / 4, 64, 4096));
}

/// What the relay reads before it plans anything: the relay record, its MAC when
/// the record says one follows, and the header of the hello that must follow.
constexpr size_t kHeadBytes = sizeof(RelayRecord) + kRelayMacBytes + sizeof(RecordHeader);

}  // namespace

Status CheckRelayRecordHeader(const RelayRecord& rec) {
  RY_RETURN_IF_ERROR(CheckHeader(rec.header, "relay record"));
  if (rec.header.kind != static_cast<uint16_t>(RecordKind::kRelay)) {
    return InvalidUsage("expected a relay record, got kind " + std::to_string(rec.header.kind));
  }
  return Status::Ok();
}

/// One relayed socket: the incoming side, the onward side and the two directions.
struct RelayService::Leg {
  /// kRefusing: over RAILYARD_RELAY_MAX_PER_PEER; the reject record is sent and the
  /// sending side shut; what the origin sends is read and dropped until it closes, so
  /// the close is a FIN after the reason, not a reset that may overtake it.
  enum class State { kRequest, kConnecting, kSplicing, kRefusing };
  State state = State::kRequest;
  Fd in, out;
  char head[kHeadBytes] = {};  ///< relay record [+ MAC] + hello header, as received
  size_t headGot = 0;
  size_t headWant = sizeof(RelayRecord);  ///< grows once the record's flags are known
  std::vector<char> forward;   ///< sent onward before any data: next relay record + hello header
  size_t forwarded = 0;
  Ring up, down;               ///< in → out, out → in
  uint32_t source = 0;         ///< incoming socket's source IPv4 (network order)
  SteadyClock::time_point deadline{};  ///< setup must finish by then
  std::string desc;
  /// The socket of a fabric TCP Endpoint (its hello is a fabric frame): both ends name
  /// a broken socket themselves ("via h1 (ADDR:PORT)", rail, seq), and a Worker that
  /// closes with bytes unread resets its socket at a clean end too, so the relay logs
  /// a broken splice of such a socket at INFO, not WARN.
  bool fabric = false;
};

Status RelayService::Start(const Router* router, const RelayOptions& options,
                           std::unique_ptr<RelayService>* out) {
  std::unique_ptr<RelayService> r(new RelayService());
  r->router_ = router;
  r->options_ = options;
  const uint16_t port = options.port;
  auto open = [port](std::vector<Fd>* res) -> Status {
    // One listener per host, moved between processes by the seat; SO_REUSEADDR only
    // (TIME_WAIT leftovers), never SO_REUSEPORT.
    Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!l.valid()) return SystemError("relay: socket(): " + ErrnoText(errno));
    int one = 1;
    setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return SystemError("relay: bind(*:" + std::to_string(port) + "): " + ErrnoText(errno) +
                         (errno == EADDRINUSE ? " (a process that is not a Railyard relay of this version holds the port)"
                                              : ""));
    }
    if (::listen(l.get(), 4096) != 0) return SystemError("relay: listen(): " + ErrnoText(errno));
    res->push_back(std::move(l));
    return Status::Ok();
  };
  RY_RETURN_IF_ERROR(RelaySeat::Claim("relay:" + std::to_string(port), options.role, open, &r->seat_));
  r->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  r->wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->epoll_ < 0 || r->wake_ < 0) return SystemError("relay: epoll/eventfd: " + ErrnoText(errno));
  r->Watch(r->wake_, kWake, EPOLLIN);
  r->WatchSeat(true);
  r->NoteSeat();
  if (r->Relaying()) {
    RY_INFO(log::kInit | log::kNet, "relay listening on port %u", unsigned{port});
  } else {
    RY_INFO(log::kInit | log::kNet, "relay: %s relays on this host (port %u); this process stands by",
            r->SeatHolder().c_str(), unsigned{port});
  }
  try {
    r->thread_ = std::thread([p = r.get()] { p->Run(); });
  } catch (const std::system_error& e) {
    return SystemError(std::string("relay: cannot start its thread: ") + e.what());
  }
  *out = std::move(r);
  return Status::Ok();
}

RelayService::~RelayService() {
  Stop(options_.drainMs);
  if (epoll_ >= 0) ::close(epoll_);
  if (wake_ >= 0) ::close(wake_);
}

int RelayService::Stop(int drainMs) {
  std::lock_guard lock(stopMu_);
  if (stopped_) return 0;
  stopped_ = true;
  if (!thread_.joinable()) return 0;
  stopDrainMs_.store(std::max(0, drainMs));
  uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
  thread_.join();
  return leftAtStop_.load();
}

std::string RelayService::SeatHolder() const {
  std::lock_guard lock(holderMu_);
  return holder_;
}

void RelayService::Watch(int fd, uint32_t tag, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Key(fd, tag);
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) {
    epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
  }
}

void RelayService::WatchSeat(bool on) {
  // Seat descriptors may leave this process (a handover): take them out of the
  // epoll set while they are still open, or the set would keep reporting them.
  if (!seat_) return;
  for (int fd : seat_->WatchFds()) {
    if (on) {
      Watch(fd, kSeat, EPOLLIN);
    } else {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    }
  }
  for (const Fd& l : seat_->Resources()) {
    if (on) {
      Watch(l.get(), kListen, EPOLLIN);
    } else {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, l.get(), nullptr);
    }
  }
}

void RelayService::NoteSeat() {
  relaying_.store(seat_ && seat_->state() == RelaySeat::State::kHolding);
  std::lock_guard lock(holderMu_);
  holder_ = seat_ ? seat_->HolderText() : "nobody";
}

void RelayService::Run() {
  pthread_setname_np(pthread_self(), "ry-relay");  // ps -L, top -H, gdb name it
  std::map<int, std::shared_ptr<Leg>> legs;  // by both of a leg's fds
  std::map<uint32_t, int> perSource;         // sockets per source address
  int refusing = 0;                          // legs in Leg::State::kRefusing
  const int maxPending = MaxPendingSockets();
  // Refusals, resets and idle closes are a peer's doing: a flood of them must not
  // flood the log (20 lines per 10 s, then a count).
  log::LogBudget noisy(20, std::chrono::seconds(10));
  bool draining = false;
  SteadyClock::time_point drainUntil{};

  auto interest = [&](Leg& l) {
    epoll_event ev{};
    ev.data.u64 = Key(l.in.get(), kLeg);
    ev.events = 0;
    if (l.state == Leg::State::kRequest) ev.events |= EPOLLIN;
    if (l.state == Leg::State::kSplicing && !l.up.eof && l.up.Space() > 0) ev.events |= EPOLLIN;
    if (l.down.len > 0) ev.events |= EPOLLOUT;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, l.in.get(), &ev);
    if (!l.out.valid()) return;
    ev.data.u64 = Key(l.out.get(), kLeg);
    ev.events = 0;
    if (l.state == Leg::State::kConnecting || l.up.len > 0 || l.forwarded < l.forward.size()) ev.events |= EPOLLOUT;
    if (l.state == Leg::State::kSplicing && !l.down.eof && l.down.Space() > 0) ev.events |= EPOLLIN;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, l.out.get(), &ev);
  };
  // Takes a leg out of the counts it is in (carried or pending, buffered, per source;
  // or refusing).
  auto uncount = [&](Leg& l) {
    if (l.state == Leg::State::kRefusing) {
      --refusing;
      return;  // never counted as carried, pending or from its source
    }
    if (l.state == Leg::State::kSplicing) {
      active_.fetch_sub(1);
    } else {
      pending_.fetch_sub(1);
    }
    buffered_.fetch_sub(l.up.buf.size() + l.down.buf.size());
    l.up.buf = {};
    l.down.buf = {};
    if (auto it = perSource.find(l.source); it != perSource.end() && --it->second == 0) perSource.erase(it);
  };
  auto closeFd = [&](Fd& fd, bool abort) {
    if (!fd.valid()) return;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd.get(), nullptr);
    if (abort) Abort(fd.get());
    legs.erase(fd.get());
    fd.Reset();
  };
  auto drop = [&](const std::shared_ptr<Leg>& l, const std::string& why, bool abort) {
    if (!why.empty() && l->fabric && l->state == Leg::State::kSplicing) {
      RY_INFO(log::kNet, "relay on %s: %s: %s", router_->HostName().c_str(), l->desc.c_str(), why.c_str());
    } else if (!why.empty()) {
      RY_WARN("relay on %s: %s: %s", router_->HostName().c_str(), l->desc.c_str(), why.c_str());
    }
    closeFd(l->in, abort);
    closeFd(l->out, abort);
    uncount(*l);
  };
  // The reason, as the origin's dialer reads it (RejectRecord), sent without blocking.
  auto sendReject = [&](const std::shared_ptr<Leg>& l, const std::string& why) {
    RejectRecord r{};
    r.header = MakeHeader(RecordKind::kReject);
    std::snprintf(r.reason, sizeof r.reason, "relay on %s: %s", router_->HostName().c_str(), why.c_str());
    size_t sent = 0;
    (void)TrySend(l->in.get(), &r, sizeof r, &sent);
  };
  // A refusal: the reason goes out at once and the leg lingers in kRefusing (at most
  // kMaxRefusing of them, each until the idle deadline) reading and dropping what the
  // origin sends until it closes. Closing at once could reset the socket over bytes the
  // origin sent that were never read, and a reset can discard the reason before the
  // origin's dialer reads it. `counted`: the leg is in the pending counts (a socket
  // refused at accept, over the per-source cap, never was). While stopping, or with
  // kMaxRefusing lingering already, the leg closes at once.
  auto refuse = [&](const std::shared_ptr<Leg>& l, const std::string& why, bool counted = true) {
    if (noisy.Take(SteadyClock::now())) {
      RY_WARN("relay on %s: %s: %s", router_->HostName().c_str(), l->desc.c_str(), why.c_str());
    }
    sendReject(l, why);  // the origin's side sent no more than the head: the send buffer is empty
    if (draining || refusing >= kMaxRefusing) {
      if (counted) {
        drop(l, "", false);
      } else {
        closeFd(l->in, false);
      }
      return;
    }
    closeFd(l->out, true);  // an onward socket that never carried a byte
    if (counted) uncount(*l);
    ::shutdown(l->in.get(), SHUT_WR);
    l->state = Leg::State::kRefusing;
    l->deadline = SteadyClock::now() + std::chrono::milliseconds(options_.idleMs);
    ++refusing;
    Watch(l->in.get(), kLeg, EPOLLIN);
    legs[l->in.get()] = l;
  };
  // A socket reset as it is accepted, unexplained to its sender (which is no
  // Railyard process, or is one of a flood): no fd, no buffer, no lingering slot.
  auto resetAtAccept = [&](const std::shared_ptr<Leg>& l, const std::string& why) {
    if (noisy.Take(SteadyClock::now())) {
      RY_WARN("relay on %s: %s reset: %s", router_->HostName().c_str(), l->desc.c_str(), why.c_str());
    }
    Abort(l->in.get());  // l->in closes it
  };
  // This host's rail addresses (fixed for the Router's life): a socket from one of
  // them comes from a local process, not from a cable.
  std::vector<in_addr> ownRails;
  for (const FabricRail& r : router_->Rails()) ownRails.push_back(r.addr);
  // Why a socket that arrived at `at` from `source` (network order) is not one the
  // relay serves ("" when it is): relayed sockets arrive at a rail address of this
  // host (every origin and relay dials a relay there), from the other end of that
  // rail's cable.
  auto offCable = [&](uint32_t at, uint32_t source) -> std::string {
    for (const FabricRail& r : router_->Rails()) {
      if (at == 0 || r.addr.s_addr != at) continue;
      if (ArrivedFromTheCable(in_addr{source}, r.addr, r.prefixLen, ownRails)) return "";
      return "it reached rail " + r.ifname + " (" + AddressText(at) + ") from " + AddressText(source) +
             ", which is not on that rail's cable (/" + std::to_string(r.prefixLen) + ")";
    }
    return "it reached " + AddressText(at) + ", not a rail address (the relay serves its cables only)";
  };
  auto scope = [&] {
    RelayScope s;
    s.selfHost = router_->HostId();
    s.graphHosts = router_->Agent().Graph().Hosts();
    for (const FabricRail& r : router_->Rails()) {
      s.railAddresses.push_back(r.addr);
      s.railPrefixLens.push_back(r.prefixLen);
    }
    s.localAddresses = LocalIpv4Addresses();
    s.relayPort = router_->RelayPort();
    EphemeralPortRange(&s.listenerPortLow, &s.listenerPortHigh);
    s.fixedListenerPorts = options_.fixedListenerPorts;
    return s;
  };
  // A socket's head is complete: check it, plan the next leg, connect.
  auto plan = [&](const std::shared_ptr<Leg>& l) {
    RelayRecord req;
    RecordHeader hello;
    std::memcpy(&req, l->head, sizeof req);
    const size_t macBytes = (req.flags & kRelayFlagMac) != 0 ? kRelayMacBytes : 0;
    const auto* mac = macBytes != 0 ? reinterpret_cast<const unsigned char*>(l->head + sizeof req) : nullptr;
    const size_t helloAt = sizeof req + macBytes;
    std::memcpy(&hello, l->head + helloAt, sizeof hello);
    // Authenticate the bytes as received, before anything in them is believed.
    if (Status m = CheckRelayMac(req, mac, router_->ClusterKey()); !m.ok()) {
      return refuse(l, "refused: " + m.message());
    }
    const RelayScope s = scope();
    const Status checked = CheckRelayRecord(req, s);  // on the bytes as received
    // Never a control byte or a byte that is not UTF-8 in a log (hostile-peer probe: a
    // random name reached the log raw, 0x9b, a terminal's CSI, included).
    const std::string origin = topology::SanitizeName(
        std::string_view(req.originName, strnlen(req.originName, sizeof req.originName)), sizeof req.originName - 1);
    std::memset(req.originName, 0, sizeof req.originName);
    std::memcpy(req.originName, origin.data(), origin.size());
    l->desc = "socket " + std::to_string(req.sockIndex) + " from " + origin + " (" + AddressText(l->source) + ")";
    if (!checked.ok()) return refuse(l, "refused: " + checked.message());
    if (Status c = CheckFollowingHello(hello); !c.ok()) return refuse(l, "refused: " + c.message());
    l->fabric = hello.magic == fabric::tcp::kFrameMagic;
    SocketTarget t;
    bool ready = false;
    Status p = router_->PlanSocket(req.destHost, req.destPort, req.sockIndex, req.hops + 1, req.originName,
                                   req.originHost, &t, &ready);
    if (!p.ok() || !ready) {
      return refuse(l, p.ok() ? "no route to host " + topology::HostIdText(req.destHost) : p.message());
    }
    const bool relayed = !t.prefix.empty();
    if (Status c = CheckOnwardLeg(t, req.destPort, relayed, s); !c.ok()) return refuse(l, "refused: " + c.message());
    l->desc = "socket " + std::to_string(req.sockIndex) + " from " + req.originName + " to host " +
              router_->Agent().Graph().HostName(req.destHost) + " over " + t.rail;
    l->forward = std::move(t.prefix);
    l->forward.insert(l->forward.end(), l->head + helloAt, l->head + helloAt + sizeof hello);  // the hello's header
    l->out = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!l->out.valid()) return refuse(l, "socket(): " + ErrnoText(errno));
    (void)TuneTcpSocket(l->out.get(), 0);
    (void)::bind(l->out.get(), reinterpret_cast<const sockaddr*>(&t.local), t.localLen);
    if (::connect(l->out.get(), reinterpret_cast<const sockaddr*>(&t.remote), t.remoteLen) != 0 &&
        errno != EINPROGRESS) {
      return refuse(l, "connect onward over " + t.rail + ": " + ErrnoText(errno));
    }
    l->state = Leg::State::kConnecting;
    Watch(l->out.get(), kLeg, EPOLLOUT);
    legs[l->out.get()] = l;
    interest(*l);
  };

  std::vector<epoll_event> events(64);
  auto nextSweep = SteadyClock::now() + std::chrono::seconds(1);
  for (;;) {
    int waitMs = 1000;
    if (draining) {
      if (legs.empty()) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(drainUntil - SteadyClock::now()).count();
      if (left <= 0) break;
      waitMs = static_cast<int>(std::min<long long>(left, waitMs));
    }
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), waitMs);
    if (n < 0) {
      if (errno == EINTR) continue;
      RY_WARN("relay: epoll_wait: %s", ErrnoText(errno).c_str());
      break;
    }
    for (int e = 0; e < n; ++e) {
      const int fd = static_cast<int>(events[e].data.u64 & 0xffffffffu);
      const uint32_t tag = static_cast<uint32_t>(events[e].data.u64 >> 32);
      const uint32_t got = events[e].events;
      if (tag == kWake) {
        uint64_t v;
        (void)!::read(wake_, &v, sizeof v);
        if (draining) continue;
        // Stop: no new sockets (the seat goes to a process standing by, or the port
        // closes); refuse the ones being set up; carry the rest for a while.
        draining = true;
        const int ms = stopDrainMs_.load();
        drainUntil = SteadyClock::now() + std::chrono::milliseconds(ms);
        WatchSeat(false);
        seat_->HandOff();
        NoteSeat();
        std::vector<std::shared_ptr<Leg>> setup;
        for (auto& [k, l] : legs) {
          if (l->state != Leg::State::kSplicing && std::find(setup.begin(), setup.end(), l) == setup.end()) setup.push_back(l);
        }
        for (auto& l : setup) {
          if (l->state == Leg::State::kRefusing) {
            drop(l, "", false);  // its reason is already out
          } else {
            refuse(l, "the relay is stopping");
          }
        }
        if (ms > 0 && active_.load() > 0) {
          RY_INFO(log::kNet, "relay on %s: stopping; carrying %d relayed sockets for up to %d ms",
                  router_->HostName().c_str(), active_.load(), ms);
        }
        continue;
      }
      if (tag == kSeat) {
        if (draining) continue;
        RelaySeat::Change change = RelaySeat::Change::kNone;
        WatchSeat(false);
        Status s = seat_->OnReadable(fd, &change);
        WatchSeat(true);
        NoteSeat();
        if (!s.ok()) RY_WARN("relay: %s", s.message().c_str());
        if (change == RelaySeat::Change::kTaken) {
          RY_INFO(log::kNet, "relay: this process now relays on port %u", unsigned{options_.port});
        } else if (change == RelaySeat::Change::kGivenAway) {
          RY_INFO(log::kNet, "relay: %s relays from now on; this process carries its %d relayed sockets until they end",
                  SeatHolder().c_str(), active_.load());
        }
        continue;
      }
      if (tag == kListen) {
        if (draining || !Relaying()) continue;
        for (;;) {
          const int c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          auto l = std::make_shared<Leg>();
          l->in = Fd(c);
          l->source = SourceOf(c);
          l->desc = "socket from " + AddressText(l->source);
          // The listener is bound to every interface (one socket, which the seat hands
          // between processes), but it serves cables only: a socket that reached this
          // host at any other address (the management network, loopback), or at a rail
          // address from off that rail's cable, is reset before a byte of it is read.
          if (const std::string why = offCable(ArrivedAt(c), l->source); !why.empty()) {
            resetAtAccept(l, why);
            continue;
          }
          if (pending_.load() >= maxPending) {
            resetAtAccept(l, std::to_string(maxPending) + " sockets already wait for their relay record (a quarter "
                                                          "of the fd limit, at most 4096)");
            continue;
          }
          if (perSource[l->source] >= options_.maxPerPeer) {
            // Said to the origin (a Railyard rank over its cap): the refusal lingers to
            // deliver its reason, unless kMaxRefusing refusals linger already.
            const std::string why = "refused: already " + std::to_string(options_.maxPerPeer) +
                                    " sockets from that address (RAILYARD_RELAY_MAX_PER_PEER)";
            if (refusing >= kMaxRefusing) {
              resetAtAccept(l, why + ", and " + std::to_string(refusing) + " refusals in progress");
            } else {
              refuse(l, why, false);
            }
            continue;
          }
          ++perSource[l->source];
          (void)TuneTcpSocket(c, 0);
          l->up.cap = l->down.cap = options_.bufferBytes;
          l->deadline = SteadyClock::now() + std::chrono::milliseconds(options_.idleMs);
          pending_.fetch_add(1);
          Watch(c, kLeg, EPOLLIN);
          legs[c] = l;
        }
        continue;
      }
      auto it = legs.find(fd);
      if (it == legs.end()) continue;
      std::shared_ptr<Leg> l = it->second;
      const bool isIn = fd == l->in.get();

      if (l->state == Leg::State::kRefusing) {
        // Read and drop what the origin sent (its relay record, perhaps its hello)
        // until it closes; the sweep resets a leg whose origin never does.
        // At most 64 KiB a wake (level-triggered: the rest on the next), so an origin that
        // keeps sending cannot hold this thread; the sweep resets it at the deadline.
        char sink[4096];
        ssize_t r = 0;
        for (int i = 0; i < 16 && (r = ::read(fd, sink, sizeof sink)) > 0; ++i) {
        }
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) drop(l, "", false);
        continue;
      }
      if (l->state == Leg::State::kRequest) {
        size_t nread = 0;
        bool closed = false;
        Status s = TryRecv(fd, l->head + l->headGot, l->headWant - l->headGot, &nread, &closed);
        l->headGot += nread;
        if (!s.ok() || closed) {
          drop(l, "", false);
          continue;
        }
        if (l->headGot < l->headWant) continue;
        if (l->headWant == sizeof(RelayRecord)) {
          // The record is in: check what it is, then read its MAC (if it says one
          // follows) and the hello's header.
          RelayRecord req;
          std::memcpy(&req, l->head, sizeof req);
          if (Status h = CheckRelayRecordHeader(req); !h.ok()) {
            refuse(l, h.message());
            continue;
          }
          l->headWant = sizeof req + ((req.flags & kRelayFlagMac) != 0 ? kRelayMacBytes : 0) + sizeof(RecordHeader);
          continue;  // level-triggered: the rest is read on the next wake-up if it is there
        }
        plan(l);
        continue;
      }

      if (l->state == Leg::State::kConnecting) {
        if (isIn) {
          // Only a hang-up or error can wake the incoming side now (its interest is
          // empty, but EPOLLHUP/EPOLLERR are always reported, level-triggered): the
          // origin is gone, so the pending connect is pointless.
          if (got & (EPOLLHUP | EPOLLERR)) drop(l, "", true);
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          refuse(l, "connect onward: " + ErrnoText(err));
          continue;
        }
        l->state = Leg::State::kSplicing;
        pending_.fetch_sub(1);
        active_.fetch_add(1);
        RY_INFO(log::kNet, "relay: carrying %s", l->desc.c_str());
        interest(*l);
        continue;
      }

      // Splicing: move what can move, both ways, without blocking.
      bool broken = false;
      std::string why;
      auto pump = [&](int from, Ring& ring, const char* side) {
        if (ring.eof || ring.Space() == 0) return;
        buffered_.fetch_add(ring.Ensure());
        iovec iov[2];
        const int k = ring.FreeIov(iov);
        const ssize_t r = ::readv(from, iov, k);
        if (r > 0) {
          ring.len += static_cast<size_t>(r);
        } else if (r == 0) {
          ring.eof = true;
        } else if (errno != EAGAIN && errno != EINTR) {
          broken = true;
          why = std::string("read from the ") + side + ": " + ErrnoText(errno);
        }
      };
      auto drain = [&](int to, Ring& ring, const char* side) {
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
            why = std::string("write to the ") + side + ": " + ErrnoText(errno);
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
        if (got & (EPOLLIN | EPOLLHUP | EPOLLERR)) pump(fd, l->up, "origin side");
        if (forwardDone) drain(l->out.get(), l->up, "onward side");
        drain(fd, l->down, "origin side");
      } else {
        if (got & (EPOLLIN | EPOLLHUP | EPOLLERR)) pump(fd, l->down, "onward side");
        drain(l->in.get(), l->down, "origin side");
        if (forwardDone) drain(fd, l->up, "onward side");
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
    // Setup deadlines: a socket that never sends its record (or whose onward
    // connect hangs) holds an fd, not a buffer, and not for long.
    if (const auto now = SteadyClock::now(); now >= nextSweep) {
      nextSweep = now + std::chrono::seconds(1);
      std::vector<std::shared_ptr<Leg>> late;
      for (auto& [k, l] : legs) {
        if (l->state != Leg::State::kSplicing && now >= l->deadline && std::find(late.begin(), late.end(), l) == late.end()) {
          late.push_back(l);
        }
      }
      for (auto& l : late) {
        if (l->state == Leg::State::kRefusing) {  // refused, and the origin never closed
          drop(l, "", true);
          continue;
        }
        if (noisy.Take(now)) {
          RY_WARN("relay on %s: %s closed: no %s within %d ms (RAILYARD_RELAY_IDLE_MS)", router_->HostName().c_str(),
                  l->desc.c_str(), l->state == Leg::State::kRequest ? "relay record and hello" : "onward connection",
                  options_.idleMs);
        }
        drop(l, "", true);
      }
      if (const uint64_t quiet = noisy.TakeSuppressed(now); quiet > 0) {
        RY_WARN("relay on %s: %llu more refused, reset or idle sockets not logged (at most 20 lines per %lld s)",
                router_->HostName().c_str(), static_cast<unsigned long long>(quiet),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(noisy.window()).count()));
      }
    }
  }
  // Stopped: every relayed socket still open breaks, so its ends learn at once.
  std::vector<std::shared_ptr<Leg>> all;
  for (auto& [fd, l] : legs) {
    if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
  }
  leftAtStop_.store(static_cast<int>(all.size()));
  if (!all.empty() && stopDrainMs_.load() > 0) {
    RY_WARN("relay on %s: %zu relayed sockets still open after %d ms of draining: closing them",
            router_->HostName().c_str(), all.size(), stopDrainMs_.load());
  }
  for (auto& l : all) drop(l, "", true);
  if (!draining && seat_) {
    WatchSeat(false);
    seat_->HandOff();
  }
  NoteSeat();
}

}  // namespace railyard::proxy
