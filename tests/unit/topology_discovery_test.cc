// topology/discovery: rails of a DGX Spark fixture (sysfs + hwloc XML), the skip
// rules on a veth fixture, GID/PCIe parsing, and a smoke test on the live machine.
#include "topology/discovery.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <mutex>
#include <string>
#include <vector>

#include "env/log.h"
#include "tests/unit/log_capture.h"

namespace railyard::topology {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

const std::string kSpark = RAILYARD_FIXTURE_DIR "/sysfs-spark";
const std::string kSparkXml = RAILYARD_FIXTURE_DIR "/hwloc/spark.xml";
const std::string kVeth = RAILYARD_FIXTURE_DIR "/sysfs-veth";

NetDevice Addr(const char* name, const char* addr, int prefix, bool up = true, bool loopback = false) {
  NetDevice d;
  d.name = name;
  d.addrString = addr;
  d.prefixLen = prefix;
  d.up = up;
  d.running = up;
  d.loopback = loopback;
  if (std::string(addr).find(':') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&d.addr);
    sa->sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, addr, &sa->sin6_addr), 1) << addr;
    d.linkLocal = IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&d.addr);
    sa->sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, addr, &sa->sin_addr), 1) << addr;
    d.linkLocal = std::string(addr).starts_with("169.254.");
  }
  return d;
}

std::vector<NetDevice> SparkAddresses() {
  return {Addr("enp1s0f0np0", "10.0.0.1", 24),     Addr("enp1s0f0np0", "fe80::4ebb:47ff:fe2e:10a0", 64),
          Addr("enp1s0f1np1", "10.0.1.1", 24),     Addr("enP2p1s0f0np0", "fd00:2::1", 64),
          Addr("enP2p1s0f0np0", "fe80::4ebb:47ff:fe2e:10a4", 64), Addr("enP2p1s0f1np1", "10.0.3.1", 24)};
}

DiscoveryOptions SparkOptions() {
  DiscoveryOptions o;
  o.sysfsRoot = kSpark;
  o.hwlocXml = kSparkXml;
  o.interfaces = SparkAddresses();
  return o;
}

using railyard::test_support::LogCapture;

const Rail* Find(const std::vector<Rail>& rails, const std::string& name) {
  for (const Rail& r : rails) {
    if (r.netdev == name) return &r;
  }
  return nullptr;
}

std::vector<std::string> Names(const std::vector<Rail>& rails) {
  std::vector<std::string> n;
  for (const Rail& r : rails) n.push_back(r.netdev);
  return n;
}

TEST(TopologyDiscoverySpark, FourRailsPairedAndOrdered) {
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(SparkOptions(), &rails, &skipped).ok());
  EXPECT_THAT(skipped, IsEmpty());
  ASSERT_EQ(rails.size(), 4u);
  // Order: PCI bus id (domain 0000 before 0002, function 0 before 1).
  EXPECT_THAT(Names(rails), ElementsAre("enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0", "enP2p1s0f1np1"));
  const char* rdma[] = {"rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"};
  const char* bus[] = {"0000:01:00.0", "0000:01:00.1", "0002:01:00.0", "0002:01:00.1"};
  const char* mac[] = {"4c:bb:47:2e:10:a0", "4c:bb:47:2e:10:a1", "4c:bb:47:2e:10:a4", "4c:bb:47:2e:10:a5"};
  for (std::size_t i = 0; i < rails.size(); ++i) {
    SCOPED_TRACE(rails[i].netdev);
    const Rail& r = rails[i];
    EXPECT_EQ(r.rdmaDevice, rdma[i]);
    EXPECT_EQ(r.rdmaPort, 1);
    EXPECT_EQ(r.rdmaPortState, "ACTIVE");
    EXPECT_EQ(r.linkLayer, "Ethernet");
    EXPECT_EQ(r.pciBusId, bus[i]);
    EXPECT_EQ(r.pciFunction, static_cast<int>(i % 2));
    EXPECT_THAT(r.pciPath, AllOf(HasSubstr("/sysfs-spark/devices/pci"), testing::EndsWith(bus[i])));
    EXPECT_EQ(r.speedMbps, 200000);
    EXPECT_EQ(r.mtu, 9000);
    EXPECT_EQ(r.mac, mac[i]);
    EXPECT_EQ(r.ifIndex, static_cast<int>(i) + 3);
    EXPECT_EQ(r.numaNode, 0);
    EXPECT_EQ(r.nearestGpu, "cuda0");
    EXPECT_TRUE(r.up);
    EXPECT_TRUE(r.running);
    EXPECT_EQ(r.carrier, true);
    EXPECT_EQ(r.operState, "up");
    EXPECT_TRUE(r.isPci());
  }
}

TEST(TopologyDiscoverySpark, PhysicalPortsTwoRailsPerQsfpPort) {
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(SparkOptions(), &rails, nullptr).ok());
  ASSERT_EQ(rails.size(), 4u);
  // f0 of both PCIe devices is QSFP port 0, f1 is port 1.
  EXPECT_EQ(Find(rails, "enp1s0f0np0")->physicalPort, 0);
  EXPECT_EQ(Find(rails, "enp1s0f1np1")->physicalPort, 1);
  EXPECT_EQ(Find(rails, "enP2p1s0f0np0")->physicalPort, 0);
  EXPECT_EQ(Find(rails, "enP2p1s0f1np1")->physicalPort, 1);
  // 0000 functions have phys_port_name; the 0002 ones fall back to the PCI function.
  EXPECT_EQ(Find(rails, "enp1s0f1np1")->physicalPortSource, "phys_port_name");
  EXPECT_EQ(Find(rails, "enp1s0f1np1")->physPortName, "p1");
  EXPECT_EQ(Find(rails, "enP2p1s0f1np1")->physicalPortSource, "pci function");
  int perPort[2] = {0, 0};
  for (const Rail& r : rails) {
    ASSERT_GE(r.physicalPort, 0);
    ASSERT_LE(r.physicalPort, 1);
    ++perPort[r.physicalPort];
  }
  EXPECT_EQ(perPort[0], 2);
  EXPECT_EQ(perPort[1], 2);
}

TEST(TopologyDiscoverySpark, NarrowLinkWarning) {
  LogCapture capture;
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(SparkOptions(), &rails, nullptr).ok());
  const Rail* narrow = Find(rails, "enP2p1s0f1np1");
  ASSERT_NE(narrow, nullptr);
  EXPECT_EQ(narrow->pcie.currentWidth, 4);
  EXPECT_EQ(narrow->pcie.maxWidth, 8);
  EXPECT_EQ(narrow->pcie.currentSpeed, 32.0);
  EXPECT_EQ(narrow->pcie.maxSpeed, 32.0);
  EXPECT_TRUE(narrow->pcie.degraded());
  EXPECT_NEAR(narrow->hwlocLinkSpeedGBps, 15.75, 0.01);
  ASSERT_EQ(narrow->warnings.size(), 1u);
  EXPECT_THAT(narrow->warnings[0], AllOf(HasSubstr("0002:01:00.1"), HasSubstr("x4 32.0 GT/s"), HasSubstr("x8")));
  for (const char* wide : {"enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0"}) {
    const Rail* r = Find(rails, wide);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->pcie.currentWidth, 8) << wide;
    EXPECT_FALSE(r->pcie.degraded()) << wide;
    EXPECT_THAT(r->warnings, IsEmpty()) << wide;
    EXPECT_NEAR(r->hwlocLinkSpeedGBps, 31.51, 0.01) << wide;
  }
  std::vector<std::string> warns;
  for (const std::string& l : capture.lines()) {
    if (l.starts_with("WARN ")) warns.push_back(l);
  }
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_THAT(warns[0], AllOf(HasSubstr("enP2p1s0f1np1"), HasSubstr("below its maximum")));
}

TEST(TopologyDiscoverySpark, GidTables) {
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(SparkOptions(), &rails, nullptr).ok());
  ASSERT_EQ(rails.size(), 4u);

  const Rail& f0 = *Find(rails, "enp1s0f0np0");
  ASSERT_EQ(f0.gids.size(), 4u);
  EXPECT_EQ(f0.gids[0].index, 0);
  EXPECT_EQ(f0.gids[0].type, "RoCE v1");  // "IB/RoCE v1" on an Ethernet port
  EXPECT_EQ(f0.gids[0].text, "fe80:0000:0000:0000:4ebb:47ff:fe2e:10a0");
  EXPECT_EQ(f0.gids[0].ip, "fe80::4ebb:47ff:fe2e:10a0");
  EXPECT_TRUE(f0.gids[0].linkLocal);
  EXPECT_EQ(f0.gids[0].raw[0], 0xfe);
  EXPECT_EQ(f0.gids[0].raw[15], 0xa0);
  EXPECT_EQ(f0.gids[1].type, "RoCE v2");
  EXPECT_EQ(f0.gids[3].type, "RoCE v2");
  EXPECT_EQ(f0.gids[3].ip, "10.0.0.1");
  EXPECT_TRUE(f0.gids[3].ipv4Mapped);
  EXPECT_EQ(f0.gids[3].ndev, "enp1s0f0np0");

  // rocep1s0f1: index 2 is a hole (all zeros) and is not reported.
  const Rail& f1 = *Find(rails, "enp1s0f1np1");
  ASSERT_EQ(f1.gids.size(), 3u);
  EXPECT_EQ(f1.gids[0].index, 0);
  EXPECT_EQ(f1.gids[1].index, 1);
  EXPECT_EQ(f1.gids[2].index, 3);
  EXPECT_EQ(f1.gids[2].ip, "10.0.1.1");
  EXPECT_EQ(f1.gids[2].type, "RoCE v2");

  // roceP2p1s0f0: IPv6-only; types/2 cannot be read (type unknown, entry kept).
  const Rail& p2 = *Find(rails, "enP2p1s0f0np0");
  ASSERT_EQ(p2.gids.size(), 4u);
  EXPECT_EQ(p2.gids[2].type, "");
  EXPECT_EQ(p2.gids[2].ip, "fd00:2::1");
  EXPECT_EQ(p2.gids[2].ndev, "enP2p1s0f0np0");
  EXPECT_EQ(p2.gids[3].type, "RoCE v2");
  EXPECT_EQ(p2.gids[3].ip, "fd00:2::1");
  EXPECT_FALSE(p2.gids[3].ipv4Mapped);
  EXPECT_FALSE(p2.gids[3].linkLocal);
  EXPECT_TRUE(std::none_of(p2.gids.begin(), p2.gids.end(), [](const Gid& g) { return g.ipv4Mapped; }));
  ASSERT_EQ(p2.addresses.size(), 2u);
  EXPECT_TRUE(std::all_of(p2.addresses.begin(), p2.addresses.end(),
                          [](const RailAddress& a) { return a.family == AF_INET6; }));
}

TEST(TopologyDiscoverySpark, WithoutHwlocNumaFromSysfsAndNoGpu) {
  DiscoveryOptions o = SparkOptions();
  o.disableHwloc = true;
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(o, &rails, nullptr).ok());
  ASSERT_EQ(rails.size(), 4u);
  EXPECT_EQ(Find(rails, "enp1s0f0np0")->numaNode, 0);     // numa_node "0"
  EXPECT_EQ(Find(rails, "enP2p1s0f0np0")->numaNode, -1);  // numa_node "-1", no hwloc
  for (const Rail& r : rails) {
    EXPECT_EQ(r.nearestGpu, "") << r.netdev;
    EXPECT_EQ(r.hwlocLinkSpeedGBps, 0.0f) << r.netdev;
  }
  // A fake sysfs root with no XML: hwloc is not used (never the live machine's).
  o.disableHwloc = false;
  o.hwlocXml.clear();
  ASSERT_TRUE(DiscoverRails(o, &rails, nullptr).ok());
  EXPECT_EQ(Find(rails, "enp1s0f0np0")->nearestGpu, "");
}

TEST(TopologyDiscoverySpark, BadHwlocXmlIsAnError) {
  DiscoveryOptions o = SparkOptions();
  o.hwlocXml = kSpark + "/no-such.xml";
  std::vector<Rail> rails;
  Status s = DiscoverRails(o, &rails, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("no-such.xml"));
}

TEST(TopologyDiscoverySpark, FilterSelectsRails) {
  DiscoveryOptions o = SparkOptions();
  o.ifnameFilter = "enP2";
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("enP2p1s0f0np0", "enP2p1s0f1np1"));
  EXPECT_THAT(skipped, ElementsAre("enp1s0f0np0: filtered out by RAILYARD_SOCKET_IFNAME='enP2'", "enp1s0f1np1: filtered out by RAILYARD_SOCKET_IFNAME='enP2'"));
}

TEST(TopologyDiscoverySpark, NoAddressesSkipsAllUnlessIncluded) {
  DiscoveryOptions o = SparkOptions();
  o.interfaces = std::vector<NetDevice>{};  // flags then come from sysfs
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(rails, IsEmpty());
  ASSERT_EQ(skipped.size(), 4u);
  for (const std::string& s : skipped) EXPECT_THAT(s, testing::EndsWith(": no address"));

  o.includeNoAddress = true;
  skipped.clear();
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_EQ(rails.size(), 4u);
  EXPECT_THAT(skipped, IsEmpty());
  for (const Rail& r : rails) {
    EXPECT_TRUE(r.up) << r.netdev;       // sysfs flags 0x1003
    EXPECT_TRUE(r.running) << r.netdev;  // carrier 1
  }
}

std::vector<NetDevice> VethAddresses() {
  return {Addr("lo", "127.0.0.1", 8, true, true),
          Addr("veth0", "192.0.2.1", 24),
          Addr("veth0", "fe80::1", 64),
          Addr("veth1", "169.254.7.1", 16),
          Addr("veth1", "fe80::2", 64),
          Addr("veth2", "192.0.2.3", 24, /*up=*/false),
          Addr("veth4", "198.51.100.4", 24)};
}

DiscoveryOptions VethOptions() {
  DiscoveryOptions o;
  o.sysfsRoot = kVeth;
  o.interfaces = VethAddresses();
  return o;
}

TEST(TopologyDiscoveryVeth, PlainVethHost) {
  LogCapture capture;
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(VethOptions(), &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth4"));
  const Rail& v0 = rails[0];
  EXPECT_FALSE(v0.isPci());
  EXPECT_EQ(v0.pciPath, "");
  EXPECT_EQ(v0.pciFunction, -1);
  EXPECT_EQ(v0.rdmaDevice, "");
  EXPECT_EQ(v0.rdmaPort, 0);
  EXPECT_THAT(v0.gids, IsEmpty());
  EXPECT_EQ(v0.numaNode, -1);
  EXPECT_EQ(v0.nearestGpu, "");
  EXPECT_EQ(v0.physicalPort, -1);  // its dev_port reads 0, as a real veth's does: no "device" link, no port
  EXPECT_EQ(v0.speedMbps, 10000);
  EXPECT_EQ(v0.mtu, 1500);
  EXPECT_EQ(v0.mac, "2e:7a:01:00:00:01");
  ASSERT_EQ(v0.addresses.size(), 2u);
  EXPECT_EQ(v0.addresses[0].address, "192.0.2.1");
  EXPECT_EQ(v0.addresses[0].prefixLen, 24);
  EXPECT_FALSE(v0.addresses[0].linkLocal);
  EXPECT_TRUE(v0.addresses[1].linkLocal);  // kept, flagged

  EXPECT_THAT(skipped, ElementsAre(StartsWith("lo: loopback"), "veth1: only link-local addresses (169.254/16, fe80::/10)",
                                   "veth2: down (interface not up)", "veth3: no address"));
  // Every skip is logged at INFO with its reason.
  int infos = 0;
  for (const std::string& l : capture.lines()) {
    if (l.starts_with("INFO ") && l.find("skipped:") != std::string::npos) ++infos;
  }
  EXPECT_EQ(infos, 4);
}

// A down interface without an address got "down (interface not up)" in railyard-info's
// table but "no address" from the fabric's rail selection (which keeps down ones): one
// reason naming both now, whichever option set is used (new-user trial, an idle ifb0).
TEST(TopologyDiscoveryVeth, DownWithoutAddressGivesBothReasonsOnce) {
  DiscoveryOptions o = VethOptions();
  std::vector<NetDevice> addrs;
  for (const NetDevice& d : *o.interfaces) {
    if (d.name != "veth2") addrs.push_back(d);
  }
  o.interfaces = addrs;
  for (bool includeDown : {false, true}) {
    o.includeDown = includeDown;
    std::vector<Rail> rails;
    std::vector<std::string> skipped;
    ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
    EXPECT_THAT(skipped, testing::Contains("veth2: down (interface not up) and no address")) << includeDown;
    EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth4")) << includeDown;
  }
}

TEST(TopologyDiscoveryVeth, IncludeOverrides) {
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  DiscoveryOptions o = VethOptions();
  o.includeLinkLocal = true;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth1", "veth4"));

  o = VethOptions();
  o.includeDown = true;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth2", "veth4"));
  EXPECT_FALSE(Find(rails, "veth2")->up);
  EXPECT_EQ(Find(rails, "veth2")->operState, "down");

  o = VethOptions();
  o.includeNoAddress = true;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth3", "veth4"));
  EXPECT_THAT(Find(rails, "veth3")->addresses, IsEmpty());

  o = VethOptions();
  o.includeDown = o.includeNoAddress = o.includeLinkLocal = true;
  skipped.clear();
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth1", "veth2", "veth3", "veth4"));
  EXPECT_THAT(skipped, ElementsAre(StartsWith("lo: loopback")));  // loopback stays out
}

TEST(TopologyDiscoveryVeth, DownFromSysfsOperstate) {
  // veth2 has IFF_UP in the injected flags but operstate "down" / carrier 0 in sysfs.
  DiscoveryOptions o = VethOptions();
  for (NetDevice& d : *o.interfaces) {
    if (d.name == "veth2") d.up = d.running = true;
  }
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(skipped, Contains("veth2: down (operstate down)"));
}

TEST(TopologyDiscoveryVeth, LoopbackOnlyWhenFilterNamesIt) {
  DiscoveryOptions o = VethOptions();
  o.ifnameFilter = "lo,veth0";
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("lo", "veth0"));
  EXPECT_THAT(skipped, Contains("veth4: filtered out by RAILYARD_SOCKET_IFNAME='lo,veth0'"));

  // An exclude list does not name lo explicitly.
  o.ifnameFilter = "^veth4";
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0"));
}

// Fabric mode's rule (issue 8.2): a port that carries a default route is never a rail
// unless the filter names it exactly; every filter NCCL users write keeps it out.
TEST(TopologyDiscoveryVeth, DefaultRoutePortIsNeverARailUnlessNamedExactly) {
  for (const char* filter : {"", "0", "e", "^", "=", "^docker", "veth", "^docker,lo", "^lo", "^=veth4",
                             "veth0", "^=veth0", "veth0,veth4"}) {
    SCOPED_TRACE(filter);
    DiscoveryOptions o = VethOptions();
    o.ifnameFilter = filter;
    o.skipDefaultRoute = true;
    o.defaultRouteInterfaces = std::set<std::string>{"veth0"};
    std::vector<Rail> rails;
    std::vector<std::string> skipped;
    ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
    EXPECT_EQ(Find(rails, "veth0"), nullptr);
    if (InterfaceFilter::Parse(filter).Matches("veth0")) {
      EXPECT_THAT(skipped, Contains(StartsWith("veth0: carries a default route (an uplink, not a cable; a rail "
                                               "only when RAILYARD_SOCKET_IFNAME names it exactly: '=veth0')")));
    }
  }
  // Without the rule (the verbs transport outside fabric mode) the port stays.
  DiscoveryOptions o = VethOptions();
  o.defaultRouteInterfaces = std::set<std::string>{"veth0"};
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(o, &rails, nullptr).ok());
  EXPECT_NE(Find(rails, "veth0"), nullptr);
}

TEST(TopologyDiscoveryVeth, DefaultRoutePortNamedExactlyIsARailWithAWarning) {
  LogCapture capture;
  DiscoveryOptions o = VethOptions();
  o.ifnameFilter = "=veth0,veth4";
  o.skipDefaultRoute = true;
  o.defaultRouteInterfaces = std::set<std::string>{"veth0"};
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(o, &rails, nullptr).ok());
  EXPECT_THAT(Names(rails), ElementsAre("veth0", "veth4"));
  EXPECT_TRUE(Find(rails, "veth0")->carriesDefaultRoute);
  EXPECT_FALSE(Find(rails, "veth4")->carriesDefaultRoute);
  ASSERT_EQ(Find(rails, "veth0")->warnings.size(), 1u);
  EXPECT_THAT(Find(rails, "veth0")->warnings[0], HasSubstr("veth0 carries a default route"));
  EXPECT_THAT(capture.lines(), Contains(AllOf(StartsWith("WARN "), HasSubstr("veth0 carries a default route"),
                                              HasSubstr("UDP broadcasts"))));
  // A second discovery (railyard-info's table, then its fabric rails) keeps the rail's
  // warning but logs it no more: once per process (new-user trial: twice on stderr).
  rails.clear();
  ASSERT_TRUE(DiscoverRails(o, &rails, nullptr).ok());
  ASSERT_EQ(Find(rails, "veth0")->warnings.size(), 1u);
  size_t logged = 0;
  for (const std::string& l : capture.lines()) {
    if (l.rfind("WARN ", 0) == 0 && l.find("veth0 carries a default route") != std::string::npos) ++logged;
  }
  EXPECT_EQ(logged, 1u) << ::testing::PrintToString(capture.lines());
}

TEST(TopologyDiscoveryVeth, FilterSkipNamesTheVariable) {
  DiscoveryOptions o = VethOptions();
  o.ifnameFilter = "veth4";
  o.ifnameFilterSource = "--ifname";
  std::vector<std::string> skipped;
  std::vector<Rail> rails;
  ASSERT_TRUE(DiscoverRails(o, &rails, &skipped).ok());
  EXPECT_THAT(skipped, Contains("veth0: filtered out by --ifname='veth4'"));
}

TEST(TopologyNetdev, DefaultRouteInterfacesFromProcNetRoute) {
  const std::string path = ::testing::TempDir() + "/route";
  {
    std::ofstream f(path);
    f << "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
         "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
         "p0\t0000C90A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
         "wg0\t00000000\t00000000\t0001\t0\t0\t0\t00000080\t0\t0\t0\n"  // 0.0.0.0/1: not default
         "eth1\t00000000\t010300C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
         "garbage\n";
  }
  EXPECT_THAT(DefaultRouteInterfaces(path), ElementsAre("eth0", "eth1"));
  EXPECT_THAT(DefaultRouteInterfaces(path + ".missing"), IsEmpty());
}

TEST(TopologyDiscoveryParse, GidText) {
  std::array<std::uint8_t, 16> raw{};
  ASSERT_TRUE(ParseGidText("fe80:0000:0000:0000:0e42:a1ff:fe5b:1c2a", &raw));
  EXPECT_EQ(raw[0], 0xfe);
  EXPECT_EQ(raw[1], 0x80);
  EXPECT_EQ(raw[8], 0x0e);
  EXPECT_EQ(raw[15], 0x2a);
  EXPECT_FALSE(ParseGidText("fe80::1", &raw));
  EXPECT_FALSE(ParseGidText("fe80:0000:0000:0000:0e42:a1ff:fe5b:1c2g", &raw));
  EXPECT_FALSE(ParseGidText("fe80-0000:0000:0000:0e42:a1ff:fe5b:1c2a", &raw));
  EXPECT_FALSE(ParseGidText("", &raw));
}

TEST(TopologyDiscoveryParse, PcieSpeed) {
  EXPECT_EQ(ParsePcieSpeed("32.0 GT/s PCIe"), 32.0);
  EXPECT_EQ(ParsePcieSpeed("8.0 GT/s"), 8.0);
  EXPECT_EQ(ParsePcieSpeed("2.5 GT/s PCIe"), 2.5);
  EXPECT_EQ(ParsePcieSpeed("Unknown"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeed("Unknown speed"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeed("16"), std::nullopt);
  EXPECT_EQ(ParsePcieSpeed(""), std::nullopt);
}

TEST(TopologyDiscoveryLive, SmokeNoCrashLoopbackNotARail) {
  DiscoveryOptions o;  // live /sys, getifaddrs, live hwloc, ibverbs cross-check
  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  Status s = DiscoverRails(o, &rails, &skipped);
  ASSERT_TRUE(s.ok()) << s.message();
  for (const Rail& r : rails) {
    EXPECT_NE(r.netdev, "lo");
    EXPECT_TRUE(r.up) << r.netdev;
    EXPECT_TRUE(std::any_of(r.addresses.begin(), r.addresses.end(), [](const RailAddress& a) { return !a.linkLocal; }))
        << r.netdev;
  }
  EXPECT_THAT(skipped, Contains(StartsWith("lo: loopback")));
  // Deterministic: a second run gives the same rails in the same order.
  std::vector<Rail> again;
  ASSERT_TRUE(DiscoverRails(o, &again, nullptr).ok());
  EXPECT_EQ(Names(again), Names(rails));
}

}  // namespace
}  // namespace railyard::topology
