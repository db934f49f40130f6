// The fabric transport the snapshot tests run on, chosen by the environment so the
// same tests (and the same serving process, which inherits it) run over TCP on the
// host and over verbs in the soft-RoCE lane (tests/lanes/rxe):
//   SNAPSHOT_TEST_TRANSPORT unset or "tcp": a TCP Domain on 127.0.0.1.
//   "verbs": a verbs Domain; in the lane (RXE_LANE_HOSTS set) the serving process
//   takes host h0's rails (RXE_LANE_DEVS_H0) and clients host h1's, so the traffic
//   crosses the rail veths; elsewhere RAILYARD_HCA's ports (all, when unset).
#pragma once

#include <memory>

#include "env/status.h"
#include "proxy/fabric/domain.h"

namespace railyard::storage::snapshot::testing {

/// Which end of the tier a Domain is for (it picks the lane host).
enum class Side { kPeer, kClient };

/// True when SNAPSHOT_TEST_TRANSPORT=verbs.
bool TestUsesVerbs();

/// Creates the Domain for `side`; `timeoutMs` is the Endpoints' RAILYARD_TIMEOUT_MS.
/// InvalidUsage (verbs, outside the lane) when this host has no RDMA port: the tests
/// skip then; in the lane a missing device is a SystemError (a failure, never a skip).
/// `helloTimeoutMs`: TCP only, the listener's wait for a connection's first frames
/// (RAILYARD_ACCEPT_TIMEOUT_MS; the verbs lane takes it from the environment).
Status MakeTestDomain(Side side, int timeoutMs, std::unique_ptr<fabric::Domain>* out, int helloTimeoutMs = 10000);

}  // namespace railyard::storage::snapshot::testing
