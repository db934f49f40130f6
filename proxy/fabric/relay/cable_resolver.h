// ResolveFns (forwarder.h) for a relay whose ports are cables: an address is carried
// to, straight, only when it lies on the subnet of one port (its cable) and is none
// of this host's own addresses. Everything else, loopback and hosts off the cables
// included, is refused: the relay forwards only between hosts on its cables, over
// rails. Multi-hop routes (a target behind a further relay) come from a resolver
// that asks the cabling graph (proxy/routing); not these.
#pragma once

#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/relay/forwarder.h"

namespace railyard::fabric::relay {

/// TCP ports. `ports[p]`: the rails of Forwarder port p (RailInfo::address, IPv4);
/// `prefixLen`: the cables' subnet prefix (1..32, e.g. 24). An address (a TCP
/// WorkerAddress) is on port p when it has as many rails as p and every rail lies on
/// the subnet of p's same-index rail.
ResolveFn MakeTcpCableResolver(std::vector<std::vector<RailInfo>> ports, int prefixLen);

/// Verbs ports. `ports[p]`: the IPv4 address (dotted) of Forwarder port p's verbs
/// Domain: its bootstrap listener, on the cable's subnet (VerbsOptions::
/// bootstrapAddress). An address (a VerbsAddress) is on port p when its bootstrap
/// listener lies on p's subnet (`prefixLen` bits). The QPs then run over the RDMA
/// ports of that Domain: no leg of a route through this relay is TCP.
ResolveFn MakeVerbsCableResolver(std::vector<std::string> ports, int prefixLen);

}  // namespace railyard::fabric::relay
