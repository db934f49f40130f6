// proxy/verbs/hca_filter: RAILYARD_HCA grammar (NCCL_IB_HCA's, with the whole-number
// prefix rule), and the skip rules that turn rails into verbs devices (fake rails and
// the Spark sysfs fixture).
#include "proxy/verbs/hca_filter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/spark_fixture.h"

#include <mutex>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/log.h"
#include "topology/discovery.h"
#include "tests/unit/log_capture.h"

namespace railyard::proxy::verbs {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using railyard::test_support::LogCapture;

// --- prefix rule --------------------------------------------------------------------

TEST(VerbsHcaPrefix, TrailingNumberIsWhole) {
  EXPECT_TRUE(HcaPrefixMatches("mlx5_1", "mlx5_1"));
  EXPECT_FALSE(HcaPrefixMatches("mlx5_1", "mlx5_11"));
  EXPECT_FALSE(HcaPrefixMatches("mlx5_1", "mlx5_10"));
  EXPECT_TRUE(HcaPrefixMatches("mlx5", "mlx5_0"));
  EXPECT_TRUE(HcaPrefixMatches("mlx5", "mlx5_11"));
  EXPECT_FALSE(HcaPrefixMatches("mlx5", "mlx50"));
  EXPECT_TRUE(HcaPrefixMatches("mlx", "mlx5_0"));  // the entry ends in a letter
  EXPECT_TRUE(HcaPrefixMatches("rocep1s0f", "rocep1s0f1"));
  EXPECT_TRUE(HcaPrefixMatches("rocep1s0", "rocep1s0f0"));
  EXPECT_FALSE(HcaPrefixMatches("rocep1", "rocep11s0f0"));
  EXPECT_FALSE(HcaPrefixMatches("mlx5_1", "mlx5_"));  // shorter name
  EXPECT_FALSE(HcaPrefixMatches("mlx5_1", "bnxt_re1"));
  EXPECT_TRUE(HcaPrefixMatches("", "anything"));
}

TEST(VerbsHcaPrefix, NcclListWouldMatchLongerNumber) {
  // The deliberate difference: NCCL's own matcher (topology::MatchDeviceList, prefix
  // mode) lets mlx5_1 select mlx5_11; RAILYARD_HCA does not.
  topology::DeviceList nccl = topology::ParseDeviceList("mlx5_1", topology::kNcclMaxIbDevs);
  EXPECT_TRUE(topology::MatchDeviceList(nccl, "mlx5_11", 1));
  EXPECT_FALSE(HcaFilter::Parse("mlx5_1").Matches("mlx5_11", 1));
  EXPECT_TRUE(HcaFilter::Parse("mlx5_1").Matches("mlx5_1", 1));
}

// --- grammar --------------------------------------------------------------------------

TEST(VerbsHcaFilter, EmptySelectsAll) {
  HcaFilter f = HcaFilter::Parse("");
  EXPECT_TRUE(f.selectsAll());
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_TRUE(f.Matches("rocep1s0f0", 2));
  EXPECT_TRUE(HcaFilter().Matches("anything", -1));
}

TEST(VerbsHcaFilter, PrefixList) {
  HcaFilter f = HcaFilter::Parse("mlx5_1,mlx5_4");
  EXPECT_FALSE(f.selectsAll());
  EXPECT_FALSE(f.list().exclude);
  EXPECT_FALSE(f.list().exact);
  ASSERT_EQ(f.list().entries.size(), 2u);
  EXPECT_TRUE(f.Matches("mlx5_1", 1));
  EXPECT_TRUE(f.Matches("mlx5_4", 1));
  EXPECT_FALSE(f.Matches("mlx5_11", 1));
  EXPECT_FALSE(f.Matches("mlx5_14", 1));
  EXPECT_FALSE(f.Matches("mlx5_0", 1));
  EXPECT_FALSE(f.Matches("mlx5_40", 1));
}

TEST(VerbsHcaFilter, FamilyPrefixSelectsEveryDevice) {
  HcaFilter f = HcaFilter::Parse("mlx5");
  for (const char* d : {"mlx5_0", "mlx5_1", "mlx5_11", "mlx5_bond_0"}) EXPECT_TRUE(f.Matches(d, 1)) << d;
  EXPECT_FALSE(f.Matches("mlx50", 1));
  EXPECT_FALSE(f.Matches("rocep1s0f0", 1));
}

TEST(VerbsHcaFilter, ExcludeList) {
  HcaFilter f = HcaFilter::Parse("^mlx5_1");
  EXPECT_TRUE(f.list().exclude);
  EXPECT_FALSE(f.Matches("mlx5_1", 1));
  EXPECT_TRUE(f.Matches("mlx5_11", 1));  // NCCL would exclude mlx5_11 too
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
}

TEST(VerbsHcaFilter, ExactList) {
  HcaFilter f = HcaFilter::Parse("=mlx5_1,rocep1s0f0");
  EXPECT_TRUE(f.list().exact);
  EXPECT_TRUE(f.Matches("mlx5_1", 1));
  EXPECT_TRUE(f.Matches("rocep1s0f0", 1));
  EXPECT_FALSE(f.Matches("mlx5_11", 1));
  EXPECT_FALSE(f.Matches("rocep1s0f", 1));
  EXPECT_FALSE(HcaFilter::Parse("=mlx5").Matches("mlx5_0", 1));  // exact: no prefixes at all
}

TEST(VerbsHcaFilter, ExcludeExact) {
  HcaFilter f = HcaFilter::Parse("^=mlx5_1,mlx5_4");
  EXPECT_TRUE(f.list().exclude);
  EXPECT_TRUE(f.list().exact);
  EXPECT_FALSE(f.Matches("mlx5_1", 1));
  EXPECT_FALSE(f.Matches("mlx5_4", 1));
  EXPECT_TRUE(f.Matches("mlx5_11", 1));
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  // "=^" is not "^=": an exact list whose first name is "^mlx5_1".
  HcaFilter g = HcaFilter::Parse("=^mlx5_1");
  EXPECT_FALSE(g.list().exclude);
  EXPECT_FALSE(g.Matches("mlx5_1", 1));
  EXPECT_TRUE(g.Matches("^mlx5_1", 1));
}

TEST(VerbsHcaFilter, Ports) {
  HcaFilter f = HcaFilter::Parse("mlx5_0:1,mlx5_1");
  ASSERT_EQ(f.list().entries.size(), 2u);
  EXPECT_EQ(f.list().entries[0].port, 1);
  EXPECT_EQ(f.list().entries[1].port, -1);
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_FALSE(f.Matches("mlx5_0", 2));
  EXPECT_TRUE(f.Matches("mlx5_1", 1));  // no port: every port
  EXPECT_TRUE(f.Matches("mlx5_1", 2));
  EXPECT_TRUE(f.Matches("mlx5_0", -1));  // caller does not know the port
  // Prefix rule with a port: mlx5_1:2 does not select mlx5_11 port 2.
  EXPECT_FALSE(HcaFilter::Parse("mlx5_1:2").Matches("mlx5_11", 2));

  HcaFilter x = HcaFilter::Parse("^=mlx5_0:2");
  EXPECT_TRUE(x.Matches("mlx5_0", 1));
  EXPECT_FALSE(x.Matches("mlx5_0", 2));

  // NCCL 2.28.9: anything after a second ':' is ignored (no rail:plane fields).
  HcaFilter r = HcaFilter::Parse("mlx5_0:1:7");
  ASSERT_EQ(r.list().entries.size(), 1u);
  EXPECT_EQ(r.list().entries[0].port, 1);
  EXPECT_TRUE(r.Matches("mlx5_0", 1));
}

TEST(VerbsHcaFilter, EmptyExcludeListSelectsNothing) {
  // NCCL: matchIfList returns true for an empty list, XOR exclude -> false for all.
  EXPECT_FALSE(HcaFilter::Parse("^").Matches("mlx5_0", 1));
  EXPECT_FALSE(HcaFilter::Parse("^=").Matches("mlx5_0", 1));
  // "=" alone is an empty non-exclusive list: everything.
  EXPECT_TRUE(HcaFilter::Parse("=").Matches("mlx5_0", 1));
}

TEST(VerbsHcaFilter, AtMost32Entries) {
  std::string v = "=";
  for (int i = 0; i < 40; ++i) v += (i > 0 ? ",dev" : "dev") + std::to_string(i);
  HcaFilter f = HcaFilter::Parse(v);
  EXPECT_EQ(f.list().entries.size(), topology::kNcclMaxIbDevs);
  EXPECT_TRUE(f.Matches("dev31", 1));
  EXPECT_FALSE(f.Matches("dev32", 1));
}

TEST(VerbsHcaFilter, WhitespaceIsKeptAndWarned) {
  LogCapture logs;
  HcaFilter f = HcaFilter::Parse("mlx5_0, mlx5_1");
  EXPECT_TRUE(f.Matches("mlx5_0", 1));
  EXPECT_FALSE(f.Matches("mlx5_1", 1));
  EXPECT_THAT(logs.lines(), ElementsAre(AllOf(HasSubstr("WARN"), HasSubstr("' mlx5_1'"))));
}

TEST(VerbsHcaFilter, ComesFromRailyardHcaOrNcclIbHca) {
  auto parse = [](std::vector<std::pair<std::string, std::string>> vars) {
    env::Lookup lookup = [vars](const char* name) -> std::optional<std::string> {
      for (const auto& [k, v] : vars) {
        if (k == name) return v;
      }
      return std::nullopt;
    };
    env::Config c;
    EXPECT_TRUE(env::Parse(lookup, {}, &c).ok());
    return c.hca;
  };
  EXPECT_EQ(parse({{"NCCL_IB_HCA", "^=mlx5_1"}}), "^=mlx5_1");
  EXPECT_EQ(parse({{"NCCL_IB_HCA", "mlx5_1"}, {"RAILYARD_HCA", "mlx5_2:1"}}), "mlx5_2:1");
  EXPECT_EQ(parse({}), "");
}

// --- device selection ---------------------------------------------------------------

topology::Gid V4Gid(int index, const char* type, const char* ip) {
  topology::Gid g;
  g.index = index;
  g.type = type;
  g.raw[10] = g.raw[11] = 0xff;
  EXPECT_EQ(inet_pton(AF_INET, ip, g.raw.data() + 12), 1);
  g.ip = ip;
  g.ipv4Mapped = true;
  return g;
}

topology::Gid LinkLocal(int index, const char* type) {
  topology::Gid g;
  g.index = index;
  g.type = type;
  g.raw = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  g.linkLocal = true;
  return g;
}

topology::Rail FakeRail(const char* netdev, const char* dev, int port, const char* state,
                        std::vector<topology::Gid> gids) {
  topology::Rail r;
  r.netdev = netdev;
  r.rdmaDevice = dev;
  r.rdmaPort = port;
  r.rdmaPortState = state;
  r.linkLayer = "Ethernet";
  r.gids = std::move(gids);
  return r;
}

TEST(VerbsSelectDevices, SkipsDownFilteredAndGidlessWithInfo) {
  std::vector<topology::Rail> rails;
  rails.push_back(FakeRail("eth0", "mlx5_0", 1, "ACTIVE", {LinkLocal(0, "RoCE v1"), V4Gid(3, "RoCE v2", "10.0.0.1")}));
  rails.push_back(FakeRail("eth1", "mlx5_1", 1, "DOWN", {V4Gid(3, "RoCE v2", "10.0.1.1")}));
  rails.push_back(FakeRail("eth11", "mlx5_11", 1, "ACTIVE", {V4Gid(4, "RoCE v2", "10.0.11.1")}));
  rails.push_back(FakeRail("eth2", "mlx5_2", 1, "ACTIVE", {}));  // every entry a hole
  topology::Rail plain;
  plain.netdev = "eno1";  // no RDMA device: not a candidate, not reported
  rails.push_back(plain);
  topology::Rail ib = FakeRail("ib0", "mlx5_3", 1, "ACTIVE", {V4Gid(0, "IB", "10.9.9.9")});
  ib.linkLayer = "InfiniBand";
  rails.push_back(ib);

  LogCapture logs;
  std::vector<std::string> skipped;
  std::vector<VerbsDevice> devs =
      SelectVerbsDevices(rails, HcaFilter::Parse("^mlx5_11"), GidPolicy{}, &skipped);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].device, "mlx5_0");
  EXPECT_EQ(devs[0].port, 1);
  EXPECT_EQ(devs[0].netdev, "eth0");
  EXPECT_EQ(devs[0].gid.index, 3);
  EXPECT_EQ(devs[0].rail, &rails[0]);
  EXPECT_THAT(skipped,
              ElementsAre("mlx5_1:1 (eth1): port down (state DOWN)",
                          "mlx5_11:1 (eth11): filtered out by RAILYARD_HCA='^mlx5_11'",
                          HasSubstr("mlx5_2:1 (eth2): no usable GID: the GID table is empty"),
                          HasSubstr("mlx5_3:1 (ib0): link layer InfiniBand")));
  int infoSkips = 0;
  for (const std::string& l : logs.lines()) {
    if (l.starts_with("INFO") && l.find("skipping") != std::string::npos) ++infoSkips;
  }
  EXPECT_EQ(infoSkips, 4);
}

TEST(VerbsSelectDevices, GidPolicyCanEliminateADevice) {
  std::vector<topology::Rail> rails;
  rails.push_back(FakeRail("eth0", "mlx5_0", 1, "ACTIVE", {V4Gid(3, "RoCE v2", "10.0.0.1")}));
  rails.push_back(FakeRail("eth1", "mlx5_1", 1, "ACTIVE", {V4Gid(3, "RoCE v2", "192.168.7.1")}));
  GidPolicy p;
  p.addrRange = "192.168.0.0/16";
  std::vector<std::string> skipped;
  std::vector<VerbsDevice> devs = SelectVerbsDevices(rails, HcaFilter{}, p, &skipped);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].device, "mlx5_1");
  EXPECT_THAT(skipped, ElementsAre(AllOf(HasSubstr("mlx5_0:1"), HasSubstr("no usable GID"),
                                         HasSubstr("RAILYARD_ADDR_RANGE=192.168.0.0/16"))));
}

// The Spark fixture through DiscoverRails: four RoCE ports, one with an IPv6-only table.
std::vector<topology::Rail> SparkRails() { return railyard::testing::SparkRails(true); }

TEST(VerbsSelectDevices, SparkFixture) {
  std::vector<topology::Rail> rails = SparkRails();
  ASSERT_EQ(rails.size(), 4u);
  std::vector<std::string> skipped;
  std::vector<VerbsDevice> devs = SelectVerbsDevices(rails, HcaFilter{}, GidPolicy{}, &skipped);
  EXPECT_THAT(skipped, IsEmpty());
  ASSERT_EQ(devs.size(), 4u);
  EXPECT_EQ(devs[0].device, "rocep1s0f0");
  EXPECT_EQ(devs[0].gid.index, 3);
  EXPECT_EQ(devs[1].device, "rocep1s0f1");
  EXPECT_EQ(devs[1].gid.index, 3);  // past the hole at 2
  EXPECT_EQ(devs[2].device, "roceP2p1s0f0");
  EXPECT_EQ(devs[2].gid.index, 3);  // IPv6-only: its RoCE v2 IPv6 GID
  EXPECT_EQ(devs[2].gid.gid.ip, "fd00:2::1");
  EXPECT_EQ(devs[3].device, "roceP2p1s0f1");
  EXPECT_EQ(devs[3].gid.index, 3);

  // Exact exclusion of one, prefix selection of a PCI domain's pair.
  devs = SelectVerbsDevices(rails, HcaFilter::Parse("^=rocep1s0f1"), GidPolicy{}, &skipped);
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[1].device, "roceP2p1s0f0");
  devs = SelectVerbsDevices(rails, HcaFilter::Parse("roceP2p1s0f"), GidPolicy{}, nullptr);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].device, "roceP2p1s0f0");
  EXPECT_EQ(devs[1].device, "roceP2p1s0f1");
  devs = SelectVerbsDevices(rails, HcaFilter::Parse("rocep1s0f0:2"), GidPolicy{}, nullptr);
  EXPECT_THAT(devs, IsEmpty());  // only port 1 exists

  // An IPv4 range removes the IPv6-only device, with the reason.
  GidPolicy v4;
  v4.addrRange = "10.0.0.0/8";
  skipped.clear();
  devs = SelectVerbsDevices(rails, HcaFilter{}, v4, &skipped);
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_THAT(skipped, ElementsAre(AllOf(HasSubstr("roceP2p1s0f0:1 (enP2p1s0f0np0)"),
                                         HasSubstr("only link-local and IPv6 GIDs"))));
}

}  // namespace
}  // namespace railyard::proxy::verbs
