// The gin-* patterns of railyard-perf: one rank opens the plugin's one-sided table
// (--one-sided rma-v14 | rma-v13 | gin-v11, as NCCL 2.30 / 2.28 would), connects
// the full mesh, registers a data window (send area, receive area) and a signals
// window, and runs each size of the pattern; rank 0 prints nccl-tests columns.
// Each pattern is its own file (gin_put_pattern.cc, gin_signal_pattern.cc,
// gin_alltoall_pattern.cc) and sees the comm through GinBench.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "env/status.h"
#include "tools/railyard-perf/bootstrap.h"
#include "tools/railyard-perf/one_sided_table.h"
#include "tools/railyard-perf/options.h"

namespace railyard::perf {

/// What a gin pattern works with. Signals are cumulative over the whole run (never
/// reset): `expected[q]` is how many this rank has seen from rank q so far.
struct GinBench {
  OneSidedTable* table = nullptr;
  Bootstrap* boot = nullptr;
  std::string libPath;  ///< the library the table came from (named in errors)
  int me = 0;
  int n = 0;
  Deadline deadline;
  char* data = nullptr;         ///< [0, areaBytes): send area; [areaBytes, 2 × areaBytes): receive area
  std::size_t areaBytes = 0;
  void* dataMh = nullptr;
  uint64_t* signals = nullptr;  ///< one uint64_t per source rank
  void* sigMh = nullptr;
  std::vector<uint64_t> expected;  ///< per source: the signal value reached so far
  int idleSleepUs = 0;             ///< Poll: sleep when nothing completed (0: yield)

  /// The signal word from rank `q` (atomic load).
  uint64_t Signal(int q) const { return __atomic_load_n(&signals[q], __ATOMIC_ACQUIRE); }
  /// A failed data call (iput, iputSignal) to `peer`, worded as every other failed
  /// call: the result's name and number, this rank, the plugin's first WARN.
  Status CallFailed(const char* call, int peer, ncclResult_t rc) const;
  /// Tests every request in `reqs` once, removing the done ones, then progresses.
  /// An error names the call and the rank.
  Status Poll(std::vector<void*>* reqs);
  /// Polls until `reqs` is empty and Signal(q) >= expected[q] for every q with
  /// `from[q]`; bounded by `deadline`.
  Status WaitFor(std::vector<void*>* reqs, const std::vector<bool>& from);
  /// Bootstrap barrier with a thread driving progress meanwhile (over the TCP fabric
  /// a target's acks leave only when it progresses, as NCCL's proxy thread always does).
  Status Barrier();
  /// Runs a blocking bootstrap step `fn` with that progress thread alongside.
  Status WithProgress(const std::function<Status()>& fn);
};

/// Runs the blocking step `fn` (a bootstrap exchange) with a thread calling
/// `table.Progress()` until it returns: over the TCP fabric a target's acks leave only
/// when it progresses, as NCCL's proxy thread always does. Returns fn's Status.
Status WithProgressOf(OneSidedTable& table, const std::function<Status()>& fn);

/// One size of one pattern: `*usPerIter` is this rank's average µs per timed
/// iteration, `*wrong` the elements of its receive area that do not hold what the
/// senders wrote (0 when checking is off).
using GinSizeFn = Status (*)(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                             long long* wrong);

/// gin-put: pairs (0<->1, ...) put `bytes` to each other, up to 8 puts in flight,
/// the last of each phase with a strong signal so the target knows they all landed.
Status GinPutSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                  long long* wrong);
/// gin-put-oneway: as gin-put, but only the even rank of a pair puts; the odd rank
/// waits for the phase's signal (the raw Write benchmarks' one direction). Data is
/// checked on the odd rank.
Status GinPutOneWaySize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                        long long* wrong);
/// gin-signal: pairs; the even rank puts `bytes` with a signal, the odd one answers
/// with the same when the signal arrives: µs per round trip.
Status GinSignalSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                     long long* wrong);
/// gin-alltoall (the MoE dispatch shape): every rank puts bytes/N to every other
/// rank with a signal (ADD 1) and waits for the signals of all of them.
Status GinAllToAllSize(GinBench& b, std::size_t bytes, int iters, int warmup, bool check, double* usPerIter,
                       long long* wrong);

/// Runs opts.pattern (a gin-* one) as rank boot.rank(); returns an ExitCode (runner.h).
int RunGinRank(const Options& opts, Bootstrap& boot);

}  // namespace railyard::perf
