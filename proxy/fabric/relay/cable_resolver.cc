#include "proxy/fabric/relay/cable_resolver.h"

#include <arpa/inet.h>

#include "proxy/fabric/tcp/tcp_frame.h"

namespace railyard::fabric::relay {

ResolveFn MakeTcpCableResolver(std::vector<std::vector<RailInfo>> ports, int prefixLen) {
  std::vector<std::vector<uint32_t>> nets;  // host order
  for (const auto& rails : ports) {
    std::vector<uint32_t> v;
    for (const RailInfo& r : rails) {
      in_addr a{};
      v.push_back(inet_pton(AF_INET, r.address.c_str(), &a) == 1 ? ntohl(a.s_addr) : 0);
    }
    nets.push_back(std::move(v));
  }
  const uint32_t mask = prefixLen <= 0 ? 0 : prefixLen >= 32 ? 0xffffffffu : ~((1u << (32 - prefixLen)) - 1);
  return [nets, mask](std::span<const uint8_t> address, NextHop* out) -> Status {
    tcp::WorkerAddress w;
    RY_RETURN_IF_ERROR(tcp::WorkerAddress::Unpack(address, &w));
    for (size_t p = 0; p < nets.size(); ++p) {
      if (w.rails.size() != nets[p].size()) continue;
      bool onCable = true;
      for (size_t i = 0; i < w.rails.size() && onCable; ++i) {
        const uint32_t ip = ntohl(w.rails[i].ipv4);
        bool own = false;
        for (const auto& port : nets) {
          for (uint32_t mine : port) own = own || mine == ip;
        }
        onCable = !own && (ip & mask) == (nets[p][i] & mask) && (ip >> 24) != 127;
      }
      if (onCable) {
        *out = NextHop{p, {}};
        return Status::Ok();
      }
    }
    return InvalidUsage("address " + tcp::RailAddressText(w.rails.empty() ? tcp::RailAddress{} : w.rails[0]) +
                        " is on no cable of this relay");
  };
}

}  // namespace railyard::fabric::relay
