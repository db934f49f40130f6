// Self-tests of the conformance harness: a rank's failed assertion, crash or hang
// must fail the calling test with the rank named, within the run's bound. Without
// these, a broken harness would make every conformance test pass vacuously.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/conformance/harness.h"

namespace railyard::conformance {
namespace {

/// The one failure message of `failures`, or a description of why there is not one.
std::string Only(const std::vector<std::string>& failures) {
  if (failures.size() == 1) return failures[0];
  std::string all = std::to_string(failures.size()) + " failures:";
  for (const auto& f : failures) all += "\n---\n" + f;
  return all;
}


// Proves a failed EXPECT inside a rank comes back as a failure of the test,
// prefixed with the rank, while the other rank's success is not reported.
TEST(ConformanceHarness, RankFailureIsReportedWithItsRank) {
  const auto f = RunRanksReport({.nranks = 2, .timeout = Ms(10000)},
                                [](Rank& r) { EXPECT_EQ(r.rank(), 0) << "planted failure"; });
  ASSERT_EQ(f.size(), 1u) << Only(f);
  EXPECT_EQ(f[0].rfind("rank 1 (pid ", 0), 0u) << f[0];
  EXPECT_NE(f[0].find("planted failure"), std::string::npos) << f[0];
}

// Proves a rank that crashes (SIGABRT) before reporting fails the test, naming
// the rank and the signal.
TEST(ConformanceHarness, CrashedRankIsReported) {
  const auto f = RunRanksReport({.nranks = 2, .timeout = Ms(10000)}, [](Rank& r) {
    if (r.rank() == 1) std::abort();
  });
  ASSERT_EQ(f.size(), 1u) << Only(f);
  EXPECT_EQ(f[0].rfind("rank 1 (pid ", 0), 0u) << f[0];
  EXPECT_NE(f[0].find("killed by signal 6"), std::string::npos) << f[0];
}

// Proves a rank stuck outside any harness wait is SIGKILLed when the run's bound
// passes, and the failure names it and quotes its last note; the run returns in
// bounded time.
TEST(ConformanceHarness, HungRankIsKilledAndNamed) {
  const auto t0 = Clock::now();
  const auto f = RunRanksReport({.nranks = 2, .timeout = Ms(1500)}, [](Rank& r) {
    if (r.rank() == 0) return;
    r.Note("stuck in pause()");
    for (;;) ::pause();
  });
  EXPECT_LT(Clock::now() - t0, Ms(5000));
  ASSERT_EQ(f.size(), 1u) << Only(f);
  EXPECT_EQ(f[0].rfind("rank 1 (pid ", 0), 0u) << f[0];
  EXPECT_NE(f[0].find("hung"), std::string::npos) << f[0];
  EXPECT_NE(f[0].find("last note: stuck in pause()"), std::string::npos) << f[0];
}

// Proves a peer wait on a rank that exits early fails fast with the peer named
// (EOF on its channel) instead of waiting for the deadline.
TEST(ConformanceHarness, WaitOnAnExitedPeerFailsFast) {
  const auto t0 = Clock::now();
  const auto f = RunRanksReport({.nranks = 2, .timeout = Ms(20000)}, [](Rank& r) {
    if (r.rank() == 1) return;
    uint64_t v = 0;
    EXPECT_FALSE(r.RecvU64(1, &v));
  });
  ASSERT_EQ(f.size(), 1u) << Only(f);
  EXPECT_EQ(f[0].rfind("rank 0 (pid ", 0), 0u) << f[0];
  EXPECT_NE(f[0].find("rank 1 closed its channel"), std::string::npos) << f[0];
  EXPECT_LT(Clock::now() - t0, Ms(5000));
}

// Proves Rank::Kill kills the named rank, that its death is not a failure, and
// that pids are known to every rank. Also that the transport environment
// (RAILYARD_SOCKET_IFNAME "=lo" for tcp) and RAILYARD_TIMEOUT_MS reach the ranks.
TEST(ConformanceHarness, KillOnRequestAndEnvironment) {
  RunRanks({.nranks = 3, .timeout = Ms(10000), .pluginTimeoutMs = 1234}, [](Rank& r) {
    EXPECT_EQ(r.pid(r.rank()), ::getpid());
    const char* t = std::getenv("RAILYARD_TIMEOUT_MS");
    ASSERT_NE(t, nullptr);
    EXPECT_STREQ(t, "1234");
    if (TransportName() == "tcp") {
      const char* ifname = std::getenv("RAILYARD_SOCKET_IFNAME");
      ASSERT_NE(ifname, nullptr);
      EXPECT_STREQ(ifname, "=lo");
    }
    if (r.rank() == 2) {
      uint64_t never = 0;
      (void)r.RecvU64(0, &never);  // killed here
      ADD_FAILURE() << "rank 2 outlived its SIGKILL";
    } else if (r.rank() == 0) {
      EXPECT_TRUE(r.Kill(2));
      EXPECT_EQ(::kill(r.pid(2), 0), -1) << "rank 2 still exists";
    }
  });
}

}  // namespace
}  // namespace railyard::conformance
