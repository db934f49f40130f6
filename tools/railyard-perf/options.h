// railyard-perf command line: nccl-tests style flags, parsed with CLI11.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "env/status.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {

/// Largest message railyard-perf accepts for -b/-e (NCCL never posts more than
/// 1 GiB per request, and v8 plugins take int sizes).
inline constexpr std::size_t kMaxBytes = std::size_t{1} << 30;
/// Most message sizes one run walks (-b..-e by -i or -f): 65536. "-b 0 -e 1G -i 1" would
/// otherwise make every rank build a list of 2^30 sizes (8 GiB) before it sends a byte.
inline constexpr std::size_t kMaxSizes = std::size_t{1} << 16;

/// Everything the command line selects. Defaults follow nccl-tests where it has
/// the same flag; differences are documented next to the field.
struct Options {
  std::size_t minBytes = 32u << 20;   ///< -b/--minbytes (32M)
  std::size_t maxBytes = 32u << 20;   ///< -e/--maxbytes (32M), at most kMaxBytes
  std::size_t stepBytes = 1u << 20;   ///< -i/--stepbytes (1M), used when stepFactor == 1
  std::uint64_t stepFactor = 1;       ///< -f/--stepfactor (1 = linear steps of stepBytes)
  int iters = 20;                     ///< -n/--iters
  int warmupIters = 5;                ///< -w/--warmup_iters (nccl-tests uses 1; we use 5)
  int check = 1;                      ///< -c/--check: 1 = verify every timed iteration (collectives, -z 0: two untimed ones after), 0 = off
  /// -z/--blocking (collectives, nccl-tests' flag): 0 = timed iterations are posted back
  /// to back, the next one before the last has finished (at most 2 in flight, on two
  /// sets of buffers; -c 1 checks each as it finishes), as nccl-tests enqueues them on
  /// its stream; 1 = wait for each before posting the next.
  int blocking = 0;
  Pattern pattern = Pattern::kRing;   ///< -p/--pattern sendrecv|ring|alltoall|allreduce|allgather|reducescatter|gin-put|gin-signal|gin-alltoall
  std::string datatype = "float";     ///< -d/--datatype (collectives; nccl-tests names: int8 .. f8e5m2)
  std::string op = "sum";             ///< -o/--op (collectives): sum, prod, max, min, avg
  /// --idle-sleep-us: gin-* poll loops sleep this long when a pass completed nothing
  /// (0 = sched_yield only). For CPU-starved lanes (the soft-RoCE guest), never a barrier.
  int idleSleepUs = 0;
  std::string oneSided = "rma-v14";   ///< --one-sided: the table gin-* patterns drive (rma-v14|rma-v13|gin-v11)
  int dev = 0;                        ///< --dev: plugin device index
  int timeoutSec = 600;               ///< -T/--timeout: whole-run limit in seconds
  std::optional<std::string> plugin;  ///< --plugin (same grammar as NCCL_NET_PLUGIN; overrides it)
  std::string jsonPath;               ///< --json PATH: also write the rows as JSON
  int netVersion = 0;                 ///< --net-version 6..11: use that table only (testing aid; 0 = the newest of them, as NCCL 2.28.9)
  int np = 0;                         ///< -np N: fork N local ranks (0 = not in this mode)
  int rank = -1;                      ///< --rank R (multi-host mode)
  int nranks = 0;                     ///< --nranks N (multi-host mode)
  std::string root;                   ///< --root HOST:PORT (multi-host mode; rank 0 listens there)
};

/// Parses a byte count with an optional K, M or G suffix (powers of 1024, case
/// insensitive, an optional trailing 'B'), e.g. "64", "1K", "32M", "1G".
/// Fails with InvalidUsage on garbage, a fraction ("1.5K"), overflow or an empty string.
Status ParseSize(const std::string& text, std::size_t* out);

/// Formats a byte count the short way ("1K", "32M", "1G", "1000").
std::string FormatSize(std::size_t bytes);

/// Splits "HOST:PORT" (port 1..65535). Fails with InvalidUsage naming `text`.
Status ParseHostPort(const std::string& text, std::string* host, int* port);

/// Parses argv into `out` and checks the combination (ranges, -e <= 1 GiB,
/// -b <= -e, exactly one of -np or --rank/--nranks/--root). `-np N` is accepted
/// as nccl-tests/MPI users type it. Returns InvalidUsage with CLI11's message on
/// a bad flag. `*exitNow` is set (with ok) when --help was printed.
Status ParseOptions(int argc, const char* const* argv, Options* out, bool* exitNow);

/// Bytes one row of `o`'s pattern moves for a requested size `requestedBytes`: whole
/// elements (floats, or -d's type for the collectives; alltoall: 16-byte chunks per
/// rank), so it may be less than requested, or 0.
std::size_t RowBytes(const Options& o, std::size_t requestedBytes);

/// A one-line note for a sweep whose smallest size (-b, above 0) moves no whole element
/// (new-user trial: `-b 3 -e 7` printed a 0-byte row without a word), naming the first
/// size that moves data; "" otherwise. For a parsed `o` (ParseOptions).
std::string SizeNote(const Options& o);

/// Exit statuses of railyard-perf (also printed by --help; tools/railyard-perf/README.md).
inline constexpr const char* kExitStatusHelp =
    "Exit status:\n"
    "  0  every size ran and every check passed\n"
    "  1  error: a plugin call, the bootstrap or the setup failed (the call, rank, peer and\n"
    "     ncclResult_t are printed), no plugin could be loaded (NCCL_NET_PLUGIN=none\n"
    "     included), or the -T limit expired\n"
    "  2  bad flags or options (including --json PATH that cannot be written, a --root host\n"
    "     that does not resolve, and ranks started with different options, or a second\n"
    "     process as a rank that joined already while rank 0 waits for the others)\n"
    "  3  the run finished but #wrong > 0 (data check failed)\n"
    "  4  this rank stopped because another rank failed first (that rank prints the cause;\n"
    "     a rank with operations in flight first waits up to 3 s for their own error)";

/// The options every rank must agree on, as a fixed-size record for the bootstrap's
/// AllGather (same build on every rank, so the layout matches). Ranks started with
/// different -b/-e/-i/-f/-n/-w/-c/-p/-z would post different sizes or counts and fail
/// much later with a confusing plugin error ("send larger than posted receive buffer").
struct RunShape {
  std::uint64_t minBytes = 0, maxBytes = 0, stepBytes = 0, stepFactor = 0;
  std::int32_t iters = 0, warmupIters = 0, check = 0, pattern = 0;
  std::int32_t blocking = 0;  ///< -z (collective patterns only; 0 for the others)
};

/// The RunShape of `opts`.
RunShape ShapeOf(const Options& opts);

/// "" when the two agree; else every flag that differs, e.g.
/// "-b 1M on rank 1 but 4M on rank 0, -n 5 on rank 1 but 20 on rank 0".
std::string ShapeDifference(const RunShape& mine, int myRank, const RunShape& other, int otherRank);

/// The message sizes to run, as nccl-tests walks them: minBytes, then
/// ×stepFactor (when > 1) or +stepBytes, while <= maxBytes.
std::vector<std::size_t> SizeList(const Options& opts);

/// `sizes` less every size whose row would repeat an earlier row: `rowBytes(size)` is the
/// byte count the row reports (the size rounded down to whole elements by the pattern's
/// layout), so "-b 0 -e 1K -f 2" with 4-byte floats gives the rows 0, 4, 8, ... once each
/// (it printed three rows of 0 bytes, for the sizes 0, 1 and 2). Order is kept.
std::vector<std::size_t> DistinctRows(const std::vector<std::size_t>& sizes,
                                      const std::function<std::size_t(std::size_t)>& rowBytes);

}  // namespace railyard::perf
