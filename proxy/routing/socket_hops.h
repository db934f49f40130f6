// The hop rule of relayed sockets, as a pure function of the cabling graph: which
// rail-link socket `sockIndex` of a connection takes out of a host, straight to the
// listener's host or to the relay on the next hop. Router::PlanSocket (every relay,
// and a connector of the older comms) applies it one hop at a time; SpliceSockIndex
// runs it along the whole path, so a connector can pick the socket index that makes
// the last relay land on one given rail of the target (a fabric TCP Worker listens
// per rail and checks that each socket arrives on the rail its hello names).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/cluster_graph.h"

namespace railyard::proxy {

/// One hop of a relayed socket out of a host.
struct HopChoice {
  bool reachable = false;   ///< false: the graph has no route (yet); nothing else is set
  bool direct = false;      ///< the link reaches the listener's host itself
  uint64_t next = 0;        ///< the host at the link's other end (the listener's, or the next relay)
  topology::RailLink link;  ///< the rail-link taken
};

/// The hop socket `sockIndex` takes out of host `self` toward `destHost`, having
/// crossed `hops` relays already (0 at the connector): each hop consumes low bits of
/// the index (k = sockIndex >> min(hops, 8)); a cabled destination takes the link
/// WeightedPick(speeds, k) of the cable; otherwise the next hop is nextHops[k % n]
/// of the tied shortest paths and the link WeightedPick(speeds, k / n) of the cable
/// to it. `destHost` must differ from `self`.
HopChoice ChooseHop(const topology::ClusterGraph& graph, uint64_t self, uint64_t destHost, int sockIndex, int hops);

/// The smallest socket index in [0, 65536) whose relayed path, entering the relays at
/// host `firstRelay` (a neighbour of the connector, which dials it straight: the
/// connector's own choice consumes no bits), ends with a link to `destHost` on which
/// `destHost`'s end has IPv4 `destAddress` (dotted text), with the last relay being
/// `lastRelay`. -1 when no index does (the relays' tie-breaking never takes that
/// cable, or the graph has no route).
int SpliceSockIndex(const topology::ClusterGraph& graph, uint64_t firstRelay, uint64_t lastRelay, uint64_t destHost,
                    const std::string& destAddress);

/// The relays after `firstRelay` that socket `sockIndex` crosses on its way to
/// `destHost` (the path SpliceSockIndex walks), in order; empty when `firstRelay` is
/// cabled to `destHost` or the graph has no route. For errors that name a relayed route
/// whole ("via h1 (ADDR) -> h2"), so a fault at a later relay is not taken for the first.
std::vector<uint64_t> SplicePathAfter(const topology::ClusterGraph& graph, uint64_t firstRelay, uint64_t destHost,
                                      int sockIndex);

}  // namespace railyard::proxy
