#include "topology/cluster_graph.h"

#include <algorithm>
#include <deque>
#include <tuple>

namespace railyard::topology {

const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kSingle: return "single";
    case Shape::kMesh: return "mesh";
    case Shape::kRing: return "ring";
    case Shape::kChain: return "chain";
    case Shape::kPartial: return "partial";
    case Shape::kDisconnected: return "disconnected";
  }
  return "?";
}

void ClusterGraph::AddHost(uint64_t id, const std::string& name) { hosts_[id] = name; }

void ClusterGraph::AddLink(const RailEnd& x, const RailEnd& y) {
  if (x.host == y.host) return;
  hosts_.try_emplace(x.host, "");
  hosts_.try_emplace(y.host, "");
  links_.insert(x.host < y.host ? RailLink{x, y} : RailLink{y, x});
}

void ClusterGraph::RemoveRail(uint64_t host, const std::string& ifname) {
  std::erase_if(links_, [&](const RailLink& l) {
    return (l.a.host == host && l.a.ifname == ifname) || (l.b.host == host && l.b.ifname == ifname);
  });
}

std::vector<uint64_t> ClusterGraph::Hosts() const {
  std::vector<uint64_t> v;
  for (const auto& [id, name] : hosts_) v.push_back(id);
  return v;
}

std::string ClusterGraph::HostName(uint64_t id) const {
  auto it = hosts_.find(id);
  return it == hosts_.end() ? "" : it->second;
}

std::vector<uint64_t> ClusterGraph::Neighbours(uint64_t h) const {
  std::set<uint64_t> n;
  for (const RailLink& l : links_) {
    if (l.a.host == h) n.insert(l.b.host);
    if (l.b.host == h) n.insert(l.a.host);
  }
  return {n.begin(), n.end()};
}

std::vector<RailLink> ClusterGraph::LinksBetween(uint64_t x, uint64_t y) const {
  std::vector<RailLink> v;
  const uint64_t lo = std::min(x, y), hi = std::max(x, y);
  for (const RailLink& l : links_) {
    if (l.a.host == lo && l.b.host == hi) v.push_back(l);
  }
  return v;
}

std::map<uint64_t, int> ClusterGraph::Distances(uint64_t src) const {
  std::map<uint64_t, int> dist;
  if (hosts_.count(src) == 0) return dist;
  std::deque<uint64_t> q{src};
  dist[src] = 0;
  while (!q.empty()) {
    const uint64_t h = q.front();
    q.pop_front();
    for (uint64_t n : Neighbours(h)) {
      if (dist.count(n) == 0) {
        dist[n] = dist[h] + 1;
        q.push_back(n);
      }
    }
  }
  return dist;
}

size_t ClusterGraph::UncabledHosts() const {
  return static_cast<size_t>(
      std::count_if(hosts_.begin(), hosts_.end(), [&](const auto& h) { return Neighbours(h.first).empty(); }));
}

Shape ClusterGraph::DeriveShape() const {
  // A new-user trial: one made-up record with no links (a host nobody is cabled to)
  // turned every host's shape to "disconnected" for a dead interval.
  std::vector<uint64_t> cabled;
  for (const auto& [id, name] : hosts_) {
    if (!Neighbours(id).empty()) cabled.push_back(id);
  }
  const size_t n = cabled.size();
  if (n <= 1) return Shape::kSingle;
  if (Distances(cabled.front()).size() != n) return Shape::kDisconnected;
  size_t ones = 0, twos = 0;
  bool complete = true;
  for (uint64_t id : cabled) {
    const size_t d = Neighbours(id).size();
    complete = complete && d == n - 1;
    ones += d == 1;
    twos += d == 2;
  }
  if (complete) return Shape::kMesh;
  if (twos == n) return Shape::kRing;
  if (ones == 2 && twos == n - 2) return Shape::kChain;
  return Shape::kPartial;
}

Route ClusterGraph::RouteTo(uint64_t from, uint64_t to) const {
  Route r;
  r.peer = to;
  const auto dist = Distances(to);  // distances to the destination
  auto it = dist.find(from);
  if (from == to || it == dist.end()) return r;
  r.hops = it->second;
  if (r.hops == 1) {
    r.direct = LinksBetween(from, to);
    return r;
  }
  for (uint64_t n : Neighbours(from)) {
    auto d = dist.find(n);
    if (d != dist.end() && d->second == r.hops - 1) r.nextHops.push_back(n);
  }
  return r;
}

std::vector<Route> ClusterGraph::Routes(uint64_t from) const {
  std::vector<Route> v;
  for (const auto& [id, name] : hosts_) {
    if (id != from) v.push_back(RouteTo(from, id));
  }
  return v;
}

}  // namespace railyard::topology
