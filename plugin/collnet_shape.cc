// See collnet_shape.h.
#include "plugin/collnet_shape.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "env/log.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/runtime/cable_set_domain.h"
#include "topology/cabling_agent.h"
#include "topology/local_graph.h"

namespace railyard::plugin::collnet {
namespace {

/// Netmask (network byte order) of this host's interface holding IPv4 `want`; 0 when none.
uint32_t CollNetNetmaskOf(const ifaddrs* list, in_addr want) {
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != want.s_addr) continue;
    return reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
  }
  return 0;
}

/// Netmask of this host's interface holding one of `rails`' addresses, the first found; 0 when none.
uint32_t RailNetmask(const std::vector<fabric::RailInfo>& rails) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  uint32_t mask = 0;
  for (const auto& r : rails) {
    in_addr want{};
    if (inet_pton(AF_INET, r.address.c_str(), &want) != 1) continue;
    if ((mask = CollNetNetmaskOf(list, want)) != 0) break;
  }
  freeifaddrs(list);
  return mask;
}

/// How long a listen waits for a cabling agent that has just started to settle (ms).
constexpr int kSettleMs = 3000;

/// Network-order mask of a prefix length 1..32.
uint32_t PrefixMask(unsigned prefix) { return htonl(prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix)); }

}  // namespace

const char* ShapeSourceName(ShapeSource s) {
  switch (s) {
    case ShapeSource::kSetting: return "RAILYARD_COLLNET_SHAPE";
    case ShapeSource::kCablingGraph: return "cabling graph";
    case ShapeSource::kCablingGraphAndSubnets: return "cabling graph and rail subnets";
    case ShapeSource::kRailSubnets: return "rail subnets";
    case ShapeSource::kTcpAddresses: return "tcp addresses";
    case ShapeSource::kRankOrder: return "rank order";
    case ShapeSource::kRelayedRankOrder: return "rank order over relays (the ranks' own cables form no ring, chain or mesh)";
  }
  return "unknown";
}

void FillLocator(const fabric::Domain& domain, CollnetHandle* h) {
  h->host = HostDigest(topology::LocalHostId());
  h->hasNeighbours = false;
  h->neighbours.clear();
  topology::LocalGraph g;
  if (topology::LocalCablingGraph(&g, kSettleMs)) {
    std::set<uint32_t> nb;
    for (uint64_t n : g.graph.Neighbours(g.self)) nb.insert(HostDigest(n));
    nb.erase(h->host);
    if (!nb.empty() && nb.size() <= 255 && HostDigest(g.self) == h->host) {  // the handle's u8 count
      h->hasNeighbours = true;
      h->neighbours.assign(nb.begin(), nb.end());
    }
  }
  h->hasRails = false;
  h->rails.clear();
  ifaddrs* list = nullptr;
  if (domain.rails().empty() || getifaddrs(&list) != 0) return;
  std::vector<HandleRail> rails;
  bool all = true;
  for (const auto& r : domain.rails()) {
    in_addr a{};
    uint32_t mask = 0;
    if (inet_pton(AF_INET, r.address.c_str(), &a) != 1 || (mask = CollNetNetmaskOf(list, a)) == 0) {
      all = false;
      break;
    }
    rails.push_back({a.s_addr, static_cast<uint8_t>(__builtin_popcount(mask))});
  }
  freeifaddrs(list);
  if (all) {
    h->hasRails = true;
    h->rails = std::move(rails);
  }
}

/// Whether every rank reaches every other through `m`'s edges.
static bool Connected(const std::vector<std::vector<bool>>& m) {
  if (m.empty()) return true;
  std::vector<bool> seen(m.size(), false);
  std::vector<size_t> stack{0};
  seen[0] = true;
  while (!stack.empty()) {
    const size_t a = stack.back();
    stack.pop_back();
    for (size_t b = 0; b < m.size(); ++b) {
      if (m[a][b] && !seen[b]) {
        seen[b] = true;
        stack.push_back(b);
      }
    }
  }
  return std::all_of(seen.begin(), seen.end(), [](bool x) { return x; });
}

bool AdjacencyFromHandles(const std::vector<CollnetHandle>& handles, std::vector<std::vector<bool>>* adj,
                          ShapeSource* source) {
  const size_t n = handles.size();
  std::set<uint32_t> hosts;
  for (const auto& h : handles) hosts.insert(h.host);
  const bool graph = hosts.size() == n && std::all_of(handles.begin(), handles.end(), [](const CollnetHandle& h) {
                       return h.hasNeighbours;
                     });
  const bool rails = std::all_of(handles.begin(), handles.end(), [](const CollnetHandle& h) {
    return h.hasRails && !h.rails.empty();
  });
  if (n == 0 || (!graph && !rails)) return false;
  auto lists = [](const CollnetHandle& h, uint32_t host) {
    return std::binary_search(h.neighbours.begin(), h.neighbours.end(), host);
  };
  // Whether a rail of a and one of b lie in one network under the shorter prefix;
  // `only` also asks that no third rank has a rail in that network (a point-to-point
  // cable's subnet, not a switch's or a wide prefix's).
  auto shareSubnet = [&](size_t a, size_t b, bool only) {
    for (const HandleRail& ra : handles[a].rails) {
      for (const HandleRail& rb : handles[b].rails) {
        const uint32_t mask = PrefixMask(std::min(ra.prefix, rb.prefix));
        if (((ra.ipv4 ^ rb.ipv4) & mask) != 0) continue;
        if (!only) return true;
        bool third = false;
        for (size_t c = 0; c < n && !third; ++c) {
          if (c == a || c == b) continue;
          for (const HandleRail& rc : handles[c].rails) third = third || ((rc.ipv4 ^ ra.ipv4) & mask) == 0;
        }
        if (!third) return true;
      }
    }
    return false;
  };
  auto build = [&](bool byGraph, bool* fromSubnets) {
    std::vector<std::vector<bool>> m(n, std::vector<bool>(n, false));
    std::vector<size_t> degree(n, 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        const bool cabled = byGraph ? lists(handles[a], handles[b].host) && lists(handles[b], handles[a].host)
                                    : shareSubnet(a, b, false);
        m[a][b] = m[b][a] = cabled;
        degree[a] += cabled;
        degree[b] += cabled;
      }
    }
    if (!byGraph || !rails) return m;
    // A point-to-point cable uses one rail at each end: a cable's subnet fills in only
    // where both ends have a rail the graph does not account for yet.
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        if (m[a][b] || degree[a] >= handles[a].rails.size() || degree[b] >= handles[b].rails.size()) continue;
        if (!shareSubnet(a, b, true)) continue;
        m[a][b] = m[b][a] = true;
        ++degree[a];
        ++degree[b];
        *fromSubnets = true;
      }
    }
    return m;
  };
  bool byGraph = graph, fromSubnets = false;
  std::vector<std::vector<bool>> m = build(byGraph, &fromSubnets);
  if (byGraph && rails && !Connected(m)) {
    // The agents' graphs disagree (one end of a cable has not heard the other yet when
    // its rank filled its handle: slow hosts start a second apart) beyond what the
    // cables' own subnets fill in: the rails' subnets, which every rank read from its
    // own interfaces, answer instead when they connect every rank.
    bool unused = false;
    std::vector<std::vector<bool>> r = build(false, &unused);
    if (Connected(r)) {
      byGraph = false;
      m = std::move(r);
    }
  }
  *adj = std::move(m);
  if (source) {
    *source = !byGraph ? ShapeSource::kRailSubnets
                       : (fromSubnets ? ShapeSource::kCablingGraphAndSubnets : ShapeSource::kCablingGraph);
  }
  return true;
}

Status CollnetTopology(const std::string& setting, const fabric::Domain& domain,
                       const std::vector<CollnetHandle>& handles, collectives::Topology* out, ShapeSource* source) {
  collectives::Topology t;
  if (!setting.empty() && setting != "auto") {
    if (!collectives::ParseShape(setting, &t.shape)) {
      return InvalidArgument("RAILYARD_COLLNET_SHAPE '" + setting + "' is not auto, ring, chain or mesh");
    }
    if (source) *source = ShapeSource::kSetting;
    *out = t;
    return Status::Ok();
  }
  std::vector<std::vector<bool>> adj;
  ShapeSource src = ShapeSource::kRankOrder;
  if (!AdjacencyFromHandles(handles, &adj, &src)) {
    const uint32_t mask = std::strcmp(domain.TransportName(), "tcp") == 0 ? RailNetmask(domain.rails()) : 0;
    if (mask == 0) {
      if (source) *source = ShapeSource::kRankOrder;
      *out = t;  // nothing to read the cabling from: a ring in rank order
      return Status::Ok();
    }
    std::vector<fabric::tcp::WorkerAddress> wa(handles.size());
    for (size_t r = 0; r < handles.size(); ++r) {
      Status s = fabric::tcp::WorkerAddress::Unpack(handles[r].address, &wa[r]);
      if (!s.ok()) return InvalidArgument("collnet: rank " + std::to_string(r) + "'s address: " + s.message());
    }
    const size_t n = handles.size();
    adj.assign(n, std::vector<bool>(n, false));
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        bool cabled = false;
        for (const auto& ra : wa[a].rails) {
          for (const auto& rb : wa[b].rails) cabled = cabled || ((ra.ipv4 ^ rb.ipv4) & mask) == 0;
        }
        adj[a][b] = adj[b][a] = cabled;
      }
    }
    src = ShapeSource::kTcpAddresses;
  }
  if (Status shaped = collectives::ShapeFromAdjacency(adj, out); !shaped.ok()) {
    // In fabric mode every host reaches every other through the relays, so ranks whose
    // own cables make no shape (the hosts between them run no rank of this job) still
    // make a ring: in rank order, the uncabled hops relayed.
    // Fabric mode here (the cable set's Domain: its Workers reach relayed hosts) and on
    // every rank (each handle carries its agent's neighbours). A handle's neighbours
    // alone are not fabric mode: a host:NAME tier client runs an agent without it.
    const bool relayed = dynamic_cast<const runtime::CableSetDomain*>(&domain) != nullptr &&
                         std::all_of(handles.begin(), handles.end(), [](const CollnetHandle& h) { return h.hasNeighbours; });
    if (!relayed) {
      return Status(shaped.code(), shaped.message() + " (outside fabric mode nothing relays between hosts with no cable; "
                                                      "RAILYARD_COLLNET_SHAPE forces a shape)");
    }
    RY_WARN("CollNet: %s: a ring in rank order instead, its hops between hosts with no cable carried by the relays "
            "(RAILYARD_COLLNET_SHAPE forces a shape; a cabling graph not yet complete when the ranks connected does "
            "this too)", shaped.message().c_str());
    *out = collectives::Topology{};
    if (source) *source = ShapeSource::kRelayedRankOrder;
    return Status::Ok();
  }
  if (source) *source = src;
  return Status::Ok();
}

}  // namespace railyard::plugin::collnet
