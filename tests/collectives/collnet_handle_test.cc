// The CollNet connect handle (plugin/collnet_handle.h) and the shape read from the
// handles alone (plugin/collnet_shape.h AdjacencyFromHandles): round trips, hostile
// bytes refused, lists that do not fit left out; the cabling graph's neighbours and the
// rails' IPv4 networks (what a verbs rank's handle carries) giving ring, chain and mesh
// in cable order; and the process's cabling agent seen through topology/local_graph.h.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "plugin/collnet_handle.h"
#include "plugin/collnet_shape.h"
#include "proxy/fabric/fake/fake_transport.h"
#include "topology/cabling_agent.h"
#include "topology/local_graph.h"

namespace railyard::plugin::collnet {
namespace {

uint32_t Ip(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1) << text;
  return a.s_addr;
}

CollnetHandle Sample() {
  CollnetHandle h;
  h.address.assign(24, 0x11);  // a verbs Worker address is 24 bytes
  h.host = 0x1234;
  h.hasNeighbours = true;
  h.neighbours = {0x10, 0x2000};
  h.hasRails = true;
  h.rails = {{Ip("10.0.0.1"), 24}, {Ip("10.0.3.2"), 24}};
  return h;
}

TEST(CollnetHandle, RoundTripAndHostileBytes) {
  uint8_t buf[kHandleBytes];
  const CollnetHandle h = Sample();
  bool dropped = true;
  ASSERT_TRUE(h.Pack(buf, &dropped).ok());
  EXPECT_FALSE(dropped);
  CollnetHandle got;
  ASSERT_TRUE(CollnetHandle::Unpack(buf, &got).ok());
  EXPECT_EQ(got.address, h.address);
  EXPECT_EQ(got.host, 0x1234u);
  EXPECT_TRUE(got.hasNeighbours);
  EXPECT_EQ(got.neighbours, h.neighbours);
  EXPECT_TRUE(got.hasRails);
  EXPECT_EQ(got.rails, h.rails);
  // Byte offsets: header 8, address 24, locator 8 (host, flags, counts), 2 neighbours, 2 rails.
  const size_t loc = 8 + 24;
  auto refused = [&](auto mutate, const char* what) {
    uint8_t b[kHandleBytes];
    std::memcpy(b, buf, sizeof b);
    mutate(b);
    CollnetHandle out = Sample();
    out.host = 77;
    EXPECT_FALSE(CollnetHandle::Unpack(b, &out).ok()) << what;
    EXPECT_EQ(out.host, 77u) << what << ": *out changed on error";
  };
  refused([](uint8_t* b) { b[0] = 'X'; }, "magic");
  refused([](uint8_t* b) { b[4] = 1; }, "version 1");
  refused([](uint8_t* b) { b[6] = 125; }, "address overruns");
  refused([&](uint8_t* b) { std::memset(b + loc, 0, 4); }, "host 0");
  refused([&](uint8_t* b) { b[loc + 4] |= 4; }, "unknown flag");
  refused([&](uint8_t* b) { b[loc + 7] = 1; }, "reserved byte");
  refused([&](uint8_t* b) { b[loc + 5] = 30; }, "neighbour count overruns");
  refused([&](uint8_t* b) { b[loc + 6] = 200; }, "rail count overruns");
  refused([&](uint8_t* b) { b[loc + 4] &= ~1; }, "neighbour count without its flag");
  refused([&](uint8_t* b) { std::memcpy(b + loc + 8, b + loc + 12, 4); }, "neighbours not ascending");
  refused([&](uint8_t* b) { std::memcpy(b + loc + 8, b + loc, 4); }, "the host its own neighbour");
  refused([&](uint8_t* b) { b[loc + 8 + 8 + 4] = 0; }, "prefix 0");
  refused([&](uint8_t* b) { b[loc + 8 + 8 + 4] = 33; }, "prefix 33");
  EXPECT_FALSE(CollnetHandle::Unpack(std::span<const uint8_t>(buf, 7), &got).ok());
  // Packing refuses what it could never encode.
  CollnetHandle bad = Sample();
  bad.host = 0;
  EXPECT_FALSE(bad.Pack(buf).ok());
  bad = Sample();
  bad.rails[1].prefix = 0;
  EXPECT_FALSE(bad.Pack(buf).ok());
  bad = Sample();
  bad.address.assign(121, 1);  // 8 + 121 + 8 > 128
  EXPECT_FALSE(bad.Pack(buf).ok());
}

TEST(CollnetHandle, ListsThatDoNotFitAreLeftOutWhole) {
  // A 4-rail TCP address is 80 bytes: 8 + 80 + 8 leaves 32 bytes: 2 neighbours (8) and
  // 4 rails (20) fit; 6 rails (30) after the neighbours do not.
  CollnetHandle h = Sample();
  h.address.assign(80, 2);
  h.rails.assign(4, {Ip("10.1.0.1"), 24});
  uint8_t buf[kHandleBytes];
  bool dropped = true;
  ASSERT_TRUE(h.Pack(buf, &dropped).ok());
  EXPECT_FALSE(dropped);
  CollnetHandle got;
  ASSERT_TRUE(CollnetHandle::Unpack(buf, &got).ok());
  EXPECT_EQ(got.rails.size(), 4u);
  h.rails.assign(6, {Ip("10.1.0.1"), 24});
  ASSERT_TRUE(h.Pack(buf, &dropped).ok());
  EXPECT_TRUE(dropped);
  ASSERT_TRUE(CollnetHandle::Unpack(buf, &got).ok());
  EXPECT_TRUE(got.hasNeighbours);
  EXPECT_EQ(got.neighbours.size(), 2u);
  EXPECT_FALSE(got.hasRails);
  EXPECT_TRUE(got.rails.empty());
}

/// Rank r's handle: host 100 + r, neighbours `nb` (ranks), rails `rails`.
CollnetHandle Rank(int r, std::vector<int> nb, std::vector<HandleRail> rails) {
  CollnetHandle h;
  h.address = {1, 2, 3};
  h.host = HostDigest(100 + static_cast<uint64_t>(r));
  if (!nb.empty()) {
    h.hasNeighbours = true;
    for (int n : nb) h.neighbours.push_back(HostDigest(100 + static_cast<uint64_t>(n)));
    std::sort(h.neighbours.begin(), h.neighbours.end());
  }
  if (!rails.empty()) {
    h.hasRails = true;
    h.rails = std::move(rails);
  }
  // Through the bytes, as connect sees it.
  uint8_t buf[kHandleBytes];
  EXPECT_TRUE(h.Pack(buf).ok());
  CollnetHandle got;
  EXPECT_TRUE(CollnetHandle::Unpack(buf, &got).ok());
  return got;
}

collectives::Topology ShapeOf(const std::vector<CollnetHandle>& hs, ShapeSource want) {
  std::vector<std::vector<bool>> adj;
  ShapeSource src = ShapeSource::kRankOrder;
  EXPECT_TRUE(AdjacencyFromHandles(hs, &adj, &src));
  EXPECT_EQ(src, want);
  collectives::Topology t;
  EXPECT_TRUE(collectives::ShapeFromAdjacency(adj, &t).ok());
  return t;
}

TEST(CollnetShapeFromHandles, CablingGraphGivesRingChainMeshInCableOrder) {
  // A ring cabled 0-2-1-3-0 (not rank order), as four agents' graphs have it.
  std::vector<CollnetHandle> ring{Rank(0, {2, 3}, {}), Rank(1, {2, 3}, {}), Rank(2, {0, 1}, {}), Rank(3, {0, 1}, {})};
  collectives::Topology t = ShapeOf(ring, ShapeSource::kCablingGraph);
  EXPECT_EQ(t.shape, collectives::Shape::kRing);
  EXPECT_EQ(t.order, (std::vector<int>{0, 2, 1, 3}));
  // A chain 3-0-1-2.
  std::vector<CollnetHandle> chain{Rank(0, {1, 3}, {}), Rank(1, {0, 2}, {}), Rank(2, {1}, {}), Rank(3, {0}, {})};
  t = ShapeOf(chain, ShapeSource::kCablingGraph);
  EXPECT_EQ(t.shape, collectives::Shape::kChain);
  EXPECT_EQ(t.order, (std::vector<int>{2, 1, 0, 3}));
  std::vector<CollnetHandle> mesh{Rank(0, {1, 2}, {}), Rank(1, {0, 2}, {}), Rank(2, {0, 1}, {})};
  EXPECT_EQ(ShapeOf(mesh, ShapeSource::kCablingGraph).shape, collectives::Shape::kMesh);
  // A cable only one end's graph has is no cable: ranks 0 and 2 of the ring disagree
  // about 0-2, so the rest (2-1-3-0) is a chain.
  ring[2] = Rank(2, {1}, {});
  t = ShapeOf(ring, ShapeSource::kCablingGraph);
  EXPECT_EQ(t.shape, collectives::Shape::kChain);
  EXPECT_EQ(t.order, (std::vector<int>{0, 3, 1, 2}));
}

TEST(CollnetShapeFromHandles, RailSubnetsAsVerbsRanksCarryThem) {
  // Four guests in a ring 0-1-2-3-0, one /24 per cable, two rails each (the verbs
  // Worker address carries no rail address: the locator's rails are all there is).
  auto R = [](const char* ip) { return HandleRail{Ip(ip), 24}; };
  std::vector<CollnetHandle> ring{Rank(0, {}, {R("10.9.0.1"), R("10.9.3.2")}),
                                  Rank(1, {}, {R("10.9.0.2"), R("10.9.1.1")}),
                                  Rank(2, {}, {R("10.9.1.2"), R("10.9.2.1")}),
                                  Rank(3, {}, {R("10.9.2.2"), R("10.9.3.1")})};
  collectives::Topology t = ShapeOf(ring, ShapeSource::kRailSubnets);
  EXPECT_EQ(t.shape, collectives::Shape::kRing);
  EXPECT_EQ(t.order, (std::vector<int>{0, 1, 2, 3}));
  // The single soft-RoCE guest: every "host" on every rail's subnet: a mesh.
  std::vector<CollnetHandle> flat;
  for (int h = 0; h < 4; ++h) {
    const std::string a = "10.77.0." + std::to_string(h + 1), b = "10.77.1." + std::to_string(h + 1);
    flat.push_back(Rank(h, {}, {R(a.c_str()), R(b.c_str())}));
  }
  EXPECT_EQ(ShapeOf(flat, ShapeSource::kRailSubnets).shape, collectives::Shape::kMesh);
  // The shorter prefix of the two ends decides: a /16 end reaches a /24 one inside it.
  std::vector<CollnetHandle> mixed{Rank(0, {}, {HandleRail{Ip("10.5.1.1"), 16}}),
                                   Rank(1, {}, {HandleRail{Ip("10.5.2.1"), 24}})};
  EXPECT_EQ(ShapeOf(mixed, ShapeSource::kRailSubnets).shape, collectives::Shape::kMesh);
  // The graph wins over rails when every rank has it and accounts for every rail (no
  // fill-in from subnets: each rank already has as many graph cables as rails); ranks of one host (one digest)
  // make the graph useless and the rails answer.
  std::vector<CollnetHandle> both = ring;
  const std::vector<std::vector<int>> cabled{{2, 3}, {2, 3}, {0, 1}, {0, 1}};  // a graph ring 0-2-1-3-0
  for (int r = 0; r < 4; ++r) both[r] = Rank(r, cabled[static_cast<size_t>(r)], both[r].rails);
  std::vector<std::vector<bool>> adj;
  ShapeSource src = ShapeSource::kRankOrder;
  ASSERT_TRUE(AdjacencyFromHandles(both, &adj, &src));
  EXPECT_EQ(src, ShapeSource::kCablingGraph);
  EXPECT_TRUE(adj[0][2]);
  EXPECT_FALSE(adj[0][1]);
  both[1].host = both[0].host;
  ASSERT_TRUE(AdjacencyFromHandles(both, &adj, &src));
  EXPECT_EQ(src, ShapeSource::kRailSubnets);
  // One rank without rails and no graph: the handles tell nothing.
  ring[3].hasRails = false;
  ring[3].rails.clear();
  EXPECT_FALSE(AdjacencyFromHandles(ring, &adj, &src));
}

TEST(CollnetShapeFromHandles, ACableBothAgentsMissedIsFilledInFromItsOwnSubnet) {
  // The ring of 4 guests (CI, verbs-ring.collnet_over_rdma): g0 and g3 had not heard each
  // other across cable 3 when their ranks filled their handles, so the graph, consistent
  // at both ends, is the chain 0-1-2-3. Cable 3's /24 holds a rail of ranks 0 and 3 only,
  // and each has one rail the graph does not account for: the ring comes back.
  auto R = [](const char* ip) { return HandleRail{Ip(ip), 24}; };
  std::vector<CollnetHandle> ring{Rank(0, {1}, {R("10.9.0.1"), R("10.9.3.2")}),
                                  Rank(1, {0, 2}, {R("10.9.0.2"), R("10.9.1.1")}),
                                  Rank(2, {1, 3}, {R("10.9.1.2"), R("10.9.2.1")}),
                                  Rank(3, {2}, {R("10.9.2.2"), R("10.9.3.1")})};
  collectives::Topology t = ShapeOf(ring, ShapeSource::kCablingGraphAndSubnets);
  EXPECT_EQ(t.shape, collectives::Shape::kRing);
  EXPECT_EQ(t.order, (std::vector<int>{0, 1, 2, 3}));
  // A chain's ends with a rail each on one switch segment (10.9.9.0/24, shared with rank
  // 1): no cable's own subnet, nothing filled in, the chain stays.
  ring[0] = Rank(0, {1}, {R("10.9.0.1"), R("10.9.9.1")});
  ring[1] = Rank(1, {0, 2}, {R("10.9.0.2"), R("10.9.1.1"), R("10.9.9.2")});
  ring[3] = Rank(3, {2}, {R("10.9.2.2"), R("10.9.9.3")});
  t = ShapeOf(ring, ShapeSource::kCablingGraph);
  EXPECT_EQ(t.shape, collectives::Shape::kChain);
}

TEST(CollnetShapeFromHandles, GraphsThatDisagreeAreFilledInFromTheCablesSubnets) {
  // The ring of 4 guests: ranks 0 and 2 filled their handles before hearing g1's
  // hellos, so no cable of rank 1 is listed at both ends. The mutual graph leaves
  // rank 1 alone; its cables' own subnets put it back in the ring.
  auto R = [](const char* ip) { return HandleRail{Ip(ip), 24}; };
  std::vector<CollnetHandle> ring{Rank(0, {3}, {R("10.9.0.1"), R("10.9.3.2")}),
                                  Rank(1, {0, 2}, {R("10.9.0.2"), R("10.9.1.1")}),
                                  Rank(2, {3}, {R("10.9.1.2"), R("10.9.2.1")}),
                                  Rank(3, {0, 2}, {R("10.9.2.2"), R("10.9.3.1")})};
  collectives::Topology t = ShapeOf(ring, ShapeSource::kCablingGraphAndSubnets);
  EXPECT_EQ(t.shape, collectives::Shape::kRing);
  EXPECT_EQ(t.order, (std::vector<int>{0, 1, 2, 3}));
  // Rails all on one wide network (a /16 over every cable: no cable's own subnet):
  // nothing to fill in, rank 1 is still alone, and the rails alone (a mesh) answer.
  std::vector<CollnetHandle> wide = ring;
  const char* ips[4][2] = {{"10.9.0.1", "10.9.3.2"}, {"10.9.0.2", "10.9.1.1"}, {"10.9.1.2", "10.9.2.1"},
                           {"10.9.2.2", "10.9.3.1"}};
  for (size_t r = 0; r < 4; ++r) wide[r].rails = {HandleRail{Ip(ips[r][0]), 16}, HandleRail{Ip(ips[r][1]), 16}};
  EXPECT_EQ(ShapeOf(wide, ShapeSource::kRailSubnets).shape, collectives::Shape::kMesh);
  // Without rails the graph is all there is: rank 1 reaches nobody, as before.
  for (auto& h : ring) {
    h.hasRails = false;
    h.rails.clear();
  }
  std::vector<std::vector<bool>> adj;
  ShapeSource src = ShapeSource::kRankOrder;
  ASSERT_TRUE(AdjacencyFromHandles(ring, &adj, &src));
  EXPECT_EQ(src, ShapeSource::kCablingGraph);
  EXPECT_FALSE(adj[1][0]);
  EXPECT_FALSE(adj[1][2]);
}

// Ranks on hosts with no cable between them (two hosts apart on a ring of 4: the hosts
// between run no rank of the job). Only fabric mode's cable set relays: there they make a
// ring in rank order over the relays (the testbed case fabric.allreduce-ranks-apart.fabric
// runs it; new-user trial: "rank 0 reaches no other rank"). Any other Domain refuses,
// even when the handles carry agents' neighbours (a host:NAME tier client runs an agent
// outside fabric mode), naming the way out.
TEST(CollnetShapeFromHandles, RanksWithNoCableBetweenThemAreRefusedOutsideFabricMode) {
  std::unique_ptr<fabric::Domain> domain;
  ASSERT_TRUE(fabric::fake::CreateFakeDomain({}, &domain).ok());
  auto R = [](const char* ip) { return HandleRail{Ip(ip), 30}; };
  // h0 (rank 0) cabled to h1 and h3, h2 (rank 1) cabled to h1 and h3: hosts 201, 203 run no rank.
  auto onHost = [&](uint64_t host, std::vector<uint64_t> neighbourHosts, std::vector<HandleRail> rails) {
    CollnetHandle h = Rank(0, {}, std::move(rails));
    h.host = HostDigest(host);
    h.hasNeighbours = true;
    for (uint64_t n : neighbourHosts) h.neighbours.push_back(HostDigest(n));
    std::sort(h.neighbours.begin(), h.neighbours.end());
    return h;
  };
  std::vector<CollnetHandle> apart{onHost(200, {201, 203}, {R("10.77.0.1"), R("10.77.3.2")}),
                                   onHost(202, {201, 203}, {R("10.77.1.2"), R("10.77.2.1")})};
  collectives::Topology t;
  ShapeSource src = ShapeSource::kSetting;
  Status s = CollnetTopology("auto", *domain, apart, &t, &src);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("rank 0 reaches no other rank"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("RAILYARD_COLLNET_SHAPE forces a shape"), std::string::npos) << s.message();
  EXPECT_NE(std::string(ShapeSourceName(ShapeSource::kRelayedRankOrder)).find("over relays"), std::string::npos);
}

TEST(CollnetLocalGraph, TheProcessAgentIsSeenWhileItRuns) {
  topology::LocalGraph g;
  EXPECT_FALSE(topology::LocalCablingGraph(&g));
  std::unique_ptr<topology::CablingAgent> agent;
  topology::AgentOptions o;
  o.port = 0;
  ASSERT_TRUE(topology::CablingAgent::Start("h-test", {}, o, &agent, 0xabcdef0123ull).ok());
  ASSERT_TRUE(topology::LocalCablingGraph(&g));
  EXPECT_EQ(g.self, 0xabcdef0123ull);
  EXPECT_EQ(g.graph.Neighbours(g.self).size(), 0u);  // no rails: no neighbour, the locator lists none
  agent.reset();
  EXPECT_FALSE(topology::LocalCablingGraph(&g));
}

}  // namespace
}  // namespace railyard::plugin::collnet
