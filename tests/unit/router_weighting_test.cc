// How a connection's sockets spread over the rails of a cable (proxy/routing).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "proxy/routing/router.h"

namespace railyard::proxy {
namespace {

std::map<size_t, int> Spread(const std::vector<int>& speeds, int sockets) {
  std::map<size_t, int> count;
  for (int k = 0; k < sockets; ++k) ++count[WeightedPick(speeds, k)];
  return count;
}

TEST(RouterWeighting, EqualRailsAlternate) {
  const std::vector<int> two{200000, 200000};
  EXPECT_EQ(WeightedPick(two, 0) == WeightedPick(two, 1), false);
  EXPECT_EQ(Spread(two, 4), (std::map<size_t, int>{{0, 2}, {1, 2}}));
  EXPECT_EQ(Spread({10000, 10001}, 6), (std::map<size_t, int>{{0, 3}, {1, 3}}));
}

TEST(RouterWeighting, FasterRailsCarryProportionallyMore) {
  EXPECT_EQ(Spread({200000, 100000}, 3), (std::map<size_t, int>{{0, 2}, {1, 1}}));
  EXPECT_EQ(Spread({200000, 100000}, 12), (std::map<size_t, int>{{0, 8}, {1, 4}}));
  // Four sockets over 2:1 rails still use both.
  EXPECT_EQ(Spread({200000, 100000}, 4).size(), 2u);
}

TEST(RouterWeighting, UnknownOrZeroSpeedStillGetsSockets) {
  EXPECT_EQ(Spread({0, 0}, 2), (std::map<size_t, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(Spread({100000, 0}, 9).at(1), 1);
  EXPECT_EQ(WeightedPick({42}, 7), 0u);
  EXPECT_EQ(WeightedPick({}, 3), 0u);
}

}  // namespace
}  // namespace railyard::proxy
