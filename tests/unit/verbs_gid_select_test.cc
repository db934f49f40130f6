// proxy/verbs/gid_select: GID choice over fake tables (rxe, ConnectX on two hosts,
// holes, unreadable types, IPv6-only, link-local-only), over the Spark sysfs fixture
// through topology::DiscoverRails, forced indexes, address ranges and peers.
#include "proxy/verbs/gid_select.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/spark_fixture.h"

#include <algorithm>
#include <string>
#include <vector>

#include "env/config.h"
#include "topology/discovery.h"
#include "tests/unit/parse_env.h"

namespace railyard::proxy::verbs {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// --- table builders ------------------------------------------------------------------

topology::Gid V4(int index, const char* type, const char* ip) {
  topology::Gid g;
  g.index = index;
  g.type = type;
  g.raw[10] = g.raw[11] = 0xff;
  EXPECT_EQ(inet_pton(AF_INET, ip, g.raw.data() + 12), 1) << ip;
  g.ip = ip;
  g.ipv4Mapped = true;
  return g;
}

topology::Gid V6(int index, const char* type, const char* ip) {
  topology::Gid g;
  g.index = index;
  g.type = type;
  EXPECT_EQ(inet_pton(AF_INET6, ip, g.raw.data()), 1) << ip;
  g.ip = ip;
  g.linkLocal = g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80;
  return g;
}

// The EUI-64 link-local GID of MAC 02:11:22:33:44:55 (what every RoCE port has at 0).
topology::Gid LL(int index, const char* type) { return V6(index, type, "fe80::11:22ff:fe33:4455"); }

topology::Gid Hole(int index) {
  topology::Gid g;
  g.index = index;
  return g;
}

PeerAddress Peer(const char* ip, int prefix) { return PeerAddress{ip, prefix}; }

// --- helpers --------------------------------------------------------------------------

TEST(VerbsGidType, ParsesSysfsText) {
  EXPECT_EQ(ParseGidType("RoCE v2"), GidType::kRoceV2);
  EXPECT_EQ(ParseGidType("RoCE v2\n"), GidType::kRoceV2);
  EXPECT_EQ(ParseGidType("RoCE v1"), GidType::kRoceV1);
  EXPECT_EQ(ParseGidType("IB/RoCE v1"), GidType::kRoceV1);
  EXPECT_EQ(ParseGidType("IB"), GidType::kIb);
  EXPECT_EQ(ParseGidType(""), GidType::kUnknown);
  EXPECT_EQ(ParseGidType("garbage"), GidType::kUnknown);
  EXPECT_STREQ(GidTypeName(GidType::kRoceV2), "RoCE v2");
  EXPECT_STREQ(GidTypeName(GidType::kUnknown), "unknown type");
}

TEST(VerbsCidr, ParseAndContain) {
  auto r = ParseCidr("10.0.0.0/16");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->family, AF_INET);
  EXPECT_EQ(r->prefixLen, 16);
  EXPECT_TRUE(CidrContains(*r, V4(3, "RoCE v2", "10.0.255.7")));
  EXPECT_FALSE(CidrContains(*r, V4(3, "RoCE v2", "10.1.0.1")));
  EXPECT_FALSE(CidrContains(*r, V6(3, "RoCE v2", "fd00::1")));  // IPv4 range: IPv4 GIDs only
  EXPECT_TRUE(CidrContains(*ParseCidr("10.0.0.77/8"), V4(3, "RoCE v2", "10.200.0.1")));  // host bits ignored
  EXPECT_TRUE(CidrContains(*ParseCidr("0.0.0.0/0"), V4(3, "RoCE v2", "192.0.2.1")));

  auto r6 = ParseCidr("fd00::/8");
  ASSERT_TRUE(r6.has_value());
  EXPECT_EQ(r6->family, AF_INET6);
  EXPECT_TRUE(CidrContains(*r6, V6(3, "RoCE v2", "fd00:2::1")));
  EXPECT_FALSE(CidrContains(*r6, LL(0, "RoCE v1")));
  EXPECT_FALSE(CidrContains(*r6, V4(3, "RoCE v2", "10.0.0.1")));
  EXPECT_TRUE(CidrContains(*ParseCidr("fe80::/10"), LL(0, "RoCE v1")));
  EXPECT_TRUE(CidrContains(*ParseCidr("fd00:2::/33"), V6(3, "RoCE v2", "fd00:2:7fff::1")));
  EXPECT_FALSE(CidrContains(*ParseCidr("fd00:2::/33"), V6(3, "RoCE v2", "fd00:2:8000::1")));

  for (const char* bad : {"10.0.0.0", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "/8", "host/8",
                          "10.0.0.0/8x", "10.0.0.0/-1", " 10.0.0.0/8", "10.0.0.0/0008"}) {
    EXPECT_FALSE(ParseCidr(bad).has_value()) << bad;
  }
}

// --- real layouts -----------------------------------------------------------------------

TEST(VerbsGidSelect, RxeLayout) {
  // rdma_rxe on a 1500-byte veth: 0 = link-local fe80, 1 = ::ffff:<ipv4>, both RoCE v2.
  std::vector<topology::Gid> t = {LL(0, "RoCE v2"), V4(1, "RoCE v2", "192.168.122.10")};
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.index, 1);
  EXPECT_EQ(c.type, GidType::kRoceV2);
  EXPECT_EQ(c.gid.raw, t[1].raw);
  EXPECT_THAT(c.reason, AllOf(HasSubstr("GID 1 (RoCE v2, IPv4 192.168.122.10)"),
                              HasSubstr("lowest-index RoCE v2 GID with an IPv4-mapped address")));
  EXPECT_TRUE(c.warning.empty());
}

// ConnectX: a v1 and a v2 entry per address. Host A has the IPv4 pair at 2/3; host B
// lost an address (hole at 2), so its pair sits at 3/4. Each host picks its own index.
std::vector<topology::Gid> ConnectXHostA() {
  return {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V4(2, "RoCE v1", "10.0.0.1"),
          V4(3, "RoCE v2", "10.0.0.1")};
}
std::vector<topology::Gid> ConnectXHostB() {
  return {LL(0, "RoCE v1"), LL(1, "RoCE v2"), Hole(2), V4(3, "RoCE v1", "10.0.0.2"),
          V4(4, "RoCE v2", "10.0.0.2")};
}

TEST(VerbsGidSelect, ConnectXIndexDiffersBetweenHosts) {
  GidChoice a = ChooseGid(ConnectXHostA(), GidPolicy{}, nullptr);
  GidChoice b = ChooseGid(ConnectXHostB(), GidPolicy{}, nullptr);
  ASSERT_TRUE(a.ok()) << a.error;
  ASSERT_TRUE(b.ok()) << b.error;
  EXPECT_EQ(a.index, 3);
  EXPECT_EQ(b.index, 4);
  EXPECT_EQ(a.gid.ip, "10.0.0.1");
  EXPECT_EQ(b.gid.ip, "10.0.0.2");
  // With each other as peer (same /24), the same indexes.
  PeerAddress toB = Peer("10.0.0.2", 24), toA = Peer("10.0.0.1", 24);
  EXPECT_EQ(ChooseGid(ConnectXHostA(), GidPolicy{}, &toB).index, 3);
  EXPECT_EQ(ChooseGid(ConnectXHostB(), GidPolicy{}, &toA).index, 4);
  EXPECT_THAT(ChooseGid(ConnectXHostA(), GidPolicy{}, &toB).reason,
              HasSubstr("in the subnet of peer 10.0.0.2/24"));
}

TEST(VerbsGidSelect, RoceVersionOnePrefersV1) {
  GidPolicy p;
  p.roceVersion = 1;
  GidChoice c = ChooseGid(ConnectXHostB(), p, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 3);
  EXPECT_EQ(c.type, GidType::kRoceV1);
  EXPECT_THAT(c.reason, HasSubstr("lowest-index RoCE v1 GID"));
}

TEST(VerbsGidSelect, OnlyV1IPv4FallsBackToIt) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), V4(1, "RoCE v1", "10.0.0.1")};
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 1);  // NCCL ends on the same entry (first IPv4 GID)
  EXPECT_THAT(c.reason, HasSubstr("no RoCE v2 GID with an IPv4-mapped address"));
}

TEST(VerbsGidSelect, HolesAsZeroEntriesAndAtIndexZero) {
  std::vector<topology::Gid> t = {Hole(0), Hole(1), V4(2, "RoCE v2", "10.0.0.1"), Hole(3)};
  // "fe80::" with nothing after the prefix is unconfigured too (NCCL configuredGid).
  topology::Gid bare = V6(4, "RoCE v2", "fe80::");
  t.push_back(bare);
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 2);
  GidChoice none = ChooseGid({Hole(0), Hole(1), bare}, GidPolicy{}, nullptr);
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.index, -1);
  EXPECT_THAT(none.error, HasSubstr("the GID table is empty"));
  EXPECT_FALSE(ChooseGid({}, GidPolicy{}, nullptr).ok());
}

TEST(VerbsGidSelect, UnreadableTypeUsedOnlyWhenNothingTypedFits) {
  // Typed v1 beats an unreadable entry of the same family (NCCL would take index 1).
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), V4(1, "", "10.0.0.1"), V4(2, "RoCE v1", "10.0.0.1")};
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 2);

  // Nothing typed in the family: the unreadable one, and the reason says so.
  std::vector<topology::Gid> u = {LL(0, "RoCE v2"), V4(1, "", "10.0.0.1")};
  GidChoice d = ChooseGid(u, GidPolicy{}, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.type, GidType::kUnknown);
  EXPECT_THAT(d.reason, AllOf(HasSubstr("type unreadable"), HasSubstr("gid_attrs/types/1 could not be read"),
                              HasSubstr("RoCE version is unknown")));
}

TEST(VerbsGidSelect, Ipv6OnlyTableWithDefaultPolicy) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V6(2, "RoCE v1", "fd00:2::1"),
                                  V6(3, "RoCE v2", "fd00:2::1")};
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 3);  // NCCL would fall back to index 0 (link-local RoCE v1)
  EXPECT_THAT(c.reason, AllOf(HasSubstr("no usable IPv4-mapped GID"),
                              HasSubstr("only link-local and IPv6 GIDs"),
                              HasSubstr("NCCL 2.28.9 would fall back to GID index 0")));
  // AF_INET6 asks for exactly this: tier 1.
  GidPolicy v6;
  v6.addrFamily = AF_INET6;
  GidChoice d = ChooseGid(t, v6, nullptr);
  EXPECT_EQ(d.index, 3);
  EXPECT_THAT(d.reason, HasSubstr("lowest-index RoCE v2 GID with an IPv6 address"));
}

TEST(VerbsGidSelect, AddrFamilyInet6PrefersIpv6OnDualStack) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V4(2, "RoCE v1", "10.0.0.1"),
                                  V4(3, "RoCE v2", "10.0.0.1"), V6(4, "RoCE v1", "fd00::1"),
                                  V6(5, "RoCE v2", "fd00::1")};
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, nullptr).index, 3);
  GidPolicy v6;
  v6.addrFamily = AF_INET6;
  EXPECT_EQ(ChooseGid(t, v6, nullptr).index, 5);
}

// --- link-local and peers ---------------------------------------------------------

TEST(VerbsGidSelect, LinkLocalOnlyNeedsAPeerOnTheLink) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), LL(1, "RoCE v2")};
  GidChoice noPeer = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(noPeer.ok());
  EXPECT_EQ(noPeer.index, 1);  // the v2 one
  EXPECT_THAT(noPeer.reason, AllOf(HasSubstr("only link-local GIDs are usable"),
                                   HasSubstr("no peer address known yet")));

  PeerAddress far = Peer("10.0.1.2", 24);
  GidChoice c = ChooseGid(t, GidPolicy{}, &far);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.index, -1);
  EXPECT_THAT(c.error, AllOf(HasSubstr("no usable GID: only link-local GIDs"),
                             HasSubstr("peer 10.0.1.2 is on another subnet")));

  PeerAddress onLink = Peer("fe80::aa:bbff:fecc:ddee", 64);
  GidChoice d = ChooseGid(t, GidPolicy{}, &onLink);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.index, 1);
}

TEST(VerbsGidSelect, PeerOnAnotherSubnetWithLinkLocalAndIpv6Only) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V6(2, "", "fd00:2::1"),
                                  V6(3, "RoCE v2", "fd00:2::1")};
  PeerAddress far = Peer("10.0.1.2", 24);
  GidChoice c = ChooseGid(t, GidPolicy{}, &far);
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.error,
              HasSubstr("no usable GID: only link-local and IPv6 GIDs, peer 10.0.1.2 is on another subnet"));
  EXPECT_THAT(c.error, HasSubstr("an IPv6 GID cannot reach it"));
  // An IPv6 peer in fd00:2::/64 is reachable through the RoCE v2 IPv6 GID.
  PeerAddress near = Peer("fd00:2::2", 64);
  GidChoice d = ChooseGid(t, GidPolicy{}, &near);
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.index, 3);
}

TEST(VerbsGidSelect, NeverLinkLocalForAPeerOnAnotherSubnet) {
  // The IPv4 GID is excluded by the range; a link-local fallback must not be taken.
  std::vector<topology::Gid> t = {LL(0, "RoCE v2"), V4(1, "RoCE v2", "10.0.0.1")};
  PeerAddress far = Peer("10.0.1.2", 24);
  GidPolicy p;
  p.addrRange = "192.168.0.0/16";
  GidChoice c = ChooseGid(t, p, &far);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.index, 0);
}

TEST(VerbsGidSelect, PeerSubnetBreaksTiesWithinATier) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v2"), V4(1, "RoCE v2", "10.0.0.1"),
                                  V4(2, "RoCE v2", "10.0.1.1")};
  PeerAddress p1 = Peer("10.0.1.2", 24), p0 = Peer("10.0.0.9", 24), other = Peer("172.16.0.1", 24);
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, &p1).index, 2);
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, &p0).index, 1);
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, &other).index, 1);  // routed: lowest index
  // A peer given as a GID, as the connection metadata carries it.
  PeerAddress asGid = Peer("0000:0000:0000:0000:0000:ffff:0a00:0102", 24);
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, &asGid).index, 2);
  PeerAddress mapped = Peer("::ffff:10.0.1.2", 24);
  EXPECT_EQ(ChooseGid(t, GidPolicy{}, &mapped).index, 2);
}

TEST(VerbsGidSelect, PeerFamilyExcludesTheOtherFamily) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v2"), V4(1, "RoCE v2", "10.0.0.1"),
                                  V6(2, "RoCE v2", "fd00::1")};
  PeerAddress v6peer = Peer("fd00::2", 64);
  GidChoice c = ChooseGid(t, GidPolicy{}, &v6peer);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 2);
}

TEST(VerbsGidSelect, BadPeerAddressIsAnError) {
  PeerAddress bad = Peer("peer-host", 24);
  GidChoice c = ChooseGid(ConnectXHostA(), GidPolicy{}, &bad);
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.error, HasSubstr("'peer-host'"));
}

// --- forced index -------------------------------------------------------------------

TEST(VerbsGidSelect, ForcedIndex) {
  GidPolicy p;
  p.forcedIndex = 2;
  GidChoice c = ChooseGid(ConnectXHostA(), p, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 2);
  EXPECT_EQ(c.type, GidType::kRoceV1);
  EXPECT_THAT(c.reason, HasSubstr("forced by RAILYARD_GID_INDEX=2"));

  p.forcedIndex = 2;  // a hole on host B
  GidChoice hole = ChooseGid(ConnectXHostB(), p, nullptr);
  EXPECT_FALSE(hole.ok());
  EXPECT_EQ(hole.index, -1);
  EXPECT_THAT(hole.error, AllOf(HasSubstr("GID index 2"), HasSubstr("hole")));

  p.forcedIndex = 9;
  GidChoice past = ChooseGid(ConnectXHostB(), p, nullptr);
  EXPECT_FALSE(past.ok());
  EXPECT_THAT(past.error, AllOf(HasSubstr("GID index 9"), HasSubstr("out of range"),
                                HasSubstr("last entry is index 4")));

  p.forcedIndex = 0;
  GidChoice empty = ChooseGid({}, p, nullptr);
  EXPECT_FALSE(empty.ok());
  EXPECT_THAT(empty.error, AllOf(HasSubstr("GID index 0"), HasSubstr("empty")));
}

TEST(VerbsGidSelect, ForcedIndexWinsButWarns) {
  GidPolicy p;
  p.forcedIndex = 0;  // link-local
  PeerAddress far = Peer("10.0.1.2", 24);
  GidChoice c = ChooseGid(ConnectXHostA(), p, &far);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.index, 0);
  EXPECT_THAT(c.warning, AllOf(HasSubstr("link-local"), HasSubstr("peer 10.0.1.2 is on another subnet")));
  PeerAddress near = Peer("10.0.0.2", 24);
  EXPECT_TRUE(ChooseGid(ConnectXHostA(), p, &near).warning.empty());
  // Forced IPv4 GID for an IPv6 peer.
  p.forcedIndex = 3;
  PeerAddress v6 = Peer("fd00::2", 64);
  EXPECT_THAT(ChooseGid(ConnectXHostA(), p, &v6).warning, HasSubstr("is an IPv4 GID but peer fd00::2 is IPv6"));
  // Forced entry whose type is unreadable.
  p.forcedIndex = 1;
  GidChoice u = ChooseGid({LL(0, "RoCE v2"), V4(1, "", "10.0.0.1")}, p, nullptr);
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(u.reason, HasSubstr("RoCE version is unknown"));
}

// --- address range --------------------------------------------------------------------

TEST(VerbsGidSelect, AddrRangeSelectsAmongAddresses) {
  std::vector<topology::Gid> t = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V4(2, "RoCE v1", "10.0.0.1"),
                                  V4(3, "RoCE v2", "10.0.0.1"), V4(4, "RoCE v1", "192.168.50.1"),
                                  V4(5, "RoCE v2", "192.168.50.1"), V4(6, "RoCE v1", "172.20.0.1"),
                                  V4(7, "RoCE v2", "172.20.0.1")};
  GidPolicy p;
  EXPECT_EQ(ChooseGid(t, p, nullptr).index, 3);
  // Private ranges are ordinary, valid ranges.
  p.addrRange = "192.168.0.0/16";
  GidChoice c = ChooseGid(t, p, nullptr);
  EXPECT_EQ(c.index, 5);
  EXPECT_THAT(c.reason, HasSubstr("inside RAILYARD_ADDR_RANGE=192.168.0.0/16"));
  p.addrRange = "172.16.0.0/12";
  EXPECT_EQ(ChooseGid(t, p, nullptr).index, 7);
  p.addrRange = "10.0.0.0/8";
  EXPECT_EQ(ChooseGid(t, p, nullptr).index, 3);

  p.addrRange = "100.64.0.0/10";
  GidChoice none = ChooseGid(t, p, nullptr);
  EXPECT_FALSE(none.ok());
  EXPECT_THAT(none.error, AllOf(HasSubstr("link-local and IPv4 GIDs"),
                                HasSubstr("none inside RAILYARD_ADDR_RANGE=100.64.0.0/10")));
}

TEST(VerbsGidSelect, AddrRangeErrors) {
  GidPolicy p;
  p.addrRange = "fd00::/8";  // IPv6 range with the AF_INET family
  GidChoice c = ChooseGid(ConnectXHostA(), p, nullptr);
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(c.error, AllOf(HasSubstr("is IPv6"), HasSubstr("AF_INET")));
  p.addrRange = "10.0.0.0";
  EXPECT_THAT(ChooseGid(ConnectXHostA(), p, nullptr).error, HasSubstr("not a CIDR"));
  p.addrFamily = AF_INET6;
  p.addrRange = "fd00:2::/32";
  std::vector<topology::Gid> t = {LL(0, "RoCE v2"), V6(1, "RoCE v2", "fd00:1::1"), V6(2, "RoCE v2", "fd00:2::1")};
  EXPECT_EQ(ChooseGid(t, p, nullptr).index, 2);
}

// --- GID change ---------------------------------------------------------------------

TEST(VerbsGidSelect, GidChangeTriggersReResolution) {
  std::vector<topology::Gid> t = ConnectXHostA();
  GidChoice c = ChooseGid(t, GidPolicy{}, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(GidStillValid(c, t));
  // IBV_EVENT_GID_CHANGE: the address moved (DHCP renew) and the table was rebuilt.
  std::vector<topology::Gid> after = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), V4(2, "RoCE v1", "10.0.0.7"),
                                      V4(3, "RoCE v2", "10.0.0.7")};
  EXPECT_FALSE(GidStillValid(c, after));
  GidChoice again = ChooseGid(after, GidPolicy{}, nullptr);
  EXPECT_EQ(again.index, 3);
  EXPECT_EQ(again.gid.ip, "10.0.0.7");
  // Address removed: the entry became a hole.
  std::vector<topology::Gid> gone = {LL(0, "RoCE v1"), LL(1, "RoCE v2"), Hole(2), Hole(3)};
  EXPECT_FALSE(GidStillValid(c, gone));
  EXPECT_FALSE(GidStillValid(GidChoice{}, t));
}

// --- the Spark fixture, through DiscoverRails -------------------------------------

std::vector<topology::Rail> SparkRails() { return railyard::testing::SparkRails(false); }

const topology::Rail& Find(const std::vector<topology::Rail>& rails, const char* dev) {
  auto it = std::find_if(rails.begin(), rails.end(),
                         [&](const topology::Rail& r) { return r.rdmaDevice == dev; });
  EXPECT_NE(it, rails.end()) << dev;
  return *it;
}

TEST(VerbsGidSelectSpark, EachDevice) {
  std::vector<topology::Rail> rails = SparkRails();
  ASSERT_EQ(rails.size(), 4u);

  GidChoice f0 = ChooseGid(Find(rails, "rocep1s0f0").gids, GidPolicy{}, nullptr);
  ASSERT_TRUE(f0.ok()) << f0.error;
  EXPECT_EQ(f0.index, 3);
  EXPECT_EQ(f0.gid.ip, "10.0.0.1");
  EXPECT_EQ(f0.type, GidType::kRoceV2);

  // Hole at 2: index 3 all the same.
  GidChoice f1 = ChooseGid(Find(rails, "rocep1s0f1").gids, GidPolicy{}, nullptr);
  ASSERT_TRUE(f1.ok()) << f1.error;
  EXPECT_EQ(f1.index, 3);
  EXPECT_EQ(f1.gid.ip, "10.0.1.1");

  // IPv6 only, types/2 unreadable: the RoCE v2 IPv6 entry, never the link-local one.
  const topology::Rail& p2 = Find(rails, "roceP2p1s0f0");
  GidChoice v6 = ChooseGid(p2.gids, GidPolicy{}, nullptr);
  ASSERT_TRUE(v6.ok()) << v6.error;
  EXPECT_EQ(v6.index, 3);
  EXPECT_EQ(v6.gid.ip, "fd00:2::1");
  EXPECT_THAT(v6.reason, HasSubstr("only link-local and IPv6 GIDs"));
  // Asking for RoCE v1 does not bring in the unreadable entry: typed v2 first.
  GidPolicy v1;
  v1.roceVersion = 1;
  EXPECT_EQ(ChooseGid(p2.gids, v1, nullptr).index, 3);
  // Forcing the unreadable entry works and says its version is unknown.
  GidPolicy forced;
  forced.forcedIndex = 2;
  GidChoice f = ChooseGid(p2.gids, forced, nullptr);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.type, GidType::kUnknown);
  EXPECT_THAT(f.reason, HasSubstr("RoCE version is unknown"));
  // An IPv4 peer on another subnet: nothing usable, and the error says why.
  PeerAddress far = Peer("10.0.1.2", 24);
  GidChoice err = ChooseGid(p2.gids, GidPolicy{}, &far);
  EXPECT_FALSE(err.ok());
  EXPECT_THAT(err.error,
              HasSubstr("only link-local and IPv6 GIDs, peer 10.0.1.2 is on another subnet"));

  GidChoice p3 = ChooseGid(Find(rails, "roceP2p1s0f1").gids, GidPolicy{}, nullptr);
  EXPECT_EQ(p3.index, 3);
  EXPECT_EQ(ChooseGid(Find(rails, "roceP2p1s0f1").gids, v1, nullptr).index, 2);

  // The hole of rocep1s0f1 forced.
  forced.forcedIndex = 2;
  GidChoice hole = ChooseGid(Find(rails, "rocep1s0f1").gids, forced, nullptr);
  EXPECT_FALSE(hole.ok());
  EXPECT_THAT(hole.error, AllOf(HasSubstr("RAILYARD_GID_INDEX=2"), HasSubstr("hole")));
}

// --- configuration --------------------------------------------------------------------

using railyard::test_support::ParseEnv;

TEST(VerbsGidConfig, VariablesAndAliases) {
  Status st;
  env::Config c = ParseEnv({{"NCCL_IB_GID_INDEX", "3"},
                            {"NCCL_IB_ROCE_VERSION_NUM", "1"},
                            {"NCCL_IB_ADDR_FAMILY", "AF_INET6"},
                            {"NCCL_IB_ADDR_RANGE", "fd00::/8"}},
                           &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.gidIndex, 3);
  EXPECT_EQ(c.roceVersion, 1);
  EXPECT_EQ(c.addrFamily, AF_INET6);
  EXPECT_EQ(c.addrRange, "fd00::/8");

  c = ParseEnv({{"NCCL_IB_GID_INDEX", "3"}, {"RAILYARD_GID_INDEX", "-1"}}, &st);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(c.gidIndex, -1);

  for (auto bad : std::vector<std::pair<std::string, std::string>>{
           {"RAILYARD_ADDR_RANGE", "10.0.0.0"},
           {"RAILYARD_ADDR_RANGE", "10.0.0.0/40"},
           {"RAILYARD_ADDR_RANGE", "10.0.0.0/-1"},
           {"NCCL_IB_ADDR_RANGE", "fd00::/200"},
           {"RAILYARD_ADDR_FAMILY", "inet"},
           {"RAILYARD_GID_INDEX", "-2"},
           {"RAILYARD_GID_INDEX", "256"},
           {"RAILYARD_ROCE_VERSION", "3"}}) {
    ParseEnv({bad}, &st);
    EXPECT_FALSE(st.ok()) << bad.first << "=" << bad.second;
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_THAT(st.message(), HasSubstr(bad.first)) << st.message();
  }
}

}  // namespace
}  // namespace railyard::proxy::verbs
