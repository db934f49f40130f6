// Routes of relayed fabric Endpoints from the cabling graph (topology::ClusterGraph,
// as proxy/routing's Router keeps it): the source side's RouteFn (routed_worker.h)
// and the relay side's ResolveFn (forwarder.h), for the TCP transport over
// per-cable Domains.
//
// Conventions shared by every host (so both ends of a cable agree without talking):
//   - A cable is every rail-link between two hosts; its rails are in
//     ClusterGraph::LinksBetween order (sorted, so both ends see the same order), and
//     a per-cable Domain lists this host's ends in that order (rail i pairs rail i).
//   - A per-cable Worker address names the host that owns its rails ("owner") and,
//     through the links those rails are on, the host at their other end ("entry"):
//     the address is reachable straight from the entry host only.
//   - The Forwarder of host H listens, on its cable to N, on H's rails of that cable
//     at one fixed TCP port (RAILYARD_FABRIC_RELAY_PORT): ForwarderAddress(H, N). Only
//     the process holding H's relay seat binds it (the kernel keeps a second one
//     out), so no peer can make a source route through anything but H's relay.
//
// Route of a source S to an address owned by T with entry E: S == E (or T == S):
// straight there; else through the Forwarder of N, the first hop of a shortest path
// from S to E. A relay R does the same for the target of a route it is asked to open:
// R == E: straight on, on its port facing T; else on through N's Forwarder, N the
// first hop from R towards E. Shortest paths shrink at every hop, so a route never
// loops while the graph holds still.
//
// Everything is refused (InvalidUsage naming why) that is not a graph host over
// rails: an unpackable address, a rail address no link of the graph has, rails of
// different hosts or cables, this relay's own addresses, a host with no route.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/routed_worker.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "topology/cluster_graph.h"

namespace railyard::fabric::relay {

/// The cabling graph now (e.g. Router::Agent().Graph()); called once per route decision.
using GraphFn = std::function<topology::ClusterGraph()>;

/// Where a per-cable Worker address lies in the graph.
struct AddressCable {
  uint64_t owner = 0;  ///< host whose rails the address lists
  uint64_t entry = 0;  ///< host at the other end of those rails' links
};

/// Locates `address` (1..16 rails) in `graph`: every rail's IPv4 must be the owner's
/// end of a link between the same two hosts. InvalidUsage naming the first rail that
/// is not (unknown address, another host's, another cable's).
Status LocateAddress(const topology::ClusterGraph& graph, const tcp::WorkerAddress& address, AddressCable* out);

/// The packed Forwarder address of host `relay` on its cable to `toward`: the relay's
/// rails of that cable in LinksBetween order, each at `port` (host order); the worker
/// id is the relay's host id (the TCP transport does not check a target's id).
/// InvalidUsage when the two are not cabled.
Status ForwarderAddress(const topology::ClusterGraph& graph, uint64_t relay, uint64_t toward, uint16_t port,
                        std::vector<uint8_t>* out);

/// The neighbour of `from` that starts a shortest path to `to` (`to` itself when
/// cabled; else the lowest of the tied next hops). InvalidUsage when unreachable.
Status FirstHop(const topology::ClusterGraph& graph, uint64_t from, uint64_t to, uint64_t* out);

/// A source's plan for one Endpoint.
struct SourcePlan {
  uint64_t neighbour = 0;      ///< the host whose cable the Endpoint leaves by (self for own-host targets)
  std::vector<uint8_t> relay;  ///< empty: straight to the target; else the Forwarder to go through
};

/// Plans an Endpoint from host `self` to the per-cable Worker address `target`
/// (packed; peer data). Errors of Unpack and LocateAddress; InvalidUsage when no
/// route to the entry host exists.
Status PlanSource(const topology::ClusterGraph& graph, uint64_t self, std::span<const uint8_t> target,
                  uint16_t forwarderPort, SourcePlan* out);

/// The source side's RouteFn for the per-cable Worker facing `neighbour`: PlanSource
/// on the graph `graph` returns, and InvalidUsage when the plan leaves by another cable
/// (the caller chose the wrong Worker).
RouteFn MakeGraphRouteFn(GraphFn graph, uint64_t self, uint64_t neighbour, uint16_t forwarderPort);

/// The relay side's ResolveFn: `portNeighbours[p]` is the host Forwarder port p's
/// cable reaches. Refuses this host's own addresses and everything LocateAddress
/// refuses; InvalidUsage when the next hop has no port here.
ResolveFn MakeGraphResolveFn(GraphFn graph, uint64_t self, std::vector<uint64_t> portNeighbours,
                             uint16_t forwarderPort);

/// This host's rails of its cable to `neighbour`, in LinksBetween order, as fabric
/// RailInfo (ifname, IPv4 text, speed): what a per-cable Domain is made of.
std::vector<RailInfo> CableRails(const topology::ClusterGraph& graph, uint64_t self, uint64_t neighbour);

}  // namespace railyard::fabric::relay
