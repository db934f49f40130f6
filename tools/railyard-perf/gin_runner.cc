// See gin_runner.h: setup, the size loop and the report of the gin-* patterns.
#include "tools/railyard-perf/gin_runner.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tools/railyard-perf/launcher.h"
#include "tools/railyard-perf/nccl_logger.h"
#include "tools/railyard-perf/patterns.h"
#include "tools/railyard-perf/plugin_loader.h"
#include "tools/railyard-perf/report.h"
#include "tools/railyard-perf/runner.h"

namespace railyard::perf {
namespace {

/// A failed table call, worded as the net patterns word theirs: the result's name, the
/// table and its library, the plugin's first WARN since the previous call, and for
/// init where to look (new-user trial: "plugin call init failed on rank 0: 5" alone).
Status Plugin(const char* call, int rank, ncclResult_t rc, OneSidedKind kind, const std::string& path) {
  std::string m = std::string("plugin call ") + call + " of " + OneSidedKindName(kind) + " (" + path +
                  ") failed on rank " + std::to_string(rank) + ": " + ResultName(rc) + " (" +
                  std::to_string(int(rc)) + ")";
  const std::string warn = TakeFirstWarn();
  if (!warn.empty()) m += ": " + warn;
  if (std::strcmp(call, "init") == 0) {
    m += "\n  hint: the table's init() failed; its WARN says why (often a malformed RAILYARD_* variable)";
  }
  return SystemError(m);
}

OneSidedKind KindOf(const std::string& name) {
  if (name == "gin-v11") return OneSidedKind::kGinV11;
  if (name == "rma-v13") return OneSidedKind::kRmaV13;
  return OneSidedKind::kRmaV14;
}

/// dlopen's the first NCCL_NET_PLUGIN candidate (or --plugin, or railyard-perf's
/// ../lib fallback) that exports the table.
void* OpenLib(const Options& opts, OneSidedKind kind, std::string* path) {
  const char* env = std::getenv("NCCL_NET_PLUGIN");
  const std::optional<std::string> value = opts.plugin ? opts.plugin : env ? std::optional<std::string>(env) : std::nullopt;
  PluginSpec spec = ResolvePluginValue(value);
  std::vector<std::string> tries;
  for (const auto& c : spec.candidates) tries.insert(tries.end(), c.tries.begin(), c.tries.end());
  if (spec.isDefault) {
    for (const auto& f : ConvenienceFallbacks(ExecutableDir())) tries.push_back(f);
  }
  for (const auto& t : tries) {
    void* lib = ::dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    if (OneSidedTable(lib, kind).ok()) {
      *path = t;
      return lib;
    }
    ::dlclose(lib);
  }
  return nullptr;
}

}  // namespace

Status GinBench::CallFailed(const char* call, int peer, ncclResult_t rc) const {
  std::string m = std::string(call) + " to peer " + std::to_string(peer) + " failed on rank " + std::to_string(me) +
                  ": " + ResultName(rc) + " (" + std::to_string(int(rc)) + ")";
  const std::string warn = TakeFirstWarn();
  if (!warn.empty()) m += ": " + warn;
  return SystemError(m);
}

Status GinBench::Poll(std::vector<void*>* reqs) {
  const std::size_t before = reqs->size();
  for (std::size_t i = 0; i < reqs->size();) {
    int done = 0;
    ncclResult_t rc = table->Test((*reqs)[i], &done);
    if (rc != ncclSuccess) return Plugin("test", me, rc, table->kind(), libPath);
    if (done) {
      (*reqs)[i] = reqs->back();
      reqs->pop_back();
    } else {
      ++i;
    }
  }
  ncclResult_t rc = table->Progress();
  // Nothing completed: give the CPU away for a moment. Both ranks of a pair spin here,
  // and on a host with fewer cores than spinning threads (the soft-RoCE guest: rxe's
  // kernel work needs a CPU too; the TCP fabric's peer needs one to land bytes) a
  // spin that never yields makes every round trip wait for a scheduler tick.
  if (reqs->size() == before) {
    if (idleSleepUs > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(idleSleepUs));
    } else {
      std::this_thread::yield();
    }
  }
  return rc == ncclSuccess ? Status::Ok() : Plugin("progress", me, rc, table->kind(), libPath);
}

Status GinBench::WaitFor(std::vector<void*>* reqs, const std::vector<bool>& from) {
  while (true) {
    bool all = reqs->empty();
    for (int q = 0; q < n && all; ++q) all = !from[size_t(q)] || Signal(q) >= expected[size_t(q)];
    if (all) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      return SystemError("rank " + std::to_string(me) + ": timed out waiting for requests or signals");
    }
    RY_RETURN_IF_ERROR(Poll(reqs));
  }
}

Status WithProgressOf(OneSidedTable& table, const std::function<Status()>& fn) {
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop.load(std::memory_order_acquire)) (void)table.Progress();
  });
  Status s = fn();
  stop.store(true, std::memory_order_release);
  t.join();
  return s;
}

Status GinBench::WithProgress(const std::function<Status()>& fn) { return WithProgressOf(*table, fn); }

Status GinBench::Barrier() {
  return WithProgress([this] { return boot->Barrier(); });
}

int RunGinRank(const Options& opts, Bootstrap& boot) {
  const int me = boot.rank();
  const int n = boot.nranks();
  SetLoggerRank(me);
  bool connected = false;
  // Exit 4 when a peer's process has gone (new-user trial: after a kill -9 the ranks
  // that only lost the bootstrap exited 1).
  auto fail = [&](const Status& s) { return ReportRankFailure(boot, s, connected); };
  const OneSidedKind kind = KindOf(opts.oneSided);
  std::string path;
  void* lib = OpenLib(opts, kind, &path);
  if (lib == nullptr) return fail(InvalidUsage(std::string("no plugin exports the ") + OneSidedKindName(kind) + " table"));
  OneSidedTable table(lib, kind);
  ncclResult_t rc = table.Init(1, &NcclLogger);
  if (rc != ncclSuccess) return fail(Plugin("init", me, rc, kind, path));
  int ndev = 0, type = 0, maxRecvs = 0;
  if ((rc = table.Devices(&ndev)) != ncclSuccess) return fail(Plugin("devices", me, rc, kind, path));
  if (opts.dev >= ndev) return fail(InvalidUsage("--dev " + std::to_string(opts.dev) + " but the table has " + std::to_string(ndev)));
  std::string devName = "?";
  int speedMbps = 0;
  if ((rc = table.Properties(opts.dev, &type, &maxRecvs, &devName, &speedMbps)) != ncclSuccess) {
    return fail(Plugin("getProperties", me, rc, kind, path));
  }
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  if ((rc = table.Listen(opts.dev, handle)) != ncclSuccess) return fail(Plugin("listen", me, rc, kind, path));
  std::vector<uint8_t> all(size_t(n) * NCCL_NET_HANDLE_MAXSIZE);
  if (Status s = boot.AllGather(handle, sizeof handle, all.data()); !s.ok()) return fail(s);
  std::vector<void*> hs;
  for (int r = 0; r < n; ++r) hs.push_back(all.data() + size_t(r) * NCCL_NET_HANDLE_MAXSIZE);
  if ((rc = table.Connect(hs, me)) != ncclSuccess) return fail(Plugin("connect", me, rc, kind, path));
  connected = true;

  GinBench b;
  b.table = &table;
  b.boot = &boot;
  b.libPath = path;
  b.me = me;
  b.n = n;
  b.deadline = DeadlineIn(opts.timeoutSec);
  b.idleSleepUs = opts.idleSleepUs;
  b.areaBytes = std::max<std::size_t>(64, (opts.maxBytes + 63) & ~std::size_t{63});  // -e 0: mmap needs a length
  const std::size_t dataBytes = 2 * b.areaBytes;
  void* mem = ::mmap(nullptr, dataBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return fail(SystemError("mmap of the data window failed"));
  b.data = static_cast<char*>(mem);
  std::vector<uint64_t> sig(size_t(n), 0);
  b.signals = sig.data();
  b.expected.assign(size_t(n), 0);
  if ((rc = table.RegMrSym(b.data, dataBytes, 0, &b.dataMh)) != ncclSuccess) return fail(Plugin("regMrSym", me, rc, kind, path));
  if ((rc = table.RegMrSym(b.signals, sig.size() * 8, NCCL_NET_MR_FLAG_FORCE_SO, &b.sigMh)) != ncclSuccess) {
    return fail(Plugin("regMrSym", me, rc, kind, path));
  }
  GinSizeFn fn = opts.pattern == Pattern::kGinPut      ? &GinPutSize
                 : opts.pattern == Pattern::kGinPutOneWay ? &GinPutOneWaySize
                 : opts.pattern == Pattern::kGinSignal ? &GinSignalSize
                                                       : &GinAllToAllSize;
  const double factor = BusBwFactor(opts.pattern, n);
  if (me == 0) {
    std::printf("# railyard-perf %s over %s (%s), %d ranks, device %d, %s\n", PatternName(opts.pattern),
                OneSidedKindName(kind), path.c_str(), n, opts.dev,
                opts.pattern == Pattern::kGinSignal ? "time = one put+signal round trip"
                                                    : "time = one iteration of the pattern");
    std::fputs(TableHeader().c_str(), stdout);
  }
  std::vector<Row> rows;
  long long wrongTotal = 0;
  const std::vector<std::size_t> sizes =
      DistinctRows(SizeList(opts), [&](std::size_t s) { return LayoutFor(opts.pattern, s, n).totalBytes; });
  for (std::size_t req : sizes) {
    const Layout l = LayoutFor(opts.pattern, req, n);
    if (Status s = b.Barrier(); !s.ok()) return fail(s);
    double us = 0;
    long long wrong = 0;
    if (Status s = fn(b, l.totalBytes, opts.iters, opts.warmupIters, opts.check != 0, &us, &wrong); !s.ok()) {
      return fail(s);
    }
    double v[2] = {us, double(wrong)};
    Status red = b.WithProgress([&] {
      RY_RETURN_IF_ERROR(boot.AllReduce(std::span<double>(v, 1), ReduceOp::kMax));
      return boot.AllReduce(std::span<double>(v + 1, 1), ReduceOp::kSum);
    });
    if (!red.ok()) return fail(red);
    Row row;
    row.bytes = l.totalBytes;
    row.count = l.count;
    row.timeUs = v[0];
    row.algbw = AlgBw(l.totalBytes, v[0]);
    row.busbw = row.algbw * factor;
    row.wrong = opts.check ? (long long)v[1] : -1;
    wrongTotal += opts.check ? (long long)v[1] : 0;
    rows.push_back(row);
    if (me == 0) {
      std::fputs(TableRow(row).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  if (me == 0) std::fputs(TableFooter(rows).c_str(), stdout);
  Status json;
  if (me == 0 && !opts.jsonPath.empty()) {
    RunInfo info = RunInfoFromOptions(opts, n);
    const char* env = std::getenv("NCCL_NET_PLUGIN");
    info.pluginValue = opts.plugin ? *opts.plugin + " (--plugin)" : env != nullptr ? env : "<unset>";
    info.pluginPath = path;
    info.symbol = table.Symbol();
    info.pluginName = table.Name();
    info.version = table.Version();
    info.devName = devName;
    info.speedMbps = speedMbps;
    json = WriteJson(opts.jsonPath, info, rows);
  }
  (void)b.Barrier();
  (void)table.DeregMrSym(b.sigMh);
  (void)table.DeregMrSym(b.dataMh);
  (void)table.Close();
  (void)table.Finalize();
  ::munmap(mem, dataBytes);
  if (!json.ok()) {
    PrintRankError(me, json.message());
    return int(kExitUsage);
  }
  return wrongTotal > 0 ? int(kExitWrongData) : int(kExitOk);
}

}  // namespace railyard::perf
