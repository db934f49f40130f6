#include "tools/railyard-perf/report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tools/railyard-perf/options.h"
#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {
namespace {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return n < 0 ? std::string() : std::string(buf, std::size_t(std::min<int>(n, int(sizeof(buf)) - 1)));
}

double AvgBusBw(const std::vector<Row>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& r : rows) sum += r.busbw;
  return sum / double(rows.size());
}

}  // namespace

double AlgBw(std::size_t bytes, double timeUs) { return timeUs > 0 ? double(bytes) / 1e3 / timeUs : 0; }

std::string TableHeader() {
  std::string s;
  s += Printf("#%52s  %s\n", "", "out-of-place");
  s += Printf("#%11s %12s %8s %6s %6s %7s %6s %6s %6s\n", "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong");
  s += Printf("#%11s %12s %8s %6s %6s %7s %6s %6s %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  return s;
}

std::string TableRow(const Row& row) {
  std::string time;
  if (row.timeUs >= 10000.0) time = Printf("%7.0f", row.timeUs);
  else if (row.timeUs >= 100.0) time = Printf("%7.1f", row.timeUs);
  else time = Printf("%7.2f", row.timeUs);
  const std::string wrong = row.wrong < 0 ? std::string("N/A") : Printf("%lld", row.wrong);
  return Printf("%12zu %12zu %8s %6s %6i %7s %6.2f %6.2f %6s\n", row.bytes, row.count, row.type, row.redop, -1,
                time.c_str(), row.algbw, row.busbw, wrong.c_str());
}

std::string TableFooter(const std::vector<Row>& rows) {
  long long wrong = 0;
  for (const auto& r : rows) wrong += r.wrong > 0 ? r.wrong : 0;
  std::string s = "#\n";
  s += Printf("# Out of bounds values : %lld %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
  s += Printf("# Avg bus bandwidth    : %g \n", AvgBusBw(rows));
  s += "#\n";
  return s;
}

std::string RunHeader(const RunInfo& i) {
  std::string s;
  s += Printf("# railyard-perf: pattern %s, %d rank(s), nccl-tests style, host memory, 1 rank per process\n",
              i.pattern.c_str(), i.nranks);
  s += Printf("#  nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %llu(%s) warmup iters: %d iters: %d agg iters: 1 "
              "validation: %d graph: 0\n",
              i.minBytes, i.maxBytes, i.stepFactor > 1 ? i.stepFactor : (unsigned long long)i.stepBytes,
              i.stepFactor > 1 ? "factor" : "bytes", i.warmupIters, i.iters, i.check);
  s += "#\n";
  s += Printf("# Plugin: %s (NCCL_NET_PLUGIN=%s)\n", i.pluginPath.c_str(), i.pluginValue.c_str());
  s += Printf("# Plugin: symbol %s (net v%d), name \"%s\"\n", i.symbol.c_str(), i.version, i.pluginName.c_str());
  s += Printf("# Device: %d [%s] speed %d Mbps; busbw factor %g\n", i.dev, i.devName.c_str(), i.speedMbps,
              i.busbwFactor);
  s += "#\n# Using devices\n";
  for (const auto& l : i.rankLines) s += l + "\n";
  s += "#\n";
  return s;
}

RunInfo RunInfoFromOptions(const Options& opts, int nranks) {
  RunInfo i;
  i.pattern = PatternName(opts.pattern);
  i.nranks = nranks;
  i.dev = opts.dev;
  i.busbwFactor = BusBwFactor(opts.pattern, nranks);
  i.minBytes = opts.minBytes;
  i.maxBytes = opts.maxBytes;
  i.stepBytes = opts.stepBytes;
  i.stepFactor = opts.stepFactor;
  i.iters = opts.iters;
  i.warmupIters = opts.warmupIters;
  i.check = opts.check;
  return i;
}

Status CheckJsonWritable(const std::string& path) {
  struct stat st{};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) return InvalidUsage("--json " + path + ": is a directory");
  // O_APPEND without O_TRUNC: an existing file keeps its contents until the run has its rows.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return InvalidUsage("--json " + path + ": cannot be written: " + std::strerror(errno));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());  // leave no empty file behind should the run fail
  return Status::Ok();
}

Status WriteJson(const std::string& path, const RunInfo& i, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["tool"] = "railyard-perf";
  j["plugin"] = {{"path", i.pluginPath}, {"value", i.pluginValue}, {"symbol", i.symbol},
                 {"name", i.pluginName},  {"version", i.version}};
  j["device"] = {{"index", i.dev}, {"name", i.devName}, {"speed_mbps", i.speedMbps}};
  j["pattern"] = i.pattern;
  j["nranks"] = i.nranks;
  j["busbw_factor"] = i.busbwFactor;
  j["iters"] = i.iters;
  j["warmup_iters"] = i.warmupIters;
  j["check"] = i.check;
  nlohmann::json arr = nlohmann::json::array();
  long long wrong = 0;
  for (const auto& r : rows) {
    nlohmann::json o = {{"size", r.bytes},      {"count", r.count},          {"type", r.type},
                        {"redop", r.redop},      {"root", -1},                {"time_us", r.timeUs},
                        {"algbw_gbps", r.algbw}, {"busbw_gbps", r.busbw}};
    o["wrong"] = r.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.wrong);
    wrong += r.wrong > 0 ? r.wrong : 0;
    arr.push_back(std::move(o));
  }
  j["rows"] = std::move(arr);
  j["out_of_bounds"] = wrong;
  j["avg_busbw_gbps"] = AvgBusBw(rows);
  std::ofstream f(path);
  if (!f) return InvalidUsage("--json " + path + ": cannot open for writing");
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return InvalidUsage("--json " + path + ": write failed");
  return Status::Ok();
}

}  // namespace railyard::perf
