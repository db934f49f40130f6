#include "proxy/fabric/relay/cable_resolver.h"

#include <arpa/inet.h>

#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"

namespace railyard::fabric::relay {
namespace {

/// Host-order IPv4 of a dotted address; 0 when it is not one.
uint32_t Ipv4(const std::string& dotted) {
  in_addr a{};
  return inet_pton(AF_INET, dotted.c_str(), &a) == 1 ? ntohl(a.s_addr) : 0;
}

/// The rails of every port (host order) and the subnet mask: which port an
/// address's rails lie on.
struct CableNets {
  std::vector<std::vector<uint32_t>> nets;
  uint32_t mask = 0;

  CableNets(std::vector<std::vector<uint32_t>> n, int prefixLen) : nets(std::move(n)) {
    mask = prefixLen <= 0 ? 0 : prefixLen >= 32 ? 0xffffffffu : ~((1u << (32 - prefixLen)) - 1);
  }
  bool Own(uint32_t ip) const {
    for (const auto& port : nets) {
      for (uint32_t mine : port) {
        if (mine == ip) return true;
      }
    }
    return false;
  }
  /// The port whose rails `ips` (host order, one per rail) lie on, rail by rail;
  /// nets.size() when none.
  size_t PortOf(const std::vector<uint32_t>& ips) const {
    for (size_t p = 0; p < nets.size(); ++p) {
      if (ips.empty() || ips.size() != nets[p].size()) continue;
      bool onCable = true;
      for (size_t i = 0; i < ips.size() && onCable; ++i) {
        onCable = !Own(ips[i]) && (ips[i] & mask) == (nets[p][i] & mask) && (ips[i] >> 24) != 127;
      }
      if (onCable) return p;
    }
    return nets.size();
  }
};

}  // namespace

ResolveFn MakeTcpCableResolver(std::vector<std::vector<RailInfo>> ports, int prefixLen) {
  std::vector<std::vector<uint32_t>> nets;
  for (const auto& rails : ports) {
    std::vector<uint32_t> v;
    for (const RailInfo& r : rails) v.push_back(Ipv4(r.address));
    nets.push_back(std::move(v));
  }
  return [cables = CableNets(std::move(nets), prefixLen)](std::span<const uint8_t> address, NextHop* out) -> Status {
    tcp::WorkerAddress w;
    RY_RETURN_IF_ERROR(tcp::WorkerAddress::Unpack(address, &w));
    std::vector<uint32_t> ips;
    for (const auto& r : w.rails) ips.push_back(ntohl(r.ipv4));
    const size_t p = cables.PortOf(ips);
    if (p == cables.nets.size()) {
      return InvalidUsage("address " + tcp::RailAddressText(w.rails.empty() ? tcp::RailAddress{} : w.rails[0]) +
                          " is on no cable of this relay");
    }
    *out = NextHop{p, {}};
    return Status::Ok();
  };
}

ResolveFn MakeVerbsCableResolver(std::vector<std::string> ports, int prefixLen) {
  std::vector<std::vector<uint32_t>> nets;
  for (const std::string& a : ports) nets.push_back({Ipv4(a)});
  return [cables = CableNets(std::move(nets), prefixLen)](std::span<const uint8_t> address, NextHop* out) -> Status {
    verbs::VerbsAddress v;
    RY_RETURN_IF_ERROR(verbs::VerbsAddress::Unpack(address, &v));
    const size_t p = cables.PortOf({ntohl(v.ipv4)});
    if (p == cables.nets.size()) return InvalidUsage("verbs address " + v.Name() + " is on no cable of this relay");
    *out = NextHop{p, {}};
    return Status::Ok();
  };
}

}  // namespace railyard::fabric::relay
