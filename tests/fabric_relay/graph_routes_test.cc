// The cabling graph's routes for relayed fabric Endpoints (graph_routes.h): a ring of
// 4 hosts, 2 rails per cable (as the ring4x2 testbed lane), and a chain of 4.
// Checks the source's plan (direct, one relay, two relays), the relay's next hop,
// the Forwarder addresses at the fixed port, and every refusal; for TCP and for
// verbs addresses (every leg of a verbs route through verbs ports).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>

#include "proxy/fabric/relay/graph_routes.h"

namespace railyard::fabric::relay {
namespace {

constexpr uint16_t kPort = 29519;

/// Host ids 1..4 named h0..h3; cable between hosts x<y on subnet 10.<cable>.<rail>.0/24,
/// x's end .1, y's end .2.
topology::ClusterGraph Graph(bool ring) {
  topology::ClusterGraph g;
  for (uint64_t h = 1; h <= 4; ++h) g.AddHost(h, "h" + std::to_string(h - 1));
  const int cables = ring ? 4 : 3;
  for (int c = 0; c < cables; ++c) {
    const uint64_t x = static_cast<uint64_t>(c) + 1, y = static_cast<uint64_t>((c + 1) % 4) + 1;
    for (int r = 0; r < 2; ++r) {
      const std::string net = "10." + std::to_string(c) + "." + std::to_string(r) + ".";
      g.AddLink({x, "c" + std::to_string(c) + "r" + std::to_string(r), net + "1", 10000},
                {y, "c" + std::to_string(c) + "r" + std::to_string(r), net + "2", 10000});
    }
  }
  return g;
}

uint32_t Ip(const std::string& text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text.c_str(), &a), 1);
  return a.s_addr;
}

std::vector<uint8_t> Address(std::vector<std::string> ips, uint16_t port = 40000) {
  tcp::WorkerAddress w;
  w.workerId = 0x1234;
  for (const auto& ip : ips) w.rails.push_back({Ip(ip), port, 10000});
  return w.Pack();
}

/// A verbs Worker address whose bootstrap listener is at `ip`.
std::vector<uint8_t> VerbsAt(const std::string& ip, uint16_t port = 40100, uint16_t rails = 2) {
  verbs::VerbsAddress v;
  v.workerId = 0x5678;
  v.ipv4 = Ip(ip);
  v.port = port;
  v.rails = rails;
  return v.Pack();
}

verbs::VerbsAddress UnpackedVerbs(const std::vector<uint8_t>& b) {
  verbs::VerbsAddress v;
  EXPECT_TRUE(verbs::VerbsAddress::Unpack(b, &v).ok());
  return v;
}

tcp::WorkerAddress Unpacked(const std::vector<uint8_t>& b) {
  tcp::WorkerAddress w;
  EXPECT_TRUE(tcp::WorkerAddress::Unpack(b, &w).ok());
  return w;
}

TEST(GraphRoutes, LocateNamesOwnerAndEntry) {
  const auto g = Graph(true);
  AddressCable c;
  // h2's end of cable 1 (h1-h2).
  ASSERT_TRUE(LocateAddress(g, Unpacked(Address({"10.1.0.2", "10.1.1.2"})), &c).ok());
  EXPECT_EQ(c.owner, 3u);
  EXPECT_EQ(c.entry, 2u);
  // Rails of two different cables of h2.
  Status s = LocateAddress(g, Unpacked(Address({"10.1.0.2", "10.2.0.1"})), &c);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("rail 1 address 10.2.0.1"), std::string::npos) << s.message();
  // An address off the graph.
  s = LocateAddress(g, Unpacked(Address({"192.168.1.5"})), &c);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("on no cable"), std::string::npos) << s.message();
}

TEST(GraphRoutes, ForwarderAddressIsTheRelaysRailsAtTheFixedPort) {
  const auto g = Graph(true);
  std::vector<uint8_t> a;
  ASSERT_TRUE(ForwarderAddress(g, 2, 1, kPort, &a).ok());  // h1 on its cable to h0
  const auto w = Unpacked(a);
  ASSERT_EQ(w.rails.size(), 2u);
  EXPECT_EQ(w.rails[0].ipv4, Ip("10.0.0.2"));
  EXPECT_EQ(w.rails[1].ipv4, Ip("10.0.1.2"));
  EXPECT_EQ(w.rails[0].port, kPort);
  EXPECT_EQ(w.rails[1].port, kPort);
  EXPECT_EQ(w.workerId, 2u);
  EXPECT_EQ(ForwarderAddress(g, 1, 3, kPort, &a).code(), Code::kInvalidUsage);  // h0 and h2 are not cabled
}

TEST(GraphRoutes, SourcePlanDirectOneAndTwoRelays) {
  const auto ring = Graph(true);
  SourcePlan p;
  // h0 -> h1's end of cable 0: direct, on the cable to h1.
  ASSERT_TRUE(PlanSource(ring, 1, Address({"10.0.0.2", "10.0.1.2"}), kPort, &p).ok());
  EXPECT_EQ(p.neighbour, 2u);
  EXPECT_TRUE(p.relay.empty());
  // h0 -> h2's end of cable 1 (entry h1): through h1's Forwarder on cable 0.
  ASSERT_TRUE(PlanSource(ring, 1, Address({"10.1.0.2", "10.1.1.2"}), kPort, &p).ok());
  EXPECT_EQ(p.neighbour, 2u);
  auto relay = Unpacked(p.relay);
  EXPECT_EQ(relay.rails[0].ipv4, Ip("10.0.0.2"));
  EXPECT_EQ(relay.rails[0].port, kPort);
  // h0 -> h2's end of cable 2 (entry h3): through h3 (h0's cable 3 end is .2, h3's .1).
  ASSERT_TRUE(PlanSource(ring, 1, Address({"10.2.0.1", "10.2.1.1"}), kPort, &p).ok());
  EXPECT_EQ(p.neighbour, 4u);
  relay = Unpacked(p.relay);
  EXPECT_EQ(relay.rails[0].ipv4, Ip("10.3.0.1"));
  // Another process on h0 (its rails are h0's own): direct on that cable.
  ASSERT_TRUE(PlanSource(ring, 1, Address({"10.0.0.1", "10.0.1.1"}), kPort, &p).ok());
  EXPECT_EQ(p.neighbour, 2u);
  EXPECT_TRUE(p.relay.empty());
  // Chain h0-h1-h2-h3: h0 -> h3 (entry h2) goes first to h1.
  const auto chain = Graph(false);
  ASSERT_TRUE(PlanSource(chain, 1, Address({"10.2.0.2", "10.2.1.2"}), kPort, &p).ok());
  EXPECT_EQ(p.neighbour, 2u);
  relay = Unpacked(p.relay);
  EXPECT_EQ(relay.rails[0].ipv4, Ip("10.0.0.2"));
}

TEST(GraphRoutes, ForwardPathNamesEveryRelayAfterTheFirst) {
  // Chain h0-h1-h2-h3; host ids 1..4.
  const auto chain = Graph(false);
  // To h3's end of cable 2 (entry h2): from h1 on through h2, whose Forwarder hands it to h3.
  EXPECT_EQ(ForwardPathAfter(chain, 2, AddressCable{4, 3}), (std::vector<uint64_t>{3}));
  // The first relay is the entry: nothing after it.
  EXPECT_TRUE(ForwardPathAfter(chain, 3, AddressCable{4, 3}).empty());
  // An address of the relay host itself: nothing after it.
  EXPECT_TRUE(ForwardPathAfter(chain, 2, AddressCable{2, 1}).empty());
  // From two hops short of the entry: both later relays, in path order.
  EXPECT_EQ(ForwardPathAfter(chain, 1, AddressCable{4, 3}), (std::vector<uint64_t>{2, 3}));
  // A host the graph cannot reach: cut short, empty.
  auto cut = Graph(false);
  cut.AddHost(9, "h9");
  EXPECT_TRUE(ForwardPathAfter(cut, 2, AddressCable{9, 9}).empty());

  // The label: the first relay's host and Forwarder rail, then the later relays.
  std::vector<uint8_t> relay;
  ASSERT_TRUE(ForwarderAddress(chain, 2, 1, kPort, &relay).ok());  // h1 on its cable to h0
  const auto target = Address({"10.2.0.2", "10.2.1.2"});          // h3's end of cable 2
  EXPECT_EQ(ForwardRouteLabel(chain, relay, target), "h1 (10.0.0.2:" + std::to_string(kPort) + ") -> h2");
  // Over verbs: the Forwarder's bootstrap listener, the same path.
  std::vector<uint8_t> verbsRelay;
  ASSERT_TRUE(ForwarderAddress(chain, 2, 1, 29522, &verbsRelay, AddressKind::kVerbs).ok());
  EXPECT_EQ(ForwardRouteLabel(chain, verbsRelay, VerbsAt("10.2.0.2")), "h1 (10.0.0.2:29522) -> h2");
  // A target the graph does not place: the first relay alone; a relay it does not
  // place (peer data): nothing.
  EXPECT_EQ(ForwardRouteLabel(chain, relay, Address({"10.9.9.9"})), "h1 (10.0.0.2:" + std::to_string(kPort) + ")");
  EXPECT_EQ(ForwardRouteLabel(chain, Address({"10.9.9.9"}), target), "");
  EXPECT_EQ(ForwardRouteLabel(chain, std::vector<uint8_t>{1, 2, 3}, target), "");
}

TEST(GraphRoutes, RouteFnRefusesTheWrongCableAndForeignAddresses) {
  const auto ring = Graph(true);
  RouteFn viaH1 = MakeGraphRouteFn([&] { return ring; }, 1, 2, kPort);
  std::vector<uint8_t> relay;
  ASSERT_TRUE(viaH1(Address({"10.1.0.2", "10.1.1.2"}), &relay).ok());
  EXPECT_FALSE(relay.empty());
  Status s = viaH1(Address({"10.2.0.1", "10.2.1.1"}), &relay);  // leaves by the cable to h3
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("cable to h3"), std::string::npos) << s.message();
  EXPECT_FALSE(viaH1(Address({"127.0.0.1"}), &relay).ok());
  const std::vector<uint8_t> garbage(20, 0xab);
  EXPECT_EQ(viaH1(garbage, &relay).code(), Code::kInvalidArgument);
}

TEST(GraphRoutes, ResolveFnStraightOnThroughTheNextRelayAndRefusals) {
  const auto chain = Graph(false);
  // h1 (id 2): port 0 faces h0 (id 1), port 1 faces h2 (id 3).
  ResolveFn h1 = MakeGraphResolveFn([&] { return chain; }, 2, {1, 3}, kPort);
  NextHop hop;
  // h2's end of cable 1 (entry h1 = this relay): straight on, port 1.
  ASSERT_TRUE(h1(Address({"10.1.0.2", "10.1.1.2"}), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  EXPECT_TRUE(hop.via.empty());
  EXPECT_EQ(hop.name, "h2");  // the target's host: its errors name the leg by it
  // h0's end of cable 0 (a source arriving on port 0): a neighbour on port 0.
  ASSERT_TRUE(h1(Address({"10.0.0.1", "10.0.1.1"}), &hop).ok());
  EXPECT_EQ(hop.port, 0u);
  EXPECT_TRUE(hop.via.empty());
  // h3's end of cable 2 (entry h2): on through h2's Forwarder on cable 1.
  ASSERT_TRUE(h1(Address({"10.2.0.2", "10.2.1.2"}), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  EXPECT_EQ(hop.name, "h2");  // the next relay's host, not the target's
  const auto via = Unpacked(hop.via);
  EXPECT_EQ(via.rails[0].ipv4, Ip("10.1.0.2"));
  EXPECT_EQ(via.rails[1].ipv4, Ip("10.1.1.2"));
  EXPECT_EQ(via.rails[0].port, kPort);
  // This relay's own rails (its cable to h2): straight on by the port facing h2 (a
  // Worker of this host whose address lists only that cable).
  ASSERT_TRUE(h1(Address({"10.1.0.1", "10.1.1.1"}), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  EXPECT_TRUE(hop.via.empty());
  EXPECT_TRUE(hop.local);  // a target only: Forwarder::Open refuses it as a source
  // Refused: its own Forwarder port (a route into itself), an address off the graph, loopback.
  Status s = h1(Address({"10.1.0.1", "10.1.1.1"}, kPort), &hop);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("own Forwarder port"), std::string::npos) << s.message();
  EXPECT_EQ(h1(Address({"10.9.0.2"}), &hop).code(), Code::kInvalidUsage);
  EXPECT_EQ(h1(Address({"127.0.0.1"}), &hop).code(), Code::kInvalidUsage);
  // A relay without a port towards the next hop refuses (h1 with only its h0 port).
  ResolveFn h1OnePort = MakeGraphResolveFn([&] { return chain; }, 2, {1}, kPort);
  s = h1OnePort(Address({"10.1.0.2", "10.1.1.2"}), &hop);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("has no TCP port"), std::string::npos) << s.message();
  // A host the graph cannot reach: the graph without cable 1, h1 asked for h3.
  topology::ClusterGraph cut = chain;
  cut.RemoveRail(2, "c1r0");
  cut.RemoveRail(2, "c1r1");
  ResolveFn h1Cut = MakeGraphResolveFn([&] { return cut; }, 2, {1, 3}, kPort);
  s = h1Cut(Address({"10.2.0.2", "10.2.1.2"}), &hop);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("no route"), std::string::npos) << s.message();
}

constexpr uint16_t kVerbsPort = 29522;

TEST(GraphRoutes, VerbsAddressesArePlacedByTheirBootstrapRail) {
  const auto ring = Graph(true);
  AddressKind kind = AddressKind::kTcp;
  AddressCable c;
  // h2's end of cable 1 (h1-h2), bootstrap on its first rail.
  ASSERT_TRUE(LocatePacked(ring, VerbsAt("10.1.0.2"), &kind, &c).ok());
  EXPECT_EQ(kind, AddressKind::kVerbs);
  EXPECT_EQ(c.owner, 3u);
  EXPECT_EQ(c.entry, 2u);
  ASSERT_TRUE(LocatePacked(ring, Address({"10.1.0.2", "10.1.1.2"}), &kind, &c).ok());
  EXPECT_EQ(kind, AddressKind::kTcp);
  Status s = LocatePacked(ring, VerbsAt("192.168.7.7"), &kind, &c);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("192.168.7.7 is on no cable"), std::string::npos) << s.message();
  // Neither kind: both reasons named.
  s = LocatePacked(ring, std::vector<uint8_t>(24, 0x5a), &kind, &c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("as TCP"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("as verbs"), std::string::npos) << s.message();
}

TEST(GraphRoutes, VerbsForwarderAddressIsTheCablesFirstRailAtTheVerbsPort) {
  const auto ring = Graph(true);
  std::vector<uint8_t> a;
  ASSERT_TRUE(ForwarderAddress(ring, 2, 1, kVerbsPort, &a, AddressKind::kVerbs).ok());  // h1 facing h0
  const verbs::VerbsAddress v = UnpackedVerbs(a);
  EXPECT_EQ(v.ipv4, Ip("10.0.0.2"));
  EXPECT_EQ(v.port, kVerbsPort);
  EXPECT_EQ(v.rails, 2u);
  EXPECT_EQ(v.workerId, 2u);
  Status s = ForwarderAddress(ring, 2, 1, 0, &a, AddressKind::kVerbs);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("RAILYARD_FABRIC_RELAY_VERBS_PORT is 0"), std::string::npos) << s.message();
}

TEST(GraphRoutes, VerbsSourcePlanKeepsEveryLegVerbs) {
  const auto ring = Graph(true);
  SourcePlan p;
  // h0 -> h1's verbs Worker on cable 0: straight.
  ASSERT_TRUE(PlanSource(ring, 1, VerbsAt("10.0.0.2"), kPort, &p, kVerbsPort).ok());
  EXPECT_EQ(p.neighbour, 2u);
  EXPECT_TRUE(p.relay.empty());
  // h0 -> h2's verbs Worker on cable 1 (entry h1): through h1's verbs port on cable 0.
  ASSERT_TRUE(PlanSource(ring, 1, VerbsAt("10.1.0.2"), kPort, &p, kVerbsPort).ok());
  EXPECT_EQ(p.neighbour, 2u);
  const verbs::VerbsAddress relay = UnpackedVerbs(p.relay);
  EXPECT_EQ(relay.ipv4, Ip("10.0.0.2"));
  EXPECT_EQ(relay.port, kVerbsPort);
  // Without a verbs Forwarder port a relayed verbs target is refused, a direct one not.
  EXPECT_EQ(PlanSource(ring, 1, VerbsAt("10.1.0.2"), kPort, &p, 0).code(), Code::kInvalidUsage);
  EXPECT_TRUE(PlanSource(ring, 1, VerbsAt("10.0.0.2"), kPort, &p, 0).ok());
  // The RouteFn of h0's cable to h1 says the same.
  RouteFn viaH1 = MakeGraphRouteFn([&] { return ring; }, 1, 2, kPort, kVerbsPort);
  std::vector<uint8_t> via;
  ASSERT_TRUE(viaH1(VerbsAt("10.1.0.2"), &via).ok());
  EXPECT_EQ(UnpackedVerbs(via).port, kVerbsPort);
}

TEST(GraphRoutes, VerbsResolveLeavesByTheVerbsPortOnly) {
  const auto chain = Graph(false);
  // h1 (id 2): TCP ports 0 (h0), 1 (h2); verbs ports 2 (h0), 3 (h2).
  ResolveFn h1 = MakeGraphResolveFn([&] { return chain; }, 2, {1, 3, 1, 3}, kPort,
                                    {AddressKind::kTcp, AddressKind::kTcp, AddressKind::kVerbs, AddressKind::kVerbs},
                                    kVerbsPort);
  NextHop hop;
  // h2's verbs Worker on cable 1: straight on, by the verbs port facing h2.
  ASSERT_TRUE(h1(VerbsAt("10.1.0.2"), &hop).ok());
  EXPECT_EQ(hop.port, 3u);
  EXPECT_TRUE(hop.via.empty());
  // A verbs source from h0 resolves to the verbs port it arrives on.
  ASSERT_TRUE(h1(VerbsAt("10.0.0.1"), &hop).ok());
  EXPECT_EQ(hop.port, 2u);
  // h3's verbs Worker (entry h2): on through h2's verbs port on cable 1.
  ASSERT_TRUE(h1(VerbsAt("10.2.0.2"), &hop).ok());
  EXPECT_EQ(hop.port, 3u);
  const verbs::VerbsAddress via = UnpackedVerbs(hop.via);
  EXPECT_EQ(via.ipv4, Ip("10.1.0.2"));
  EXPECT_EQ(via.port, kVerbsPort);
  // TCP addresses keep the TCP ports.
  ASSERT_TRUE(h1(Address({"10.1.0.2", "10.1.1.2"}), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  // A relay whose cable to h2 has no RDMA ports (TCP only) refuses the verbs address.
  ResolveFn tcpOnly = MakeGraphResolveFn([&] { return chain; }, 2, {1, 3}, kPort, {}, kVerbsPort);
  Status s = tcpOnly(VerbsAt("10.1.0.2"), &hop);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("has no verbs (RDMA) port"), std::string::npos) << s.message();
  // This relay's own verbs Worker on its cable to h2: straight on by the verbs port facing h2.
  ASSERT_TRUE(h1(VerbsAt("10.1.0.1"), &hop).ok());
  EXPECT_EQ(hop.port, 3u);
  EXPECT_TRUE(hop.via.empty());
  EXPECT_EQ(h1(VerbsAt("10.1.0.1", kVerbsPort), &hop).code(), Code::kInvalidUsage);  // its own verbs port
  EXPECT_EQ(h1(VerbsAt("10.1.0.1", kPort), &hop).code(), Code::kInvalidUsage);       // and its TCP one
  EXPECT_EQ(h1(Address({"10.1.0.1"}, kVerbsPort), &hop).code(), Code::kInvalidUsage);
  ASSERT_TRUE(h1(VerbsAt("10.2.0.2"), &hop).ok());
  EXPECT_FALSE(hop.local);
}

TEST(GraphRoutes, CableRailsInLinkOrder) {
  const auto ring = Graph(true);
  const auto rails = CableRails(ring, 3, 2);  // h2's end of cable 1
  ASSERT_EQ(rails.size(), 2u);
  EXPECT_EQ(rails[0].address, "10.1.0.2");
  EXPECT_EQ(rails[1].address, "10.1.1.2");
  EXPECT_EQ(rails[0].device, "c1r0");
  EXPECT_TRUE(CableRails(ring, 1, 3).empty());
}

}  // namespace
}  // namespace railyard::fabric::relay
