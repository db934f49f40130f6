// The hop rule of relayed sockets (proxy/routing/socket_hops.h): ChooseHop is what
// every relay applies, and SpliceSockIndex finds the socket index whose whole path
// ends on one given rail of the target, through the given last relay.
#include "proxy/routing/socket_hops.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace railyard::proxy {
namespace {

constexpr uint64_t kH0 = 10, kH1 = 11, kH2 = 12, kH3 = 13;

/// A ring h0-h1-h2-h3-h0 with two 10G rails per cable; h<a>-h<b> rail r has addresses
/// 10.<a><b>.<r>.1 (lower host) and .2.
topology::ClusterGraph Ring() {
  topology::ClusterGraph g;
  const uint64_t ids[] = {kH0, kH1, kH2, kH3};
  for (int i = 0; i < 4; ++i) g.AddHost(ids[i], "h" + std::to_string(i));
  auto cable = [&](int a, int b) {
    for (int r = 0; r < 2; ++r) {
      const std::string net = "10." + std::to_string(a) + std::to_string(b) + "." + std::to_string(r) + ".";
      g.AddLink({ids[a], "p" + std::to_string(b) + "r" + std::to_string(r), net + "1", 10000},
                {ids[b], "p" + std::to_string(a) + "r" + std::to_string(r), net + "2", 10000});
    }
  };
  cable(0, 1);
  cable(1, 2);
  cable(2, 3);
  cable(0, 3);
  return g;
}

/// Follows socket `s` from `firstRelay` (hops = 1, as the connector dials it straight)
/// to `dest`: the last relay and the target's address of the last link.
std::pair<uint64_t, std::string> Walk(const topology::ClusterGraph& g, uint64_t firstRelay, uint64_t dest, int s) {
  uint64_t at = firstRelay;
  for (int hops = 1; hops < 16; ++hops) {
    const HopChoice c = ChooseHop(g, at, dest, s, hops);
    EXPECT_TRUE(c.reachable);
    if (!c.reachable) return {0, ""};
    if (c.direct) return {at, c.link.Other(at).address};
    at = c.next;
  }
  return {0, ""};
}

TEST(SocketHops, ACabledDestinationTakesTheRailsInTurn) {
  const topology::ClusterGraph g = Ring();
  std::set<std::string> seen;
  for (int s = 0; s < 4; ++s) {
    const HopChoice c = ChooseHop(g, kH1, kH2, s, 0);
    ASSERT_TRUE(c.reachable);
    EXPECT_TRUE(c.direct);
    EXPECT_EQ(c.next, kH2);
    seen.insert(c.link.Other(kH1).address);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"10.12.0.2", "10.12.1.2"}));
}

TEST(SocketHops, TheOppositeHostIsReachedBothWaysRound) {
  const topology::ClusterGraph g = Ring();
  std::set<uint64_t> next;
  for (int s = 0; s < 4; ++s) {
    const HopChoice c = ChooseHop(g, kH0, kH2, s, 0);
    ASSERT_TRUE(c.reachable);
    EXPECT_FALSE(c.direct);
    next.insert(c.next);
  }
  EXPECT_EQ(next, (std::set<uint64_t>{kH1, kH3}));
}

TEST(SocketHops, TheSpliceIndexLandsOnEveryRailOfTheTargetsCable) {
  const topology::ClusterGraph g = Ring();
  // h0 -> h2 through h1: h2's rails on its cable to h1 are 10.12.{0,1}.2.
  for (const char* rail : {"10.12.0.2", "10.12.1.2"}) {
    const int s = SpliceSockIndex(g, kH1, kH1, kH2, rail);
    ASSERT_GE(s, 0) << rail;
    EXPECT_EQ(Walk(g, kH1, kH2, s), std::make_pair(kH1, std::string(rail)));
  }
  // Through h3: h2's rails on its cable to h3 (h2 is the lower host there: .1).
  for (const char* rail : {"10.23.0.1", "10.23.1.1"}) {
    const int s = SpliceSockIndex(g, kH3, kH3, kH2, rail);
    ASSERT_GE(s, 0) << rail;
    EXPECT_EQ(Walk(g, kH3, kH2, s), std::make_pair(kH3, std::string(rail)));
  }
}

TEST(SocketHops, ARailTheRelaysNeverLandOnHasNoIndex) {
  const topology::ClusterGraph g = Ring();
  // Entering at h1, no path to h2 ends through h3 or on a rail of the h2-h3 cable.
  EXPECT_EQ(SpliceSockIndex(g, kH1, kH3, kH2, "10.23.0.1"), -1);
  EXPECT_EQ(SpliceSockIndex(g, kH1, kH1, kH2, "10.23.0.1"), -1);
  // An address no link has.
  EXPECT_EQ(SpliceSockIndex(g, kH1, kH1, kH2, "192.0.2.1"), -1);
  // A host the graph cannot reach.
  topology::ClusterGraph cut = g;
  cut.AddHost(99, "lonely");
  EXPECT_EQ(SpliceSockIndex(cut, kH1, kH1, 99, "10.12.0.2"), -1);
}

TEST(SocketHops, TwoRelaysInAChainLandOnTheRailAsked) {
  // h0 - h1 - h2 - h3, one rail per cable but two on the last: h0 -> h3 enters at h1
  // and leaves the relays at h2.
  topology::ClusterGraph g;
  for (uint64_t id : {kH0, kH1, kH2, kH3}) g.AddHost(id, "h" + std::to_string(id - kH0));
  g.AddLink({kH0, "a", "10.1.0.1", 10000}, {kH1, "b", "10.1.0.2", 10000});
  g.AddLink({kH1, "c", "10.2.0.1", 10000}, {kH2, "d", "10.2.0.2", 10000});
  g.AddLink({kH2, "e", "10.3.0.1", 10000}, {kH3, "f", "10.3.0.2", 10000});
  g.AddLink({kH2, "g", "10.3.1.1", 10000}, {kH3, "h", "10.3.1.2", 10000});
  for (const char* rail : {"10.3.0.2", "10.3.1.2"}) {
    const int s = SpliceSockIndex(g, kH1, kH2, kH3, rail);
    ASSERT_GE(s, 0) << rail;
    EXPECT_EQ(Walk(g, kH1, kH3, s), std::make_pair(kH2, std::string(rail)));
  }
  // h1 is not the last relay of any path to h3.
  EXPECT_EQ(SpliceSockIndex(g, kH1, kH1, kH3, "10.3.0.2"), -1);
  // The relays after the first on that path (the route's errors name them): h2 alone;
  // none from h2 (cabled to h3) or toward a host with no route.
  EXPECT_EQ(SplicePathAfter(g, kH1, kH3, SpliceSockIndex(g, kH1, kH2, kH3, "10.3.0.2")), std::vector<uint64_t>{kH2});
  EXPECT_TRUE(SplicePathAfter(g, kH2, kH3, 0).empty());
  g.AddHost(99, "lonely");
  EXPECT_TRUE(SplicePathAfter(g, kH1, 99, 0).empty());
}

}  // namespace
}  // namespace railyard::proxy
