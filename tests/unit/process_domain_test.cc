// runtime::CreateProcessDomain: the transport choice and the TCP rails. This host may or
// may not have RDMA ports (CI machines have none; the soft-RoCE guest has rxe ports), so
// the verbs cases accept either a verbs Domain or the named refusal, never anything else.
#include "proxy/runtime/process_domain.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

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
