// How a CollNet comm learns its cabling shape (ring, chain, mesh) and cable order:
// RAILYARD_COLLNET_SHAPE forces one (rank order); "auto" reads it from the ranks'
// Worker addresses in the connect handles, which every rank holds, so every rank
// reaches the same answer without a further exchange.
#pragma once

#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/collectives/shape.h"
#include "proxy/fabric/domain.h"

namespace railyard::plugin::collnet {

/// `setting`: "auto", "ring", "chain" or "mesh" (env::Config::collnetShape; empty =
/// auto). auto over the TCP transport: ranks a and b are cabled when a rail address
/// of a and one of b lie in one subnet, the prefix being the netmask of this host's
/// own first rail interface (the same on every host of a switchless cluster: one /24
/// per cable); then collectives::ShapeFromAdjacency. auto over other transports (their
/// addresses carry no IPv4 rails) or when no rail interface has a netmask: a ring in
/// rank order. InvalidArgument for a malformed address or cabling that is no ring,
/// chain or mesh (connect then fails and NCCL falls back to its own algorithms).
Status CollnetTopology(const std::string& setting, const fabric::Domain& domain,
                       const std::vector<std::vector<uint8_t>>& addresses, collectives::Topology* out);

}  // namespace railyard::plugin::collnet
