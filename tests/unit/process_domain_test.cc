// runtime::CreateProcessDomain: the transport choice and the TCP rails. This host may or
// may not have RDMA ports (CI machines have none; the soft-RoCE guest has rxe ports), so
// the verbs cases accept either a verbs Domain or the named refusal, never anything else.
#include "proxy/runtime/process_domain.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace railyard::runtime {
namespace {

env::Config ConfigWith(std::map<std::string, std::string> vars) {
  env::Config c;
  auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_TRUE(env::Parse(lookup, {}, &c).ok());
  return c;
}

topology::NetDevice Device(const char* name, const char* ipv4, bool loopback, std::optional<int> speedMbps = {}) {
  topology::NetDevice d;
  d.name = name;
  d.addr.ss_family = AF_INET;
  d.addrString = ipv4;
  d.loopback = loopback;
  d.speedMbps = speedMbps;
  return d;
}

// An exclusion filter (RAILYARD_SOCKET_IFNAME=^mgmt0, as the README advises railyardd)
// matches lo too: the tiers' rails are the other ports, in order, never 127.0.0.1
// (new-user trial: railyardd's expert store bound 127.0.0.1 with ^mgmt0 set).
TEST(ProcessDomain, TcpRailsLeaveLoopbackOutWhenTheFilterMatchedOtherPorts) {
  const std::vector<topology::NetDevice> devs = {Device("lo", "127.0.0.1", true), Device("p0r0", "10.201.0.1", false, 25000),
                                                 Device("p1r0", "10.201.7.1", false)};
  const std::vector<fabric::RailInfo> rails = TcpRailsOf(devs, 8, 10000);
  ASSERT_EQ(rails.size(), 2u);
  EXPECT_EQ(rails[0].device, "p0r0");
  EXPECT_EQ(rails[0].address, "10.201.0.1");
  EXPECT_EQ(rails[0].speedMbps, 25000u);
  EXPECT_EQ(rails[1].device, "p1r0");
  EXPECT_EQ(rails[1].speedMbps, 10000u) << "unknown speed: the default";
  EXPECT_EQ(TcpRailsOf(devs, 1, 10000).size(), 1u) << "maxRails";
  // A filter that matched only loopback (=lo, lo) keeps it: the user named it.
  const std::vector<fabric::RailInfo> lo = TcpRailsOf({Device("lo", "127.0.0.1", true)}, 8, 10000);
  ASSERT_EQ(lo.size(), 1u);
  EXPECT_EQ(lo[0].address, "127.0.0.1");
  // IPv6 addresses are no TCP rail; nothing matched, nothing returned.
  topology::NetDevice v6 = Device("p0r0", "fe80::1", false);
  v6.addr.ss_family = AF_INET6;
  EXPECT_TRUE(TcpRailsOf({v6}, 8, 10000).empty());
  EXPECT_TRUE(TcpRailsOf({}, 8, 10000).empty());
}

TEST(ProcessDomain, TcpOnLoopbackWhenUnset) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "tcp"}});
  ProcessDomainOptions o;
  o.loopbackWhenUnset = true;
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(CreateProcessDomain(c, o, &d).ok());
  EXPECT_STREQ(d->TransportName(), "tcp");
  ASSERT_EQ(d->rails().size(), 1u);
  EXPECT_EQ(d->rails()[0].address, "127.0.0.1");
}

TEST(ProcessDomain, TcpRailsFromTheLoopbackInterface) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "tcp"}});
  ProcessDomainOptions o;
  o.ifname = "=lo";
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(CreateProcessDomain(c, o, &d).ok());
  ASSERT_EQ(d->rails().size(), 1u);
  EXPECT_EQ(d->rails()[0].device, "lo");
  EXPECT_EQ(d->rails()[0].address, "127.0.0.1");
}

TEST(ProcessDomain, AnInterfaceThatDoesNotExistIsRefusedAndOutputUntouched) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "tcp"}});
  ProcessDomainOptions o;
  o.ifname = "=railyard-none0";
  std::unique_ptr<fabric::Domain> d;
  Status s = CreateProcessDomain(c, o, &d);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(d, nullptr);
}

TEST(ProcessDomain, MaxRailsOutOfRange) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "tcp"}});
  ProcessDomainOptions o;
  o.maxRails = 0;
  std::unique_ptr<fabric::Domain> d;
  Status s = CreateProcessDomain(c, o, &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("maxRails 0"), std::string::npos) << s.message();
  EXPECT_EQ(d, nullptr);
}

TEST(ProcessDomain, VerbsIsVerbsOrANamedRefusal) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "verbs"}});
  ProcessDomainOptions o;
  o.loopbackWhenUnset = true;
  std::unique_ptr<fabric::Domain> d;
  Status s = CreateProcessDomain(c, o, &d);
  if (s.ok()) {
    EXPECT_STREQ(d->TransportName(), "verbs");
  } else {
    EXPECT_EQ(s.message().rfind("RAILYARD_TRANSPORT=verbs: ", 0), 0u) << s.message();
    EXPECT_EQ(d, nullptr);
  }
}

TEST(ProcessDomain, AutoFallsBackToTcpWithoutPorts) {
  env::Config c = ConfigWith({{"RAILYARD_TRANSPORT", "auto"}});
  ProcessDomainOptions o;
  o.loopbackWhenUnset = true;
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(CreateProcessDomain(c, o, &d).ok());
  const std::string t = d->TransportName();
  EXPECT_TRUE(t == "tcp" || t == "verbs") << t;
  if (t == "tcp") {
    EXPECT_EQ(d->rails()[0].address, "127.0.0.1");
  }
}

}  // namespace
}  // namespace railyard::runtime
