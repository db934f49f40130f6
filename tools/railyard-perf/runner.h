// One rank of railyard-perf: open the plugin, connect the pattern's peers,
// run every size, report (rank 0), clean up.
#pragma once

#include <chrono>

#include "tools/railyard-perf/bootstrap.h"
#include "tools/railyard-perf/options.h"

namespace railyard::perf {

/// Process exit codes of a rank (and of railyard-perf); 4 is kExitPeerFailed (launcher.h).
/// kExitStatusHelp (options.h) documents them for --help and the README.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,       ///< a plugin call, the bootstrap or the setup failed
  kExitUsage = 2,       ///< bad flags, an unwritable --json, ranks started with different options
  kExitWrongData = 3,   ///< the run finished but #wrong > 0
};

/// How long a failed rank looks for a peer whose process has gone before it calls the
/// failure its own (3 s): a dead peer's sockets close at once.
inline constexpr std::chrono::seconds kPeerGoneGrace{3};

/// Reports this rank's failure `s` on stderr and returns its exit status: kExitPeerFailed
/// when another rank's process has gone (Bootstrap::PeerGoneWithin, kPeerGoneGrace once
/// `connected`, else only a peer already gone), its words appended; else kExitError.
/// Leaves the bootstrap first, so the others see this rank gone before its plugin
/// teardown. For the collective and gin-* patterns.
int ReportRankFailure(Bootstrap& boot, const Status& s, bool connected);

/// Runs the benchmark as rank boot.rank() of boot.nranks(). Errors are printed
/// to stderr with the rank (and, for plugin calls, the call, the peer and the
/// ncclResult_t). Rank 0 prints the table to stdout and writes --json.
/// Returns an ExitCode.
int RunRank(const Options& opts, Bootstrap& boot);

}  // namespace railyard::perf
