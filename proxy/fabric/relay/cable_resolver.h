// A ResolveFn (forwarder.h) for TCP ports: an address is carried to, straight, only
// when every rail of it lies on the subnet of the same-index rail of one port (its
// cable), and is none of this host's own addresses. Everything else, loopback and
// hosts off the cables included, is refused: the relay forwards only between hosts
// on its cables, over rails. Multi-hop routes (a target behind a further relay)
// come from a resolver that asks the cabling graph (proxy/routing); not this one.
#pragma once

#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/relay/forwarder.h"

namespace railyard::fabric::relay {

/// `ports[p]`: the rails of Forwarder port p (RailInfo::address, IPv4); `prefixLen`:
/// the cables' subnet prefix (1..32, e.g. 24).
ResolveFn MakeTcpCableResolver(std::vector<std::vector<RailInfo>> ports, int prefixLen);

}  // namespace railyard::fabric::relay
