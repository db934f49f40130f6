#include "proxy/fabric/relay/forwarder_host.h"

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

/// Longest sleep of the relay thread in poll while its Forwarder is quiet (ms).
constexpr int kQuietWaitMs = 5;

/// Sleeps until one of `fds` is readable or `ms` pass.
void WaitReadable(const std::vector<int>& fds, int ms) {
  std::vector<pollfd> p(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) p[i] = pollfd{fds[i], POLLIN, 0};
  (void)::poll(p.data(), p.size(), ms);  // EINTR or a timeout: the loop progresses anyway
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
  forwarder_.reset();  // its Workers before their Domains
  domains_.clear();
  neighbours_.clear();
  cables_.clear();
  serving_.store(false);
}

bool ForwarderHost::Build(const topology::ClusterGraph& g) {
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
  for (const auto& rails : cables) {
    tcp::TcpOptions o = options_.tcp;
    o.rails = rails;
    o.listenPort = options_.port;
    o.rank = options_.relay.rank;
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
  std::unique_ptr<Forwarder> f;
  Status s = Forwarder::Create(ports, options_.relay, MakeGraphResolveFn(graph_, self_, neighbours, options_.port), &f,
                               onward);
  if (!s.ok()) {
    problem_ = s.message();  // e.g. the port still bound by the seat's previous holder
    return false;
  }
  domains_ = std::move(domains);
  forwarder_ = std::move(f);
  neighbours_ = std::move(neighbours);
  cables_ = std::move(cables);
  problem_.clear();
  serving_.store(true);
  RY_INFO(log::kNet, "fabric relay: Forwarder on port %u over %zu cables", static_cast<unsigned>(options_.port),
          neighbours_.size());
  return true;
}

void ForwarderHost::Run() {
  using Clock = std::chrono::steady_clock;
  const auto retry = std::chrono::milliseconds(options_.retryMs);
  Clock::time_point nextCheck{};
  std::string lastLogged, lastWarned;
  Clock::time_point failingSince{};  // when the builds began to fail for a real cause
  int idle = 0;
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
          // New cables (or rails) are served once no route is open on the old ones.
          rebuild = (n != neighbours_ || !SameRails(c, cables_)) && forwarder_->stats().routesOpen == 0;
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
                      portHeld ? "; another process is bound to it (RAILYARD_FABRIC_RELAY_PORT chooses the port)" : "");
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
      WaitReadable(fds, kQuietWaitMs);
      continue;
    }
    // Otherwise busy while bytes move; backs off to 1 ms naps when idle.
    idle = n > 0 ? 0 : idle + 1;
    if (idle > 2000 || !serving_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(serving_.load() ? 1 : 10));
  }
}

}  // namespace railyard::fabric::relay
