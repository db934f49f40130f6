#include "proxy/runtime/cable_set_domain.h"

#include <arpa/inet.h>

#define XXH_INLINE_ALL  // header-only xxHash (Debian libxxhash-dev): nothing links libxxhash.so
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "env/log.h"
#include "proxy/fabric/address_record.h"
#include "proxy/fabric/random_id.h"
#include "proxy/fabric/relay/multi_route_endpoint.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/routed_worker.h"
#include "proxy/fabric/tcp/tcp_endpoint.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/routing/router.h"
#include "proxy/routing/socket_hops.h"
#include "proxy/runtime/cable_endpoint.h"

namespace railyard::runtime {

namespace {

constexpr uint32_t kHostMagic = 0x41485952;  // "RYHA"
constexpr size_t kHostPerRail = 8;

/// A 127/8 address (network order): a host-local rail (HostLocalIpv4).
bool IsHostLocal(uint32_t ipv4) { return (ntohl(ipv4) >> 24) == 127; }

std::string Ipv4Text(uint32_t networkOrder) {
  in_addr a{};
  a.s_addr = networkOrder;
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

/// One cable of a CableSetWorker: its Domain (sharing the set's RegionTable), and
/// the RoutedWorker over that Domain's TCP Worker and RelayClient.
struct Cable {
  uint64_t neighbour = 0;
  /// The cable's Domain: a TCP one owned here, or the set's verbs Domain of the cable.
  fabric::Domain* domain = nullptr;
  std::unique_ptr<fabric::Domain> ownedDomain;
  bool verbs = false;
  std::vector<fabric::RailInfo> rails;  ///< this host's rails of the cable (graph addresses, link order)
  std::vector<uint8_t> railIndices;     ///< this host's fabric rail index of each cable rail
  /// With a fixed listenPort: the relayed Endpoints' Domain (each makes its own Worker,
  /// which cannot bind the fixed port again); ephemeral ports, the same regions.
  std::unique_ptr<fabric::Domain> relayDomain;
  std::unique_ptr<fabric::relay::RoutedWorker> worker;
  /// The TCP Worker inside `worker` (null for a verbs cable): spliced routes' Endpoints.
  fabric::tcp::TcpWorker* tcp = nullptr;
};

/// See cable_set_domain.h.
class CableSetWorker : public fabric::Worker {
 public:
  CableSetWorker() : id_(fabric::RandomNonZeroId()) {}
  ~CableSetWorker() override {
    for (Cable& c : cables_) c.worker.reset();  // Workers before their Domains (verbs ones are the set's)
    local_.reset();
  }

  Status Init(CableSetDomain* set, const CableSetOptions& o, const std::shared_ptr<fabric::RegionTable>& regions) {
    set_ = set;
    options_ = o;
    regions_ = regions;
    self_ = o.self;
    graph_ = o.graph;
    multiRoute_ = o.multiRoute;
    port_ = o.forwarderPort;
    const topology::ClusterGraph g = graph_();
    for (uint64_t n : g.Neighbours(self_)) RY_RETURN_IF_ERROR(AddCable(g, n));
    // No cable yet (no neighbour heard, or a host alone): the host-local Worker lets
    // this host's processes reach each other (a one-rank run talks to itself); each
    // cable is taken as it comes up (AdoptNewCables).
    if (cables_.empty()) RY_RETURN_IF_ERROR(StartLocal());
    return RebuildAddress();
  }

  std::vector<uint8_t> Address() const override {
    std::lock_guard<std::mutex> lock(addressMutex_);
    return address_;
  }

  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<fabric::Endpoint>* out) override {
    HostAddress to;
    RY_RETURN_IF_ERROR(HostAddress::Unpack(peerAddress, &to));
    const uint32_t here = HostLocalIpv4(self_);
    for (const HostAddress::Rail& r : to.rails) {
      if (!r.hostLocal || r.ipv4 != here) continue;
      // A Worker of this host that has a host-local rail: straight over loopback.
      if (local_ == nullptr) RY_RETURN_IF_ERROR(StartLocal());
      fabric::tcp::WorkerAddress w;
      w.workerId = to.workerId;
      w.rails.push_back({r.ipv4, r.port, 0});
      return local_->Connect(w.Pack(), out);
    }
    const topology::ClusterGraph g = graph_();
    AdoptNewCables(g);
    std::vector<CableGroup> groups;
    if (Status picked = PickCableGroups(g, self_, to, &groups); !picked.ok()) {
      if (std::all_of(to.rails.begin(), to.rails.end(), [](const HostAddress::Rail& r) { return r.hostLocal; })) {
        // Only a host-local rail, and another host's.
        return InvalidUsage("fabric mode: the peer's Worker had no cable when its address was taken (only its "
                            "host-local rail " + Ipv4Text(to.rails.front().ipv4) + ", another host's): its host "
                            "heard no neighbour within RAILYARD_TIMEOUT_MS of its start: run railyardd on every "
                            "host so the cabling is known before jobs start; or it refused its neighbours' hellos "
                            "(a cluster key on one side only: every process of every host, railyardd and ranks alike, "
                            "needs the same key, RAILYARD_CLUSTER_KEY_FILE naming a file of the same contents; that "
                            "host's log WARNs of refused datagrams); or it listens on another cabling port (every "
                            "process of every host needs the same RAILYARD_DISCOVERY_PORT)");
      }
      return picked;
    }
    // The nearest cable first; a relayed peer also gets a route through every other
    // relay on a shortest path (a different first hop), used in turn.
    std::vector<std::unique_ptr<fabric::Endpoint>> routes;
    std::vector<uint64_t> firstHops;
    Status mismatch = Status::Ok();
    Status firstError = Status::Ok();  ///< the first relayed route that failed to connect
    // Spliced through the socket relays, one route: a MultiRouteEndpoint moves to its
    // next route only once nothing is outstanding, and that wait cost more than the
    // second relay gave (docs/benchmarks.md, "Fabric relay over TCP spliced").
    PreferSplicedGroup(g, self_, options_.spliceTcpRelays, &groups);
    if (!multiRoute_) groups.resize(1);
    for (const CableGroup& group : groups) {
      fabric::relay::SourcePlan plan;
      Status s = fabric::relay::PlanSource(g, self_, group.address, port_, &plan, options_.verbsForwarderPort);
      const bool tried = !routes.empty() || !firstError.ok();
      if (tried && (!s.ok() || plan.relay.empty())) continue;
      RY_RETURN_IF_ERROR(s);
      if (std::find(firstHops.begin(), firstHops.end(), plan.neighbour) != firstHops.end()) continue;
      Cable* cable = nullptr;
      for (Cable& c : cables_) {
        if (c.neighbour == plan.neighbour) cable = &c;
      }
      if (cable == nullptr) {
        if (tried) continue;
        return InvalidUsage("fabric mode: no Worker on the cable to " + g.HostName(plan.neighbour) +
                            " (a cable that came up after this Worker started and could not be taken: see the WARN)");
      }
      if (cable->verbs != group.verbs) {
        // Another of the peer's cables may match; said only when none does.
        if (mismatch.ok()) {
          mismatch = InvalidUsage(std::string("fabric mode: the peer's cable runs ") + (group.verbs ? "verbs" : "TCP") +
                                  " but this host's cable to " + g.HostName(plan.neighbour) + " runs " +
                                  (cable->verbs ? "verbs" : "TCP") +
                                  " (a route keeps one transport on every leg: RDMA ports on some hosts only?)");
        }
        continue;
      }
      std::unique_ptr<fabric::Endpoint> ep;
      Status c = Status::Ok();
      if (!plan.relay.empty() && !cable->verbs && options_.spliceTcpRelays && cable->tcp != nullptr &&
          ConnectSpliced(g, *cable, group.address, &ep)) {
        // through the socket relays (ConnectSpliced)
      } else {
        c = cable->worker->Connect(group.address, &ep);
      }
      if (!c.ok()) {
        // A route whose Connect fails at once (a local error, an address it cannot use)
        // costs that route only: the peer's other shortest paths are tried before the
        // first error is returned. A relay that refuses later (a TCP or verbs connect
        // is non-blocking) fails the Endpoint by an error event, as before.
        if (routes.empty() && plan.relay.empty()) return c;
        RY_INFO(log::kNet, "fabric mode: the route to the peer through %s failed (%s)%s",
                g.HostName(plan.neighbour).c_str(), c.message().c_str(),
                routes.empty() ? "; trying the peer's other routes" : "; the others carry its traffic");
        if (firstError.ok()) firstError = c;
        firstHops.push_back(plan.neighbour);  // not that relay again for another of the peer's cables
        continue;
      }
      if (cable->verbs) {
        ep = std::make_unique<CableEndpoint>(std::move(ep), set_, cable->domain, cable->railIndices, group.railIndices);
      }
      routes.push_back(std::move(ep));
      firstHops.push_back(plan.neighbour);
      if (plan.relay.empty()) break;  // straight over a cable: that one only
    }
    if (routes.empty() && !firstError.ok()) return firstError;
    if (routes.empty()) return mismatch.ok() ? InvalidUsage("fabric mode: no cable of the peer can be reached") : mismatch;
    if (routes.size() == 1) {
      *out = std::move(routes.front());
    } else {
      *out = std::make_unique<fabric::relay::MultiRouteEndpoint>(std::move(routes));
    }
    return Status::Ok();
  }

  size_t Progress(std::vector<fabric::Event>* events) override {
    const auto now = std::chrono::steady_clock::now();
    if (now >= nextAdoptCheck_) {
      nextAdoptCheck_ = now + kAdoptCheckPeriod;
      AdoptNewCables(graph_());
    }
    size_t n = 0;
    for (Cable& c : cables_) n += c.worker->Progress(events);
    if (local_ != nullptr) n += local_->Progress(events);
    return n;
  }

  /// An epoll set of every cable's Worker's WaitFd() and the host-local Worker's
  /// (fabric::WaitSet, kept up to date by Quiet): the NCCL comms' helper sleeps on it
  /// while nothing moves (it woke every 2 ms to poll, 7-8 % of a ring guest's CPU).
  int WaitFd() const override { return waitSet_.fd(); }
  /// Every cable's Worker and the host-local one Quiet(), each with a descriptor.
  bool Quiet() const override {
    fds_.clear();
    for (const Cable& c : cables_) {
      if (!c.worker->Quiet()) return false;
      fds_.push_back(c.worker->WaitFd());
    }
    if (local_ != nullptr) {
      if (!local_->Quiet()) return false;
      fds_.push_back(local_->WaitFd());
    }
    // A cable the graph gained is adopted by Progress within kAdoptCheckPeriod: a
    // sleeper must come back by then (the caller bounds its sleep; see CommWorker).
    return waitSet_.Sync(fds_);
  }

  fabric::WorkerStats stats() const override {
    fabric::WorkerStats s;
    std::vector<const fabric::Worker*> workers;
    for (const Cable& c : cables_) workers.push_back(c.worker.get());
    if (local_ != nullptr) workers.push_back(local_.get());
    for (const fabric::Worker* w : workers) {
      const fabric::WorkerStats x = w->stats();
      s.bytesLanded += x.bytesLanded;
      s.bytesServed += x.bytesServed;
      s.framesRefused += x.framesRefused;
      s.connectionsFailed += x.connectionsFailed;
      s.peerConnections += x.peerConnections;
    }
    return s;
  }

 private:
  /// How often Progress looks for cables the graph gained (a graph copy each time).
  static constexpr std::chrono::milliseconds kAdoptCheckPeriod{100};

  /// An Endpoint to the TCP Worker `target` (a peer's per-cable address, owned by host
  /// T and entered from host E, with no cable from here) through the socket relays
  /// (CableSetOptions::spliceTcpRelays): its sockets leave by `cable` to its neighbour
  /// N, the first relay, and for each of the target's rails the relay record carries
  /// the socket index whose path (socket_hops.h) ends at E on that very rail. False
  /// (nothing made; the Forwarder route is taken) when the address does not unpack or
  /// locate, or no index lands on one of its rails; a made Endpoint's errors come later
  /// as events.
  bool ConnectSpliced(const topology::ClusterGraph& g, Cable& cable, std::span<const uint8_t> target,
                      std::unique_ptr<fabric::Endpoint>* out) {
    fabric::tcp::WorkerAddress w;
    fabric::relay::AddressCable where;
    if (!fabric::tcp::WorkerAddress::Unpack(target, &w).ok() || !fabric::relay::LocateAddress(g, w, &where).ok()) {
      return false;
    }
    const auto links = g.LinksBetween(self_, cable.neighbour);
    if (links.empty() || cable.rails.empty()) return false;
    fabric::tcp::SpliceRoute route;
    std::vector<int> sockIndex;
    for (size_t j = 0; j < w.rails.size(); ++j) {
      char text[INET_ADDRSTRLEN] = {};
      in_addr a{};
      a.s_addr = w.rails[j].ipv4;
      inet_ntop(AF_INET, &a, text, sizeof text);
      const int s = proxy::SpliceSockIndex(g, cable.neighbour, where.entry, where.owner, text);
      if (s < 0) {
        RY_INFO(log::kNet, "fabric mode: no relayed socket path from %s lands on %s of %s; the route goes "
                "through the Forwarders", g.HostName(cable.neighbour).c_str(), text, g.HostName(where.owner).c_str());
        return false;
      }
      sockIndex.push_back(s);
      route.localRail.push_back(static_cast<int>(j % std::min(cable.rails.size(), links.size())));
    }
    const std::string relayHost = g.HostName(cable.neighbour);
    // The relays after the first, named too: a fault at any of them shows at this end
    // as the route's ("via h1 (ADDR) -> h2"; new-user trial: a frozen second relay was
    // named as the first, which was healthy).
    std::string beyond;
    for (uint64_t h : sockIndex.empty() ? std::vector<uint64_t>{}
                                        : proxy::SplicePathAfter(g, cable.neighbour, where.owner, sockIndex.front())) {
      beyond += " -> " + g.HostName(h);
    }
    route.via = relayHost + " (" + links[0].Other(self_).address + ":" + std::to_string(options_.socketRelayPort) + ")" +
                beyond;
    const std::string origin = g.HostName(self_);
    const uint64_t self = self_;
    const uint16_t relayPort = options_.socketRelayPort;
    const std::vector<fabric::RailInfo> rails = cable.rails;
    route.dial = [w, where, sockIndex, links, rails, origin, self, relayPort, relayHost, beyond, route = route.localRail,
                  key = options_.relay.clusterKey](int peerRail, int, fabric::tcp::DialPlan* plan) -> Status {
      const size_t j = static_cast<size_t>(peerRail);
      const size_t li = static_cast<size_t>(route[j]);
      plan->local.sin_family = AF_INET;
      inet_pton(AF_INET, rails[li].address.c_str(), &plan->local.sin_addr);
      const std::string relayAddress = links[li].Other(self).address;
      plan->remote.sin_family = AF_INET;
      inet_pton(AF_INET, relayAddress.c_str(), &plan->remote.sin_addr);
      plan->remote.sin_port = htons(relayPort);
      plan->via = relayHost + " (" + relayAddress + ":" + std::to_string(relayPort) + ")" + beyond;
      return proxy::MakeRelayPrefix(where.owner, w.rails[j].port, sockIndex[j], 0, origin, self, key.get(),
                                    &plan->preamble);
    };
    if (!cable.tcp->ConnectSpliced(target, route, out).ok()) return false;
    return true;
  }

  /// A Cable (TCP Domain and Worker on the cable's rails, RelayClient, RoutedWorker)
  /// toward neighbour `n` of graph `g`; nothing when the graph lists no rail of it.
  Status AddCable(const topology::ClusterGraph& g, uint64_t n) {
    Cable c;
    c.neighbour = n;
    fabric::tcp::TcpOptions t = options_.tcp;
    t.rails = fabric::relay::CableRails(g, self_, n);
    if (t.rails.empty()) return Status::Ok();
    t.nameAddress = [graph = graph_](const std::string& ip) { return HostOfRailAddress(graph(), ip); };
    t.connectionName = id_;  // peers know this Worker by the set's id (its HostAddress)
    if (t.rails.size() > fabric::tcp::WorkerAddress::kMaxRails) t.rails.resize(fabric::tcp::WorkerAddress::kMaxRails);
    RY_RETURN_IF_ERROR(set_->CableRailIndices(t.rails, &c.railIndices, &c.verbs));
    c.rails = t.rails;
    std::unique_ptr<fabric::Worker> direct;
    std::unique_ptr<fabric::relay::RelayClient> client;
    if (c.verbs) {
      // Every rail of the cable is an RDMA port: the verbs transport, relayed through
      // the Forwarders' verbs ports.
      RY_RETURN_IF_ERROR(set_->VerbsDomainOf(n, t.rails, c.railIndices, &c.domain));
      RY_RETURN_IF_ERROR(c.domain->CreateWorker(&direct));
      RY_RETURN_IF_ERROR(fabric::relay::RelayClient::Create(*c.domain, options_.relay, &client));
    } else {
      // 0 (ephemeral) unless the caller fixed one (railyardd's tier tunnels: RAILYARD_TIER_TUNNEL_PORT).
      t.listenPort = options_.tcp.listenPort;
      t.sharedRegions = regions_;
      RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(t, &c.ownedDomain));
      c.domain = c.ownedDomain.get();
      RY_RETURN_IF_ERROR(c.domain->CreateWorker(&direct));
      c.tcp = dynamic_cast<fabric::tcp::TcpWorker*>(direct.get());
      if (t.listenPort != 0) {
        t.listenPort = 0;
        RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(t, &c.relayDomain));
      }
      RY_RETURN_IF_ERROR(
          fabric::relay::RelayClient::Create(c.relayDomain ? *c.relayDomain : *c.domain, options_.relay, &client));
    }
    client->SetRelayNamer([graph = graph_](std::span<const uint8_t> relay, std::span<const uint8_t> target) {
      return fabric::relay::ForwardRouteLabel(graph(), relay, target);
    });
    std::string railNames;
    for (const fabric::RailInfo& r : c.domain->rails()) railNames += (railNames.empty() ? "" : ",") + r.device;
    RY_INFO(log::kNet, "fabric mode: the cable to %s runs %s over %s", g.HostName(n).c_str(),
            c.verbs ? "verbs (RDMA, relayed through the Forwarders' verbs ports)" : "TCP", railNames.c_str());
    c.worker = std::make_unique<fabric::relay::RoutedWorker>(
        std::move(direct), std::move(client),
        fabric::relay::MakeGraphRouteFn(graph_, self_, n, port_, options_.verbsForwarderPort));
    cables_.push_back(std::move(c));
    return Status::Ok();
  }

  /// A cable that came up after this Worker was made (a neighbour of `g` with no
  /// Cable yet) gets one, and the Address() grows by its rails (appended: a peer
  /// groups an address's rails by cable, so the earlier ones keep their meaning).
  /// Peers holding the older address still reach this host over the earlier cables.
  /// A cable that cannot be taken (its fixed port taken) is warned once and left.
  void AdoptNewCables(const topology::ClusterGraph& g) {
    bool added = false;
    for (uint64_t n : g.Neighbours(self_)) {
      const bool have = std::any_of(cables_.begin(), cables_.end(), [n](const Cable& c) { return c.neighbour == n; });
      if (have || refused_.count(n) != 0) continue;
      const size_t before = cables_.size();
      if (Status s = AddCable(g, n); !s.ok()) {
        refused_.insert(n);
        RY_WARN("fabric mode: the cable to %s that came up after this Worker started is not used: %s",
                g.HostName(n).c_str(), s.message().c_str());
        continue;
      }
      if (cables_.size() > before) {
        added = true;
        RY_INFO(log::kNet, "fabric mode: a Worker on the cable to %s, which came up after this Worker started",
                g.HostName(n).c_str());
      }
    }
    if (added) (void)RebuildAddress();
  }

  /// The host-local Worker: a TCP Domain on one loopback rail, HostLocalIpv4(self),
  /// over the set's registrations, and its Worker. Its rail leads the Address().
  Status StartLocal() {
    fabric::tcp::TcpOptions t = options_.tcp;
    const std::string text = Ipv4Text(HostLocalIpv4(self_));
    t.rails = {fabric::RailInfo{"lo", text, 0}};
    t.listenPort = 0;
    t.sharedRegions = regions_;
    t.connectionName = id_;
    std::unique_ptr<fabric::Domain> domain;
    std::unique_ptr<fabric::Worker> worker;
    RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(t, &domain));
    RY_RETURN_IF_ERROR(domain->CreateWorker(&worker));
    localDomain_ = std::move(domain);
    local_ = std::move(worker);
    RY_INFO(log::kNet, "fabric mode: no cable of this host yet; processes of this host reach this Worker over "
            "loopback (%s)", text.c_str());
    return Status::Ok();
  }

  /// address_ from the Cables' Workers' rails, in Cable order (the first 16 rails).
  Status RebuildAddress() {
    HostAddress a;
    a.workerId = id_;
    if (local_ != nullptr) {
      fabric::tcp::WorkerAddress w;
      RY_RETURN_IF_ERROR(fabric::tcp::WorkerAddress::Unpack(local_->Address(), &w));
      a.rails.push_back({w.rails.front().ipv4, w.rails.front().port, false, 0, true});
    }
    for (const Cable& c : cables_) {
      if (c.verbs) {
        // Every rail of the cable names the verbs Worker's bootstrap port; the first
        // rail's address is where it listens (VerbsOptions::bootstrapAddress).
        fabric::verbs::VerbsAddress v;
        RY_RETURN_IF_ERROR(fabric::verbs::VerbsAddress::Unpack(c.worker->Address(), &v));
        const std::vector<fabric::RailInfo>& rails = c.rails;  // the graph's addresses (the listener binds rails[0])
        for (size_t i = 0; i < rails.size() && i < c.railIndices.size(); ++i) {
          in_addr ip{};
          if (inet_pton(AF_INET, rails[i].address.c_str(), &ip) != 1) continue;
          if (a.rails.size() < HostAddress::kMaxRails) a.rails.push_back({ip.s_addr, v.port, true, c.railIndices[i]});
        }
        continue;
      }
      fabric::tcp::WorkerAddress w;
      RY_RETURN_IF_ERROR(fabric::tcp::WorkerAddress::Unpack(c.worker->Address(), &w));
      for (size_t i = 0; i < w.rails.size(); ++i) {
        const uint8_t index = i < c.railIndices.size() ? c.railIndices[i] : 0;
        if (a.rails.size() < HostAddress::kMaxRails) a.rails.push_back({w.rails[i].ipv4, w.rails[i].port, false, index});
      }
    }
    std::lock_guard<std::mutex> lock(addressMutex_);
    address_ = a.Pack();  // never empty: with no cable, the host-local rail (Init)
    return Status::Ok();
  }

  uint64_t id_;
  CableSetDomain* set_ = nullptr;
  CableSetOptions options_;
  std::shared_ptr<fabric::RegionTable> regions_;
  std::set<uint64_t> refused_;  ///< neighbours whose late cable could not be taken
  std::chrono::steady_clock::time_point nextAdoptCheck_{};
  uint64_t self_ = 0;
  fabric::relay::GraphFn graph_;
  uint16_t port_ = 0;
  bool multiRoute_ = false;
  std::vector<Cable> cables_;
  std::unique_ptr<fabric::Domain> localDomain_;  ///< the host-local rail's Domain (StartLocal)
  std::unique_ptr<fabric::Worker> local_;        ///< its Worker (destroyed before its Domain)
  mutable fabric::WaitSet waitSet_;  ///< synced by Quiet()
  mutable std::vector<int> fds_;     ///< Quiet()'s scratch
  mutable std::mutex addressMutex_;  ///< Address() may be read by another thread than the Worker's
  std::vector<uint8_t> address_;
};

}  // namespace

CableSetOptions CableSetOptions::FromConfig(const env::Config& config, uint64_t self, fabric::relay::GraphFn graph,
                                            std::vector<fabric::RailInfo> rails,
                                            std::shared_ptr<const topology::ClusterKey> clusterKey) {
  CableSetOptions o;
  o.self = self;
  o.graph = std::move(graph);
  o.tcp = fabric::tcp::TcpOptions::FromConfig(config, {});
  o.tcp.socketsPerRail = std::clamp(config.nsocks, 1, 16);
  o.relay = fabric::relay::RelayOptions::FromConfig(config);
  o.relay.clusterKey = std::move(clusterKey);
  o.forwarderPort = static_cast<uint16_t>(config.fabricRelayPort);
  o.spliceTcpRelays = config.fabricTcpRelay == "splice";
  o.socketRelayPort = static_cast<uint16_t>(config.relayPort);
  o.rails = std::move(rails);
  o.verbs = fabric::verbs::VerbsOptions::FromConfig(config);
  o.verbsForwarderPort = static_cast<uint16_t>(config.fabricRelayVerbsPort);
  return o;
}

namespace {
const fabric::AddressRecordFormat kHostAddressFormat{kHostMagic,
                                                     HostAddress::kVersion,
                                                     kHostPerRail,
                                                     HostAddress::kMaxRails,
                                                     "host address",
                                                     [](uint32_t) {
                                                       return std::string("not a Railyard fabric-mode host address");
                                                     },
                                                     /*ownsRailWord=*/true};
}  // namespace

std::vector<uint8_t> HostAddress::Pack() const {
  return fabric::PackAddressRecord(kHostAddressFormat, workerId, rails, [this](size_t i, uint8_t* slot) {
    slot[0] = rails[i].hostLocal ? 2 : rails[i].verbs ? 1 : 0;
    slot[1] = rails[i].railIndex;
  });
}

uint32_t HostLocalIpv4(uint64_t host) {
  const uint64_t x = XXH64(&host, sizeof host, 0);  // ids differing in any bit differ here
  const uint32_t a = static_cast<uint32_t>(x >> 16) & 0xff, b = static_cast<uint32_t>(x >> 8) & 0xff;
  const uint32_t c = static_cast<uint32_t>(x % 254) + 1;
  return htonl((127u << 24) | (a << 16) | (b << 8) | c);
}

Status HostAddress::Unpack(std::span<const uint8_t> b, HostAddress* out) {
  HostAddress a;
  RY_RETURN_IF_ERROR(fabric::UnpackAddressRecord(
      kHostAddressFormat, b, &a.workerId, [&](size_t i, uint32_t ipv4, uint16_t port, const uint8_t* slot) {
        const std::string rail = "host address rail " + std::to_string(i);
        if (slot[0] > 2) {
          return InvalidArgument(rail + " has transport " + std::to_string(slot[0]) + " (0 TCP, 1 verbs, 2 host-local)");
        }
        if (slot[0] == 2 && !IsHostLocal(ipv4)) return InvalidArgument(rail + " is host-local but not on 127/8");
        if (slot[1] >= fabric::RemoteKey::kMaxRails) {
          return InvalidArgument(rail + " has rail index " + std::to_string(slot[1]) + " (0..15)");
        }
        a.rails.push_back({ipv4, port, slot[0] == 1, slot[1], slot[0] == 2});
        return Status::Ok();
      }));
  *out = std::move(a);
  return Status::Ok();
}

Status PickCable(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                 std::vector<uint8_t>* cableAddress) {
  std::vector<std::vector<uint8_t>> all;
  RY_RETURN_IF_ERROR(PickCables(graph, self, to, &all));
  *cableAddress = std::move(all.front());
  return Status::Ok();
}

Status PickCables(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                  std::vector<std::vector<uint8_t>>* cableAddresses) {
  std::vector<CableGroup> groups;
  RY_RETURN_IF_ERROR(PickCableGroups(graph, self, to, &groups));
  cableAddresses->clear();
  for (CableGroup& g : groups) cableAddresses->push_back(std::move(g.address));
  return Status::Ok();
}

std::string HostOfRailAddress(const topology::ClusterGraph& graph, const std::string& ipv4) {
  for (const topology::RailLink& l : graph.Links()) {
    if (l.a.address == ipv4) return graph.HostName(l.a.host);
    if (l.b.address == ipv4) return graph.HostName(l.b.host);
  }
  return "";
}

void PreferSplicedGroup(const topology::ClusterGraph& graph, uint64_t self, bool splice, std::vector<CableGroup>* groups) {
  if (!splice || groups->size() < 2 || groups->front().verbs) return;
  fabric::relay::AddressKind kind;
  fabric::relay::AddressCable where;
  if (fabric::relay::LocatePacked(graph, groups->front().address, &kind, &where).ok() && self > where.owner) {
    std::swap(groups->front(), groups->back());
  }
  groups->resize(1);
}

Status FirstHopOf(const topology::ClusterGraph& graph, const CableSetOptions& options, std::span<const uint8_t> peer,
                  std::string* how) {
  HostAddress to;
  RY_RETURN_IF_ERROR(HostAddress::Unpack(peer, &to));
  std::vector<CableGroup> groups;
  RY_RETURN_IF_ERROR(PickCableGroups(graph, options.self, to, &groups));
  PreferSplicedGroup(graph, options.self, options.spliceTcpRelays, &groups);
  fabric::relay::SourcePlan plan;
  RY_RETURN_IF_ERROR(fabric::relay::PlanSource(graph, options.self, groups.front().address, options.forwarderPort, &plan,
                                               options.verbsForwarderPort));
  *how = (plan.relay.empty() ? "direct to " : "via relay ") + graph.HostName(plan.neighbour);
  return Status::Ok();
}

Status PickCableGroups(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                       std::vector<CableGroup>* out) {
  // Group the rails by cable (entry host); rails the graph does not know are skipped.
  struct Group {
    uint64_t owner = 0, entry = 0;
    bool verbs = false;
    fabric::tcp::WorkerAddress address;
    std::vector<uint8_t> railIndices;
  };
  std::vector<Group> groups;
  for (const HostAddress::Rail& r : to.rails) {
    fabric::tcp::WorkerAddress one;
    one.workerId = to.workerId;
    one.rails.push_back({r.ipv4, r.port, 0});
    fabric::relay::AddressCable c;
    if (!fabric::relay::LocateAddress(graph, one, &c).ok()) continue;
    int speed = 0;
    for (const topology::RailLink& l : graph.LinksBetween(c.owner, c.entry)) {
      if (l.End(c.owner).address == Ipv4Text(r.ipv4)) speed = std::min(l.a.speedMbps, l.b.speedMbps);
    }
    Group* g = nullptr;
    for (Group& x : groups) {
      if (x.owner == c.owner && x.entry == c.entry) g = &x;
    }
    if (g == nullptr) {
      groups.push_back(Group{c.owner, c.entry, r.verbs, {}, {}});
      g = &groups.back();
      g->address.workerId = to.workerId;
    }
    if (g->verbs != r.verbs) return InvalidUsage("the peer's address mixes TCP and verbs rails on one cable");
    g->address.rails.push_back({r.ipv4, r.port, static_cast<uint32_t>(std::max(0, speed))});
    g->railIndices.push_back(r.railIndex);
  }
  if (groups.empty()) return InvalidUsage("no rail of the peer's address is on a cable of the cluster graph");
  for (const Group& g : groups) {
    if (g.owner != groups.front().owner) return InvalidUsage("the peer's address lists rails of two hosts");
  }
  std::vector<const Group*> best;  // the nearest entries, ascending
  int bestHops = std::numeric_limits<int>::max();
  for (const Group& g : groups) {
    // Straight: this host is the entry (a neighbour) or the owner (another process here).
    const int hops = g.entry == self || g.owner == self ? 0 : graph.RouteTo(self, g.entry).hops;
    if (g.entry != self && g.owner != self && hops == 0) continue;  // unreachable
    if (hops < bestHops) {
      best.clear();
      bestHops = hops;
    }
    if (hops == bestHops) best.push_back(&g);
  }
  if (best.empty()) return InvalidUsage("no cable of the peer host is reachable from this host");
  std::sort(best.begin(), best.end(), [](const Group* a, const Group* b) { return a->entry < b->entry; });
  out->clear();
  for (const Group* g : best) {
    CableGroup c;
    c.verbs = g->verbs;
    c.railIndices = g->railIndices;
    if (g->verbs) {
      // The verbs Worker listens on the cable's first rail; its port is on every rail.
      fabric::verbs::VerbsAddress v;
      v.workerId = g->address.workerId;
      v.ipv4 = g->address.rails.front().ipv4;
      v.port = g->address.rails.front().port;
      v.rails = static_cast<uint16_t>(g->address.rails.size());
      c.address = v.Pack();
    } else {
      c.address = g->address.Pack();
    }
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

CableSetDomain::CableSetDomain(CableSetOptions options)
    : options_(std::move(options)), regions_(std::make_shared<fabric::RegionTable>()) {
  caps_.flags = fabric::kCapSend | fabric::kCapWrite | fabric::kCapWriteImm | fabric::kCapRead |
                fabric::kCapFetchAdd | fabric::kCapFence | fabric::kCapHostMemory | fabric::kCapPreciseRemoteErrors |
                fabric::kCapTargetCpuChecks | fabric::kCapMultiProcess;
  caps_.maxRecordBytes = fabric::tcp::kMaxRecordBytes;
  caps_.maxOpBytes = fabric::tcp::kMaxOpBytes;
  caps_.maxOpsInFlight = fabric::tcp::kOpWindow;
}

CableSetDomain::~CableSetDomain() = default;

Status CableSetDomain::Create(CableSetOptions options, std::unique_ptr<CableSetDomain>* out) {
  if (!options.graph || options.self == 0 || options.rails.empty()) {
    return InvalidArgument("fabric mode domain: no cabling graph, host id or rails");
  }
  if (options.rails.size() > fabric::RemoteKey::kMaxRails) {
    return InvalidArgument("fabric mode domain: " + std::to_string(options.rails.size()) + " rails (at most " +
                           std::to_string(fabric::RemoteKey::kMaxRails) + ")");
  }
  RY_RETURN_IF_ERROR(options.relay.Validate());
  std::unique_ptr<CableSetDomain> d(new CableSetDomain(std::move(options)));
  const CableSetOptions& o = d->options_;
  d->verbsRailOf_.assign(o.rails.size(), -1);
  if (o.ib != nullptr) {
    d->verbsPortOf_.assign(o.rails.size(), std::string());
    std::vector<std::string> names;
    std::string map;  // which fabric rail runs RDMA on which port (IbPorts::Open lists every port)
    for (size_t i = 0; i < o.rails.size(); ++i) {
      const int p = o.ib->FindActive(o.rails[i].device);
      map += (map.empty() ? "" : ", ") + o.rails[i].device;
      if (p < 0) {
        map += " TCP";
        continue;
      }
      d->verbsRailOf_[i] = static_cast<int>(names.size());
      d->verbsPortOf_[i] = o.ib->at(static_cast<size_t>(p)).Name();
      names.push_back(d->verbsPortOf_[i]);
      map += " RDMA on " + d->verbsPortOf_[i];
    }
    RY_INFO(log::kInit | log::kNet, "fabric mode: fabric rails %s; an RDMA port that is not a fabric rail is unused",
            map.c_str());
    if (!names.empty()) {
      RY_RETURN_IF_ERROR(fabric::verbs::CreateVerbsDomainOn(o.verbs, o.ib, names, &d->verbsAll_));
      // What every cable can do: the verbs transport's limits too, and its errors are
      // the HCA's (no precise remote reasons, no target CPU checks).
      const fabric::Capabilities& v = d->verbsAll_->capabilities();
      d->caps_.flags &= ~(fabric::kCapPreciseRemoteErrors | fabric::kCapTargetCpuChecks);
      d->caps_.maxRecordBytes = std::min(d->caps_.maxRecordBytes, v.maxRecordBytes);
      d->caps_.maxOpBytes = std::min(d->caps_.maxOpBytes, v.maxOpBytes);
      d->caps_.maxOpsInFlight = std::min(d->caps_.maxOpsInFlight, v.maxOpsInFlight);
    }
  }
  *out = std::move(d);
  return Status::Ok();
}

Status CableSetDomain::Register(void* addr, uint64_t bytes, uint32_t access, fabric::MemoryKind kind,
                                const fabric::Region** out) {
  if (kind != fabric::MemoryKind::kHost) {
    return InvalidUsage("fabric mode registers host memory only (its TCP cables cannot read device memory)");
  }
  const fabric::Region* vr = nullptr;
  fabric::RailKeys keys;
  if (verbsAll_) {
    // One MR per RDMA rail; the Region carries their keys in fabric-rail order.
    RY_RETURN_IF_ERROR(verbsAll_->Register(addr, bytes, access, kind, &vr));
    keys.lkeys.assign(options_.rails.size(), 0);
    keys.rkeys.assign(options_.rails.size(), 0);
    keys.mrs.assign(options_.rails.size(), nullptr);
    for (size_t i = 0; i < options_.rails.size(); ++i) {
      const int r = verbsRailOf_[i];
      if (r < 0) continue;
      keys.lkeys[i] = vr->railLkeys[static_cast<size_t>(r)];
      keys.rkeys[i] = vr->railRkeys[static_cast<size_t>(r)];
      keys.mrs[i] = vr->railMr[static_cast<size_t>(r)];
    }
  }
  std::shared_ptr<fabric::RegionRecord> rec;
  {
    std::lock_guard lock(mu_);  // with Deregister's: the table and the verbs map change together
    if (Status s = regions_->Register(addr, bytes, access, kind, &rec, vr != nullptr ? &keys : nullptr); !s.ok()) {
      if (vr != nullptr) (void)verbsAll_->Deregister(vr);
      return s;
    }
    if (vr != nullptr) verbsRegions_[&rec->region()] = vr;
  }
  *out = &rec->region();
  return Status::Ok();
}

Status CableSetDomain::Deregister(const fabric::Region* region) {
  // The verbs side is taken out of the maps first, under mu_, while `region` is still
  // registered: a Register on another thread cannot reuse its address before then.
  const fabric::Region* vr = nullptr;
  {
    std::lock_guard lock(mu_);
    if (regions_->Find(region) == nullptr) return InvalidArgument("fabric mode: deregister of a region not registered here");
    auto it = verbsRegions_.find(region);
    if (it != verbsRegions_.end()) {
      vr = it->second;
      verbsRegions_.erase(it);
    }
    for (auto v = views_.begin(); v != views_.end();) {
      v = v->first.first == region ? views_.erase(v) : std::next(v);  // a post holding one keeps it alive
    }
    RY_RETURN_IF_ERROR(regions_->Deregister(region));  // TCP: nothing lands any more
  }
  if (vr != nullptr) return verbsAll_->Deregister(vr);  // the HCA refuses every remote access from here
  return Status::Ok();
}

Status CableSetDomain::CreateWorker(std::unique_ptr<fabric::Worker>* out) {
  auto w = std::make_unique<CableSetWorker>();
  RY_RETURN_IF_ERROR(w->Init(this, options_, regions_));
  *out = std::move(w);
  return Status::Ok();
}

Status CableSetDomain::CableRailIndices(const std::vector<fabric::RailInfo>& cableRails, std::vector<uint8_t>* indices,
                                        bool* rdma) const {
  indices->clear();
  bool all = verbsAll_ != nullptr;
  for (const fabric::RailInfo& r : cableRails) {
    size_t i = 0;
    while (i < options_.rails.size() && options_.rails[i].address != r.address) ++i;
    if (i == options_.rails.size()) {
      // The cabling agent serving this host (railyardd's, or another process's) found
      // the cable on a rail this process left out (new-user trial: nothing said why).
      return InvalidUsage("fabric mode: the cable's rail " + r.device + " (" + r.address +
                          ") is not one of this process's fabric rails: this host's cabling agent (railyardd, or "
                          "the process that started first) runs with other rails; set RAILYARD_SOCKET_IFNAME (or "
                          "railyardd's --ifname) the same for railyardd and every rank of the host, and "
                          "NCCL_SOCKET_IFNAME too (its interface is left out of the rails where it is set)");
    }
    indices->push_back(static_cast<uint8_t>(i));
    all = all && verbsRailOf_[i] >= 0;
  }
  *rdma = all && !cableRails.empty();
  return Status::Ok();
}

Status CableSetDomain::VerbsDomainOf(uint64_t neighbour, const std::vector<fabric::RailInfo>& cableRails,
                                     const std::vector<uint8_t>& indices, fabric::Domain** out) {
  std::lock_guard lock(mu_);
  auto it = cableVerbs_.find(neighbour);
  if (it != cableVerbs_.end() && it->second.indices == indices &&
      it->second.domain->rails().front().address == cableRails.front().address) {
    *out = it->second.domain.get();
    return Status::Ok();
  }
  if (it != cableVerbs_.end()) {
    // The cable's rails changed since: a Domain for the new set (the old one stays
    // for the Workers still using it).
    retiredVerbs_.push_back(std::move(it->second.domain));
    cableVerbs_.erase(it);
  }
  std::vector<std::string> names;
  for (uint8_t i : indices) {
    const int r = verbsRailOf_[i];
    if (r < 0) return InvalidUsage("fabric mode: rail " + options_.rails[i].device + " is not an RDMA port");
    names.push_back(verbsPortOf_[i]);
  }
  fabric::verbs::VerbsOptions v = options_.verbs;
  v.bootstrapAddress = cableRails.front().address;  // graph_routes.h: the cable's first rail
  v.bootstrapPort = 0;
  std::unique_ptr<fabric::Domain> d;
  RY_RETURN_IF_ERROR(fabric::verbs::CreateVerbsDomainOn(v, options_.ib, names, &d));
  *out = d.get();
  cableVerbs_[neighbour] = CableVerbs{std::move(d), indices};
  return Status::Ok();
}

std::shared_ptr<const fabric::Region> CableSetDomain::ViewFor(const fabric::Region* region, const fabric::Domain* cable,
                                                              const std::vector<uint8_t>& indices) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(region, cable);
  auto it = views_.find(key);
  if (it != views_.end()) return it->second;
  if (verbsRegions_.count(region) == 0) return nullptr;
  auto view = std::make_shared<fabric::Region>(*region);
  view->railLkeys.clear();
  view->railRkeys.clear();
  view->railMr.clear();
  for (uint8_t i : indices) {
    if (i >= region->railLkeys.size()) return nullptr;
    view->railLkeys.push_back(region->railLkeys[i]);
    view->railRkeys.push_back(region->railRkeys[i]);
    view->railMr.push_back(region->railMr[i]);
  }
  views_[key] = view;
  return view;
}

}  // namespace railyard::runtime
