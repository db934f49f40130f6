// Local multi-rank launcher (-np N): forks N processes that meet through the
// bootstrap on 127.0.0.1, waits for them, and fails fast when one fails.
#pragma once

#include <functional>
#include <cstddef>
#include <string>
#include <vector>

#include "tools/railyard-perf/bootstrap.h"

namespace railyard::perf {

/// Exit status by which a rank says "I stopped only because another rank
/// failed". LaunchLocal reports a rank with any other failure in preference.
inline constexpr int kExitPeerFailed = 4;

/// What a forked rank runs. `boot` is already connected (rank and nranks are
/// in it). The return value becomes the process exit status (0 = success).
using RankMain = std::function<int(Bootstrap& boot)>;

/// Outcome of LaunchLocal.
struct LaunchResult {
  int exitCode = 0;     ///< 0 when every rank exited 0; else the failing rank's code (1 for a signal)
  int failedRank = -1;  ///< first rank that failed, -1 if none
  std::string message;  ///< human-readable summary of failures ("" on success)
  bool timedOut = false;  ///< the -T limit expired and the ranks still running were killed
  /// The first error each rank reported through PrintRankError, by rank ("" for none;
  /// at most kRankErrorBytes - 1 bytes each): the launcher's own view of why ranks failed.
  std::vector<std::string> rankErrors;
};

/// Bytes kept of one rank's first error for LaunchResult::rankErrors.
inline constexpr std::size_t kRankErrorBytes = 1024;

/// Prints "railyard-perf: rank R: TEXT" to stderr and, in a rank LaunchLocal forked, hands
/// the first such text to the launcher (LaunchResult::rankErrors), so the parent can tell
/// what failed instead of only how the rank exited. Async-signal-unsafe; call from the
/// rank's own thread.
void PrintRankError(int rank, const std::string& text);

/// Listens on 127.0.0.1 port 0, forks `nranks` children (rank 0 inherits the
/// listening socket, the others connect to its port), runs `rankMain` in each
/// and `_exit`s with its result. The parent waits for all of them; when a rank
/// fails (non-zero exit or signal; the first one that did not exit with
/// kExitPeerFailed is reported, else the first) it sends SIGTERM to the rest and, after a
/// 5 s grace period, SIGKILL. After `timeoutSec` every rank still running is
/// killed and the run fails. Children's bootstrap steps are bounded by the same
/// timeout. Flushes stdio before forking. Must be called from a single-threaded process.
LaunchResult LaunchLocal(int nranks, int timeoutSec, const RankMain& rankMain);

}  // namespace railyard::perf
