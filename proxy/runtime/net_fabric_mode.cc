// Fabric mode (RAILYARD_FABRIC) of the process's NetRuntime: the cabling agent and
// relays (proxy/routing, proxy/relay, the fabric relay's Forwarder), the one NCCL
// device over every rail, and the route-to-port mapping of its connections (cabled
// peers over the cable's RDMA ports, the rest over TCP, relayed; with the fabric
// comms (runtime::detail::UsesFabricComms: the default over TCP rails), the
// CableSetDomain: RDMA cables over verbs, relayed over RDMA).
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"
#include "proxy/handle.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/routing/relay_hop_names.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/runtime/net_state.h"
#include "topology/cluster_key.h"
#include "topology/utf8_name.h"

namespace railyard::runtime::detail {

namespace {

/// Fabric mode over the fabric comms: the cabling graph of the Router running now
/// (an empty graph between the last finalize and the next init).
topology::ClusterGraph FabricModeGraph(NetState& g) {
  std::lock_guard lock(g.graphMu);
  return g.graphRouter != nullptr ? g.graphRouter->Agent().Graph() : topology::ClusterGraph();
}

}  // namespace

std::vector<int> AllPorts(const NetState& g) {
  std::vector<int> ports;
  for (size_t i = 0; i < g.ib->size(); ++i) ports.push_back(static_cast<int>(i));
  return ports;
}

proxy::verbs::VerbsDeviceSetup FabricVerbsSetup(const NetState& g, std::vector<int> ports, int trafficClass) {
  proxy::verbs::VerbsDeviceSetup v;
  v.ib = g.ib.get();
  v.ports = std::move(ports);
  v.link = proxy::verbs::LinkConfigFrom(*g.config);
  v.initTrafficClass = trafficClass;
  v.options.timeoutMs = g.config->timeoutMs;
  v.options.useInline = g.config->ibUseInline != 0;
  v.options.device = g.fabricName;
  v.fabric = true;
  return v;
}

std::vector<int> CablePorts(const NetState& g, const std::vector<proxy::SocketTarget>& targets) {
  std::vector<int> ports;
  for (const proxy::SocketTarget& t : targets) {
    if (!t.prefix.empty()) return {};
    const int found = g.ib->FindActive(t.rail);
    if (found < 0) return {};
    if (std::find(ports.begin(), ports.end(), found) == ports.end()) ports.push_back(found);
  }
  return ports;
}

/// Creates (first init) the FabricRuntime with one device, the host's CableSetDomain
/// over every rail (routes from the Router's cabling graph, relays through the hosts'
/// Forwarders at RAILYARD_FABRIC_RELAY_PORT), and starts its CommWorker, whose Worker
/// gets a TCP Worker per cable the graph knows now.
Status StartFabricModeComms(NetState& g) {
  {
    std::lock_guard lock(g.graphMu);
    g.graphRouter = g.router.get();
  }
  if (g.fabric == nullptr) {
    std::vector<fabric::RailInfo> rails;
    for (const proxy::FabricRail& r : g.fabricRails) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &r.addr, text, sizeof text);
      rails.push_back({r.ifname, text, static_cast<uint32_t>(std::max(0, r.speedMbps))});
    }
    std::shared_ptr<const topology::ClusterKey> key;
    RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &key));
    runtime::CableSetOptions o = runtime::CableSetOptions::FromConfig(
        *g.config, g.router->HostId(), [state = &g] { return FabricModeGraph(*state); }, std::move(rails),
        std::move(key));  // the state is the process's, never freed
    o.multiRoute = true;  // the NCCL comms take a peer's ops over every route (proxy/nccl/peer_workers.h)
    // Cables of RDMA ports run the verbs transport on the ports init opened (open for
    // the life of the process: NCCL may still hold registrations).
    if (g.ib != nullptr && g.ib->size() > 0) {
      o.ib = std::shared_ptr<proxy::verbs::IbPorts>(std::shared_ptr<void>(), g.ib.get());
    }
    std::unique_ptr<runtime::CableSetDomain> domain;
    RY_RETURN_IF_ERROR(runtime::CableSetDomain::Create(std::move(o), &domain));
    std::unique_ptr<runtime::FabricRuntime> rt;
    RY_RETURN_IF_ERROR(runtime::FabricRuntime::CreateOver(std::move(domain), g.fabricName, &rt));
    g.fabric = rt.release();  // never freed (see NetState)
    runtime::SetFabric(g.fabric);
  }
  if (g.config->fabricTcpRelay == "splice") {
    // RDMA routes only where this host has RDMA ports (new-user trial: the line named
    // the verbs ports on a host with none).
    const std::string rdma = g.ib != nullptr && g.ib->size() > 0
                                 ? ", RDMA routes through the Forwarders' verbs ports (" +
                                       std::to_string(g.config->fabricRelayVerbsPort) + ")"
                                 : std::string(", no RDMA port here");
    RY_INFO(log::kInit | log::kNet, "fabric mode over the fabric comms (RAILYARD_COMMS=%s): cable set, TCP "
            "routes spliced through the socket relays at port %d%s", g.config->comms.c_str(), g.config->relayPort,
            rdma.c_str());
  } else {
    RY_INFO(log::kInit | log::kNet, "fabric mode over the fabric comms (RAILYARD_COMMS=%s): cable set, "
            "relays through the Forwarders at port %d", g.config->comms.c_str(), g.config->fabricRelayPort);
  }
  // The CommWorker's Worker takes the cables the graph has when it starts (later ones
  // as they come), and a listen hands out the addresses it has then: let a neighbour
  // whose processes start later be heard first, up to RAILYARD_TIMEOUT_MS (with a
  // shorter wait, a rank whose neighbours' processes start seconds later would hand
  // out an address with no cable, which they are refused at connect). With none by
  // then, the Worker starts on its host-local rail alone (this host's processes reach it).
  const uint64_t self = g.router->HostId();
  const topology::CablingAgent& agent = g.router->Agent();
  const auto t0 = proxy::Clock::now();
  if (!agent.WaitFor(
          [self](const topology::ClusterGraph& graph, uint64_t) { return !graph.Neighbours(self).empty(); },
          g.config->timeoutMs)) {
    // Nothing heard on any rail: a misconfigured host otherwise waited out
    // RAILYARD_TIMEOUT_MS in silence (new-user trial: another RAILYARD_DISCOVERY_PORT).
    std::string railNames;
    for (const proxy::FabricRail& r : g.fabricRails) railNames += (railNames.empty() ? "" : ", ") + r.ifname;
    RY_WARN("fabric mode: heard no neighbour on rails %s within RAILYARD_TIMEOUT_MS (%d ms, cabling port %d): the "
            "hosts at their other ends are down or run no Railyard process, or use another RAILYARD_DISCOVERY_PORT or "
            "RAILYARD_CLUSTER_KEY_FILE than this process; only this host's processes are reachable until one is heard",
            railNames.c_str(), g.config->timeoutMs, g.config->discoveryPort);
  }
  // The other rails' neighbours may come a moment later (their processes start a second
  // apart under load): an address handed out before a cable is heard lacks it, and a
  // peer holding it reaches this host round the ring for the whole job. Give every
  // rail that is no shared segment up to 3 x RAILYARD_DISCOVERY_DEAD_MS (within
  // RAILYARD_TIMEOUT_MS) to hear its neighbour; a rail with nobody on it costs that once.
  std::set<std::string> rails;
  const auto shared = agent.SharedSegments();
  for (const proxy::FabricRail& r : g.fabricRails) {
    if (std::find(shared.begin(), shared.end(), r.ifname) == shared.end()) rails.insert(r.ifname);
  }
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(proxy::Clock::now() - t0).count();
  const int more = static_cast<int>(std::min<int64_t>(3LL * g.config->discoveryDeadMs, g.config->timeoutMs - spent));
  if (more > 0 && !rails.empty()) {
    const bool all = agent.WaitFor(
        [self, &rails](const topology::ClusterGraph& graph, uint64_t) {
          std::set<std::string> heard;
          for (uint64_t n : graph.Neighbours(self)) {
            for (const topology::RailLink& l : graph.LinksBetween(self, n)) heard.insert(l.End(self).ifname);
          }
          return std::all_of(rails.begin(), rails.end(), [&](const std::string& r) { return heard.count(r) != 0; });
        },
        more);
    if (!all) {
      RY_INFO(log::kInit | log::kNet, "fabric mode: not every rail heard a neighbour within %d ms; the first "
              "listens' addresses leave those rails out (peers reach this host by the cables heard)", more);
    }
  }
  return g.fabric->Start();
}

/// `why`: the cabling graph has no path to the listener's host yet. True while
/// RAILYARD_TIMEOUT_MS has not passed since the first try on this handle (kept in the
/// handle's connect-state area, as the older comms keep theirs). False for every other
/// error, and once the time is up (the error then names it).
bool FabricModeRouteMayCome(const NetState& g, void* handle, Status& why) {
  const std::string& m = why.message();
  const bool noRouteYet = m.find("reachable") != std::string::npos || m.find("no route from") != std::string::npos ||
                          m.find("no rail of the peer") != std::string::npos;
  if (why.code() != Code::kInvalidUsage || !noRouteYet) return false;
  auto* wire = static_cast<proxy::nccl::FabricHandleWire*>(handle);
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(proxy::Clock::now().time_since_epoch()).count());
  if (wire->stageMagic != proxy::kStageMagic) {
    wire->stageMagic = proxy::kStageMagic;
    wire->stageState = now;
  }
  const uint64_t waited = now - wire->stageState;
  if (waited <= static_cast<uint64_t>(g.config->timeoutMs)) return true;
  why = Status(why.code(), why.message() + " (no route after " + std::to_string(waited) +
                               " ms: the host is not cabled to this host or any host that can relay)");
  return false;
}

Status StartFabric(NetState& g) {
  proxy::RouterOptions fo;
  bool truncated = false;
  RY_RETURN_IF_ERROR(topology::CheckLocalName(g.config->hostName.empty() ? g.host : g.config->hostName,
                                              g.config->hostName.empty() ? "the system host name" : "RAILYARD_HOST_NAME",
                                              &fo.hostName, &truncated));
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &fo.agent.key));
  fo.agent.port = static_cast<uint16_t>(g.config->discoveryPort);
  fo.agent.intervalMs = g.config->discoveryIntervalMs;
  fo.agent.deadIntervalMs = g.config->discoveryDeadMs;
  fo.relayPort = static_cast<uint16_t>(g.config->relayPort);
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &fo.clusterKey));  // relay records' MAC
  RY_RETURN_IF_ERROR(proxy::Router::Start(g.fabricRails, fo, &g.router));
  // Errors on relayed sockets name the relay that carried them.
  proxy::SetAddressNamer([r = g.router.get()](const in_addr& a) { return r->HostNameOfAddress(a); });
  proxy::RelayOptions ro;
  ro.port = fo.relayPort;
  ro.bufferBytes = g.config->relayBufferBytes;
  ro.role = proxy::RelaySeat::Role::kRank;  // relays only while no railyardd (or other rank) does
  ro.drainMs = 0;                           // finalize does not wait for other jobs' sockets
  ro.idleMs = g.config->relayIdleMs;
  ro.maxPerPeer = g.config->relayMaxPerPeer;
  ro.fixedListenerPorts = {static_cast<uint16_t>(g.config->tierTunnelPort),
                           static_cast<uint16_t>(g.config->tierTunnelPort + 1)};
  if (Status s = proxy::RelayService::Start(g.router.get(), ro, &g.relay); !s.ok()) {
    // Another user's process holds the port, or the seat could not be reached.
    RY_INFO(log::kInit | log::kNet, "fabric: not relaying in this process: %s", s.message().c_str());
  }
  if (g.relay != nullptr) {
    // The fabric relay's thread: serves relayed fabric Endpoints while this process holds the seat.
    // The process's RDMA ports (open for its life) serve the relay's verbs ports too.
    std::shared_ptr<proxy::verbs::IbPorts> ib;
    if (g.ib != nullptr && g.ib->size() > 0) ib = std::shared_ptr<proxy::verbs::IbPorts>(std::shared_ptr<void>(), g.ib.get());
    if (Status s = fabric::relay::StartSeatForwarder(*g.router, *g.relay, *g.config, -1, &g.forwarder, std::move(ib),
                                                     /*openIb=*/false);
        !s.ok()) {
      RY_INFO(log::kInit | log::kNet, "fabric: no fabric relay in this process: %s", s.message().c_str());
    }
  }
  // Let the agent hear its neighbours first (a few hello periods, woken by every
  // change), so the device NCCL sees leaves out shared segments such as a
  // management bridge, and the first connections find their routes at once.
  const topology::CablingAgent& agent = g.router->Agent();
  for (int i = 0; i < 10 && !agent.Settled(); ++i) {
    agent.WaitFor([](const topology::ClusterGraph&, uint64_t) { return false; }, fo.agent.intervalMs);
  }
  const auto shared = agent.SharedSegments();
  std::string name = "railyard[";
  int speed = 0, n = 0;
  for (const auto& r : g.fabricRails) {
    if (std::find(shared.begin(), shared.end(), r.ifname) != shared.end()) continue;
    name += (n++ ? "+" : "") + r.ifname;
    speed += r.speedMbps;
  }
  name += "]";
  // The same name keeps its string (NCCL may hold the pointer); a new one retires the
  // old, so init cycles (failed ones too) with unchanged rails keep nothing more.
  if (name != g.fabricName) {
    if (!g.fabricName.empty()) g.retiredNames.push_back(std::move(g.fabricName));
    g.fabricName = name;
  }
  g.fabricSpeedMbps = speed;
  g.fabricNameRails = n;
  return Status::Ok();
}

}  // namespace railyard::runtime::detail
