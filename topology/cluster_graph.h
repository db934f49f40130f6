// The cluster as a graph: hosts, and the rail-links (cables × rails) between them,
// as learned from the cabling. Derives the shape and every host's route table.
// Pure data: no I/O, so tests can build any wiring.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace railyard::topology {

/// One end of a rail-link: a rail (one NIC port / PCIe function) of one host.
struct RailEnd {
  uint64_t host = 0;       ///< host id (random 64-bit, stable for the life of the agent)
  std::string ifname;      ///< netdev name on that host, e.g. "enp1s0f0np0"
  std::string address;     ///< the rail's IP address (numeric text)
  int speedMbps = 0;       ///< link speed, Mbps (0 = unknown)

  bool operator<(const RailEnd& o) const {
    return std::tie(host, ifname, address) < std::tie(o.host, o.ifname, o.address);
  }
  bool operator==(const RailEnd& o) const {
    return host == o.host && ifname == o.ifname && address == o.address;
  }
};

/// One rail of one cable: two rail ends that reached each other.
struct RailLink {
  RailEnd a;  ///< the end on the lower host id (normalised by AddLink)
  RailEnd b;
  bool operator<(const RailLink& o) const { return std::tie(a, b) < std::tie(o.a, o.b); }
  bool operator==(const RailLink& o) const { return a == o.a && b == o.b; }
  /// The end on `host` (a or b); `host` must be an end of the link.
  const RailEnd& End(uint64_t host) const { return a.host == host ? a : b; }
  /// The end opposite `host`.
  const RailEnd& Other(uint64_t host) const { return a.host == host ? b : a; }
};

/// The cluster's shape, derived from host adjacency (rail multiplicity ignored), over
/// the hosts with at least one cable (ClusterGraph::DeriveShape): a host heard of but
/// cabled to nobody (a host starting, whose links both ends have not reported yet, a
/// host on a shared segment, or a record an untrusted peer made up) is unreachable in
/// the routes but leaves the shape alone.
enum class Shape {
  kSingle,        ///< no links: one host (and perhaps uncabled ones)
  kMesh,          ///< every host cabled to every other (2 and 3 hosts always are, if connected)
  kRing,          ///< ≥ 4 hosts, connected, every host has exactly 2 neighbours
  kChain,         ///< ≥ 3 hosts in a line: two ends with 1 neighbour, the rest with 2
  kPartial,       ///< connected, but none of the above
  kDisconnected,  ///< some cabled hosts cannot reach others at all
};

/// "mesh", "ring", "chain", "partial", "single", "disconnected".
const char* ShapeName(Shape s);

/// How `from` reaches one peer.
struct Route {
  uint64_t peer = 0;
  int hops = 0;                     ///< 1 = cabled directly; 0 = unreachable
  std::vector<RailLink> direct;     ///< hops == 1: every rail-link of the cable(s) to peer
  std::vector<uint64_t> nextHops;   ///< hops > 1: neighbours that start a shortest path
                                    ///< (two on a ring when both directions tie), ascending
};

/// The whole cluster: hosts and rail-links.
class ClusterGraph {
 public:
  /// Adds (or renames) a host.
  void AddHost(uint64_t id, const std::string& name);
  /// Adds a rail-link (idempotent; the ends are normalised so a < b by host id).
  /// Both hosts are added if unknown. A link from a host to itself is ignored.
  void AddLink(const RailEnd& x, const RailEnd& y);
  /// Removes every link with an end on rail (host, ifname), e.g. when a cable is cut.
  void RemoveRail(uint64_t host, const std::string& ifname);

  /// Host ids, ascending.
  std::vector<uint64_t> Hosts() const;
  /// Host name ("" if unknown).
  std::string HostName(uint64_t id) const;
  /// Hosts cabled to `h`, ascending.
  std::vector<uint64_t> Neighbours(uint64_t h) const;
  /// Every rail-link between hosts x and y (any order), sorted.
  std::vector<RailLink> LinksBetween(uint64_t x, uint64_t y) const;
  /// Every rail-link, sorted.
  const std::set<RailLink>& Links() const { return links_; }

  /// The shape of the cabled hosts (see Shape).
  Shape DeriveShape() const;
  /// Hosts with no cable to any host (see Shape), e.g. 1 while a neighbour starts up.
  size_t UncabledHosts() const;
  /// Route from `from` to every other host, by ascending peer id. Unreachable peers
  /// appear with hops = 0.
  std::vector<Route> Routes(uint64_t from) const;
  /// Route from `from` to `to` (hops = 0 if unreachable or unknown).
  Route RouteTo(uint64_t from, uint64_t to) const;

 private:
  /// Hop distance from `src` to every reachable host (BFS).
  std::map<uint64_t, int> Distances(uint64_t src) const;

  std::map<uint64_t, std::string> hosts_;
  std::set<RailLink> links_;
};

}  // namespace railyard::topology
