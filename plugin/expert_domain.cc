#include "plugin/expert_domain.h"

#include <sys/socket.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "topology/netdev.h"

namespace railyard::plugin {

Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out) {
  std::vector<fabric::RailInfo> rails;
  if (!config.railIfname.empty()) {
    std::vector<topology::NetDevice> devs;
    RY_RETURN_IF_ERROR(topology::SelectSocketDevices(config.railIfname, &devs));
    for (const topology::NetDevice& d : devs) {
      if (d.family() != AF_INET || rails.size() >= fabric::RemoteKey::kMaxRails) continue;
      rails.push_back({d.name, d.addrString, static_cast<uint32_t>(d.SpeedOr(config.defaultSpeedMbps))});
    }
    if (rails.empty()) {
      return InvalidUsage("RAILYARD_SOCKET_IFNAME='" + config.railIfname + "' names no interface with an IPv4 address");
    }
  } else {
    rails.push_back({"lo", "127.0.0.1", 10000});
  }
  return fabric::tcp::CreateTcpDomain(fabric::tcp::TcpOptions::FromConfig(config, std::move(rails)), out);
}

}  // namespace railyard::plugin
