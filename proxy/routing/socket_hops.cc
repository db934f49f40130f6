#include "proxy/routing/socket_hops.h"

#include <algorithm>
#include <vector>

#include "proxy/routing/router.h"
#include "proxy/wire.h"

namespace railyard::proxy {
namespace {

const topology::RailLink& Weighted(const std::vector<topology::RailLink>& links, int k) {
  std::vector<int> speeds;
  for (const auto& l : links) speeds.push_back(std::min(l.a.speedMbps, l.b.speedMbps));
  return links[WeightedPick(speeds, k)];
}

}  // namespace

HopChoice ChooseHop(const topology::ClusterGraph& graph, uint64_t self, uint64_t destHost, int sockIndex, int hops) {
  HopChoice c;
  const topology::Route route = graph.RouteTo(self, destHost);
  const int k = sockIndex >> std::min(hops, 8);
  if (route.hops == 0) return c;
  if (route.hops == 1) {
    if (route.direct.empty()) return c;
    c.link = Weighted(route.direct, k);
    c.direct = true;
    c.next = destHost;
    c.reachable = true;
    return c;
  }
  const size_t nh = route.nextHops.size();
  if (nh == 0) return c;
  const uint64_t next = route.nextHops[static_cast<size_t>(k) % nh];
  const auto links = graph.LinksBetween(self, next);
  if (links.empty()) return c;
  c.link = Weighted(links, k / static_cast<int>(nh));
  c.next = next;
  c.reachable = true;
  return c;
}

int SpliceSockIndex(const topology::ClusterGraph& graph, uint64_t firstRelay, uint64_t lastRelay, uint64_t destHost,
                    const std::string& destAddress) {
  for (int s = 0; s < 65536; ++s) {
    uint64_t at = firstRelay;
    for (int hops = 1; hops <= kMaxRelayHops && at != destHost; ++hops) {
      const HopChoice c = ChooseHop(graph, at, destHost, s, hops);
      if (!c.reachable) return -1;  // the same for every index
      if (c.direct) {
        if (at == lastRelay && c.link.Other(at).address == destAddress) return s;
        break;
      }
      at = c.next;
    }
  }
  return -1;
}

std::vector<uint64_t> SplicePathAfter(const topology::ClusterGraph& graph, uint64_t firstRelay, uint64_t destHost,
                                      int sockIndex) {
  std::vector<uint64_t> relays;
  uint64_t at = firstRelay;
  for (int hops = 1; hops <= kMaxRelayHops && at != destHost; ++hops) {
    const HopChoice c = ChooseHop(graph, at, destHost, sockIndex, hops);
    if (!c.reachable) return {};
    if (c.direct) return relays;
    at = c.next;
    relays.push_back(at);
  }
  return {};
}

}  // namespace railyard::proxy
