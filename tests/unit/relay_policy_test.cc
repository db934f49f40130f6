// relay_policy: what a relay agrees to connect to (issue 9 item 4). Each hostile
// record or leg is refused with a reason; the legitimate ones pass.
#include "proxy/relay/relay_policy.h"
#include "proxy/fabric/tcp/tcp_frame.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

namespace railyard::proxy {
namespace {

constexpr uint64_t kSelf = 0x1111, kOther = 0x2222, kStranger = 0x9999;

RelayScope Scope() {
  RelayScope s;
  s.selfHost = kSelf;
  s.graphHosts = {kSelf, kOther};
  in_addr rail{}, mgmt{}, lo{};
  inet_pton(AF_INET, "10.201.1.2", &rail);
  inet_pton(AF_INET, "10.200.0.2", &mgmt);
  inet_pton(AF_INET, "127.0.0.1", &lo);
  s.railAddresses = {rail};
  s.localAddresses = {rail, mgmt, lo};
  s.relayPort = 29518;
  s.listenerPortLow = 32768;
  s.listenerPortHigh = 60999;
  return s;
}

RelayRecord Record(uint64_t dest, uint16_t port, uint8_t hops = 0) {
  RelayRecord r{};
  r.header = MakeHeader(RecordKind::kRelay);
  r.destHost = dest;
  r.destPort = port;
  r.hops = hops;
  return r;
}

SocketTarget Leg(const char* remote, uint16_t port, const char* local = "10.201.1.2") {
  SocketTarget t;
  auto* r = reinterpret_cast<sockaddr_in*>(&t.remote);
  r->sin_family = AF_INET;
  r->sin_port = htons(port);
  inet_pton(AF_INET, remote, &r->sin_addr);
  t.remoteLen = sizeof(sockaddr_in);
  auto* l = reinterpret_cast<sockaddr_in*>(&t.local);
  l->sin_family = AF_INET;
  inet_pton(AF_INET, local, &l->sin_addr);
  t.localLen = sizeof(sockaddr_in);
  return t;
}

TEST(RelayPolicy, ARecordForAnotherHostOfTheGraphPasses) {
  EXPECT_TRUE(CheckRelayRecord(Record(kOther, 40000), Scope()).ok());
}

// Hostile-peer probe: a relay connected to any port of a graph host (a Redis on 6379
// answered through it). Only the ephemeral range, where Railyard's listeners bind, is
// served now; its two ends pass.
TEST(RelayPolicy, APortOutsideTheListenerRangeIsRefused) {
  for (uint16_t port : {uint16_t{22}, uint16_t{6379}, uint16_t{32767}, uint16_t{61000}}) {
    Status s = CheckRelayRecord(Record(kOther, port), Scope());
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << port;
    EXPECT_NE(s.message().find("destination port " + std::to_string(port) +
                               " is outside 32768..60999 (net.ipv4.ip_local_port_range)"),
              std::string::npos)
        << s.message();
  }
  RelayScope tunnels = Scope();
  tunnels.fixedListenerPorts = {29520, 29521};
  EXPECT_TRUE(CheckRelayRecord(Record(kOther, 29521), tunnels).ok()) << "a tier tunnel port";
  Status s = CheckRelayRecord(Record(kOther, 6379), tunnels);
  EXPECT_NE(s.message().find("(nor a tier tunnel port 29520, 29521): a relay connects to nothing else"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckRelayRecord(Record(kOther, 32768), Scope()).ok());
  EXPECT_TRUE(CheckRelayRecord(Record(kOther, 60999), Scope()).ok());
  uint16_t low = 0, high = 0;
  EphemeralPortRange(&low, &high);
  EXPECT_GE(low, 1);
  EXPECT_LE(low, high);
}

TEST(RelayPolicy, ARecordNamingTheRelaysOwnHostIsRefused) {
  Status s = CheckRelayRecord(Record(kSelf, 8080), Scope());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("own host"), std::string::npos) << s.message();
}

TEST(RelayPolicy, ARecordForAHostOutsideTheGraphIsRefused) {
  Status s = CheckRelayRecord(Record(kStranger, 40000), Scope());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("not in the cabling graph"), std::string::npos) << s.message();
}

TEST(RelayPolicy, PortZeroOrTheRelayPortIsNoListener) {
  EXPECT_FALSE(CheckRelayRecord(Record(kOther, 0), Scope()).ok());
  EXPECT_FALSE(CheckRelayRecord(Record(kOther, 29518), Scope()).ok());
}

TEST(RelayPolicy, UndefinedFlagsReservedBytesAndABadOriginNameAreRefused) {
  RelayRecord r = Record(kOther, 40000);
  std::snprintf(r.originName, sizeof r.originName, "h0");
  EXPECT_TRUE(CheckRelayRecord(r, Scope()).ok());
  RelayRecord flags = r;
  flags.flags = kRelayFlagMac | 0x80;
  Status s = CheckRelayRecord(flags, Scope());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("undefined flag bits (flags 0x81)"), std::string::npos) << s.message();
  RelayRecord pad = r;
  pad.pad[1] = 1;
  s = CheckRelayRecord(pad, Scope());
  EXPECT_NE(s.message().find("reserved bytes"), std::string::npos) << s.message();
  RelayRecord unterminated = r;
  std::memset(unterminated.originName, 'a', sizeof unterminated.originName);
  s = CheckRelayRecord(unterminated, Scope());
  EXPECT_NE(s.message().find("not NUL-terminated"), std::string::npos) << s.message();
  RelayRecord control = r;
  control.originName[1] = '\n';
  s = CheckRelayRecord(control, Scope());
  EXPECT_NE(s.message().find("control byte 0x0a at 1"), std::string::npos) << s.message();
  RelayRecord trailing = r;
  trailing.originName[10] = 'x';  // after the name's NUL
  s = CheckRelayRecord(trailing, Scope());
  EXPECT_NE(s.message().find("not NUL-padded"), std::string::npos) << s.message();
}

TEST(RelayPolicy, TooManyHopsAreRefused) {
  EXPECT_TRUE(CheckRelayRecord(Record(kOther, 40000, kMaxRelayHops - 1), Scope()).ok());
  EXPECT_FALSE(CheckRelayRecord(Record(kOther, 40000, kMaxRelayHops), Scope()).ok());
}

TEST(RelayPolicy, OnlyAHelloMayFollowTheRecord) {
  EXPECT_TRUE(CheckFollowingHello(MakeHeader(RecordKind::kHello)).ok());
  EXPECT_FALSE(CheckFollowingHello(MakeHeader(RecordKind::kChunk)).ok());
  RecordHeader http;
  std::memcpy(&http, "GET / HT", sizeof http);  // what curl sends
  Status s = CheckFollowingHello(http);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("not a Railyard record"), std::string::npos) << s.message();
}

TEST(RelayPolicy, AFabricTcpHelloMayFollowTheRecordButNoOtherFrame) {
  // A fabric Endpoint spliced through the relay opens with its 64-byte hello frame; the
  // relay reads its first 8 bytes as a record header.
  auto first8 = [](const fabric::tcp::FrameHeader& f) {
    RecordHeader h;
    std::memcpy(&h, &f, sizeof h);
    return h;
  };
  EXPECT_TRUE(CheckFollowingHello(first8(fabric::tcp::MakeHeader(fabric::tcp::FrameType::kHello))).ok());
  Status write = CheckFollowingHello(first8(fabric::tcp::MakeHeader(fabric::tcp::FrameType::kWrite)));
  EXPECT_EQ(write.code(), Code::kInvalidUsage);
  EXPECT_NE(write.message().find("fabric frame type 2, not a hello"), std::string::npos) << write.message();
  fabric::tcp::FrameHeader old = fabric::tcp::MakeHeader(fabric::tcp::FrameType::kHello);
  old.version = fabric::tcp::kWireVersion + 1;
  Status version = CheckFollowingHello(first8(old));
  EXPECT_EQ(version.code(), Code::kInvalidUsage);
  EXPECT_NE(version.message().find("wire version " + std::to_string(fabric::tcp::kWireVersion + 1)),
            std::string::npos)
      << version.message();
}

TEST(RelayPolicy, AnOnwardLegToTheListenerOrNextRelayOverARailPasses) {
  EXPECT_TRUE(CheckOnwardLeg(Leg("10.201.1.1", 40000), 40000, false, Scope()).ok());
  EXPECT_TRUE(CheckOnwardLeg(Leg("10.201.1.1", 29518), 40000, true, Scope()).ok());
}

TEST(RelayPolicy, OnwardLegsToLoopbackOrThisHostOrOddAddressesAreRefused) {
  for (const char* bad : {"127.0.0.1", "127.1.2.3", "0.0.0.0", "224.0.0.1", "255.255.255.255", "169.254.1.1",
                          "10.201.1.2", "10.200.0.2"}) {
    Status s = CheckOnwardLeg(Leg(bad, 40000), 40000, false, Scope());
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << bad;
  }
}

TEST(RelayPolicy, AnOnwardLegToAnotherPortOrNotFromARailIsRefused) {
  EXPECT_FALSE(CheckOnwardLeg(Leg("10.201.1.1", 22), 40000, false, Scope()).ok());
  EXPECT_FALSE(CheckOnwardLeg(Leg("10.201.1.1", 40000), 40000, true, Scope()).ok());  // a relay follows
  EXPECT_FALSE(CheckOnwardLeg(Leg("10.201.1.1", 40000, "10.200.0.2"), 40000, false, Scope()).ok());
  // Off the cable of the rail it leaves from (hostile-peer probe: a forged record made a
  // relay dial a host's management address over a rail): refused once the rail's prefix
  // is known; not checked without it.
  RelayScope withPrefix = Scope();
  withPrefix.railPrefixLens = {24};
  EXPECT_TRUE(CheckOnwardLeg(Leg("10.201.1.1", 40000), 40000, false, withPrefix).ok());
  const Status off = CheckOnwardLeg(Leg("10.200.0.3", 40000), 40000, false, withPrefix);
  EXPECT_EQ(off.code(), Code::kInvalidUsage);
  EXPECT_NE(off.message().find("onward address 10.200.0.3:40000 is not on the cable of rail address 10.201.1.2"),
            std::string::npos)
      << off.message();
  EXPECT_TRUE(CheckOnwardLeg(Leg("10.200.0.3", 40000), 40000, false, Scope()).ok()) << "no prefix: not checked";
}

std::shared_ptr<const topology::ClusterKey> Key(char fill) {
  std::shared_ptr<const topology::ClusterKey> k;
  EXPECT_TRUE(topology::ClusterKey::FromSecret(std::string(40, fill), &k).ok());
  return k;
}

topology::ClusterMac MacOf(const RelayRecord& r, const topology::ClusterKey& k) {
  topology::ClusterMac m{};
  EXPECT_TRUE(k.Mac(kRelayMacPurpose, &r, sizeof r, &m));
  return m;
}

TEST(RelayPolicy, WithoutAKeyARecordWithoutAMacPasses) {
  EXPECT_TRUE(CheckRelayMac(Record(kOther, 40000), nullptr, nullptr).ok());
}

TEST(RelayPolicy, WithAKeyARecordWithItsMacPasses) {
  auto k = Key('a');
  RelayRecord r = Record(kOther, 40000);
  r.flags = kRelayFlagMac;
  const auto m = MacOf(r, *k);
  EXPECT_TRUE(CheckRelayMac(r, m.data(), k.get()).ok());
}

TEST(RelayPolicy, WithAKeyARecordWithoutAMacIsRefused) {
  auto k = Key('a');
  Status s = CheckRelayMac(Record(kOther, 40000), nullptr, k.get());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("carries no MAC"), std::string::npos) << s.message();
}

TEST(RelayPolicy, AMacFromAnotherKeyOrForAnotherRecordIsRefused) {
  auto k = Key('a'), other = Key('b');
  RelayRecord r = Record(kOther, 40000);
  r.flags = kRelayFlagMac;
  const auto wrongKey = MacOf(r, *other);
  Status s = CheckRelayMac(r, wrongKey.data(), k.get());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("does not verify"), std::string::npos) << s.message();
  // The MAC of a record for port 40000 does not cover the same record sent for port 22.
  const auto good = MacOf(r, *k);
  RelayRecord steered = r;
  steered.destPort = 22;
  EXPECT_FALSE(CheckRelayMac(steered, good.data(), k.get()).ok());
}

TEST(RelayPolicy, AMacToARelayWithoutAKeyIsAConfigurationError) {
  RelayRecord r = Record(kOther, 40000);
  r.flags = kRelayFlagMac;
  topology::ClusterMac m{};
  Status s = CheckRelayMac(r, m.data(), nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("RAILYARD_CLUSTER_KEY_FILE"), std::string::npos) << s.message();
}

in_addr V4(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1) << text;
  return a;
}

TEST(RelayPolicy, OnlyASourceOnTheRailsCableArrivedFromIt) {
  const in_addr rail = V4("10.201.0.2");  // h1's end of its /24 cable to h0
  const std::vector<in_addr> own = {rail, V4("10.201.2.1")};
  EXPECT_TRUE(ArrivedFromTheCable(V4("10.201.0.1"), rail, 24, own));  // h0's end
  EXPECT_TRUE(ArrivedFromTheCable(V4("10.201.0.254"), rail, 24, own));
  // Off the cable: the management network routed through this host, another cable's
  // subnet, loopback, this host's own rails (a local process), no address at all.
  EXPECT_FALSE(ArrivedFromTheCable(V4("10.200.0.4"), rail, 24, own));
  EXPECT_FALSE(ArrivedFromTheCable(V4("10.201.1.1"), rail, 24, own));
  EXPECT_FALSE(ArrivedFromTheCable(V4("127.0.0.1"), rail, 24, own));
  EXPECT_FALSE(ArrivedFromTheCable(rail, rail, 24, own));
  EXPECT_FALSE(ArrivedFromTheCable(V4("10.201.2.1"), rail, 24, own));
  EXPECT_FALSE(ArrivedFromTheCable(V4("0.0.0.0"), rail, 24, own));
  // A /30 point-to-point cable: only its own four addresses.
  EXPECT_TRUE(ArrivedFromTheCable(V4("10.201.0.1"), rail, 30, own));
  EXPECT_FALSE(ArrivedFromTheCable(V4("10.201.0.5"), rail, 30, own));
  // A /32 rail (peer routes) has no subnet: any source but this host's own.
  EXPECT_TRUE(ArrivedFromTheCable(V4("10.9.9.9"), rail, 32, own));
  EXPECT_FALSE(ArrivedFromTheCable(rail, rail, 32, own));
}

}  // namespace
}  // namespace railyard::proxy
