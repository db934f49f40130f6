// How a CollNet comm learns its cabling shape (ring, chain, mesh) and cable order:
// RAILYARD_COLLNET_SHAPE forces one (rank order); "auto" reads it from the ranks'
// connect handles (plugin/collnet_handle.h), which every rank holds, so every rank
// reaches the same answer without a further exchange.
#pragma once

#include <string>
#include <vector>

#include "env/status.h"
#include "plugin/collnet_handle.h"
#include "proxy/collectives/shape.h"
#include "proxy/fabric/domain.h"

namespace railyard::plugin::collnet {

/// Where an auto shape came from, best first (what CollnetTopology tried).
enum class ShapeSource {
  kSetting,       ///< RAILYARD_COLLNET_SHAPE named it
  kCablingGraph,  ///< every handle carries its cabling agent's neighbours (fabric mode)
  kCablingGraphAndSubnets,  ///< the graph, with cables it missed filled in from two ranks' own subnet
  kRailSubnets,   ///< every handle carries its rails' IPv4 networks (any transport)
  kTcpAddresses,  ///< TCP Worker addresses' rails under this host's rail netmask
  kRankOrder,     ///< nothing to read the cabling from: a ring in rank order
  /// Fabric mode on every rank, and the job's ranks' own cables form no ring, chain or
  /// mesh (ranks on hosts with no cable between them: the hosts between are not in the
  /// job): a ring in rank order, its uncabled hops carried by the fabric's relays.
  kRelayedRankOrder,
};
/// "RAILYARD_COLLNET_SHAPE", "cabling graph", "cabling graph and rail subnets", "rail
/// subnets", "tcp addresses", "rank order", "rank order over relays (the ranks' own
/// cables form no ring, chain or mesh)".
const char* ShapeSourceName(ShapeSource s);

/// Fills this rank's locator in `*h` (host, neighbours, rails; not the address):
/// host = HostDigest(topology::LocalHostId()); neighbours from this process's cabling
/// agent (topology::LocalCablingGraph: fabric mode; waiting up to 3 s for an agent that
/// has just started to settle) when its graph gives this host at least one neighbour;
/// rails = every rail of `domain` whose address is IPv4, with the prefix length of the
/// local interface holding it (none at all when one rail has no IPv4 address or no
/// interface holds it, e.g. an InfiniBand port).
void FillLocator(const fabric::Domain& domain, CollnetHandle* h);

/// Pure: who is cabled to whom according to the handles alone. Cabling graph: ranks a
/// and b are cabled when each lists the other's host among its neighbours (needs every
/// handle with neighbours and every host digest distinct). Rail subnets: when a rail of
/// a and one of b lie in one network under the shorter of their two prefixes (needs
/// every handle with rails). When both are there, the graph is filled in where it
/// lacks a cable between a and b, a rail of each lies in a network no third rank has a
/// rail in (a cable's own subnet: the agents had not heard each other across it yet
/// when their ranks filled their handles), and both have fewer graph cables than rails
/// (kCablingGraphAndSubnets). When the graph's
/// mutual listings, so filled in, still leave the ranks disconnected and every handle
/// has rails, the rails alone answer. False (adj untouched) when the handles tell
/// neither; `*source` says which rule answered.
bool AdjacencyFromHandles(const std::vector<CollnetHandle>& handles, std::vector<std::vector<bool>>* adj,
                          ShapeSource* source);

/// `setting`: "auto", "ring", "chain" or "mesh" (env::Config::collnetShape; empty =
/// auto). auto: AdjacencyFromHandles, else over the TCP transport the TCP Worker
/// addresses' rails under the netmask of this host's first rail interface (one /24 per
/// cable), then collectives::ShapeFromAdjacency; else a ring in rank order. Cabling
/// that is no ring, chain or mesh is a ring in rank order over relays, with a WARN, when
/// `domain` is fabric mode's cable set and every handle carries its agent's neighbours
/// (ShapeSource::kRelayedRankOrder; new-user trial: an allreduce of two
/// ranks two hosts apart on a ring failed with "rank 0 reaches no other rank"), else
/// InvalidArgument (connect then fails and NCCL falls back to its own algorithms), as
/// is a malformed address. `*source` (may be null) says where the answer came from.
Status CollnetTopology(const std::string& setting, const fabric::Domain& domain,
                       const std::vector<CollnetHandle>& handles, collectives::Topology* out,
                       ShapeSource* source = nullptr);

}  // namespace railyard::plugin::collnet
