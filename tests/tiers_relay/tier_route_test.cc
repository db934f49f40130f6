// plugin/tier_route.h's pure parts: the host:NAME peer spec and the tunnel acceptor's
// address built from the cabling graph (rails in the acceptor's order, at the port).
#include "plugin/tier_route.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace {

using railyard::plugin::ParseTierHost;
using railyard::plugin::TunnelAddressOf;
using railyard::runtime::HostAddress;
using railyard::topology::ClusterGraph;

uint32_t Ip(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a.s_addr;
}

TEST(TierRoute, ParsesHostSpecs) {
  bool isHost = true;
  std::string name;
  ASSERT_TRUE(ParseTierHost("10.0.0.2:29431", &isHost, &name).ok());
  EXPECT_FALSE(isHost);
  ASSERT_TRUE(ParseTierHost("host:gpu-node-07", &isHost, &name).ok());
  EXPECT_TRUE(isHost);
  EXPECT_EQ(name, "gpu-node-07");
  EXPECT_FALSE(ParseTierHost("host:", &isHost, &name).ok());
  EXPECT_FALSE(ParseTierHost("host:a b", &isHost, &name).ok());
  EXPECT_FALSE(ParseTierHost("host:h2:29431", &isHost, &name).ok());
  EXPECT_FALSE(ParseTierHost("host:" + std::string(65, 'x'), &isHost, &name).ok());
}

/// A chain h0 - h1 - h2, two rails per cable.
ClusterGraph Chain() {
  ClusterGraph g;
  g.AddHost(10, "h0");
  g.AddHost(11, "h1");
  g.AddHost(12, "h2");
  g.AddLink({10, "p1r0", "10.1.0.1", 10000}, {11, "p0r0", "10.1.0.2", 10000});
  g.AddLink({10, "p1r1", "10.1.1.1", 10000}, {11, "p0r1", "10.1.1.2", 10000});
  g.AddLink({11, "p1r0", "10.2.0.1", 10000}, {12, "p0r0", "10.2.0.2", 10000});
  g.AddLink({11, "p1r1", "10.2.1.1", 10000}, {12, "p0r1", "10.2.1.2", 10000});
  return g;
}

TEST(TierRoute, AcceptorAddressIsThePeersRailsAtThePort) {
  std::vector<uint8_t> packed;
  ASSERT_TRUE(TunnelAddressOf(Chain(), 10, "h2", 29520, &packed).ok());
  HostAddress a;
  ASSERT_TRUE(HostAddress::Unpack(packed, &a).ok());
  ASSERT_EQ(a.rails.size(), 2u);  // h2's rails (both on its cable to h1), not h0's or h1's
  EXPECT_EQ(a.rails[0], (HostAddress::Rail{Ip("10.2.0.2"), 29520}));
  EXPECT_EQ(a.rails[1], (HostAddress::Rail{Ip("10.2.1.2"), 29520}));
}

TEST(TierRoute, RefusesUnknownAmbiguousAndSelf) {
  std::vector<uint8_t> packed;
  const railyard::Status unknown = TunnelAddressOf(Chain(), 10, "h9", 29520, &packed);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("hosts known: h0, h1, h2"), std::string::npos) << unknown.message();
  EXPECT_FALSE(TunnelAddressOf(Chain(), 10, "h0", 29520, &packed).ok());
  ClusterGraph twice = Chain();
  twice.AddHost(13, "h2");
  twice.AddLink({12, "p1r0", "10.3.0.1", 10000}, {13, "p0r0", "10.3.0.2", 10000});
  EXPECT_FALSE(TunnelAddressOf(twice, 10, "h2", 29520, &packed).ok());
}

// What a tier client's errors call a host:NAME peer: the spec the user gave and the
// route's first hop (storage/tunnel's local 127.0.0.1:PORT is never named).
TEST(TierRoute, PeerNameIsTheSpecAndTheRoutesFirstHop) {
  railyard::plugin::TierRoute relayed;
  relayed.how = "via relay h1";
  EXPECT_EQ(relayed.PeerName("host:h2"), "host:h2 (via relay h1)");
  railyard::plugin::TierRoute direct;
  direct.how = "direct to h2";
  EXPECT_EQ(direct.PeerName("host:h2"), "host:h2 (direct to h2)");
}

/// A ring h0 - h1 - h2 - h3 - h0, one rail per cable (host ids 10..13).
ClusterGraph Ring4() {
  ClusterGraph g;
  for (int h = 0; h < 4; ++h) g.AddHost(10 + h, "h" + std::to_string(h));
  for (int h = 0; h < 4; ++h) {
    const int n = (h + 1) % 4;
    const std::string net = "10." + std::to_string(h + 1) + ".0.";
    g.AddLink({static_cast<uint64_t>(10 + h), "p1", net + "1", 10000}, {static_cast<uint64_t>(10 + n), "p0", net + "2", 10000});
  }
  return g;
}

// The first hop a tier route names is the one its Endpoint takes. The opposite host of a
// ring is tied between two relays: through the Forwarders the lowest first hop (h1 from
// h0); spliced through the socket relays the lower host of a pair keeps the first of the
// tied cables and the higher takes the last, so h0 -> h2 and h2 -> h0 use different relays
// (a tier client named "via relay h3" while its tunnel went through h1).
TEST(TierRoute, FirstHopIsTheOneTheEndpointTakes) {
  const ClusterGraph g = Ring4();
  railyard::runtime::CableSetOptions o;
  std::vector<uint8_t> toH2, toH0, toH1;
  ASSERT_TRUE(TunnelAddressOf(g, 10, "h2", 29520, &toH2).ok());
  ASSERT_TRUE(TunnelAddressOf(g, 12, "h0", 29520, &toH0).ok());
  ASSERT_TRUE(TunnelAddressOf(g, 10, "h1", 29520, &toH1).ok());
  std::string how;
  o.self = 10;
  o.spliceTcpRelays = false;
  ASSERT_TRUE(railyard::runtime::FirstHopOf(g, o, toH2, &how).ok());
  const std::string forwarders = how;
  o.spliceTcpRelays = true;
  ASSERT_TRUE(railyard::runtime::FirstHopOf(g, o, toH2, &how).ok());
  const std::string splicedUp = how;
  o.self = 12;
  ASSERT_TRUE(railyard::runtime::FirstHopOf(g, o, toH0, &how).ok());
  const std::string splicedDown = how;
  for (const std::string& h : {forwarders, splicedUp, splicedDown}) {
    EXPECT_TRUE(h == "via relay h1" || h == "via relay h3") << h;
  }
  EXPECT_NE(splicedUp, splicedDown);  // a pair's two directions, two relays
  o.self = 10;
  ASSERT_TRUE(railyard::runtime::FirstHopOf(g, o, toH1, &how).ok());
  EXPECT_EQ(how, "direct to h1");
}

}  // namespace
