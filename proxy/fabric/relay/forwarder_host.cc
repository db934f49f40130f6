#include "proxy/fabric/relay/forwarder_host.h"

#include <pthread.h>
#include <algorithm>
#include <chrono>
#include <thread>

#include <poll.h>

#include "env/log.h"

namespace railyard::fabric::relay {

namespace {

/// The cables of `self` in the graph: neighbours ascending, each with this host's rails.
void Cables(const topology::ClusterGraph& g, uint64_t self, std::vector<uint64_t>* neighbours,
            std::vector<std::vector<RailInfo>>* rails) {
  neighbours->clear();
  rails->clear();
  for (uint64_t n : g.Neighbours(self)) {
    std::vector<RailInfo> r = CableRails(g, self, n);
    if (r.empty()) continue;
    if (r.size() > tcp::WorkerAddress::kMaxRails) r.resize(tcp::WorkerAddress::kMaxRails);
    neighbours->push_back(n);
    rails->push_back(std::move(r));
  }
}

/// The neighbour's ends of its cable to `self`: the only sources a Forwarder port
/// facing that neighbour accepts sockets from (TcpOptions::acceptOnlyFrom, and
/// VerbsOptions::acceptOnlyFrom for its verbs port's bootstrap connections).
std::vector<std::string> NeighbourEnds(const topology::ClusterGraph& g, uint64_t self, uint64_t neighbour) {
  std::vector<std::string> out;
  for (const topology::RailLink& l : g.LinksBetween(self, neighbour)) {
    if (!l.Other(self).address.empty()) out.push_back(l.Other(self).address);
  }
  if (out.empty()) out.push_back("0.0.0.0");  // none known: no source matches (never "any")
  return out;
}

/// Between rebuilds that retry verbs ports which could not be made (ms).
constexpr int kVerbsRetryMs = 5000;

/// Sleep of the relay thread in poll while its Forwarder is quiet (ms): the first,
/// then doubled after each that ran out with nothing readable, up to the longest.
/// Only timers need the bound (op timeouts, the keepalive watch, the seat check,
/// stop): peers' bytes wake it at once. A fixed 5 ms woke an idle railyardd 200
/// times a second, 6-14 % of a soft-RoCE guest's CPU (ring_comms.sh --threads).
constexpr int kQuietWaitMs = 5;
constexpr int kMaxQuietWaitMs = 50;

/// Sleeps until one of `fds` is readable or `ms` pass; true when one was readable.
bool WaitReadable(const std::vector<int>& fds, int ms) {
  std::vector<pollfd> p(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) p[i] = pollfd{fds[i], POLLIN, 0};
  return ::poll(p.data(), p.size(), ms) > 0;  // EINTR or a timeout: the loop progresses anyway
}

bool SameRails(const std::vector<std::vector<RailInfo>>& a, const std::vector<std::vector<RailInfo>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (size_t j = 0; j < a[i].size(); ++j) {
      if (a[i][j].address != b[i][j].address) return false;
    }
  }
  return true;
}

}  // namespace

ForwarderHostOptions ForwarderHostOptions::FromConfig(const env::Config& config,
                                                      std::shared_ptr<const topology::ClusterKey> clusterKey) {
  ForwarderHostOptions o;
  o.port = static_cast<uint16_t>(config.fabricRelayPort);
  o.relay = RelayOptions::FromConfig(config);
  o.relay.clusterKey = std::move(clusterKey);
  o.tcp = tcp::TcpOptions::FromConfig(config, {});
  o.verbsPort = static_cast<uint16_t>(config.fabricRelayVerbsPort);
  o.verbs = verbs::VerbsOptions::FromConfig(config);
  return o;
}

ForwarderHost::ForwarderHost(GraphFn graph, uint64_t self, std::function<bool()> holding,
                             ForwarderHostOptions options)
    : graph_(std::move(graph)), self_(self), holding_(std::move(holding)), options_(std::move(options)) {}

Status ForwarderHost::Start(GraphFn graph, uint64_t self, std::function<bool()> holding,
                            ForwarderHostOptions options, std::unique_ptr<ForwarderHost>* out) {
  if (!graph || !holding) return InvalidArgument("fabric relay: no graph or no seat predicate");
  if (options.port == 0) return InvalidArgument("fabric relay: port 0 (RAILYARD_FABRIC_RELAY_PORT is 1..65535)");
  if (options.retryMs < 1) return InvalidArgument("fabric relay: retry interval must be >= 1 ms");
  if (options.warnAfterMs < 0) return InvalidArgument("fabric relay: warnAfterMs must be >= 0");
  RY_RETURN_IF_ERROR(options.relay.Validate());
  std::unique_ptr<ForwarderHost> h(new ForwarderHost(std::move(graph), self, std::move(holding), std::move(options)));
  h->thread_ = std::thread([p = h.get()] { p->Run(); });
  *out = std::move(h);
  return Status::Ok();
}

ForwarderHost::~ForwarderHost() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  Drop();
}

std::vector<uint64_t> ForwarderHost::PortNeighbours() const {
  std::lock_guard lock(mu_);
  return forwarder_ ? neighbours_ : std::vector<uint64_t>{};
}

std::vector<uint64_t> ForwarderHost::VerbsNeighbours() const {
  std::lock_guard lock(mu_);
  return forwarder_ ? verbsNeighbours_ : std::vector<uint64_t>{};
}

ForwarderStats ForwarderHost::stats() const {
  std::lock_guard lock(mu_);
  return forwarder_ ? forwarder_->stats() : ForwarderStats{};
}

std::string ForwarderHost::lastProblem() const {
  std::lock_guard lock(mu_);
  if (forwarder_ && !forwarder_->lastRefusal().empty()) return forwarder_->lastRefusal();
  return problem_;
}

void ForwarderHost::BeginDrain() {
  std::lock_guard lock(mu_);
  if (draining_.exchange(true)) return;
  if (forwarder_) forwarder_->StopOpening("the relay is draining (its process is stopping)");
}

size_t ForwarderHost::Drain(int drainMs) {
  BeginDrain();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, drainMs));
  for (;;) {
    const size_t open = stats().routesOpen;
    if (open == 0 || std::chrono::steady_clock::now() >= deadline) return open;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a counter the thread updates
  }
}

void ForwarderHost::Drop() {
  std::lock_guard lock(mu_);
  if (forwarder_) {
    const ForwarderStats st = forwarder_->stats();
    RY_INFO(log::kNet,
            "fabric relay: Forwarder stopped: %llu routes opened, %llu refused, %llu failed; %llu slots, %llu bytes "
            "forwarded; RDMA ports facing %zu cables",
            static_cast<unsigned long long>(st.routesOpened), static_cast<unsigned long long>(st.routesRefused),
            static_cast<unsigned long long>(st.routesFailed), static_cast<unsigned long long>(st.slotsForwarded),
            static_cast<unsigned long long>(st.bytesForwarded), verbsNeighbours_.size());
  }
  forwarder_.reset();  // its Workers before their Domains
  domains_.clear();
  neighbours_.clear();
  verbsNeighbours_.clear();
  cables_.clear();
  serving_.store(false);
}

void ForwarderHost::OpenRdmaPortsOnce() {
  if (options_.verbsPort == 0 || options_.ib || !options_.openIb || ibTried_) return;
  ibTried_ = true;  // once: opening the devices takes seconds under emulation
  std::unique_ptr<proxy::verbs::IbPorts> opened;
  if (Status s = proxy::verbs::IbPorts::Open(options_.verbs.config, &opened, nullptr); !s.ok()) {
    RY_WARN("fabric relay: RDMA ports cannot be opened, the relay takes TCP routes only: %s", s.message().c_str());
    return;
  }
  if (opened->size() == 0) return;  // no RDMA port on this host: nothing to say
  options_.ib = std::shared_ptr<proxy::verbs::IbPorts>(std::move(opened));
  RY_INFO(log::kNet, "fabric relay: %zu RDMA ports opened for verbs routes", options_.ib->size());
}

bool ForwarderHost::Build(const topology::ClusterGraph& g) {
  OpenRdmaPortsOnce();  // outside mu_: stats() readers do not wait for it
  std::vector<uint64_t> neighbours;
  std::vector<std::vector<RailInfo>> cables;
  Cables(g, self_, &neighbours, &cables);
  std::lock_guard lock(mu_);
  problemIsWait_ = false;
  if (neighbours.empty()) {
    problem_ = "no cable in the cluster graph yet";
    problemIsWait_ = true;
    return false;
  }
  std::vector<std::unique_ptr<Domain>> domains;
  std::vector<Domain*> ports, onward;
  std::vector<uint64_t> portNeighbours = neighbours;
  std::vector<AddressKind> kinds(neighbours.size(), AddressKind::kTcp);
  std::vector<std::vector<std::string>> ends;
  for (uint64_t n : neighbours) ends.push_back(NeighbourEnds(g, self_, n));
  for (size_t c = 0; c < cables.size(); ++c) {
    tcp::TcpOptions o = options_.tcp;
    o.rails = cables[c];
    o.listenPort = options_.port;
    o.rank = options_.relay.rank;
    o.acceptOnlyFrom = ends[c];
    // The port's Domain listens at the fixed port; routes on through a further relay
    // get Workers of a second Domain over the same rails at ephemeral ports.
    tcp::TcpOptions on = o;
    on.listenPort = 0;
    std::unique_ptr<Domain> d, od;
    Status s = tcp::CreateTcpDomain(o, &d);
    if (s.ok()) s = tcp::CreateTcpDomain(on, &od);
    if (!s.ok()) {
      problem_ = s.message();
      return false;
    }
    ports.push_back(d.get());
    onward.push_back(od.get());
    domains.push_back(std::move(d));
    domains.push_back(std::move(od));
  }
  const size_t tcpPorts = ports.size(), tcpDomains = domains.size();
  AddVerbsPorts(neighbours, cables, ends, &domains, &ports, &onward, &portNeighbours, &kinds);
  std::unique_ptr<Forwarder> f;
  Status s = Forwarder::Create(ports, options_.relay,
                               MakeGraphResolveFn(graph_, self_, portNeighbours, options_.port, kinds,
                                                  options_.verbsPort),
                               &f, onward);
  verbsShort_ = false;
  if (!s.ok() && ports.size() > tcpPorts) {
    // Without the verbs ports: when that serves, a verbs port's Worker was what failed
    // (its bootstrap port still held by the seat's previous holder, a device gone):
    // TCP routes are served meanwhile and the verbs ports retried (Run, while no route
    // is open). When it fails too, the TCP ports are the problem (problem_ below).
    const std::string verbsFailure = s.message();
    ports.resize(tcpPorts);
    onward.resize(tcpPorts);
    portNeighbours.resize(tcpPorts);
    kinds.resize(tcpPorts);
    domains.resize(tcpDomains);
    s = Forwarder::Create(ports, options_.relay,
                          MakeGraphResolveFn(graph_, self_, portNeighbours, options_.port, kinds, options_.verbsPort),
                          &f, onward);
    if (s.ok()) {
      verbsShort_ = true;
      const std::string why = "no verbs ports yet (" + verbsFailure + ")";
      if (why != verbsWarned_) {
        verbsWarned_ = why;
        RY_WARN("fabric relay: %s; verbs routes through this host are refused until they can be made (retried "
                "every %d ms while no route is open), TCP routes served",
                why.c_str(), kVerbsRetryMs);
      }
    }
  }
  std::vector<uint64_t> verbsNeighbours(portNeighbours.begin() + static_cast<std::ptrdiff_t>(tcpPorts),
                                        portNeighbours.end());
  if (!s.ok()) {
    problem_ = s.message();  // e.g. the port still bound by the seat's previous holder
    return false;
  }
  domains_ = std::move(domains);
  forwarder_ = std::move(f);
  neighbours_ = std::move(neighbours);
  verbsNeighbours_ = std::move(verbsNeighbours);
  cables_ = std::move(cables);
  problem_.clear();
  serving_.store(true);
  RY_INFO(log::kNet, "fabric relay: Forwarder on port %u over %zu cables, %zu of them also over RDMA (verbs port %u)",
          static_cast<unsigned>(options_.port), neighbours_.size(), verbsNeighbours_.size(),
          static_cast<unsigned>(options_.verbsPort));
  return true;
}

void ForwarderHost::AddVerbsPorts(const std::vector<uint64_t>& neighbours,
                                  const std::vector<std::vector<RailInfo>>& cables,
                                  const std::vector<std::vector<std::string>>& ends,
                                  std::vector<std::unique_ptr<Domain>>* domains, std::vector<Domain*>* ports,
                                  std::vector<Domain*>* onward, std::vector<uint64_t>* portNeighbours,
                                  std::vector<AddressKind>* kinds) {
  if (options_.verbsPort == 0) return;
  if (!options_.ib) return;
  auto warnOnce = [this](const std::string& why) {
    if (why == verbsWarned_) return;
    verbsWarned_ = why;
    RY_WARN("fabric relay: %s; that cable's verbs routes are refused, its TCP routes still served", why.c_str());
  };
  for (size_t c = 0; c < cables.size(); ++c) {
    std::vector<std::string> names;
    for (const RailInfo& r : cables[c]) {
      const int p = options_.ib->FindActive(r.device);
      if (p >= 0) names.push_back(options_.ib->at(static_cast<size_t>(p)).Name());
    }
    if (names.size() != cables[c].size()) continue;  // a rail without an RDMA port: TCP only
    verbs::VerbsOptions v = options_.verbs;
    v.bootstrapAddress = cables[c].front().address;  // graph_routes.h: the cable's first rail
    v.bootstrapPort = options_.verbsPort;
    v.rank = options_.relay.rank;
    v.acceptOnlyFrom = ends[c];
    verbs::VerbsOptions on = v;
    on.bootstrapPort = 0;  // routes on through a further relay: a Worker each, at ephemeral ports
    std::unique_ptr<Domain> d, od;
    Status s = verbs::CreateVerbsDomainOn(v, options_.ib, names, &d);
    if (s.ok()) s = verbs::CreateVerbsDomainOn(on, options_.ib, names, &od);
    if (!s.ok()) {
      warnOnce("no verbs port on the cable of " + cables[c].front().device + ": " + s.message());
      continue;
    }
    ports->push_back(d.get());
    onward->push_back(od.get());
    domains->push_back(std::move(d));
    domains->push_back(std::move(od));
    portNeighbours->push_back(neighbours[c]);
    kinds->push_back(AddressKind::kVerbs);
  }
}

void ForwarderHost::Run() {
  pthread_setname_np(pthread_self(), "ry-forwarder");  // ps -L, top -H, gdb name it
  using Clock = std::chrono::steady_clock;
  const auto retry = std::chrono::milliseconds(options_.retryMs);
  Clock::time_point nextCheck{};
  std::string lastLogged, lastWarned;
  Clock::time_point failingSince{};  // when the builds began to fail for a real cause
  Clock::time_point nextVerbsRetry = Clock::now() + std::chrono::milliseconds(kVerbsRetryMs);
  int idle = 0;
  int quietWaitMs = kQuietWaitMs;
  while (!stop_.load()) {
    const auto now = Clock::now();
    if (now >= nextCheck && draining_.load()) {
      nextCheck = now + retry;  // draining: the Forwarder stays as it is until the end
      failingSince = {};
    } else if (now >= nextCheck) {
      nextCheck = now + retry;
      const bool hold = holding_();
      if (!hold) failingSince = {};  // a failure counts only while this process holds the seat
      if (!hold && serving_.load()) {
        RY_INFO(log::kNet, "fabric relay: the relay seat went to another process; Forwarder stopped");
        Drop();
      } else if (hold) {
        const topology::ClusterGraph g = graph_();
        bool rebuild = !serving_.load();
        if (!rebuild) {
          std::vector<uint64_t> n;
          std::vector<std::vector<RailInfo>> c;
          Cables(g, self_, &n, &c);
          std::lock_guard lock(mu_);
          // New cables (or rails) are served once no route is open on the old ones; so
          // are verbs ports that could not be made at the last build.
          const bool noRoute = forwarder_->stats().routesOpen == 0;
          rebuild = (n != neighbours_ || !SameRails(c, cables_)) && noRoute;
          if (!rebuild && verbsShort_ && noRoute && now >= nextVerbsRetry) {
            nextVerbsRetry = now + std::chrono::milliseconds(kVerbsRetryMs);
            rebuild = true;
          }
        }
        if (rebuild) {
          Drop();
          if (!Build(g)) {
            std::lock_guard lock(mu_);
            if (problem_ != lastLogged) {
              RY_INFO(log::kNet, "fabric relay: not serving yet: %s", problem_.c_str());
              lastLogged = problem_;
            }
            if (problemIsWait_) {
              failingSince = {};
            } else if (failingSince == Clock::time_point{}) {
              failingSince = now;
            } else if (now - failingSince >= std::chrono::milliseconds(options_.warnAfterMs) &&
                       problem_ != lastWarned) {
              // New-user trial: a port held by another process left railyardd silent at
              // the default level while no relayed route could work.
              const bool portHeld = problem_.find("Address already in use") != std::string::npos;
              RY_WARN("fabric relay: cannot serve on port %u for %lld ms (retrying every %d ms): %s%s",
                      static_cast<unsigned>(options_.port),
                      static_cast<long long>(
                          std::chrono::duration_cast<std::chrono::milliseconds>(now - failingSince).count()),
                      options_.retryMs, problem_.c_str(),
                      portHeld ? "; another process is bound to it: often this host's railyardd, run with another "
                                 "RAILYARD_RELAY_PORT than this process (every process of a host must use the same "
                                 "RAILYARD_RELAY_PORT and RAILYARD_FABRIC_RELAY_PORT; the latter chooses this port)"
                               : "");
              lastWarned = problem_;
            }
          } else {
            failingSince = {};
            lastWarned.clear();  // the same cause coming back later is news again
          }
        }
      }
    }
    size_t n = 0;
    std::vector<int> fds;
    {
      std::lock_guard lock(mu_);
      if (forwarder_) {
        n = forwarder_->Progress();
        if (n == 0) fds = forwarder_->WaitFds();
      }
    }
    // When only a peer's bytes can bring work, sleep in poll until they come (as the
    // socket relay sleeps in epoll_wait): spinning here took the CPU the ranks and
    // the other relays need on a shared host, and each hop waited for a time slice.
    // Bounded, so op timeouts, the seat check and stop are still seen.
    if (!fds.empty()) {
      quietWaitMs = WaitReadable(fds, quietWaitMs) ? kQuietWaitMs : std::min(2 * quietWaitMs, kMaxQuietWaitMs);
      continue;
    }
    quietWaitMs = kQuietWaitMs;
    // Otherwise busy while bytes move; backs off to 1 ms naps when idle.
    idle = n > 0 ? 0 : idle + 1;
    if (idle > 2000 || !serving_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(serving_.load() ? 1 : 10));
  }
}

}  // namespace railyard::fabric::relay
