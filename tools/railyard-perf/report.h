// nccl-tests style output (fact sheet §6.2) and the --json file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::perf {

struct Options;  // tools/railyard-perf/options.h

/// One result row.
struct Row {
  std::size_t bytes = 0;   ///< "size": S, the bytes algbw is computed from
  std::size_t count = 0;   ///< "count": S / element size
  double timeUs = 0;       ///< average µs per iteration, max over ranks
  double algbw = 0;        ///< GB/s (1e9 bytes): bytes / time
  double busbw = 0;        ///< algbw × the pattern's factor
  long long wrong = -1;    ///< wrong elements summed over ranks; -1 = not checked (N/A)
  const char* type = "float";  ///< "type" column (the collectives' -d)
  const char* redop = "none";  ///< "redop" column (the reductions' -o; "none" for p2p and allgather)
};

/// algbw in GB/s for `bytes` moved in `timeUs` µs (0 when timeUs <= 0).
double AlgBw(std::size_t bytes, double timeUs);

/// The two "#" header rows (title with "out-of-place", then units), each ending in '\n'.
std::string TableHeader();

/// One row: "%12zu %12zu %8s %6s %6i" then "%7s %6.2f %6.2f %6s" (time printed
/// with 2, 1 or 0 decimals as nccl-tests does; #wrong "N/A" when unchecked).
std::string TableRow(const Row& row);

/// "# Out of bounds values : 0 OK" and "# Avg bus bandwidth    : X" (mean busbw
/// over `rows`), with a blank "#" line before, as nccl-tests prints them.
std::string TableFooter(const std::vector<Row>& rows);

/// Facts about the run for the header and the JSON file.
struct RunInfo {
  std::string pluginPath;      ///< library file that was loaded
  std::string pluginValue;     ///< NCCL_NET_PLUGIN / --plugin as given ("<unset>" if unset)
  std::string symbol;          ///< e.g. ncclNetPlugin_v11
  std::string pluginName;      ///< the table's name field
  int version = 0;             ///< 11, 10, 9 or 8
  std::string pattern;         ///< sendrecv / ring / alltoall
  int nranks = 0;
  int dev = 0;
  std::string devName;         ///< getProperties(dev).name on rank 0
  int speedMbps = 0;           ///< getProperties(dev).speed on rank 0
  double busbwFactor = 1;
  std::size_t minBytes = 0, maxBytes = 0, stepBytes = 0;
  unsigned long long stepFactor = 1;
  int iters = 0, warmupIters = 0, check = 0;
  std::vector<std::string> rankLines;  ///< one "#  Rank ..." line per rank
};

/// The RunInfo fields every pattern shares, from the command line: pattern, nranks,
/// dev, busbw factor, the size sweep, -n/-w/-c. The plugin and device fields are the
/// runner's to fill (what it loaded).
RunInfo RunInfoFromOptions(const Options& opts, int nranks);

/// The "# ..." block printed before the table.
std::string RunHeader(const RunInfo& info);

/// Checks before the run that `path` can be written (a file that exists stays as it is; one
/// that did not is created and removed again), so a bad --json fails at once instead of after
/// the whole run. InvalidUsage "--json PATH: cannot be written: <strerror>" (or "is a directory").
Status CheckJsonWritable(const std::string& path);

/// Writes info + rows + avg busbw as JSON to `path` (InvalidUsage naming the path on failure).
Status WriteJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace railyard::perf
