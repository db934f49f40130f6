#include "tests/snapshot/snapshot_transport.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "env/config.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"

namespace railyard::storage::snapshot::testing {

bool TestUsesVerbs() {
  const char* t = std::getenv("SNAPSHOT_TEST_TRANSPORT");
  return t != nullptr && std::string(t) == "verbs";
}

Status MakeTestDomain(Side side, int timeoutMs, std::unique_ptr<fabric::Domain>* out) {
  if (!TestUsesVerbs()) {
    fabric::tcp::TcpOptions to;
    to.rails = {fabric::RailInfo{"lo", "127.0.0.1", 10000}};
    to.timeoutMs = timeoutMs;
    return fabric::tcp::CreateTcpDomain(to, out);
  }
  const char* lane = std::getenv("RXE_LANE_HOSTS");
  std::string hca;
  if (lane != nullptr) {
    const std::string var = side == Side::kPeer ? "RXE_LANE_DEVS_H0" : "RXE_LANE_DEVS_H1";
    const char* devs = std::getenv(var.c_str());
    if (devs == nullptr) return SystemError("in the soft-RoCE lane but " + var + " is unset");
    hca = "=";
    for (const char* p = devs; *p != 0; ++p) hca += *p == ' ' ? ',' : *p;
  }
  env::Config config;
  RY_RETURN_IF_ERROR(env::Parse(
      [&](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "RAILYARD_HCA" && !hca.empty()) return hca;
        const char* v = std::getenv(name);
        if (v != nullptr) return std::string(v);
        return std::nullopt;
      },
      {}, &config));
  fabric::verbs::VerbsOptions o = fabric::verbs::VerbsOptions::FromConfig(config);
  o.bootstrapAddress = "127.0.0.1";
  o.timeoutMs = timeoutMs;
  // Setting up QPs under the lane's emulation takes seconds: not what a test's
  // short fabric timeout is about.
  o.connectTimeoutMs = std::max(timeoutMs, 20000);
  Status s = fabric::verbs::CreateVerbsDomain(o, out);
  if (!s.ok() && lane != nullptr) return SystemError("soft-RoCE lane: " + s.message());
  return s;
}

}  // namespace railyard::storage::snapshot::testing
