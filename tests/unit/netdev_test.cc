// topology/netdev: sysfs attributes from a fake tree, selection from synthetic
// candidates, and the real system's loopback interface.
#include "topology/netdev.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "env/log.h"

namespace railyard::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFake = RAILYARD_FIXTURE_DIR "/sysfs-netdev";

std::string FakeReal(const std::string& rel) {
  char* p = realpath((kFake + "/" + rel).c_str(), nullptr);
  std::string s = p ? p : "";
  free(p);
  return s;
}

TEST(NetDevSysfs, SpeedFromFakeTree) {
  EXPECT_EQ(ReadSpeedMbps("eth0", kFake), 25000);
  EXPECT_EQ(ReadSpeedMbps("eth1", kFake), std::nullopt);  // "-1"
  EXPECT_EQ(ReadSpeedMbps("eth2", kFake), std::nullopt);  // no file
  EXPECT_EQ(ReadSpeedMbps("eth3", kFake), std::nullopt);  // "fast"
  EXPECT_EQ(ReadSpeedMbps("eth4", kFake), std::nullopt);  // "0"
  EXPECT_EQ(ReadSpeedMbps("eth6", kFake), 100000);        // no trailing newline
  EXPECT_EQ(ReadSpeedMbps("eth7", kFake), 10000);         // class/net/eth7 is a link
  EXPECT_EQ(ReadSpeedMbps("nosuch", kFake), std::nullopt);
  EXPECT_EQ(ReadSpeedMbps("../net/eth0", kFake), std::nullopt);
  EXPECT_EQ(ReadSpeedMbps("..", kFake), std::nullopt);
}

TEST(NetDevSysfs, PciPathFromFakeTree) {
  const std::string pci3 = FakeReal("devices/pci0000:00/0000:00:03.0");
  ASSERT_FALSE(pci3.empty());
  EXPECT_EQ(ReadPciPath("eth0", kFake), pci3);
  EXPECT_TRUE(ReadPciPath("eth0", kFake).ends_with("/sysfs-netdev/devices/pci0000:00/0000:00:03.0"));
  EXPECT_EQ(ReadPciPath("eth1", kFake), "");  // no device link
  EXPECT_EQ(ReadPciPath("eth2", kFake), "");  // platform device, not PCI
  EXPECT_EQ(ReadPciPath("eth5", kFake), "");  // dangling link
  EXPECT_EQ(ReadPciPath("eth7", kFake), FakeReal("devices/pci0000:00/0000:00:04.0"));
  EXPECT_EQ(ReadPciPath("nosuch", kFake), "");
  // Unnormalised root spelling resolves the same.
  EXPECT_EQ(ReadPciPath("eth0", kFake + "/./class/.."), pci3);
}

// Synthetic candidates for the pure selection function.
NetDevice Dev(const char* name, const char* addr, bool up = true, bool loopback = false) {
  NetDevice d;
  d.name = name;
  d.addrString = addr;
  d.up = up;
  d.running = up;
  d.loopback = loopback;
  if (std::string(addr).find(':') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&d.addr);
    sa->sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, addr, &sa->sin6_addr), 1) << addr;
    d.linkLocal = IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr);
    d.prefixLen = 64;
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&d.addr);
    sa->sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, addr, &sa->sin_addr), 1) << addr;
    d.linkLocal = std::string(addr).starts_with("169.254.");
    d.prefixLen = 24;
  }
  return d;
}

std::vector<NetDevice> Candidates() {
  return {
      Dev("lo", "::1", true, true),
      Dev("lo", "127.0.0.1", true, true),
      Dev("eth1", "fe80::2"),
      Dev("eth1", "fd00::2"),
      Dev("eth1", "10.0.1.2"),
      Dev("eth0", "fe80::1"),
      Dev("eth0", "10.0.0.2"),
      Dev("eth11", "10.0.11.2"),
      Dev("docker0", "172.17.0.1"),
      Dev("virbr0", "192.168.122.1"),
      Dev("eth2", "10.0.2.2", /*up=*/false),
      Dev("eth3", "fe80::3"),         // link-local only
      Dev("eth4", "169.254.1.4"),     // IPv4 link-local only
      Dev("ib0", "fd00:1::5"),        // IPv6 only
  };
}

struct Selected {
  Status status;
  std::vector<std::string> names;
  std::vector<std::string> addrs;
};

Selected Select(std::string_view filter, const std::vector<NetDevice>& candidates) {
  std::vector<NetDevice> out;
  Selected s;
  log::SetSinkForTesting([](log::Level, const std::string&) {});
  s.status = SelectSocketDevicesFrom(InterfaceFilter::Parse(filter), candidates, &out);
  log::SetSinkForTesting(nullptr);
  for (const auto& d : out) {
    s.names.push_back(d.name);
    s.addrs.push_back(d.addrString);
  }
  return s;
}

TEST(SelectSocketDevices, AutomaticSkipsLoopbackDownBridgesAndLinkLocalOnly) {
  Selected s = Select("", Candidates());
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_THAT(s.names, ElementsAre("eth0", "eth1", "eth11", "ib0"));
  // IPv4 preferred; IPv6 routable when there is no IPv4.
  EXPECT_THAT(s.addrs, ElementsAre("10.0.0.2", "10.0.1.2", "10.0.11.2", "fd00:1::5"));
}

TEST(SelectSocketDevices, OneCharacterValueIsAutomatic) {
  EXPECT_THAT(Select("e", Candidates()).names, ElementsAre("eth0", "eth1", "eth11", "ib0"));
}

TEST(SelectSocketDevices, AutomaticFallsBackToLoopback) {
  std::vector<NetDevice> c = {Dev("lo", "::1", true, true), Dev("lo", "127.0.0.1", true, true),
                              Dev("docker0", "172.17.0.1"), Dev("eth0", "fe80::1"),
                              Dev("eth1", "10.0.0.2", false)};
  Selected s = Select("", c);
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_THAT(s.names, ElementsAre("lo"));
  EXPECT_THAT(s.addrs, ElementsAre("127.0.0.1"));
}

TEST(SelectSocketDevices, AutomaticWithNothingAtAllFails) {
  Selected s = Select("", {Dev("eth0", "fe80::1")});
  EXPECT_EQ(s.status.code(), Code::kSystemError);
  EXPECT_THAT(s.status.message(), HasSubstr("no usable network interface"));
}

TEST(SelectSocketDevices, FilterTakesEveryMatchIncludingLoopbackAndDown) {
  EXPECT_THAT(Select("eth1", Candidates()).names, ElementsAre("eth1", "eth11"));
  EXPECT_THAT(Select("=eth1", Candidates()).names, ElementsAre("eth1"));
  EXPECT_THAT(Select("lo", Candidates()).addrs, ElementsAre("127.0.0.1"));  // never ::1
  EXPECT_THAT(Select("eth2,docker", Candidates()).names, ElementsAre("docker0", "eth2"));
  // Link-local-only interfaces are usable when named (as in NCCL).
  EXPECT_THAT(Select("=eth3", Candidates()).addrs, ElementsAre("fe80::3"));
  EXPECT_THAT(Select("^eth,lo,docker,virbr", Candidates()).names, ElementsAre("ib0"));
  // An exclusion list takes loopback only when nothing else is left (unlike NCCL).
  EXPECT_THAT(Select("^eth,docker,virbr", Candidates()).names, ElementsAre("ib0"));
  EXPECT_THAT(Select("^eth,docker,virbr,ib", Candidates()).names, ElementsAre("lo"));
  EXPECT_THAT(Select("^=eth1,eth2,eth3,eth4,lo", Candidates()).names,
              ElementsAre("docker0", "eth0", "eth11", "ib0", "virbr0"));
}

TEST(SelectSocketDevices, FilterWithNoMatchIsInvalidUsage) {
  Selected s = Select("=eth9", Candidates());
  EXPECT_EQ(s.status.code(), Code::kInvalidUsage);
  EXPECT_THAT(s.status.message(), HasSubstr("'=eth9'"));
  EXPECT_THAT(s.status.message(), HasSubstr("eth0, eth1, eth11"));
  EXPECT_TRUE(s.names.empty());
}

TEST(SelectSocketDevices, ChoicesAndSkipsAreLoggedWithReasons) {
  std::vector<std::string> info;
  log::SetSinkForTesting([&](log::Level level, const std::string& m) {
    if (level == log::Level::kInfo) info.push_back(m);
  });
  std::vector<NetDevice> out;
  auto c = Candidates();
  Status st = SelectSocketDevicesFrom(InterfaceFilter::Parse(""), c, &out);
  log::SetSinkForTesting(nullptr);
  ASSERT_TRUE(st.ok());
  EXPECT_THAT(info, ::testing::Contains(HasSubstr("docker0 skipped: docker*/virbr*")));
  EXPECT_THAT(info, ::testing::Contains(HasSubstr("eth2 skipped: interface is down")));
  EXPECT_THAT(info, ::testing::Contains(HasSubstr("eth3 skipped: only link-local")));
  EXPECT_THAT(info, ::testing::Contains(HasSubstr("lo skipped: loopback")));
  EXPECT_THAT(info, ::testing::Contains(HasSubstr("socket device 0: eth0 10.0.0.2/24 up")));
}

// The real system: every Linux host has "lo" with 127.0.0.1.
TEST(NetDevReal, LoopbackIsListed) {
  std::vector<NetDevice> all;
  ASSERT_TRUE(ListNetDevices(&all).ok());
  bool found = false;
  for (const auto& d : all) {
    if (d.name == "lo" && d.family() == AF_INET) {
      found = true;
      EXPECT_EQ(d.addrString, "127.0.0.1");
      EXPECT_EQ(d.prefixLen, 8);
      EXPECT_TRUE(d.loopback);
      EXPECT_TRUE(d.up);
      EXPECT_FALSE(d.linkLocal);
      EXPECT_GT(d.ifIndex, 0);
      EXPECT_EQ(d.pciPath, "");
      EXPECT_EQ(d.speedMbps, std::nullopt);  // lo has no speed
    }
  }
  EXPECT_TRUE(found);
  // Sorted by name.
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].name, all[i].name);
}

TEST(NetDevReal, LoopbackSelectedByFilter) {
  for (const char* filter : {"lo", "=lo"}) {
    std::vector<NetDevice> out;
    log::SetSinkForTesting([](log::Level, const std::string&) {});
    Status st = SelectSocketDevices(filter, &out);
    log::SetSinkForTesting(nullptr);
    ASSERT_TRUE(st.ok()) << filter << ": " << st.message();
    ASSERT_FALSE(out.empty()) << filter;
    EXPECT_EQ(out[0].name, "lo") << filter;
    EXPECT_EQ(out[0].addrString, "127.0.0.1") << filter;
    EXPECT_EQ(out[0].family(), AF_INET);
    const auto* sa = reinterpret_cast<const sockaddr_in*>(&out[0].addr);
    EXPECT_EQ(ntohl(sa->sin_addr.s_addr), INADDR_LOOPBACK);
    EXPECT_EQ(sa->sin_port, 0);
    if (std::string(filter) == "=lo") {
      EXPECT_EQ(out.size(), 1u);
    }
    for (const auto& d : out) EXPECT_TRUE(d.name.starts_with("lo")) << d.name;
  }
}

TEST(NetDevReal, AutomaticSelectionNeverPicksBridgesOrLinkLocal) {
  std::vector<NetDevice> out;
  log::SetSinkForTesting([](log::Level, const std::string&) {});
  Status st = SelectSocketDevices("", &out);
  log::SetSinkForTesting(nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_FALSE(out.empty());
  for (const auto& d : out) {
    EXPECT_FALSE(d.name.starts_with("docker")) << d.name;
    EXPECT_FALSE(d.name.starts_with("virbr")) << d.name;
    if (!d.loopback) {
      EXPECT_FALSE(d.linkLocal) << d.name;
      EXPECT_TRUE(d.up) << d.name;
    }
  }
  // Loopback only as the sole fallback.
  if (out[0].loopback) {
    EXPECT_EQ(out.size(), 1u);
  }
}

}  // namespace
}  // namespace railyard::topology
