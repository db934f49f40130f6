#include "tools/railyard-perf/coll_runner.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/collnet_v12.h"
#include "tools/railyard-perf/coll_pattern.h"
#include "tools/railyard-perf/launcher.h"
#include "tools/railyard-perf/nccl_logger.h"
#include "tools/railyard-perf/plugin_loader.h"
#include "tools/railyard-perf/report.h"
#include "tools/railyard-perf/runner.h"

namespace railyard::perf {

const CollPattern& PatternOps(Pattern p) {
  if (p == Pattern::kAllGather) return AllGatherPattern();
  if (p == Pattern::kReduceScatter) return ReduceScatterPattern();
  return AllReducePattern();
}

namespace {

struct Aligned {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, Aligned>;
Buffer Alloc(std::size_t bytes) {
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, (std::max<std::size_t>(bytes, 1) + 4095) / 4096 * 4096)));
}

class CollRun {
 public:
  CollRun(const Options& o, Bootstrap& b) : opts_(o), boot_(b), me_(b.rank()), n_(b.nranks()) {}
  ~CollRun() { Cleanup(); }
  Status Run(long long* wrongTotal);
  void Cleanup();
  /// True when Run failed on the command line (-d/-o, the ranks' options differ): exit
  /// status 2. A plugin that fails to load or init is a failed call (1), as for the
  /// net patterns (new-user trial: RAILYARD_NSOCKS=0 exited 2 here, 1 there).
  bool usageError() const { return usageError_; }
  /// True once the collective comm is connected (failures after it may be a peer's).
  bool connected() const { return comm_ != nullptr; }

 private:
  Status Call(const char* what, ncclResult_t r) {
    if (r == ncclSuccess) return Status::Ok();
    std::string m = std::string("collnet ") + what + " failed on rank " + std::to_string(me_) + ": " + ResultName(r) +
                    " (" + std::to_string(int(r)) + ")";
    const std::string warn = TakeFirstWarn();  // the plugin's own reason
    if (!warn.empty()) m += ": " + warn;
    return Status(static_cast<Code>(r == ncclInvalidUsage || r == ncclInvalidArgument ? r : ncclSystemError), m);
  }
  Status Open();
  /// Rank 0's --json file: the rows with what was loaded (the CollNet table's symbol,
  /// name and version; the device as the net table of the same library reports it).
  Status WriteRows(const std::vector<Row>& rows);
  Status Wait(void* request, const std::chrono::steady_clock::time_point& deadline);

  const Options& opts_;
  Bootstrap& boot_;
  const int me_, n_;
  bool usageError_ = false;
  OpenedNet net_;
  const ncclCollNet_v11_t* table_ = nullptr;  // v11 slot order (v12 is the same but getProperties)
  int version_ = 0;
  std::string pluginValue_ = "<unset>";  ///< NCCL_NET_PLUGIN / --plugin as given, for --json
  void* ctx_ = nullptr;
  void* comm_ = nullptr;
  /// Timed iterations in flight at most when not blocking (-z 0), each on its own
  /// buffers: a collective's buffers are its own until it finishes.
  static constexpr int kInFlight = 2;
  /// `iters` iterations of -z 0 back to back: iteration i runs on buffer set
  /// i % kInFlight and is posted once iteration i - kInFlight has finished (and, with
  /// `check`, been checked; each checked one filled afresh first). *us: the whole loop;
  /// *wrong: elements that failed the check. The timed pass runs without `check`, and
  /// -c 1 adds a checked pass of kInFlight iterations after it, untimed, as nccl-tests
  /// checks outside its timing (new-user trial: the fill and check inside the time made
  /// the default rows 10-20x slower than the plugin).
  Status BackToBack(const CollPattern& pat, const CollShape& sh, CollArgs a[kInFlight], int iters, bool check,
                    const std::chrono::steady_clock::time_point& deadline, double* us, std::size_t* wrong);

  Buffer send_[kInFlight], recv_[kInFlight];
  void* sendMh_[kInFlight] = {};
  void* recvMh_[kInFlight] = {};
};

Status CollRun::BackToBack(const CollPattern& pat, const CollShape& sh, CollArgs a[kInFlight], int iters,
                           bool check, const std::chrono::steady_clock::time_point& deadline, double* us,
                           std::size_t* wrong) {
  void* req[kInFlight] = {};
  std::uint64_t salt[kInFlight] = {};
  // Waits for the iteration on buffer set k, then checks it (`check`).
  auto finish = [&](int k) -> Status {
    if (!req[k]) return Status::Ok();
    RY_RETURN_IF_ERROR(Wait(req[k], deadline));
    req[k] = nullptr;
    if (check) *wrong += pat.check(a[k], sh, salt[k]);
    return Status::Ok();
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) {
    const int k = it % kInFlight;
    RY_RETURN_IF_ERROR(finish(k));  // iteration it - kInFlight
    if (check) {  // peers read this input only through this rank's own sends: no barrier
      salt[k] = std::uint64_t(it) + 1;
      pat.fill(a[k], sh, salt[k]);
      std::memset(a[k].recv, 0xff, sh.recvBytes);
    }
    RY_RETURN_IF_ERROR(Call("post", pat.post(a[k], sh, &req[k])));
  }
  for (int i = 0; i < kInFlight; ++i) RY_RETURN_IF_ERROR(finish((iters + i) % kInFlight));  // in post order
  *us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

Status CollRun::Open() {
  OpenRequest req;
  const char* env = std::getenv("NCCL_NET_PLUGIN");
  req.value = opts_.plugin ? opts_.plugin : (env ? std::optional<std::string>(env) : std::nullopt);
  req.logger = NcclLogger;
  req.exeDir = ExecutableDir();
  std::uint64_t id = me_ == 0 ? std::random_device{}() * 0x100000001ull ^ std::uint64_t(getpid()) : 0;
  std::vector<std::uint64_t> ids(static_cast<std::size_t>(n_));
  RY_RETURN_IF_ERROR(boot_.AllGather(&id, sizeof(id), ids.data()));
  req.commId = ids[0];
  std::vector<std::string> log;
  Status s = OpenNetPlugin(req, &net_, &log);
  PrintOpenLog(log, net_, me_);
  RY_RETURN_IF_ERROR(s);
  if (req.value) pluginValue_ = *req.value + (opts_.plugin ? " (--plugin)" : "");
  // NCCL takes the CollNet table from the library that supplied the net table.
  if (void* t = dlsym(net_.lib, "ncclCollNetPlugin_v12")) {
    table_ = static_cast<const ncclCollNet_v11_t*>(t);
    version_ = 12;
  } else if (void* t11 = dlsym(net_.lib, "ncclCollNetPlugin_v11")) {
    table_ = static_cast<const ncclCollNet_v11_t*>(t11);
    version_ = 11;
  } else {
    return InvalidUsage(net_.path + " exports no ncclCollNetPlugin_v12 or _v11");
  }
  RY_RETURN_IF_ERROR(Call("init", table_->init(&ctx_, req.commId, NcclLogger)));
  int ndev = 0;
  RY_RETURN_IF_ERROR(Call("devices", table_->devices(&ndev)));
  if (ndev < 1) return InvalidUsage("the CollNet table reports no device");
  return Status::Ok();
}

Status CollRun::WriteRows(const std::vector<Row>& rows) {
  RunInfo info = RunInfoFromOptions(opts_, n_);
  info.pluginValue = pluginValue_;
  info.pluginPath = net_.path;
  info.symbol = "ncclCollNetPlugin_v" + std::to_string(version_);
  info.pluginName = table_->name != nullptr ? table_->name : "?";
  info.version = version_;
  ncclNetProperties_v11_t props{};
  if (net_.net && net_.net->getProperties(opts_.dev, &props) == ncclSuccess) {
    info.devName = props.name != nullptr ? props.name : "?";
    info.speedMbps = props.speed;
  }
  return WriteJson(opts_.jsonPath, info, rows);
}

Status CollRun::Wait(void* request, const std::chrono::steady_clock::time_point& deadline) {
  for (;;) {
    int done = 0, size = 0;
    RY_RETURN_IF_ERROR(Call("test", table_->test(request, &done, &size)));
    if (done) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) return SystemError("collnet test: the run's -T limit passed");
    std::this_thread::yield();
  }
}

Status CollRun::Run(long long* wrongTotal) {
  using collectives::DataType;
  using collectives::RedOp;
  DataType type;
  RedOp op;
  if (!collectives::ParseDataType(opts_.datatype, &type) || !collectives::ParseRedOp(opts_.op, &op)) {
    usageError_ = true;
    return InvalidUsage("-d " + opts_.datatype + " / -o " + opts_.op + " not understood");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts_.timeoutSec);
  // Ranks started with different options would post different collectives: compare first.
  struct Shape {
    RunShape run;
    std::int32_t type, op;
  } mine{ShapeOf(opts_), static_cast<std::int32_t>(type), static_cast<std::int32_t>(op)};
  std::vector<Shape> shapes(static_cast<std::size_t>(n_));
  RY_RETURN_IF_ERROR(boot_.AllGather(&mine, sizeof mine, shapes.data()));
  for (int r = 0; r < n_; ++r) {
    std::string diff = ShapeDifference(mine.run, me_, shapes[std::size_t(r)].run, r);
    // Named with the values on each rank, as ShapeDifference names -b or -z (new-user
    // trial: "-d/-o differ from rank 1"). The peer's words are only printed, as names
    // of known enum values or their number.
    auto typeName = [](std::int32_t t) {
      return collectives::ValidDataType(t) ? std::string(collectives::TypeName(DataType(t))) : std::to_string(t);
    };
    auto opName = [](std::int32_t o) {
      return collectives::ValidRedOp(o) ? std::string(collectives::OpName(RedOp(o))) : std::to_string(o);
    };
    const Shape& other = shapes[std::size_t(r)];
    if (other.type != mine.type) {
      diff += (diff.empty() ? "" : ", ") + std::string("-d ") + typeName(other.type) + " on rank " +
              std::to_string(r) + " but " + typeName(mine.type) + " on rank " + std::to_string(me_);
    }
    if (other.op != mine.op) {
      diff += (diff.empty() ? "" : ", ") + std::string("-o ") + opName(other.op) + " on rank " + std::to_string(r) +
              " but " + opName(mine.op) + " on rank " + std::to_string(me_);
    }
    if (!diff.empty()) {
      usageError_ = true;
      return InvalidUsage("the ranks' options differ: " + diff);
    }
  }
  RY_RETURN_IF_ERROR(Open());
  // listen, exchange the handles, connect (blocking and collective), closeListen.
  std::vector<char> handle(NCCL_NET_HANDLE_MAXSIZE, 0), all(NCCL_NET_HANDLE_MAXSIZE * std::size_t(n_));
  void* lc = nullptr;
  RY_RETURN_IF_ERROR(Call("listen", table_->listen(ctx_, opts_.dev, handle.data(), &lc)));
  RY_RETURN_IF_ERROR(boot_.AllGather(handle.data(), handle.size(), all.data()));
  std::vector<void*> handles(static_cast<std::size_t>(n_));
  for (int r = 0; r < n_; ++r) handles[std::size_t(r)] = all.data() + std::size_t(r) * NCCL_NET_HANDLE_MAXSIZE;
  const ncclResult_t cr = table_->connect(handles.data(), n_, me_, lc, &comm_);
  (void)table_->closeListen(lc);
  RY_RETURN_IF_ERROR(Call("connect", cr));
  if (comm_ == nullptr) return SystemError("collnet connect returned no comm on rank " + std::to_string(me_));

  const CollPattern& pat = PatternOps(opts_.pattern);
  const std::size_t tb = collectives::TypeBytes(type);
  const std::vector<std::size_t> sizes =
      DistinctRows(SizeList(opts_), [&](std::size_t s) { return pat.shape(s, n_, tb).totalBytes; });
  std::size_t maxSend = 0, maxRecv = 0;
  for (std::size_t s : sizes) {
    const CollShape sh = pat.shape(s, n_, tb);
    maxSend = std::max(maxSend, sh.sendBytes);
    maxRecv = std::max(maxRecv, sh.recvBytes);
  }
  const int sets = opts_.blocking ? 1 : kInFlight;
  CollArgs args[kInFlight];
  for (int k = 0; k < sets; ++k) {
    send_[k] = Alloc(maxSend);
    recv_[k] = Alloc(maxRecv);
    RY_RETURN_IF_ERROR(Call("regMr", table_->regMr(comm_, send_[k].get(), std::max<std::size_t>(maxSend, 1),
                                                   NCCL_PTR_HOST, &sendMh_[k])));
    RY_RETURN_IF_ERROR(Call("regMr", table_->regMr(comm_, recv_[k].get(), std::max<std::size_t>(maxRecv, 1),
                                                   NCCL_PTR_HOST, &recvMh_[k])));
    CollArgs& a = args[k];
    a.table = table_;
    a.comm = comm_;
    a.send = send_[k].get();
    a.recv = recv_[k].get();
    a.sendMh = sendMh_[k];
    a.recvMh = recvMh_[k];
    a.rank = me_;
    a.nranks = n_;
    a.type = type;
    a.op = op;
  }
  const CollArgs& a = args[0];
  if (me_ == 0) {
    std::printf("# railyard-perf %s through %s (ncclCollNetPlugin_v%d), %d ranks, datatype %s, op %s\n",
                PatternName(opts_.pattern), net_.path.c_str(), version_, n_, collectives::TypeName(type),
                opts_.pattern == Pattern::kAllGather ? "none" : collectives::OpName(op));
    std::printf("# busbw factor %.4f, %d warm-up + %d timed iterations per size, check %d, %s\n#\n",
                BusBwFactor(opts_.pattern, n_), opts_.warmupIters, opts_.iters, opts_.check,
                sets > 1 ? (opts_.check ? "timed iterations back to back (2 in flight, -z 0), then 2 more filled "
                                           "afresh and checked, untimed (as nccl-tests checks)"
                                         : "timed iterations back to back (2 in flight, -z 0)")
                         : "each iteration waited for (-z 1)");
    std::fputs(TableHeader().c_str(), stdout);
  }
  std::vector<Row> rows;
  *wrongTotal = 0;
  for (std::size_t s : sizes) {
    const CollShape sh = pat.shape(s, n_, tb);
    pat.fill(a, sh, 0);
    for (int w = 0; w < opts_.warmupIters; ++w) {
      void* req = nullptr;
      RY_RETURN_IF_ERROR(Call("post", pat.post(a, sh, &req)));
      RY_RETURN_IF_ERROR(Wait(req, deadline));
    }
    RY_RETURN_IF_ERROR(boot_.Barrier());
    if (InfoLogging(NCCL_NET)) {  // marks where the timed loop starts (tests kill a rank inside it)
      std::fprintf(stderr, "railyard-perf: rank %d: %zu B: %d timed iterations start\n", me_, sh.totalBytes,
                   opts_.iters);
    }
    double us = 0;
    std::size_t wrong = 0;
    if (sets > 1) {
      for (int k = 1; k < sets; ++k) pat.fill(args[k], sh, 0);
      RY_RETURN_IF_ERROR(BackToBack(pat, sh, args, opts_.iters, false, deadline, &us, &wrong));
      if (opts_.check) {
        double checkUs = 0;  // not in the row's time
        RY_RETURN_IF_ERROR(BackToBack(pat, sh, args, kInFlight, true, deadline, &checkUs, &wrong));
      }
    }
    for (int it = 0; sets == 1 && it < opts_.iters; ++it) {
      if (opts_.check) {
        pat.fill(a, sh, std::uint64_t(it) + 1);
        std::memset(recv_[0].get(), 0xff, sh.recvBytes);
        RY_RETURN_IF_ERROR(boot_.Barrier());  // every rank's input is in place
      }
      const auto t0 = std::chrono::steady_clock::now();
      void* req = nullptr;
      RY_RETURN_IF_ERROR(Call("post", pat.post(a, sh, &req)));
      RY_RETURN_IF_ERROR(Wait(req, deadline));
      us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (opts_.check) wrong += pat.check(a, sh, std::uint64_t(it) + 1);
    }
    double t[1] = {us / opts_.iters};
    double w[1] = {double(wrong)};
    RY_RETURN_IF_ERROR(boot_.AllReduce(t, ReduceOp::kMax));
    RY_RETURN_IF_ERROR(boot_.AllReduce(w, ReduceOp::kSum));
    Row row;
    row.bytes = sh.totalBytes;
    row.count = sh.count;
    row.timeUs = t[0];
    row.algbw = AlgBw(sh.totalBytes, t[0]);
    row.busbw = row.algbw * BusBwFactor(opts_.pattern, n_);
    row.wrong = opts_.check ? static_cast<long long>(w[0]) : -1;
    row.type = collectives::TypeName(type);
    row.redop = opts_.pattern == Pattern::kAllGather ? "none" : collectives::OpName(op);
    if (opts_.check) *wrongTotal += row.wrong;
    if (me_ == 0) {
      std::fputs(TableRow(row).c_str(), stdout);
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  if (me_ == 0) std::fputs(TableFooter(rows).c_str(), stdout);
  if (me_ == 0 && !opts_.jsonPath.empty()) return WriteRows(rows);
  return Status::Ok();
}

void CollRun::Cleanup() {
  if (table_ && comm_) {
    for (int k = 0; k < kInFlight; ++k) {
      if (sendMh_[k]) (void)table_->deregMr(comm_, sendMh_[k]);
      if (recvMh_[k]) (void)table_->deregMr(comm_, recvMh_[k]);
    }
    (void)table_->closeColl(comm_);
  }
  comm_ = nullptr;
  for (int k = 0; k < kInFlight; ++k) sendMh_[k] = recvMh_[k] = nullptr;
  if (table_ && ctx_) (void)table_->finalize(ctx_);
  ctx_ = nullptr;
  table_ = nullptr;
  (void)net_.Close();
}

}  // namespace

int RunCollRank(const Options& opts, Bootstrap& boot) {
  SetLoggerRank(boot.rank());
  CollRun run(opts, boot);
  long long wrong = 0;
  const Status s = run.Run(&wrong);
  if (!s.ok()) {
    if (run.usageError()) {
      run.Cleanup();
      PrintRankError(boot.rank(), s.message());
      return kExitUsage;
    }
    // Exit 4 when a peer's process has gone (new-user trial: after a kill -9 the
    // survivors exited 1); reported before the teardown.
    const int rc = ReportRankFailure(boot, s, run.connected());
    run.Cleanup();
    return rc;
  }
  run.Cleanup();
  if (wrong > 0) {
    if (boot.rank() == 0) std::fprintf(stderr, "railyard-perf: data check FAILED: %lld wrong element(s)\n", wrong);
    return kExitWrongData;
  }
  return kExitOk;
}

}  // namespace railyard::perf
