// The Domain a one-sided user of this process (GIN/RMA windows, CollNet staging, the
// expert and snapshot tiers) runs on, chosen in one place: the verbs transport when
// RAILYARD_TRANSPORT asks for it (or is "auto" and a usable RDMA port exists), else the
// TCP transport over the IPv4 addresses of the selected interfaces.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/remote_key.h"
#include "topology/netdev.h"

namespace railyard::runtime {

/// How CreateProcessDomain picks the TCP rails (the verbs rails are RAILYARD_HCA's ports).
struct ProcessDomainOptions {
  /// Interfaces whose IPv4 addresses become TCP rails, in RAILYARD_SOCKET_IFNAME /
  /// NCCL_SOCKET_IFNAME grammar (env::Config::socketIfname or railIfname).
  std::string ifname;
  /// With `ifname` empty: true = one rail on 127.0.0.1 (a tier daemon that must not
  /// bind an uplink unasked); false = topology::SelectSocketDevices' automatic choice,
  /// as NCCL's own socket transport picks (127.0.0.1 if it finds no IPv4 address).
  bool loopbackWhenUnset = false;
  /// Most TCP rails taken (1..RemoteKey::kMaxRails), in interface order.
  size_t maxRails = fabric::RemoteKey::kMaxRails;
  /// Who asks, for the log line ("gin", "expert", ...).
  std::string who = "railyard";
};

/// The TCP rails over the interfaces `devs` a filter matched (in their order): one per
/// IPv4 device, at most `maxRails`, speed from the device or `defaultSpeedMbps`.
/// Loopback devices only when no other IPv4 device matched (the filter names lo): an
/// exclusion such as ^mgmt0 matches lo too, but its user means the rail ports.
/// Empty when no IPv4 device matched.
std::vector<fabric::RailInfo> TcpRailsOf(const std::vector<topology::NetDevice>& devs, size_t maxRails,
                                         uint32_t defaultSpeedMbps);

/// Creates the Domain described in the file comment.
/// - RAILYARD_TRANSPORT=tcp: TCP. =verbs: verbs, or the verbs Domain's error (InvalidUsage
///   naming the ports left out when the host has none) prefixed with the variable.
///   =auto: verbs when a verbs Domain can be created, else TCP (an INFO line says why).
/// - TCP: InvalidUsage when `ifname` is set and names no interface with an IPv4 address;
///   InvalidArgument for maxRails out of range; errors of CreateTcpDomain.
/// On error `*out` is untouched.
Status CreateProcessDomain(const env::Config& config, const ProcessDomainOptions& options,
                           std::unique_ptr<fabric::Domain>* out);

}  // namespace railyard::runtime
