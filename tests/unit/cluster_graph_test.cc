// Shapes and routes derived from cabling graphs built by hand.
#include "topology/cluster_graph.h"
#include "topology/graph_json.h"

#include <gtest/gtest.h>

#include <string>

namespace railyard::topology {
namespace {

/// Cables host x port px to host y port py with `rails` rail-links, addressed one
/// subnet per rail-link as the testbed and real clusters are.
void Cable(ClusterGraph& g, uint64_t x, int px, uint64_t y, int py, int rails, int link) {
  for (int r = 0; r < rails; ++r) {
    const std::string net = "10.9." + std::to_string(link * rails + r) + ".";
    g.AddLink({x, "p" + std::to_string(px) + "r" + std::to_string(r), net + "1", 10000},
              {y, "p" + std::to_string(py) + "r" + std::to_string(r), net + "2", 10000});
  }
}

ClusterGraph Ring(int n, int rails) {
  ClusterGraph g;
  for (int h = 0; h < n; ++h) g.AddHost(static_cast<uint64_t>(h + 1), "h" + std::to_string(h));
  for (int l = 0; l < n; ++l) Cable(g, l + 1, 1, (l + 1) % n + 1, 0, rails, l);
  return g;
}

TEST(ClusterGraph, RingOfFourWithTwoRailsPerCable) {
  ClusterGraph g = Ring(4, 2);
  EXPECT_EQ(g.DeriveShape(), Shape::kRing);
  EXPECT_EQ(g.Links().size(), 8u);
  EXPECT_EQ(g.Neighbours(1), (std::vector<uint64_t>{2, 4}));
  const Route adj = g.RouteTo(1, 2);
  EXPECT_EQ(adj.hops, 1);
  ASSERT_EQ(adj.direct.size(), 2u);  // both rails of the cable
  EXPECT_EQ(adj.direct[0].End(1).ifname, "p1r0");
  EXPECT_EQ(adj.direct[1].Other(1).ifname, "p0r1");
  const Route opposite = g.RouteTo(1, 3);
  EXPECT_EQ(opposite.hops, 2);
  EXPECT_TRUE(opposite.direct.empty());
  EXPECT_EQ(opposite.nextHops, (std::vector<uint64_t>{2, 4}));  // both ring directions tie
  // railyardd --text: the tied next hops read as alternatives, not as a path.
  const std::string text = GraphToText(g, 1);
  EXPECT_NE(text.find("  h2: 2 hops, next hop h1 or h3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  h1: direct over 2 rail(s)\n"), std::string::npos) << text;
}

// The shape lines' host count (railyardd's stderr, --text): a daemon that knows only
// itself said "0 hosts (+1 with no cable)" (new-user trial); "no cable yet" after a
// cable went down (another).
TEST(ClusterGraph, HostCountTextSaysNoCableYetBeforeAnyCable) {
  ClusterGraph alone;
  alone.AddHost(1, "h0");
  EXPECT_EQ(HostCountText(alone), "no cable up (this host alone)");
  alone.AddHost(2, "h1");
  EXPECT_EQ(HostCountText(alone), "no cable up (2 hosts known)");
  ClusterGraph ring = Ring(4, 1);
  EXPECT_EQ(HostCountText(ring), "4 hosts");
  ring.AddHost(9, "h9");
  EXPECT_EQ(HostCountText(ring), "4 hosts (+1 with no cable)");
}

TEST(ClusterGraph, RingOfFiveTakesTheShorterDirection) {
  ClusterGraph g = Ring(5, 1);
  EXPECT_EQ(g.DeriveShape(), Shape::kRing);
  const Route r = g.RouteTo(1, 3);
  EXPECT_EQ(r.hops, 2);
  EXPECT_EQ(r.nextHops, (std::vector<uint64_t>{2}));
  EXPECT_EQ(g.RouteTo(1, 4).nextHops, (std::vector<uint64_t>{5}));
}

TEST(ClusterGraph, ChainOfFour) {
  ClusterGraph g;
  for (int l = 0; l < 3; ++l) Cable(g, l + 1, 1, l + 2, 0, 1, l);
  EXPECT_EQ(g.DeriveShape(), Shape::kChain);
  const Route r = g.RouteTo(1, 4);
  EXPECT_EQ(r.hops, 3);
  EXPECT_EQ(r.nextHops, (std::vector<uint64_t>{2}));
  EXPECT_EQ(g.RouteTo(4, 1).nextHops, (std::vector<uint64_t>{3}));
}

TEST(ClusterGraph, MeshOfThreeAndRingOfThreeAreMeshes) {
  EXPECT_EQ(Ring(3, 2).DeriveShape(), Shape::kMesh);
  ClusterGraph two;
  Cable(two, 7, 0, 9, 0, 2, 0);
  EXPECT_EQ(two.DeriveShape(), Shape::kMesh);
  EXPECT_EQ(two.RouteTo(9, 7).direct.size(), 2u);
}

TEST(ClusterGraph, PartialDisconnectedAndSingle) {
  ClusterGraph star;
  Cable(star, 1, 0, 2, 0, 1, 0);
  Cable(star, 1, 1, 3, 0, 1, 1);
  Cable(star, 1, 2, 4, 0, 1, 2);
  EXPECT_EQ(star.DeriveShape(), Shape::kPartial);
  // A host cabled to nobody (starting up, or made up by an untrusted record) is
  // unreachable but leaves the shape of the cabled hosts alone (a new-user trial: one
  // made-up record turned every host's shape to "disconnected").
  star.AddHost(5, "lonely");
  EXPECT_EQ(star.DeriveShape(), Shape::kPartial);
  EXPECT_EQ(star.UncabledHosts(), 1u);
  EXPECT_EQ(star.RouteTo(2, 5).hops, 0);
  // Two cabled parts that cannot reach each other are disconnected.
  Cable(star, 6, 0, 7, 0, 1, 3);
  EXPECT_EQ(star.DeriveShape(), Shape::kDisconnected);
  EXPECT_EQ(star.UncabledHosts(), 1u);
  ClusterGraph lonelyPair;
  lonelyPair.AddHost(1, "solo");
  lonelyPair.AddHost(2, "made-up");
  EXPECT_EQ(lonelyPair.DeriveShape(), Shape::kSingle);
  ClusterGraph one;
  one.AddHost(1, "solo");
  EXPECT_EQ(one.DeriveShape(), Shape::kSingle);
}

TEST(ClusterGraph, CuttingOneRailKeepsTheOtherAndCuttingBothReroutes) {
  ClusterGraph g = Ring(4, 2);
  g.RemoveRail(1, "p1r0");
  EXPECT_EQ(g.RouteTo(1, 2).direct.size(), 1u);
  g.RemoveRail(1, "p1r1");
  EXPECT_EQ(g.DeriveShape(), Shape::kChain);
  const Route r = g.RouteTo(1, 2);
  EXPECT_EQ(r.hops, 3);  // the long way round: 1 → 4 → 3 → 2
  EXPECT_EQ(r.nextHops, (std::vector<uint64_t>{4}));
}

TEST(ClusterGraph, LinksAreNormalisedAndIdempotent) {
  ClusterGraph g;
  g.AddLink({5, "a", "10.0.0.1", 1}, {3, "b", "10.0.0.2", 1});
  g.AddLink({3, "b", "10.0.0.2", 1}, {5, "a", "10.0.0.1", 1});
  g.AddLink({3, "x", "1.1.1.1", 1}, {3, "y", "1.1.1.2", 1});  // self link ignored
  ASSERT_EQ(g.Links().size(), 1u);
  EXPECT_EQ(g.Links().begin()->a.host, 3u);
}

}  // namespace
}  // namespace railyard::topology
