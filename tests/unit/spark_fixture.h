// The Spark fixture (tests/fixtures/sysfs-spark) through topology::DiscoverRails,
// with addresses injected so the result does not depend on this machine. Shared by
// the verbs tests; header-only because every tests/unit/*_test.cc is its own binary.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "topology/discovery.h"

namespace railyard::testing {

/// One interface address as getifaddrs would report it (up and running).
inline topology::NetDevice FixtureAddress(const char* name, const char* a, int prefix) {
  topology::NetDevice d;
  d.name = name;
  d.addrString = a;
  d.prefixLen = prefix;
  d.up = d.running = true;
  if (std::string(a).find(':') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&d.addr);
    sa->sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, a, &sa->sin6_addr), 1);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&d.addr);
    sa->sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, a, &sa->sin_addr), 1);
  }
  return d;
}

/// The four RoCE rails of the Spark fixture (one with an IPv6-only address), hwloc
/// off; `includeDown` keeps ports that are down.
inline std::vector<topology::Rail> SparkRails(bool includeDown) {
  topology::DiscoveryOptions o;
  o.sysfsRoot = RAILYARD_FIXTURE_DIR "/sysfs-spark";
  o.disableHwloc = true;
  o.includeDown = includeDown;
  o.interfaces = std::vector<topology::NetDevice>{
      FixtureAddress("enp1s0f0np0", "10.0.0.1", 24), FixtureAddress("enp1s0f1np1", "10.0.1.1", 24),
      FixtureAddress("enP2p1s0f0np0", "fd00:2::1", 64), FixtureAddress("enP2p1s0f1np1", "10.0.3.1", 24)};
  std::vector<topology::Rail> rails;
  EXPECT_TRUE(topology::DiscoverRails(o, &rails, nullptr).ok());
  return rails;
}

}  // namespace railyard::testing
