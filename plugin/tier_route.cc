#include "plugin/tier_route.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>

#include "env/log.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/relay/seat_forwarder.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "topology/cluster_key.h"
#include "topology/utf8_name.h"

namespace railyard::plugin {

Status ParseTierHost(const std::string& spec, bool* isHost, std::string* name) {
  const std::string prefix = kTierHostPrefix;
  *isHost = spec.rfind(prefix, 0) == 0;
  if (!*isHost) return Status::Ok();
  *name = spec.substr(prefix.size());
  if (name->empty() || name->size() > 64) {
    return InvalidArgument("peer '" + spec + "': host:NAME needs a host name of 1..64 bytes (as the peer's "
                           "RAILYARD_HOST_NAME or system host name)");
  }
  for (unsigned char c : *name) {
    if (c < 0x21 || c == 0x7f || c == ':') {
      return InvalidArgument("peer '" + spec + "': the host name holds a space, ':' or a control character");
    }
  }
  return Status::Ok();
}

namespace {

/// True when a host of `graph` is called `name`.
bool HostNamed(const topology::ClusterGraph& graph, const std::string& name) {
  const std::vector<uint64_t> hosts = graph.Hosts();
  return std::any_of(hosts.begin(), hosts.end(), [&](uint64_t h) { return graph.HostName(h) == name; });
}

}  // namespace

Status TunnelAddressOf(const topology::ClusterGraph& graph, uint64_t self, const std::string& name, uint16_t port,
                       std::vector<uint8_t>* out) {
  std::vector<uint64_t> hosts;
  std::string known;
  for (uint64_t h : graph.Hosts()) {
    if (graph.HostName(h) == name) hosts.push_back(h);
    known += (known.empty() ? "" : ", ") + graph.HostName(h);
  }
  if (hosts.empty()) return InvalidUsage("host '" + name + "' is not in the cabling graph (hosts known: " + known + ")");
  if (hosts.size() > 1) return InvalidUsage("host name '" + name + "' is held by several hosts of the cabling graph");
  if (hosts.front() == self) {
    return InvalidUsage("host '" + name + "' is this host: name a local peer by 127.0.0.1 (ip:port)");
  }
  // In the acceptor's own order (CableSetWorker: per neighbour, the cable's rails in
  // LinksBetween order): a connector names the rail it dials by its index there.
  runtime::HostAddress h;
  h.workerId = 1;  // the acceptor's id is not checked by a connector; its rails and port are fixed
  for (uint64_t n : graph.Neighbours(hosts.front())) {
    size_t onCable = 0;
    for (const topology::RailLink& l : graph.LinksBetween(hosts.front(), n)) {
      in_addr a{};
      if (onCable++ >= fabric::tcp::WorkerAddress::kMaxRails) break;
      if (inet_pton(AF_INET, l.End(hosts.front()).address.c_str(), &a) != 1) continue;
      if (h.rails.size() < runtime::HostAddress::kMaxRails) h.rails.push_back({a.s_addr, port});
    }
  }
  if (h.rails.empty()) return InvalidUsage("host '" + name + "' has no IPv4 rail in the cabling graph");
  *out = h.Pack();
  return Status::Ok();
}

std::string TierRoute::TunnelFailure(const std::string& spec, const std::string& flag) const {
  const std::string e = tunnel ? tunnel->lastError() : "";
  if (e.empty()) return "";
  std::string out = "the tunnel to " + spec + " failed: " + e;
  if (e.find("CONNECT_FAILED") != std::string::npos && e.find("Connection refused") != std::string::npos) {
    out += " (nothing listens at its tier tunnel port: does railyardd there serve " + flag + "?)";
  }
  return out;
}

Status TierRoute::WithTunnelFailure(const Status& s, const std::string& spec, const std::string& flag) const {
  if (s.ok()) return s;
  const std::string why = TunnelFailure(spec, flag);
  if (why.empty()) return s;
  // The tunnel's failure is the cause: said first (new-user trial: it came after the
  // control connection's guesses at why the peer closed, which led elsewhere), after
  // an "expert NAME: " that leads the message (ExpertErrcOf reads the code there:
  // review, SYSTEM came back instead of PEER_LOST).
  const std::string& m = s.message();
  size_t lead = 0;
  if (m.rfind("expert ", 0) == 0) {
    const size_t colon = m.find(": ");
    const bool named = colon != std::string::npos && colon > 7 &&
                       m.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", 7) == colon;
    if (named) lead = colon + 2;
  }
  return Status(s.code(), m.substr(0, lead) + why + "; so " + m.substr(lead));
}

std::shared_ptr<proxy::verbs::IbPorts> OpenTierRdmaPorts(const env::Config& config, const char* who) {
  std::unique_ptr<proxy::verbs::IbPorts> ports;
  if (Status s = proxy::verbs::IbPorts::Open(config, &ports, nullptr); !s.ok()) {
    RY_WARN("%s: RDMA ports cannot be opened, the tier data runs over TCP: %s", who, s.message().c_str());
    return nullptr;
  }
  if (ports->size() == 0) return nullptr;
  RY_INFO(log::kNet, "%s: tier data over RDMA on %zu port(s) where a cable's rails are RDMA ports", who, ports->size());
  return std::shared_ptr<proxy::verbs::IbPorts>(std::move(ports));
}

Status CreateTierDomain(const env::Config& config, const proxy::Router& router, const std::vector<proxy::FabricRail>& rails,
                        uint16_t listenPort, std::unique_ptr<runtime::CableSetDomain>* out,
                        std::shared_ptr<proxy::verbs::IbPorts> ib) {
  std::vector<fabric::RailInfo> infos;
  for (const proxy::FabricRail& r : rails) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &r.addr, text, sizeof text);
    infos.push_back({r.ifname, text, static_cast<uint32_t>(std::max(0, r.speedMbps))});
  }
  std::shared_ptr<const topology::ClusterKey> key;
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(config.clusterKeyFile, &key));
  runtime::CableSetOptions o = runtime::CableSetOptions::FromConfig(config, router.HostId(), fabric::relay::RouterGraph(router),
                                                                    std::move(infos), std::move(key));
  o.tcp.listenPort = listenPort;
  if (ib != nullptr && ib->size() > 0) o.ib = std::move(ib);
  // A refused dial means nothing listens at that host's tier port (its railyardd serves
  // no such tier, or is starting its tunnels, which it does once its agent settled):
  // redialed for 5 x RAILYARD_DISCOVERY_DEAD_MS, not the whole RAILYARD_TIMEOUT_MS.
  o.tcp.connectRetryMs = std::min(config.timeoutMs, 5 * config.discoveryDeadMs);
  return runtime::CableSetDomain::Create(std::move(o), out);
}

namespace {

struct ClientState {
  std::once_flag once;
  Status status;
  TierClientFabric* fabric = nullptr;
};

ClientState& State() {
  static auto* s = new ClientState;  // never destroyed: handles may outlive static teardown
  return *s;
}

}  // namespace

Status TierClientFabric::Get(TierClientFabric** out) {
  ClientState& st = State();
  std::call_once(st.once, [&st] {
    auto f = std::unique_ptr<TierClientFabric>(new TierClientFabric);
    st.status = [&]() -> Status {
      RY_RETURN_IF_ERROR(env::Load(&f->config_));
      const env::Config& cfg = *f->config_;
      std::vector<proxy::FabricRail> rails;
      std::string whyNone;
      // The same rails as the plugin's fabric mode and railyardd: NCCL_SOCKET_IFNAME's
      // port (NCCL's bootstrap network) is never one.
      RY_RETURN_IF_ERROR(proxy::SelectFabricRails(cfg.railIfname, cfg.defaultSpeedMbps, &rails, &whyNone,
                                                  "RAILYARD_SOCKET_IFNAME",
                                                  proxy::BootstrapIfname(cfg.railIfname, cfg.socketIfname)));
      if (rails.empty()) return InvalidUsage("a host:NAME peer needs fabric rails, and there is none: " + whyNone);
      proxy::RouterOptions ro;
      bool truncated = false;
      char sys[256] = {};
      gethostname(sys, sizeof sys - 1);
      RY_RETURN_IF_ERROR(topology::CheckLocalName(cfg.hostName.empty() ? std::string(sys) : cfg.hostName,
                                                  cfg.hostName.empty() ? "the system host name" : "RAILYARD_HOST_NAME",
                                                  &ro.hostName, &truncated));
      RY_RETURN_IF_ERROR(topology::LoadClusterKey(cfg.clusterKeyFile, &ro.agent.key));
      RY_RETURN_IF_ERROR(topology::LoadClusterKey(cfg.clusterKeyFile, &ro.clusterKey));
      ro.agent.port = static_cast<uint16_t>(cfg.discoveryPort);
      ro.agent.intervalMs = cfg.discoveryIntervalMs;
      ro.agent.deadIntervalMs = cfg.discoveryDeadMs;
      ro.relayPort = static_cast<uint16_t>(cfg.relayPort);
      RY_RETURN_IF_ERROR(proxy::Router::Start(rails, ro, &f->router_));  // the cabling agent's thread
      RY_RETURN_IF_ERROR(CreateTierDomain(cfg, *f->router_, rails, 0, &f->domain_));
      f->ib_ = OpenTierRdmaPorts(cfg, "tier client");
      RY_RETURN_IF_ERROR(CreateTierDomain(cfg, *f->router_, rails, 0, &f->dataDomain_, f->ib_));
      f->cache_ = std::make_unique<fabric::RegistrationCache>(*f->dataDomain_);
      return Status::Ok();
    }();
    if (st.status.ok()) st.fabric = f.release();
  });
  if (!st.status.ok()) return st.status;
  *out = st.fabric;
  return Status::Ok();
}

Status TierClientFabric::Open(const std::string& name, uint16_t port, TierRoute* out) {
  // A process that just started its cabling agent learns the graph first: at least
  // 5 x RAILYARD_DISCOVERY_DEAD_MS, else RAILYARD_TIMEOUT_MS.
  const int waitMs = std::max(config_->timeoutMs, 5 * config_->discoveryDeadMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  const uint64_t self = router_->HostId();
  std::vector<uint8_t> address;
  fabric::relay::SourcePlan plan;
  // A settled graph without the name: the name is wrong, or that host runs no Railyard
  // process. Said after 5 x RAILYARD_DISCOVERY_DEAD_MS of it, not the whole wait.
  const auto absentWait = std::chrono::milliseconds(5 * config_->discoveryDeadMs);
  bool absent = false;  // the settled graph lacks the name since absentSince
  auto absentSince = std::chrono::steady_clock::now();
  topology::ClusterGraph g;
  for (;;) {
    g = router_->Agent().Graph();
    const bool known = HostNamed(g, name);
    Status s = TunnelAddressOf(g, self, name, port, &address);
    runtime::HostAddress to;
    std::vector<uint8_t> cable;
    if (s.ok()) s = runtime::HostAddress::Unpack(address, &to);
    if (s.ok()) s = runtime::PickCable(g, self, to, &cable);
    if (s.ok()) s = fabric::relay::PlanSource(g, self, cable, static_cast<uint16_t>(config_->fabricRelayPort), &plan);
    const bool settled = router_->Agent().Settled();
    if (s.ok() && settled) break;
    if (known && g.HostName(self) == name) return s;  // this host: no wait makes it another  // settled: the route is the one Endpoints take
    const auto t = std::chrono::steady_clock::now();
    if (settled && !known) {
      if (!absent) absentSince = t;
      absent = true;
    } else {
      absent = false;
    }
    if (absent && t - absentSince >= absentWait) {
      return Status(s.code(), "no host '" + name + "' in the settled cabling graph for " +
                                  std::to_string(absentWait.count()) + " ms (5 x RAILYARD_DISCOVERY_DEAD_MS): " +
                                  s.message() + ": the name is wrong, or no Railyard process (railyardd) runs on that "
                                  "host or on the hosts between (a host's name is its RAILYARD_HOST_NAME, else "
                                  "its system host name)");
    }
    if (t >= deadline) {
      std::string msg = "no fabric route to host '" + name + "' after " + std::to_string(waitMs) +
                        " ms (RAILYARD_TIMEOUT_MS, at least 5 x RAILYARD_DISCOVERY_DEAD_MS): " + s.message();
      if (known && !s.ok()) {
        msg += "; a host between relays only while a Railyard process runs there: start railyardd on the hosts "
               "between this one and '" + name + "'";
      }
      return Status(s.code(), msg);
    }
    // Woken by every change of the graph; 100 ms at most between checks of the deadline.
    const uint64_t v = router_->Agent().Version();
    router_->Agent().WaitFor([v](const topology::ClusterGraph&, uint64_t now) { return now != v; }, 100);
  }
  // The control tunnel's first hop, as its Endpoint chooses it (a spliced TCP route may
  // take another of the tied relays than the Forwarder plan above).
  if (!runtime::FirstHopOf(g, domain_->options(), address, &out->how).ok()) {
    out->how = (plan.relay.empty() ? "direct to " : "via relay ") + g.HostName(plan.neighbour);
  }
  RY_RETURN_IF_ERROR(dataDomain_->CreateWorker(&out->worker));
  storage::tunnel::TunnelOptions o;
  o.peerName = out->PeerName(kTierHostPrefix + name);  // its logs name the peer asked for
  return storage::tunnel::ControlTunnel::Dial(*domain_, address, o, &out->tunnel);
}

}  // namespace railyard::plugin
