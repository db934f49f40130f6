// See collnet_shape.h.
#include "plugin/collnet_shape.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

#include "proxy/fabric/tcp/tcp_frame.h"

namespace railyard::plugin::collnet {
namespace {

/// Netmask (network byte order) of this host's interface holding one of `rails`'
/// addresses, the first found; 0 when none.
uint32_t RailNetmask(const std::vector<fabric::RailInfo>& rails) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  uint32_t mask = 0;
  for (const auto& r : rails) {
    in_addr want{};
    if (inet_pton(AF_INET, r.address.c_str(), &want) != 1) continue;
    for (ifaddrs* i = list; i && !mask; i = i->ifa_next) {
      if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
      if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != want.s_addr) continue;
      mask = reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    }
    if (mask) break;
  }
  freeifaddrs(list);
  return mask;
}

}  // namespace

Status CollnetTopology(const std::string& setting, const fabric::Domain& domain,
                       const std::vector<std::vector<uint8_t>>& addresses, collectives::Topology* out) {
  collectives::Topology t;
  if (!setting.empty() && setting != "auto") {
    if (!collectives::ParseShape(setting, &t.shape)) {
      return InvalidArgument("RAILYARD_COLLNET_SHAPE '" + setting + "' is not auto, ring, chain or mesh");
    }
    *out = t;
    return Status::Ok();
  }
  const uint32_t mask = std::strcmp(domain.TransportName(), "tcp") == 0 ? RailNetmask(domain.rails()) : 0;
  if (mask == 0) {
    *out = t;  // nothing to read the cabling from: a ring in rank order
    return Status::Ok();
  }
  std::vector<fabric::tcp::WorkerAddress> wa(addresses.size());
  for (size_t r = 0; r < addresses.size(); ++r) {
    Status s = fabric::tcp::WorkerAddress::Unpack(addresses[r], &wa[r]);
    if (!s.ok()) return InvalidArgument("collnet: rank " + std::to_string(r) + "'s address: " + s.message());
  }
  const size_t n = addresses.size();
  std::vector<std::vector<bool>> adj(n, std::vector<bool>(n, false));
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      bool cabled = false;
      for (const auto& ra : wa[a].rails) {
        for (const auto& rb : wa[b].rails) cabled = cabled || ((ra.ipv4 ^ rb.ipv4) & mask) == 0;
      }
      adj[a][b] = adj[b][a] = cabled;
    }
  }
  return collectives::ShapeFromAdjacency(adj, out);
}

}  // namespace railyard::plugin::collnet
