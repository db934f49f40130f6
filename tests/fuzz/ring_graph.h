// The cabling graph the route-decision fuzz target (cable_address_fuzz.cc) and its
// seeds (fuzz_seeds.cc) share: a ring of 4 hosts, ids 1..4 named h0..h3, two rails
// per cable as on a dual-port ConnectX ring. Cable c joins hosts c+1 and (c+1)%4+1
// on subnets 10.c.0.0/24 and 10.c.1.0/24; the lower host id's end is .1, the
// other's .2 (e.g. h1's ends of its cable to h2 are 10.1.0.1 and 10.1.1.1).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <string>

#include "topology/cluster_graph.h"

namespace railyard::fuzz {

/// The ring above; speeds 10,000 Mb/s.
inline topology::ClusterGraph RingOf4() {
  topology::ClusterGraph g;
  for (uint64_t h = 1; h <= 4; ++h) g.AddHost(h, "h" + std::to_string(h - 1));
  for (int c = 0; c < 4; ++c) {
    const uint64_t x = static_cast<uint64_t>(c) + 1, y = static_cast<uint64_t>((c + 1) % 4) + 1;
    for (int r = 0; r < 2; ++r) {
      const std::string name = "c" + std::to_string(c) + "r" + std::to_string(r);
      const std::string net = "10." + std::to_string(c) + "." + std::to_string(r) + ".";
      g.AddLink({x, name, net + "1", 10000}, {y, name, net + "2", 10000});
    }
  }
  return g;
}

/// IPv4 `text` in network order (0 when it does not parse).
inline uint32_t RingIp(const std::string& text) {
  in_addr a{};
  return inet_pton(AF_INET, text.c_str(), &a) == 1 ? a.s_addr : 0;
}

}  // namespace railyard::fuzz
