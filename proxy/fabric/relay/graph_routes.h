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
// R == E: straight on, on its port facing T; R == T (an address of the relay host
// itself, on its cable to E: a source holding an address taken before T's other
// cables came up routes through T when T is its first hop towards E): straight on, by
// the port facing E, within the host; else on through N's Forwarder, N the first hop
// from R towards E. Shortest paths shrink at every hop, so a route never
// loops while the graph holds still.
//
// Over verbs (RDMA ports on both ends of a cable) the same holds with verbs
// addresses: a per-cable verbs Worker's address names its bootstrap listener, which
// binds the first rail of the cable (LinksBetween order), so that address places it;
// the Forwarder's verbs port on its cable to N listens on H's first rail of that cable
// at RAILYARD_FABRIC_RELAY_VERBS_PORT. A route keeps its target's kind on every leg:
// a verbs target is reached through verbs Forwarder ports only, so no leg of an RDMA
// route is TCP (a relay whose cable has no RDMA ports has no verbs port there, and
// the route is refused naming it).
//
// Everything is refused (InvalidUsage naming why) that is not a graph host over
// rails: an unpackable address, a rail address no link of the graph has, rails of
// different hosts or cables, a host with no route, this relay's own Forwarder ports
// (either kind); and this host's own addresses as a route's source (NextHop::local).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/routed_worker.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"
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

/// Locates a verbs Worker `address` in `graph` by its bootstrap listener's IPv4,
/// which must be the owner's end of a link (the first rail of its cable, by the
/// convention above). InvalidUsage naming the address when no link has it.
Status LocateAddress(const topology::ClusterGraph& graph, const verbs::VerbsAddress& address, AddressCable* out);

/// The transport of a packed per-cable Worker address.
enum class AddressKind { kTcp, kVerbs };

/// Unpacks `address` (peer data) as a TCP WorkerAddress or else a verbs address (their
/// magics differ) and locates it. InvalidArgument naming both reasons when it is
/// neither; errors of LocateAddress.
Status LocatePacked(const topology::ClusterGraph& graph, std::span<const uint8_t> address, AddressKind* kind,
                    AddressCable* out);

/// The packed Forwarder address of host `relay` on its cable to `toward`, of `kind`:
///   - TCP: the relay's rails of that cable in LinksBetween order, each at `port`
///     (host order; RAILYARD_FABRIC_RELAY_PORT);
///   - verbs: the bootstrap listener on the relay's first rail of that cable at `port`
///     (RAILYARD_FABRIC_RELAY_VERBS_PORT), as many rails as the cable has (up to 16).
/// The worker id is the relay's host id (neither transport checks a target's id).
/// InvalidUsage when the two are not cabled.
Status ForwarderAddress(const topology::ClusterGraph& graph, uint64_t relay, uint64_t toward, uint16_t port,
                        std::vector<uint8_t>* out, AddressKind kind = AddressKind::kTcp);

/// The neighbour of `from` that starts a shortest path to `to` (`to` itself when
/// cabled; else the lowest of the tied next hops). InvalidUsage when unreachable.
Status FirstHop(const topology::ClusterGraph& graph, uint64_t from, uint64_t to, uint64_t* out);

/// The hosts a route through the Forwarder of `relay` passes after it, in order: each
/// relay's next hop toward the target's entry host (FirstHop, the relay side's rule
/// above) until the entry (whose Forwarder hands the route to the target over their
/// cable) or the target's own host. Empty when `relay` is the entry or the owner; cut
/// short where the graph has no route on (at most 16 hosts).
std::vector<uint64_t> ForwardPathAfter(const topology::ClusterGraph& graph, uint64_t relay,
                                       const AddressCable& target);

/// A relayed route's name in errors and peer names: "h1 (10.0.1.2:29519) -> h2", the
/// host whose Forwarder address `relay` (packed, TCP or verbs) is, that address's
/// first rail (TCP) or bootstrap listener (verbs), then every later relay
/// (ForwardPathAfter) toward `target` (packed; the path is left out when the graph
/// does not place it). "" when the graph does not place `relay` (peer data: a bad
/// address names nothing rather than failing).
std::string ForwardRouteLabel(const topology::ClusterGraph& graph, std::span<const uint8_t> relay,
                              std::span<const uint8_t> target);

/// A source's plan for one Endpoint.
struct SourcePlan {
  uint64_t neighbour = 0;      ///< the host whose cable the Endpoint leaves by (self for own-host targets)
  std::vector<uint8_t> relay;  ///< empty: straight to the target; else the Forwarder to go through
};

/// Plans an Endpoint from host `self` to the per-cable Worker address `target`
/// (packed, TCP or verbs; peer data). The relay, when one is needed, is the first
/// hop's Forwarder port of the target's kind: TCP at `forwarderPort`, verbs at
/// `verbsForwarderPort` (0: verbs targets are only reached straight; a relayed one
/// is InvalidUsage). Errors of LocatePacked; InvalidUsage when no route to the
/// entry host exists.
Status PlanSource(const topology::ClusterGraph& graph, uint64_t self, std::span<const uint8_t> target,
                  uint16_t forwarderPort, SourcePlan* out, uint16_t verbsForwarderPort = 0);

/// The source side's RouteFn for the per-cable Worker facing `neighbour`: PlanSource
/// on the graph `graph` returns, and InvalidUsage when the plan leaves by another cable
/// (the caller chose the wrong Worker).
RouteFn MakeGraphRouteFn(GraphFn graph, uint64_t self, uint64_t neighbour, uint16_t forwarderPort,
                         uint16_t verbsForwarderPort = 0);

/// The relay side's ResolveFn: `portNeighbours[p]` is the host Forwarder port p's
/// cable reaches, `portKinds[p]` its transport (empty: every port TCP). An address
/// leaves by the port facing the next hop whose kind is the address's; the next
/// relay's port address is of that kind too (TCP at `forwarderPort`, verbs at
/// `verbsForwarderPort`); this host's own addresses leave by the port facing their
/// cable's other end, straight, marked NextHop::local (a target only: Forwarder::Open
/// refuses such a source). Refuses this relay's own Forwarder ports (TCP or verbs)
/// and everything LocatePacked refuses;
/// InvalidUsage when the next hop has no port of that kind here
/// (e.g. a verbs address toward a cable without RDMA ports).
ResolveFn MakeGraphResolveFn(GraphFn graph, uint64_t self, std::vector<uint64_t> portNeighbours,
                             uint16_t forwarderPort, std::vector<AddressKind> portKinds = {},
                             uint16_t verbsForwarderPort = 0);

/// This host's rails of its cable to `neighbour`, in LinksBetween order, as fabric
/// RailInfo (ifname, IPv4 text, speed): what a per-cable Domain is made of.
std::vector<RailInfo> CableRails(const topology::ClusterGraph& graph, uint64_t self, uint64_t neighbour);

}  // namespace railyard::fabric::relay
