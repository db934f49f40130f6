// The relay's cable resolvers (proxy/fabric/relay/cable_resolver.h): an address on one
// port's cable goes out by that port; this host's own addresses, loopback, hosts off
// every cable and malformed addresses are refused, over TCP and over verbs.
#include "proxy/fabric/relay/cable_resolver.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"

namespace railyard::fabric::relay {
namespace {

uint32_t Net(const char* dotted) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, dotted, &a), 1);
  return a.s_addr;
}

std::vector<uint8_t> Verbs(const char* ip) {
  verbs::VerbsAddress v;
  v.workerId = 7;
  v.ipv4 = Net(ip);
  v.port = 40000;
  v.rails = 1;
  return v.Pack();
}

std::vector<uint8_t> Tcp(std::initializer_list<const char*> ips) {
  tcp::WorkerAddress w;
  w.workerId = 9;
  for (const char* ip : ips) w.rails.push_back({Net(ip), 40000, 0});
  return w.Pack();
}

// A relay host of a ring: port 0 on cable 10.80.0.0/24 (towards g0), port 1 on
// 10.80.1.0/24 (towards g2).
TEST(VerbsCableResolver, AnAddressGoesOutByThePortOfItsCable) {
  ResolveFn resolve = MakeVerbsCableResolver({"10.80.0.2", "10.80.1.1"}, 24);
  NextHop hop;
  ASSERT_TRUE(resolve(Verbs("10.80.1.2"), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  EXPECT_TRUE(hop.via.empty());
  ASSERT_TRUE(resolve(Verbs("10.80.0.1"), &hop).ok());
  EXPECT_EQ(hop.port, 0u);
}

TEST(VerbsCableResolver, OwnLoopbackOffCableAndMalformedAddressesAreRefused) {
  ResolveFn resolve = MakeVerbsCableResolver({"10.80.0.2", "10.80.1.1"}, 24);
  NextHop hop{5, {}};
  Status s = resolve(Verbs("10.80.1.1"), &hop);  // this relay's own port
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("on no cable"), std::string::npos) << s.message();
  EXPECT_FALSE(resolve(Verbs("10.80.2.5"), &hop).ok());  // a host off both cables
  EXPECT_FALSE(resolve(Verbs("127.0.0.1"), &hop).ok());
  EXPECT_FALSE(MakeVerbsCableResolver({"127.0.0.2"}, 8)(Verbs("127.0.0.1"), &hop).ok());  // loopback, same /8
  std::vector<uint8_t> bad = Verbs("10.80.1.2");
  bad[0] ^= 0xff;  // magic
  EXPECT_EQ(resolve(bad, &hop).code(), Code::kInvalidArgument);
  EXPECT_EQ(resolve(Tcp({"10.80.1.2"}), &hop).code(), Code::kInvalidArgument);  // not a verbs address
  EXPECT_EQ(hop.port, 5u);  // untouched on every refusal
}

TEST(TcpCableResolver, EveryRailMustLieOnTheSameIndexRailOfOnePort) {
  ResolveFn resolve = MakeTcpCableResolver(
      {{{"r0", "10.0.0.2", 0}, {"r1", "10.1.0.2", 0}}, {{"r0", "10.2.0.1", 0}, {"r1", "10.3.0.1", 0}}}, 24);
  NextHop hop;
  ASSERT_TRUE(resolve(Tcp({"10.2.0.2", "10.3.0.2"}), &hop).ok());
  EXPECT_EQ(hop.port, 1u);
  EXPECT_FALSE(resolve(Tcp({"10.2.0.2", "10.1.0.5"}), &hop).ok());  // rails of two cables
  EXPECT_FALSE(resolve(Tcp({"10.2.0.2"}), &hop).ok());              // one rail of a two-rail cable
  EXPECT_FALSE(resolve(Tcp({"10.2.0.1", "10.3.0.1"}), &hop).ok());  // this host's own
  EXPECT_EQ(resolve(Verbs("10.2.0.2"), &hop).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::fabric::relay
