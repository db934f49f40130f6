// topology/interface_filter: the NCCL_SOCKET_IFNAME grammar as NCCL 2.28.9 applies it.
#include "topology/interface_filter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "env/log.h"

namespace railyard::topology {
namespace {

bool M(std::string_view filter, std::string_view ifname) {
  return InterfaceFilter::Parse(filter).Matches(ifname);
}

TEST(InterfaceFilter, PrefixList) {
  EXPECT_TRUE(M("eth", "eth0"));
  EXPECT_TRUE(M("eth", "eth"));
  EXPECT_FALSE(M("eth", "et"));
  EXPECT_FALSE(M("eth", "ib0"));
  EXPECT_TRUE(M("eth,ib", "ib0"));
  EXPECT_TRUE(M("eth,ib", "eth3"));
  EXPECT_FALSE(M("eth,ib", "lo"));
  EXPECT_FALSE(M("eth0", "Eth0"));  // case-sensitive, as strncmp
}

TEST(InterfaceFilter, ExcludeList) {
  EXPECT_FALSE(M("^docker,lo", "docker0"));
  EXPECT_FALSE(M("^docker,lo", "lo"));
  EXPECT_FALSE(M("^docker,lo", "lo2"));
  EXPECT_TRUE(M("^docker,lo", "eth0"));
  auto f = InterfaceFilter::Parse("^docker,lo");
  EXPECT_TRUE(f.list().exclude);
  EXPECT_FALSE(f.list().exact);
}

TEST(InterfaceFilter, ExactList) {
  EXPECT_TRUE(M("=eth0,ib1", "eth0"));
  EXPECT_TRUE(M("=eth0,ib1", "ib1"));
  EXPECT_FALSE(M("=eth0,ib1", "eth01"));
  EXPECT_FALSE(M("=eth0,ib1", "eth"));
  EXPECT_TRUE(InterfaceFilter::Parse("=eth0").list().exact);
}

TEST(InterfaceFilter, ExcludeExactList) {
  EXPECT_FALSE(M("^=eth1,eth4", "eth1"));
  EXPECT_FALSE(M("^=eth1,eth4", "eth4"));
  EXPECT_TRUE(M("^=eth1,eth4", "eth11"));
  EXPECT_TRUE(M("^=eth1,eth4", "eth0"));
  // The order is ^ then =; "=^" is an exact list whose first name is "^eth1".
  auto f = InterfaceFilter::Parse("=^eth1");
  EXPECT_FALSE(f.list().exclude);
  EXPECT_TRUE(f.list().exact);
  EXPECT_TRUE(f.Matches("^eth1"));
  EXPECT_FALSE(f.Matches("eth1"));
}

TEST(InterfaceFilter, OverlappingPrefixes) {
  // NCCL prefix mode: "eth1" matches "eth11" (and "mlx5_1" matches "mlx5_10").
  EXPECT_TRUE(M("eth1", "eth1"));
  EXPECT_TRUE(M("eth1", "eth11"));
  EXPECT_FALSE(M("eth11", "eth1"));
  EXPECT_FALSE(M("^eth1", "eth11"));
  // With '=' it is exact.
  EXPECT_TRUE(M("=eth1", "eth1"));
  EXPECT_FALSE(M("=eth1", "eth11"));
  EXPECT_TRUE(M("^=eth1", "eth11"));
}

TEST(InterfaceFilter, EmptyAndOneCharacterValuesAreAutomatic) {
  for (const char* value : {"", "^", "=", "e", ","}) {
    auto f = InterfaceFilter::Parse(value);
    EXPECT_TRUE(f.automatic()) << "'" << value << "'";
    EXPECT_TRUE(f.Matches("eth0")) << "'" << value << "'";
    EXPECT_TRUE(f.Matches("lo")) << "'" << value << "'";
  }
  // Default-constructed = automatic too.
  EXPECT_TRUE(InterfaceFilter().automatic());
  // Two characters are a real list: "e," is the prefix "e".
  auto f = InterfaceFilter::Parse("e,");
  EXPECT_FALSE(f.automatic());
  EXPECT_TRUE(f.Matches("eth0"));
  EXPECT_FALSE(f.Matches("lo"));
}

TEST(InterfaceFilter, EmptyListsFollowNccl) {
  // No entries: NCCL's matchIfList matches everything, so an exclude list with
  // no entries excludes everything, and a plain empty list admits everything.
  EXPECT_FALSE(M("^=", "eth0"));
  EXPECT_FALSE(M("^,", "eth0"));
  EXPECT_TRUE(M(",,", "eth0"));
  EXPECT_TRUE(M("=,", "anything"));
}

TEST(InterfaceFilter, EmptyEntriesAreSkipped) {
  auto f = InterfaceFilter::Parse(",eth0,,ib,");
  ASSERT_EQ(f.list().entries.size(), 2u);
  EXPECT_EQ(f.list().entries[0].name, "eth0");
  EXPECT_EQ(f.list().entries[1].name, "ib");
}

TEST(InterfaceFilter, WhitespaceIsNotTrimmedAndWarns) {
  std::vector<std::string> warns;
  log::SetSinkForTesting([&](log::Level level, const std::string& m) {
    if (level == log::Level::kWarn) warns.push_back(m);
  });
  auto f = InterfaceFilter::Parse("eth0, ib0");
  log::SetSinkForTesting(nullptr);
  EXPECT_TRUE(f.Matches("eth0"));
  EXPECT_FALSE(f.Matches("ib0"));  // the entry is " ib0"
  ASSERT_EQ(f.list().entries.size(), 2u);
  EXPECT_EQ(f.list().entries[1].name, " ib0");
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_THAT(warns[0], ::testing::HasSubstr("' ib0'"));
}

TEST(InterfaceFilter, PortSuffixIsIgnoredForSockets) {
  // NCCL's shared parser cuts the name at ':'; sockets match with port -1.
  EXPECT_TRUE(M("eth0:1", "eth0"));
  EXPECT_TRUE(M("eth0:1", "eth01"));
  EXPECT_FALSE(M("=eth0:1", "eth0:1"));
  EXPECT_TRUE(M("=eth0:1", "eth0"));
}

TEST(InterfaceFilter, NamesExactlyOnlyForAnExactInclusiveEntry) {
  auto N = [](std::string_view filter, std::string_view ifname) {
    return InterfaceFilter::Parse(filter).NamesExactly(ifname);
  };
  EXPECT_TRUE(N("=eth0", "eth0"));
  EXPECT_TRUE(N("=p0,eth0", "eth0"));
  EXPECT_TRUE(N("=eth0:1", "eth0"));  // the port part is cut off, as for matching
  EXPECT_FALSE(N("=eth0", "eth01"));
  EXPECT_FALSE(N("eth0", "eth0"));      // a prefix list
  EXPECT_FALSE(N("eth", "eth0"));
  EXPECT_FALSE(N("^=eth1", "eth0"));    // an exclusion matches eth0 but does not name it
  EXPECT_FALSE(N("^docker", "eth0"));
  EXPECT_FALSE(N("=", "eth0"));         // one character: automatic
  EXPECT_FALSE(N("", "eth0"));
}

TEST(InterfaceFilter, SocketListIsLimitedLikeNccl) {
  std::string value;
  for (int i = 0; i < 17; ++i) value += (i ? ",if" : "if") + std::to_string(i) + "x";
  log::SetSinkForTesting([](log::Level, const std::string&) {});
  auto f = InterfaceFilter::Parse(value);
  log::SetSinkForTesting(nullptr);
  EXPECT_EQ(f.list().entries.size(), kNcclMaxSocketIfs);
  EXPECT_TRUE(f.Matches("if15x"));
  EXPECT_FALSE(f.Matches("if16x"));
}

// The shared parser, used with ports as NCCL_IB_HCA will be.
TEST(DeviceList, IbHcaGrammar) {
  DeviceList l = ParseDeviceList("^=mlx5_0:1,mlx5_1,:3,mlx5_2:,mlx5_3:2:7", kNcclMaxIbDevs);
  EXPECT_TRUE(l.exclude);
  EXPECT_TRUE(l.exact);
  ASSERT_EQ(l.entries.size(), 4u);
  EXPECT_EQ(l.entries[0].name, "mlx5_0");
  EXPECT_EQ(l.entries[0].port, 1);
  EXPECT_EQ(l.entries[1].name, "mlx5_1");
  EXPECT_EQ(l.entries[1].port, -1);
  EXPECT_EQ(l.entries[2].name, "mlx5_2");
  EXPECT_EQ(l.entries[2].port, 0);  // atoi("") as in NCCL
  EXPECT_EQ(l.entries[3].name, "mlx5_3");
  EXPECT_EQ(l.entries[3].port, 2);  // after a second ':' is ignored (2.28.9)

  EXPECT_FALSE(MatchDeviceList(l, "mlx5_0", 1));
  EXPECT_TRUE(MatchDeviceList(l, "mlx5_0", 2));
  EXPECT_FALSE(MatchDeviceList(l, "mlx5_1", 1));
  EXPECT_FALSE(MatchDeviceList(l, "mlx5_1", 2));
  EXPECT_TRUE(MatchDeviceList(l, "mlx5_10", 1));

  DeviceList prefix = ParseDeviceList("mlx5_1:1", kNcclMaxIbDevs);
  EXPECT_TRUE(MatchDeviceList(prefix, "mlx5_10", 1));  // NCCL prefix caveat
  EXPECT_FALSE(MatchDeviceList(prefix, "mlx5_1", 2));
  EXPECT_TRUE(MatchDeviceList(prefix, "mlx5_1", -1));
}

}  // namespace
}  // namespace railyard::topology
