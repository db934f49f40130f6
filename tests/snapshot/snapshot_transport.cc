#include "tests/snapshot/snapshot_transport.h"

#include <cstdlib>
#include <string>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "tests/common/lane_verbs_domain.h"

namespace railyard::storage::snapshot::testing {

bool TestUsesVerbs() {
  const char* t = std::getenv("SNAPSHOT_TEST_TRANSPORT");
  return t != nullptr && std::string(t) == "verbs";
}

Status MakeTestDomain(Side side, int timeoutMs, std::unique_ptr<fabric::Domain>* out, int helloTimeoutMs) {
  if (!TestUsesVerbs()) {
    fabric::tcp::TcpOptions to;
    to.rails = {fabric::RailInfo{"lo", "127.0.0.1", 10000}};
    to.timeoutMs = timeoutMs;
    to.helloTimeoutMs = helloTimeoutMs;
    return fabric::tcp::CreateTcpDomain(to, out);
  }
  // The serving process inherits this environment: RAILYARD_* settings pass through.
  return railyard::test_support::LaneVerbsDomain(side == Side::kPeer ? 0 : 1, timeoutMs, railyard::test_support::LaneEnv::kProcess,
                                            out);
}

}  // namespace railyard::storage::snapshot::testing
