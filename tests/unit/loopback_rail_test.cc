// The loopback rule (topology/loopback_rail.h): one decision and one wording, the same in
// rail discovery's skip list (railyard-info's table), in proxy::SelectFabricRails (the
// plugin's fabric mode, railyardd, host:NAME tier peers) and in railyard-info's LO row.
#include "topology/loopback_rail.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>
#include <vector>

#include "proxy/routing/router.h"
#include "topology/discovery.h"

namespace railyard::topology {
namespace {

using ::testing::Contains;

const std::string kRule =
    "loopback, never a fabric rail (its packets never leave this host), whatever RAILYARD_SOCKET_IFNAME (or railyardd --ifname) names; "
    "the tiers' TCP rail (127.0.0.1) while neither RAILYARD_SOCKET_IFNAME nor railyardd --ifname is set";

TEST(LoopbackRail, TheFlagOrTheNameLoMakesLoopback) {
  EXPECT_TRUE(IsLoopbackInterface("lo", false));    // no flags known (a fixture)
  EXPECT_TRUE(IsLoopbackInterface("lo0", true));    // IFF_LOOPBACK, another name
  EXPECT_FALSE(IsLoopbackInterface("lo0", false));  // only "lo" by name
  EXPECT_FALSE(IsLoopbackInterface("eth0", false));
}

TEST(LoopbackRail, OneWordingAndItsSkipReason) {
  EXPECT_EQ(LoopbackRailRule(), kRule);
  EXPECT_EQ(LoopbackSkipReason("lo"), "lo: " + kRule);
  std::string name;
  EXPECT_TRUE(IsLoopbackSkipReason(LoopbackSkipReason("lo0"), &name));
  EXPECT_EQ(name, "lo0");
  EXPECT_FALSE(IsLoopbackSkipReason("lo: filtered out by RAILYARD_SOCKET_IFNAME='p'"));
  EXPECT_FALSE(IsLoopbackSkipReason(kRule));  // no interface named
  EXPECT_FALSE(IsLoopbackSkipReason("lo: loopback (a rail only when RAILYARD_SOCKET_IFNAME names it)"));
  EXPECT_EQ(FabricRailRequirement("--ifname"),
            "an IPv4 interface, not loopback (never a fabric rail), without a default route unless --ifname names it "
            "exactly (=NAME); --ifname chooses");
}

NetDevice Lo() {
  NetDevice d;
  d.name = "lo";
  d.addrString = "127.0.0.1";
  d.prefixLen = 8;
  d.up = d.running = d.loopback = true;
  auto* sa = reinterpret_cast<sockaddr_in*>(&d.addr);
  sa->sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, "127.0.0.1", &sa->sin_addr), 1);
  return d;
}

// Discovery (railyard-info's table) skips loopback with the rule's words, and lists it
// only when a non-exclusive filter names it.
TEST(LoopbackRail, DiscoverySkipsLoopbackInTheRulesWords) {
  DiscoveryOptions o;
  o.sysfsRoot = RAILYARD_FIXTURE_DIR "/sysfs-veth";
  o.interfaces = std::vector<NetDevice>{Lo()};
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_TRUE(rails.empty());
  EXPECT_THAT(skipped, Contains(LoopbackSkipReason("lo")));
  o.ifnameFilter = "lo";
  skipped.clear();
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  ASSERT_EQ(rails.size(), 1u);
  EXPECT_EQ(rails[0].netdev, "lo");  // a table row, never a fabric rail (below)
}

// The fabric's rails (live host: every Linux host has lo at 127.0.0.1): named exactly,
// lo is still no rail, and the reason for finding none starts with the rule (then the
// host's other interfaces, filtered out by '=lo').
TEST(LoopbackRail, AFabricRailNeverEvenWhenNamed) {
  std::vector<proxy::FabricRail> rails;
  std::string whyNone;
  ASSERT_TRUE(proxy::SelectFabricRails("=lo", 10000, &rails, &whyNone).ok());
  EXPECT_TRUE(rails.empty());
  EXPECT_EQ(whyNone.rfind(LoopbackSkipReason("lo"), 0), 0u) << whyNone;
  EXPECT_EQ(whyNone.find(LoopbackSkipReason("lo"), 1), std::string::npos) << "said twice: " << whyNone;
}

}  // namespace
}  // namespace railyard::topology
