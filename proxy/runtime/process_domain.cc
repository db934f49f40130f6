#include "proxy/runtime/process_domain.h"

#include <sys/socket.h>

#include <vector>

#include "env/log.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "topology/loopback_rail.h"
#include "topology/netdev.h"

namespace railyard::runtime {
namespace {

Status TcpRails(const env::Config& config, const ProcessDomainOptions& o, std::vector<fabric::RailInfo>* rails) {
  if (o.ifname.empty() && o.loopbackWhenUnset) {
    rails->push_back({"lo", "127.0.0.1", static_cast<uint32_t>(config.defaultSpeedMbps)});
    return Status::Ok();
  }
  std::vector<topology::NetDevice> devs;
  Status s = topology::SelectSocketDevices(o.ifname, &devs);
  if (!s.ok() && !o.ifname.empty()) return s;
  *rails = TcpRailsOf(devs, o.maxRails, static_cast<uint32_t>(config.defaultSpeedMbps));
  if (rails->empty() && !o.ifname.empty()) {
    return InvalidUsage("RAILYARD_SOCKET_IFNAME='" + o.ifname + "' names no interface with an IPv4 address");
  }
  if (rails->empty()) rails->push_back({"lo", "127.0.0.1", static_cast<uint32_t>(config.defaultSpeedMbps)});
  return Status::Ok();
}

}  // namespace

std::vector<fabric::RailInfo> TcpRailsOf(const std::vector<topology::NetDevice>& devs, size_t maxRails,
                                         uint32_t defaultSpeedMbps) {
  bool other = false;
  for (const topology::NetDevice& d : devs) {
    other = other || (d.family() == AF_INET && !topology::IsLoopbackInterface(d.name, d.loopback));
  }
  std::vector<fabric::RailInfo> rails;
  for (const topology::NetDevice& d : devs) {
    if (d.family() != AF_INET || rails.size() == maxRails) continue;
    if (other && topology::IsLoopbackInterface(d.name, d.loopback)) continue;
    rails.push_back({d.name, d.addrString, static_cast<uint32_t>(d.SpeedOr(static_cast<int>(defaultSpeedMbps)))});
  }
  return rails;
}

Status CreateProcessDomain(const env::Config& config, const ProcessDomainOptions& options,
                           std::unique_ptr<fabric::Domain>* out) {
  if (options.maxRails < 1 || options.maxRails > fabric::RemoteKey::kMaxRails) {
    return InvalidArgument("maxRails " + std::to_string(options.maxRails) + " is outside 1.." +
                           std::to_string(fabric::RemoteKey::kMaxRails));
  }
  if (config.transport != "tcp") {
    std::unique_ptr<fabric::Domain> verbs;
    Status s = fabric::verbs::CreateVerbsDomain(fabric::verbs::VerbsOptions::FromConfig(config), &verbs);
    if (s.ok()) {
      RY_INFO(log::kNet | log::kInit, "%s: fabric verbs over %zu rail(s), first %s", options.who.c_str(),
              verbs->rails().size(), verbs->rails().empty() ? "-" : verbs->rails()[0].device.c_str());
      *out = std::move(verbs);
      return Status::Ok();
    }
    if (config.transport == "verbs") return Status(s.code(), "RAILYARD_TRANSPORT=verbs: " + s.message());
    RY_INFO(log::kNet | log::kInit, "%s: fabric over TCP (no verbs: %s)", options.who.c_str(), s.message().c_str());
  }
  std::vector<fabric::RailInfo> rails;
  RY_RETURN_IF_ERROR(TcpRails(config, options, &rails));
  std::unique_ptr<fabric::Domain> tcp;
  RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(fabric::tcp::TcpOptions::FromConfig(config, rails), &tcp));
  RY_INFO(log::kNet | log::kInit, "%s: fabric tcp over %zu rail(s), first %s (%s)", options.who.c_str(),
          rails.size(), rails[0].device.c_str(), rails[0].address.c_str());
  *out = std::move(tcp);
  return Status::Ok();
}

}  // namespace railyard::runtime
