#include "proxy/runtime/cable_set_domain.h"

#include <arpa/inet.h>

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
#include "proxy/fabric/relay/multi_route_endpoint.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/routed_worker.h"
#include "proxy/fabric/tcp/tcp_frame.h"

namespace railyard::runtime {

namespace {

constexpr uint32_t kHostMagic = 0x41485952;  // "RYHA"
constexpr size_t kHostPerRail = 8;

uint64_t RandomId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

std::string Ipv4Text(uint32_t networkOrder) {
  in_addr a{};
  a.s_addr = networkOrder;
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

/// "h1 (10.0.1.2:29519)": the host of the graph whose Forwarder address `relay` is,
/// and the address's first rail; "" when the graph does not place it.
std::string RelayLabel(const topology::ClusterGraph& g, std::span<const uint8_t> relay) {
  fabric::tcp::WorkerAddress w;
  if (!fabric::tcp::WorkerAddress::Unpack(relay, &w).ok() || w.rails.empty()) return "";
  fabric::relay::AddressCable c;
  if (!fabric::relay::LocateAddress(g, w, &c).ok()) return "";
  return g.HostName(c.owner) + " (" + fabric::tcp::RailAddressText(w.rails[0]) + ")";
}

/// One cable of a CableSetWorker: its Domain (sharing the set's RegionTable), and
/// the RoutedWorker over that Domain's TCP Worker and RelayClient.
struct Cable {
  uint64_t neighbour = 0;
  std::unique_ptr<fabric::Domain> domain;
  /// With a fixed listenPort: the relayed Endpoints' Domain (each makes its own Worker,
  /// which cannot bind the fixed port again); ephemeral ports, the same regions.
  std::unique_ptr<fabric::Domain> relayDomain;
  std::unique_ptr<fabric::relay::RoutedWorker> worker;
};

/// See cable_set_domain.h.
class CableSetWorker : public fabric::Worker {
 public:
  CableSetWorker() : id_(RandomId()) {}
  ~CableSetWorker() override {
    for (Cable& c : cables_) c.worker.reset();  // Workers before their Domains
  }

  Status Init(const CableSetOptions& o, const std::shared_ptr<fabric::RegionTable>& regions) {
    options_ = o;
    regions_ = regions;
    self_ = o.self;
    graph_ = o.graph;
    multiRoute_ = o.multiRoute;
    port_ = o.forwarderPort;
    const topology::ClusterGraph g = graph_();
    for (uint64_t n : g.Neighbours(self_)) RY_RETURN_IF_ERROR(AddCable(g, n));
    if (cables_.empty()) return InvalidUsage("fabric mode: the cabling graph has no cable of this host yet");
    return RebuildAddress();
  }

  std::vector<uint8_t> Address() const override {
    std::lock_guard<std::mutex> lock(addressMutex_);
    return address_;
  }

  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<fabric::Endpoint>* out) override {
    HostAddress to;
    RY_RETURN_IF_ERROR(HostAddress::Unpack(peerAddress, &to));
    const topology::ClusterGraph g = graph_();
    AdoptNewCables(g);
    std::vector<std::vector<uint8_t>> cableAddresses;
    RY_RETURN_IF_ERROR(PickCables(g, self_, to, &cableAddresses));
    // The nearest cable first; a relayed peer also gets a route through every other
    // relay on a shortest path (a different first hop), used in turn.
    std::vector<std::unique_ptr<fabric::Endpoint>> routes;
    std::vector<uint64_t> firstHops;
    if (!multiRoute_) cableAddresses.resize(1);
    for (const std::vector<uint8_t>& cableAddress : cableAddresses) {
      fabric::relay::SourcePlan plan;
      Status s = fabric::relay::PlanSource(g, self_, cableAddress, port_, &plan);
      if (!routes.empty() && (!s.ok() || plan.relay.empty())) continue;
      RY_RETURN_IF_ERROR(s);
      if (std::find(firstHops.begin(), firstHops.end(), plan.neighbour) != firstHops.end()) continue;
      Cable* cable = nullptr;
      for (Cable& c : cables_) {
        if (c.neighbour == plan.neighbour) cable = &c;
      }
      if (cable == nullptr) {
        if (!routes.empty()) continue;
        return InvalidUsage("fabric mode: no Worker on the cable to " + g.HostName(plan.neighbour) +
                            " (a cable that came up after this Worker started and could not be taken: see the WARN)");
      }
      std::unique_ptr<fabric::Endpoint> ep;
      Status c = cable->worker->Connect(cableAddress, &ep);
      if (!c.ok() && routes.empty()) return c;
      if (!c.ok()) continue;
      routes.push_back(std::move(ep));
      firstHops.push_back(plan.neighbour);
      if (plan.relay.empty()) break;  // straight over a cable: that one only
    }
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
    return n;
  }

  fabric::WorkerStats stats() const override {
    fabric::WorkerStats s;
    for (const Cable& c : cables_) {
      const fabric::WorkerStats x = c.worker->stats();
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

  /// A Cable (TCP Domain and Worker on the cable's rails, RelayClient, RoutedWorker)
  /// toward neighbour `n` of graph `g`; nothing when the graph lists no rail of it.
  Status AddCable(const topology::ClusterGraph& g, uint64_t n) {
    Cable c;
    c.neighbour = n;
    fabric::tcp::TcpOptions t = options_.tcp;
    t.rails = fabric::relay::CableRails(g, self_, n);
    if (t.rails.empty()) return Status::Ok();
    if (t.rails.size() > fabric::tcp::WorkerAddress::kMaxRails) t.rails.resize(fabric::tcp::WorkerAddress::kMaxRails);
    // 0 (ephemeral) unless the caller fixed one (railyardd's tier tunnels: RAILYARD_TIER_TUNNEL_PORT).
    t.listenPort = options_.tcp.listenPort;
    t.sharedRegions = regions_;
    RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(t, &c.domain));
    std::unique_ptr<fabric::Worker> direct;
    RY_RETURN_IF_ERROR(c.domain->CreateWorker(&direct));
    std::unique_ptr<fabric::relay::RelayClient> client;
    if (t.listenPort != 0) {
      t.listenPort = 0;
      RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(t, &c.relayDomain));
    }
    RY_RETURN_IF_ERROR(fabric::relay::RelayClient::Create(c.relayDomain ? *c.relayDomain : *c.domain, options_.relay, &client));
    client->SetRelayNamer([graph = graph_](std::span<const uint8_t> relay) { return RelayLabel(graph(), relay); });
    c.worker = std::make_unique<fabric::relay::RoutedWorker>(
        std::move(direct), std::move(client), fabric::relay::MakeGraphRouteFn(graph_, self_, n, port_));
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

  /// address_ from the Cables' Workers' rails, in Cable order (the first 16 rails).
  Status RebuildAddress() {
    HostAddress a;
    a.workerId = id_;
    for (const Cable& c : cables_) {
      fabric::tcp::WorkerAddress w;
      RY_RETURN_IF_ERROR(fabric::tcp::WorkerAddress::Unpack(c.worker->Address(), &w));
      for (const auto& r : w.rails) {
        if (a.rails.size() < HostAddress::kMaxRails) a.rails.push_back({r.ipv4, r.port});
      }
    }
    std::lock_guard<std::mutex> lock(addressMutex_);
    address_ = a.Pack();
    return Status::Ok();
  }

  uint64_t id_;
  CableSetOptions options_;
  std::shared_ptr<fabric::RegionTable> regions_;
  std::set<uint64_t> refused_;  ///< neighbours whose late cable could not be taken
  std::chrono::steady_clock::time_point nextAdoptCheck_{};
  uint64_t self_ = 0;
  fabric::relay::GraphFn graph_;
  uint16_t port_ = 0;
  bool multiRoute_ = false;
  std::vector<Cable> cables_;
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
  o.rails = std::move(rails);
  return o;
}

namespace {
const fabric::AddressRecordFormat kHostAddressFormat{kHostMagic, HostAddress::kVersion, kHostPerRail,
                                                     HostAddress::kMaxRails, "host address", [](uint32_t) {
                                                       return std::string("not a Railyard fabric-mode host address");
                                                     }};
}  // namespace

std::vector<uint8_t> HostAddress::Pack() const {
  return fabric::PackAddressRecord(kHostAddressFormat, workerId, rails, [](size_t, uint8_t*) {});
}

Status HostAddress::Unpack(std::span<const uint8_t> b, HostAddress* out) {
  HostAddress a;
  RY_RETURN_IF_ERROR(fabric::UnpackAddressRecord(kHostAddressFormat, b, &a.workerId,
                                                 [&](size_t, uint32_t ipv4, uint16_t port, const uint8_t*) {
                                                   a.rails.push_back({ipv4, port});
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
  // Group the rails by cable (entry host); rails the graph does not know are skipped.
  struct Group {
    uint64_t owner = 0, entry = 0;
    fabric::tcp::WorkerAddress address;
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
      groups.push_back(Group{c.owner, c.entry, {}});
      g = &groups.back();
      g->address.workerId = to.workerId;
    }
    g->address.rails.push_back({r.ipv4, r.port, static_cast<uint32_t>(std::max(0, speed))});
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
  cableAddresses->clear();
  for (const Group* g : best) cableAddresses->push_back(g->address.Pack());
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

Status CableSetDomain::Create(CableSetOptions options, std::unique_ptr<CableSetDomain>* out) {
  if (!options.graph || options.self == 0 || options.rails.empty()) {
    return InvalidArgument("fabric mode domain: no cabling graph, host id or rails");
  }
  RY_RETURN_IF_ERROR(options.relay.Validate());
  out->reset(new CableSetDomain(std::move(options)));
  return Status::Ok();
}

Status CableSetDomain::Register(void* addr, uint64_t bytes, uint32_t access, fabric::MemoryKind kind,
                                const fabric::Region** out) {
  if (kind != fabric::MemoryKind::kHost) {
    return InvalidUsage("fabric mode runs the TCP fabric transport, which cannot read device memory");
  }
  std::shared_ptr<fabric::RegionRecord> rec;
  RY_RETURN_IF_ERROR(regions_->Register(addr, bytes, access, kind, &rec));
  *out = &rec->region();
  return Status::Ok();
}

Status CableSetDomain::Deregister(const fabric::Region* region) { return regions_->Deregister(region); }

Status CableSetDomain::CreateWorker(std::unique_ptr<fabric::Worker>* out) {
  auto w = std::make_unique<CableSetWorker>();
  RY_RETURN_IF_ERROR(w->Init(options_, regions_));
  *out = std::move(w);
  return Status::Ok();
}

}  // namespace railyard::runtime
