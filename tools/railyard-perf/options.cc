#include "tools/railyard-perf/options.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <limits>

#include <CLI/CLI.hpp>

#include "tools/railyard-perf/coll_pattern.h"
#include "tools/common/cli_parse.h"

namespace railyard::perf {

Status ParseSize(const std::string& text, std::size_t* out) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t digit = std::uint64_t(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return InvalidUsage("size '" + text + "' is too large");
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return InvalidUsage("size '" + text + "' must start with a number (e.g. 64, 1K, 32M, 1G)");
  int shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': shift = 10; ++i; break;
      case 'M': shift = 20; ++i; break;
      case 'G': shift = 30; ++i; break;
      default: break;
    }
    if (i < text.size() && std::toupper(static_cast<unsigned char>(text[i])) == 'B') ++i;
  }
  if (i < text.size() && (text[i] == '.' || text[i] == ',')) {  // it said "unknown suffix" (new-user trial)
    return InvalidUsage("size '" + text + "': a whole number only, as nccl-tests takes (e.g. 1536 or 3K for 1.5K)");
  }
  if (i != text.size()) {
    return InvalidUsage("size '" + text + "': unknown suffix (use K, M or G, powers of 1024, with or without a B)");
  }
  if (shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    return InvalidUsage("size '" + text + "' is too large");
  }
  *out = std::size_t(value << shift);
  return Status::Ok();
}

std::string FormatSize(std::size_t bytes) {
  static constexpr struct { int shift; char suffix; } kUnits[] = {{30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& u : kUnits) {
    const std::size_t unit = std::size_t{1} << u.shift;
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + u.suffix;
  }
  return std::to_string(bytes);
}

Status ParseHostPort(const std::string& text, std::string* host, int* port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidUsage("--root '" + text + "' must be HOST:PORT");
  }
  const std::string portText = text.substr(colon + 1);
  int p = 0;
  for (char c : portText) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || p > 65535) {
      return InvalidUsage("--root '" + text + "': bad port '" + portText + "'");
    }
    p = p * 10 + (c - '0');
  }
  if (p < 1 || p > 65535) return InvalidUsage("--root '" + text + "': port must be 1..65535");
  *host = text.substr(0, colon);
  *port = p;
  return Status::Ok();
}

namespace {

/// CLI11 only knows single-letter short options; rewrite MPI-style "-np" to "--np".
std::vector<std::string> NormaliseArgs(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-np" || a.rfind("-np=", 0) == 0) a = "-" + a;
    args.push_back(std::move(a));
  }
  return args;
}

}  // namespace

Status ParseOptions(int argc, const char* const* argv, Options* out, bool* exitNow) {
  *exitNow = false;
  Options o;
  CLI::App app{
      "railyard-perf: nccl-tests style benchmark (point-to-point, CollNet collectives, GIN/RMA\n"
      "one-sided patterns) that drives an NCCL net plugin through its ABI the way NCCL 2.28.9\n"
      "does (plugin chosen by NCCL_NET_PLUGIN or --plugin).",
      "railyard-perf"};
  std::string minB = "32M", maxB = "32M", stepB = "1M", pattern = "ring", plugin;
  // An option given twice takes its last value, as nccl-tests' getopt does: tools/setup.sh
  // passes its arguments after its own (-b 64K ...), and `setup.sh -b 1M` must override
  // them (new-user trial: CLI11 refused the second -b).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("-b,--minbytes", minB, "smallest message size (K/M/G = powers of 1024; a B after one is allowed: 1MB = 1M)")->capture_default_str();
  app.add_option("-e,--maxbytes", maxB, "largest message size, at most 1G")->capture_default_str();
  app.add_option("-i,--stepbytes", stepB, "linear size step, used when -f is 1")->capture_default_str();
  app.add_option("-f,--stepfactor", o.stepFactor, "multiplicative size step (1 = use -i)")
      ->capture_default_str()->check(tools::InRange(std::uint64_t{1}, std::uint64_t{1} << 20));
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str()->check(tools::InRange(1, 1 << 24));
  app.add_option("-w,--warmup_iters", o.warmupIters, "untimed warm-up iterations per size (nccl-tests: 1)")
      ->capture_default_str()->check(tools::InRange(0, 1 << 24));
  app.add_option("-c,--check", o.check, "1 = verify the data of every timed iteration (collectives with -z 0: of two more, untimed, after "
                 "them, as nccl-tests), 0 = off (N/A)")
      ->capture_default_str()->check(tools::InRange(0, 1));
  app.add_option("-z,--blocking", o.blocking,
                 "collectives: 1 = wait for each timed iteration before posting the next; 0 = post them back "
                 "to back, 2 in flight on two sets of buffers (as nccl-tests enqueues them)")
      ->capture_default_str()->check(tools::InRange(0, 1));
  app.add_option("-p,--pattern", pattern,
                 "sendrecv | ring | alltoall | allreduce | allgather | reducescatter | gin-put | gin-signal | gin-alltoall | "
                 "gin-put-oneway")
      ->capture_default_str()->check(CLI::IsMember({"sendrecv", "ring", "alltoall", "allreduce", "allgather",
                                                    "reducescatter", "gin-put", "gin-signal", "gin-alltoall",
                                                    "gin-put-oneway"}));
  app.add_option("-d,--datatype", o.datatype,
                 "collectives: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2")
      ->capture_default_str()->check(CLI::IsMember({"int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
                                                    "float", "double", "bfloat16", "f8e4m3", "f8e5m2"}));
  app.add_option("-o,--op", o.op, "collectives: sum prod max min avg")
      ->capture_default_str()->check(CLI::IsMember({"sum", "prod", "max", "min", "avg"}));
  app.add_option("--idle-sleep-us", o.idleSleepUs,
                 "gin-* patterns: sleep this many us when a poll pass completed nothing (0: yield)")
      ->capture_default_str()->check(tools::InRange(0, 100000));
  app.add_option("--one-sided", o.oneSided, "table the gin-* patterns drive: rma-v14 | rma-v13 | gin-v11")
      ->capture_default_str()->check(CLI::IsMember({"rma-v14", "rma-v13", "gin-v11"}));
  app.add_option("--dev", o.dev, "plugin device index")->capture_default_str()->check(tools::InRange(0, INT_MAX));
  app.add_option("-T,--timeout", o.timeoutSec, "limit for the whole run, seconds")
      ->capture_default_str()->check(tools::InRange(1, 7 * 24 * 3600));
  auto* pluginOpt = app.add_option(
      "--plugin", plugin,
      "net plugin, same grammar as NCCL_NET_PLUGIN (name, file, path, comma list, none); overrides it");
  app.add_option("--json", o.jsonPath, "also write the result rows to this JSON file");
  app.add_option("--net-version", o.netVersion,
                 "testing aid: use ncclNetPlugin_v<N> (6..11) instead of the newest of them (NCCL 2.28.9 takes "
                 "the newest it knows, v11; a library's v12 table is NCCL 2.30's, which railyard-perf does not drive)")
      ->check(tools::InRange(6, 11));
  auto* npOpt = app.add_option("--np", o.np, "fork this many local ranks (written -np N)")->check(tools::InRange(1, 1024));
  auto* rankOpt = app.add_option("--rank", o.rank, "this process's rank (multi-host mode)")->check(tools::InRange(0, 1023));
  auto* nranksOpt = app.add_option("--nranks", o.nranks, "number of ranks (multi-host mode)")->check(tools::InRange(1, 1024));
  auto* rootOpt = app.add_option("--root", o.root, "HOST:PORT where rank 0 listens (multi-host mode)");
  npOpt->excludes(rankOpt)->excludes(nranksOpt)->excludes(rootOpt);
  rankOpt->needs(nranksOpt)->needs(rootOpt);
  nranksOpt->needs(rankOpt)->needs(rootOpt);
  rootOpt->needs(rankOpt)->needs(nranksOpt);

  app.footer(kExitStatusHelp);

  tools::AddVersionFlag(app, "railyard-perf");
  std::vector<std::string> args = NormaliseArgs(argc, argv);
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  app.allow_extras();  // refused below, named in the order typed (tools::UnexpectedArguments)
  try {
    app.parse(args);
    if (std::string extra = tools::UnexpectedArguments(app); !extra.empty()) return InvalidUsage(extra);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    *exitNow = true;
    return Status::Ok();
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    *exitNow = true;
    return Status::Ok();
  } catch (const CLI::ParseError& e) {
    return InvalidUsage(e.what());
  }

  RY_RETURN_IF_ERROR(ParseSize(minB, &o.minBytes));
  RY_RETURN_IF_ERROR(ParseSize(maxB, &o.maxBytes));
  RY_RETURN_IF_ERROR(ParseSize(stepB, &o.stepBytes));
  if (o.maxBytes > kMaxBytes) {
    return InvalidUsage("-e " + maxB + " is above the 1G limit (NCCL never posts more than 1 GiB per request)");
  }
  if (o.minBytes > o.maxBytes) return InvalidUsage("-b " + minB + " is larger than -e " + maxB);
  if (o.stepFactor == 1 && o.stepBytes == 0) return InvalidUsage("-i must be > 0 when -f is 1");
  if (o.stepFactor == 1 && (o.maxBytes - o.minBytes) / o.stepBytes >= kMaxSizes) {
    return InvalidUsage("-b " + minB + " -e " + maxB + " -i " + stepB + " makes " +
                        std::to_string((o.maxBytes - o.minBytes) / o.stepBytes + 1) + " sizes (at most " +
                        std::to_string(kMaxSizes) + "): use a larger -i or -f > 1");
  }
  o.pattern = *ParsePattern(pattern);
  if (!IsCollective(o.pattern) && (app.count("--op") > 0 || (app.count("--datatype") > 0 && o.datatype != "float"))) {
    // Not refused (a script may pass the same flags to every pattern), but said: the
    // run ignores them (new-user trial: -p gin-put -o max ran and printed "redop none").
    std::fprintf(stderr,
                 "railyard-perf: warning: -d and -o apply to allreduce, allgather and reducescatter; -p %s moves "
                 "floats and ignores them\n",
                 pattern.c_str());
  }
  if (!IsCollective(o.pattern) && app.count("--blocking") > 0) {
    std::fprintf(stderr,
                 "railyard-perf: warning: -z applies to allreduce, allgather and reducescatter; -p %s ignores it\n",
                 pattern.c_str());
  }
  if (o.pattern == Pattern::kAllGather && app.count("--op") > 0) {
    std::fprintf(stderr, "railyard-perf: warning: -p allgather reduces nothing and ignores -o %s\n", o.op.c_str());
  }
  if (!IsGinPattern(o.pattern) && app.count("--one-sided") > 0) {
    std::fprintf(stderr, "railyard-perf: warning: --one-sided applies to the gin-* patterns; -p %s ignores it\n",
                 pattern.c_str());
  }
  if ((IsGinPattern(o.pattern) || IsCollective(o.pattern)) && app.count("--net-version") > 0) {
    std::fprintf(stderr,
                 "railyard-perf: warning: --net-version applies to sendrecv, ring and alltoall (the net tables); -p "
                 "%s drives %s and ignores it\n",
                 pattern.c_str(), IsCollective(o.pattern) ? "the CollNet table" : "the one-sided table");
  }
  if (app.count("--json") > 0 && o.jsonPath.empty()) {
    return InvalidUsage("--json needs a file name (it was given an empty one)");
  }
  if (pluginOpt->count() > 0) o.plugin = plugin;
  if (o.np == 0 && rankOpt->count() == 0) o.np = 1;  // plain run: one local rank
  if (rankOpt->count() > 0) {
    if (o.rank >= o.nranks) {
      return InvalidUsage("--rank " + std::to_string(o.rank) + " must be below --nranks " + std::to_string(o.nranks));
    }
    std::string host;
    int port = 0;
    RY_RETURN_IF_ERROR(ParseHostPort(o.root, &host, &port));
  }
  // Point-to-point and GIN patterns move whole float elements (alltoall: 16-byte chunks
  // per peer). A run whose every size rounds down to none would move 0 B and report a
  // clean row for a size never measured (new-user trial: -b 3 -e 3 printed one passing
  // row of 0 B): refused. In a sweep with larger sizes too, a small size gives its 0 B
  // row as nccl-tests prints it (count 0).
  const bool collective = IsCollective(o.pattern);
  const int nranks = o.np > 0 ? o.np : o.nranks;
  // The largest size the sweep runs: -e itself, or less when the steps skip it (new-user
  // trial: -b 3 -e 7 with the default -i 1M runs 3 alone, one row of 0 B).
  const std::size_t largest = SizeList(o).back();
  const std::string sweep = largest == o.maxBytes ? "-e " + maxB
                                                  : "-b " + minB + " -e " + maxB + " (whose steps run no size above " +
                                                        FormatSize(largest) + ")";
  if (o.minBytes == 0 && o.maxBytes > 0 && largest == 0) {
    // The linear step jumps past -e (new-user trial: -b 0 -e 8 with the default -i 1M
    // ran one row of 0 B and exited 0).
    return InvalidUsage("-b 0 -e " + maxB + " runs the 0 B size alone: the next, 0 + -i " + stepB +
                        ", is past -e; use -f 2, a smaller -i, or -b 0 -e 0 for an empty message");
  }
  if (collective && o.minBytes > 0) {
    // The same rule for the collectives (new-user trial: -p allgather -b 1 -e 1 ran one
    // passing row of 0 B): whole elements per rank (allreduce: whole elements).
    collectives::DataType type = collectives::DataType::kFloat32;
    (void)collectives::ParseDataType(o.datatype, &type);  // CLI11 checked the name
    const std::size_t tb = collectives::TypeBytes(type);
    if (RowBytes(o, largest) == 0) {
      const std::size_t least = o.pattern == Pattern::kAllReduce ? tb : tb * static_cast<std::size_t>(nranks);
      return InvalidUsage(sweep + " moves nothing with -p " + pattern + " -d " + o.datatype + ": " +
                          (o.pattern == Pattern::kAllReduce
                               ? "the size counts whole " + std::to_string(tb) + "-byte elements"
                               : "each of the " + std::to_string(nranks) + " ranks holds whole " +
                                     std::to_string(tb) + "-byte elements") +
                          ", so at least " + std::to_string(least) + " B (-b 0 -e 0 for an empty operation)");
    }
  }
  if (!collective && o.minBytes > 0 && RowBytes(o, largest) == 0) {
    const bool alltoall = o.pattern == Pattern::kAllToAll || o.pattern == Pattern::kGinAllToAll;
    return InvalidUsage(sweep + " moves nothing with -p " + pattern + ": " +
                        (alltoall ? "alltoall sends 16-byte multiples to each of the " + std::to_string(nranks) +
                                        " ranks, so at least " + std::to_string(16 * nranks) + " B"
                                  : std::string("messages are whole 4-byte floats, so at least 4 B")) +
                        " (-b 0 -e 0 for an empty message)");
  }
  *out = std::move(o);
  return Status::Ok();
}

std::size_t RowBytes(const Options& o, std::size_t requestedBytes) {
  const int nranks = o.np > 0 ? o.np : o.nranks;
  if (IsCollective(o.pattern)) {
    collectives::DataType type = collectives::DataType::kFloat32;
    (void)collectives::ParseDataType(o.datatype, &type);  // CLI11 checked the name
    return PatternOps(o.pattern).shape(requestedBytes, nranks, collectives::TypeBytes(type)).totalBytes;
  }
  return LayoutFor(o.pattern, requestedBytes, nranks).totalBytes;
}

std::string SizeNote(const Options& o) {
  if (o.minBytes == 0 || RowBytes(o, o.minBytes) != 0) return "";
  // ParseOptions refused a sweep whose largest size moves nothing, so some size does.
  std::size_t firstMoving = SizeList(o).back();
  for (std::size_t s : SizeList(o)) {
    if (RowBytes(o, s) != 0) {
      firstMoving = s;
      break;
    }
  }
  // New-user trial: "too small to move a whole element" for 4 B of int32 read as wrong:
  // what is missing is a whole element per rank (or per chunk), which the shape rounds to.
  // Allreduce rounds the whole size; allgather and reducescatter each rank's share.
  const int nranks = o.np > 0 ? o.np : o.nranks;
  const std::string per =
      !IsCollective(o.pattern)             ? ""
      : o.pattern == Pattern::kAllReduce ? " (the size is rounded down to whole " + o.datatype + " elements)"
                                           : " over " + std::to_string(nranks) + " ranks (each rank's share is "
                                             "rounded down to whole " + o.datatype + " elements)";
  return "-b " + FormatSize(o.minBytes) + " moves nothing with -p " + std::string(PatternName(o.pattern)) + per +
         ": the sizes below " + FormatSize(firstMoving) + " give one row of 0 B (count 0, as nccl-tests prints it); " +
         "the first size that moves data is " + FormatSize(firstMoving) + ", which moves " +
         std::to_string(RowBytes(o, firstMoving)) + " B";
}

RunShape ShapeOf(const Options& o) {
  RunShape s;
  s.minBytes = o.minBytes;
  s.maxBytes = o.maxBytes;
  s.stepBytes = o.stepBytes;
  s.stepFactor = o.stepFactor;
  s.iters = o.iters;
  s.warmupIters = o.warmupIters;
  s.check = o.check;
  s.pattern = static_cast<std::int32_t>(o.pattern);
  s.blocking = IsCollective(o.pattern) ? o.blocking : 0;  // -z means nothing to the others
  return s;
}

std::string ShapeDifference(const RunShape& mine, int myRank, const RunShape& other, int otherRank) {
  std::string diff;
  auto add = [&](const char* flag, const std::string& a, const std::string& b) {
    if (a == b) return;
    diff += std::string(diff.empty() ? "" : ", ") + flag + " " + a + " on rank " + std::to_string(myRank) +
            " but " + b + " on rank " + std::to_string(otherRank);
  };
  add("-b", FormatSize(mine.minBytes), FormatSize(other.minBytes));
  add("-e", FormatSize(mine.maxBytes), FormatSize(other.maxBytes));
  add("-i", FormatSize(mine.stepBytes), FormatSize(other.stepBytes));
  add("-f", std::to_string(mine.stepFactor), std::to_string(other.stepFactor));
  add("-n", std::to_string(mine.iters), std::to_string(other.iters));
  add("-w", std::to_string(mine.warmupIters), std::to_string(other.warmupIters));
  add("-c", std::to_string(mine.check), std::to_string(other.check));
  add("-z", std::to_string(mine.blocking), std::to_string(other.blocking));
  auto pattern = [](std::int32_t p) {
    return p >= 0 && p <= 5 ? std::string(PatternName(static_cast<Pattern>(p))) : "pattern(" + std::to_string(p) + ")";
  };
  add("-p", pattern(mine.pattern), pattern(other.pattern));
  return diff;
}

std::vector<std::size_t> SizeList(const Options& opts) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = opts.minBytes; s <= opts.maxBytes;) {
    sizes.push_back(s);
    std::size_t next = opts.stepFactor > 1 ? s * opts.stepFactor : s + opts.stepBytes;
    if (next <= s) {           // 0 × factor, or overflow: stop
      if (s == 0 && opts.stepFactor > 1) next = 1;  // nccl-tests would loop forever on -b 0 -f 2
      else break;
    }
    s = next;
  }
  return sizes;
}

std::vector<std::size_t> DistinctRows(const std::vector<std::size_t>& sizes,
                                      const std::function<std::size_t(std::size_t)>& rowBytes) {
  std::vector<std::size_t> out;
  std::vector<std::size_t> seen;  // row bytes kept so far (sizes grow, so rows do too)
  for (std::size_t s : sizes) {
    const std::size_t row = rowBytes(s);
    if (std::find(seen.begin(), seen.end(), row) != seen.end()) continue;
    seen.push_back(row);
    out.push_back(s);
  }
  return out;
}

}  // namespace railyard::perf
