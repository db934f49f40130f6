#include "tools/railyard-perf/runner.h"
#include "tools/railyard-perf/gin_runner.h"

#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tools/railyard-perf/coll_runner.h"
#include "tools/railyard-perf/launcher.h"
#include "tools/railyard-perf/nccl_logger.h"
#include "tools/railyard-perf/patterns.h"
#include "tools/railyard-perf/plugin_loader.h"
#include "tools/railyard-perf/report.h"

namespace railyard::perf {
namespace {

using Clock = std::chrono::steady_clock;

/// A connection to one peer in one direction.
struct Conn {
  int peer = -1;
  void* comm = nullptr;      ///< sendComm or recvComm
  void* mhandle = nullptr;   ///< registration of the whole send or receive buffer
  void* listenComm = nullptr;  ///< receive side until accept succeeds
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};  ///< connect side: the peer's handle, stable across retries
};

/// One isend or irecv of an iteration.
struct Op {
  bool send = false;
  Conn* conn = nullptr;
  char* data = nullptr;
  std::size_t bytes = 0;
  void* request = nullptr;
  bool posted = false;
  bool done = false;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

/// The benchmark state of one rank.
class Runner {
 public:
  Runner(const Options& o, Bootstrap& b)
      : opts_(o),
        boot_(b),
        me_(b.rank()),
        n_(b.nranks()),
        deadline_(DeadlineIn(o.timeoutSec)),
        info_(RunInfoFromOptions(o, b.nranks())) {}

  /// Everything from plugin load to the last row. `*wrongTotal` = #wrong over all sizes and ranks.
  Status Run(long long* wrongTotal);
  /// True when this rank's failure was caused by another rank's.
  bool secondary() const { return secondary_; }
  /// True when every rank failed the same step and this one (not rank 0) need not print it.
  bool quiet() const { return quiet_; }
  /// True when the failure is a usage error (the ranks' options differ): exit status 2.
  bool usageError() const { return usageError_; }
  /// Best-effort deregMr / close / finalize / dlclose.
  void Cleanup();

 private:
  Status Fail(const char* call, int peer, ncclResult_t r, const std::string& extra = {}) const {
    std::string m = "plugin call " + std::string(call) + " failed on rank " + std::to_string(me_);
    if (peer >= 0) m += " (peer " + std::to_string(peer) + ")";
    if (!extra.empty()) m += " [" + extra + "]";
    m += ": " + std::string(ResultName(r)) + " (" + std::to_string(int(r)) + ")";
    return {Code(int(r) >= 2 && int(r) <= 6 ? int(r) : 3), m};
  }
  /// Every rank reports whether `local` succeeded; fails on every rank if one did.
  Status Agree(const Status& local, const char* step);
  /// The result of a bootstrap collective; a failure before the bootstrap's deadline
  /// (a peer closed or reset its connection: it exited or failed first) marks this rank's
  /// error as secondary (exit 4), as PeersAlive does. A timeout (the deadline passed)
  /// stays this rank's own failure (exit 1).
  Status Together(Status s) {
    if (!s.ok() && Clock::now() < boot_.deadline()) secondary_ = true;
    return s;
  }
  /// CheckPeers; a failure marks this rank's error as secondary.
  Status PeersAlive() {
    Status s = boot_.CheckPeers();
    if (!s.ok()) secondary_ = true;
    return s;
  }
  /// Every rank's RunShape against rank 0's; InvalidUsage naming each flag that differs.
  Status CheckSameOptions();
  Status OpenPlugin();
  Status Connect();
  Status RegisterBuffers(std::size_t bytes);
  Status RunSize(std::size_t sizeIndex, std::size_t requested, Row* row);
  void Prepare(const Layout& l, int key);
  std::size_t Verify(const Layout& l, int key) const;
  Status Exchange(std::vector<Op>& ops, const char* phase);
  std::size_t SendOffset(const Layout& l, int to) const {
    return opts_.pattern == Pattern::kAllToAll ? std::size_t(to) * l.perPeerBytes : 0;
  }
  std::size_t RecvOffset(const Layout& l, int from) const {
    return opts_.pattern == Pattern::kAllToAll ? std::size_t(from) * l.perPeerBytes : 0;
  }

  const Options& opts_;
  Bootstrap& boot_;
  const int me_;
  const int n_;
  const Deadline deadline_;
  OpenedNet net_;
  ncclNetProperties_v11_t props_{};
  Peers peers_;
  std::vector<std::unique_ptr<Conn>> sends_, recvs_;
  std::unique_ptr<char, FreeDeleter> sendBuf_, recvBuf_;
  std::size_t bufBytes_ = 0;
  RunInfo info_;
  bool secondary_ = false;
  bool quiet_ = false;
  bool usageError_ = false;
  bool warnedSizes_ = false;  ///< the "test() left sizes unwritten" WARN is printed once
  std::optional<Clock::time_point> peerGone_;  ///< when Exchange's CheckPeers first failed
};

/// What test() leaves in sizes[0] when it does not write it.
constexpr int kSizeUnwritten = INT_MIN;
/// How long a rank whose peer's process is gone keeps testing its own in-flight ops
/// before it reports the peer's exit (Runner::Exchange).

Status Runner::CheckSameOptions() {
  const RunShape mine = ShapeOf(opts_);
  std::vector<RunShape> all(static_cast<std::size_t>(n_));
  RY_RETURN_IF_ERROR(Together(boot_.AllGather(&mine, sizeof(mine), all.data())));
  for (int r = 1; r < n_; ++r) {
    const std::string diff = ShapeDifference(all[std::size_t(r)], r, all[0], 0);
    if (!diff.empty()) {
      usageError_ = true;
      return InvalidUsage("the ranks' options differ: " + diff +
                          " (start every rank with the same -b -e -i -f -n -w -c -p)");
    }
  }
  return Status::Ok();
}

Status Runner::Agree(const Status& local, const char* step) {
  std::vector<int> flags(std::size_t(n_), 0);
  const int mine = local.ok() ? 0 : 1;
  Status s = boot_.AllGather(&mine, sizeof(mine), flags.data());
  if (!local.ok()) {
    // The same failure everywhere (a typical bad NCCL_NET_PLUGIN): only rank 0 prints it.
    bool all = s.ok();
    for (int f : flags) all = all && f != 0;
    // Except the ranks' options differing: each rank's user must see why it exits 2.
    quiet_ = all && me_ != 0 && !usageError_;
    return local;
  }
  if (!s.ok()) return Together(s);
  std::string failed;
  for (int r = 0; r < n_; ++r) {
    if (flags[std::size_t(r)] != 0) failed += (failed.empty() ? "" : ",") + std::to_string(r);
  }
  if (failed.empty()) return Status::Ok();
  secondary_ = true;
  return InternalError(std::string(step) + " failed on rank(s) " + failed + "; rank " + std::to_string(me_) +
                       " stops too");
}

Status Runner::OpenPlugin() {
  OpenRequest req;
  req.value = opts_.plugin ? opts_.plugin : Env("NCCL_NET_PLUGIN");
  req.netName = Env("NCCL_NET");
  if (req.netName && req.netName->empty()) req.netName.reset();
  req.logger = NcclLogger;
  req.exeDir = ExecutableDir();
  req.onlyVersion = opts_.netVersion;
  req.source = opts_.plugin ? "--plugin" : "NCCL_NET_PLUGIN";
  // NCCL passes the same comm hash to init on every rank: rank 0 draws it.
  std::uint64_t id = me_ == 0 ? std::random_device{}() * 0x100000001ull ^ std::uint64_t(getpid()) : 0;
  std::vector<std::uint64_t> ids(static_cast<std::size_t>(n_));
  RY_RETURN_IF_ERROR(Together(boot_.AllGather(&id, sizeof(id), ids.data())));
  req.commId = ids[0];

  std::vector<std::string> log;
  Status s = OpenNetPlugin(req, &net_, &log);
  PrintOpenLog(log, net_, me_);
  RY_RETURN_IF_ERROR(s);
  info_.pluginValue = req.value ? *req.value : "<unset>";
  if (opts_.plugin) info_.pluginValue += " (--plugin)";
  if (net_.convenienceFallback) info_.pluginValue += "; loaded by railyard-perf's ../lib fallback";
  info_.pluginPath = net_.path;
  info_.symbol = net_.symbol;
  info_.pluginName = net_.net->name();
  info_.version = net_.net->version();

  if (opts_.dev >= net_.ndev) {
    return InvalidUsage("--dev " + std::to_string(opts_.dev) + " is out of range: the plugin reports " +
                        std::to_string(net_.ndev) + " device(s) on rank " + std::to_string(me_));
  }
  if (ncclResult_t r = net_.net->getProperties(opts_.dev, &props_); r != ncclSuccess) {
    return Fail("getProperties", -1, r, "dev " + std::to_string(opts_.dev));
  }
  if ((props_.ptrSupport & NCCL_PTR_HOST) == 0) {
    return InvalidUsage("device " + std::to_string(opts_.dev) + " does not support NCCL_PTR_HOST (ptrSupport=" +
                        std::to_string(props_.ptrSupport) + ")");
  }
  return Status::Ok();
}

Status Runner::Connect() {
  // One listen per receive connection, as NCCL's p2p transport does; the handle
  // for sender q sits in slot q of this rank's blob.
  const std::size_t H = NCCL_NET_HANDLE_MAXSIZE;
  std::vector<char> mine(std::size_t(n_) * H, 0);
  for (int p : peers_.recvFrom) {
    auto c = std::make_unique<Conn>();
    c->peer = p;
    if (ncclResult_t r = net_.net->listen(net_.ctx, opts_.dev, mine.data() + std::size_t(p) * H, &c->listenComm);
        r != ncclSuccess) {
      return Fail("listen", p, r, "dev " + std::to_string(opts_.dev));
    }
    if (c->listenComm == nullptr) return Fail("listen", p, ncclInternalError, "returned success with a NULL listenComm");
    recvs_.push_back(std::move(c));
  }
  std::vector<char> all(std::size_t(n_) * mine.size());
  RY_RETURN_IF_ERROR(Together(boot_.AllGather(mine.data(), mine.size(), all.data())));
  for (int q : peers_.sendTo) {
    auto c = std::make_unique<Conn>();
    c->peer = q;
    std::memcpy(c->handle, all.data() + std::size_t(q) * mine.size() + std::size_t(me_) * H, H);
    sends_.push_back(std::move(c));
  }
  // connect and accept never block and may each need many calls; interleave
  // them on this one thread until every comm exists.
  std::size_t pending = sends_.size() + recvs_.size();
  std::uint64_t spins = 0;
  while (pending > 0) {
    bool progress = false;
    for (auto& c : sends_) {
      if (c->comm != nullptr) continue;
      if (ncclResult_t r = net_.net->connect(net_.ctx, opts_.dev, c->handle, &c->comm); r != ncclSuccess) {
        return Fail("connect", c->peer, r);
      }
      if (c->comm != nullptr) {
        --pending;
        progress = true;
      }
    }
    for (auto& c : recvs_) {
      if (c->comm != nullptr) continue;
      if (ncclResult_t r = net_.net->accept(c->listenComm, &c->comm); r != ncclSuccess) {
        return Fail("accept", c->peer, r);
      }
      if (c->comm != nullptr) {
        --pending;
        progress = true;
        // NCCL closes the listen comm as soon as accept has produced the recvComm.
        const ncclResult_t r = net_.net->closeListen(c->listenComm);
        c->listenComm = nullptr;
        if (r != ncclSuccess) return Fail("closeListen", c->peer, r);
      }
    }
    if (!progress) {
      if ((++spins & 255) == 0) RY_RETURN_IF_ERROR(PeersAlive());
      if ((spins & 255) == 0 && Clock::now() > deadline_) {
        std::string waiting;
        for (auto& c : sends_) if (!c->comm) waiting += " connect->" + std::to_string(c->peer);
        for (auto& c : recvs_) if (!c->comm) waiting += " accept<-" + std::to_string(c->peer);
        return SystemError("rank " + std::to_string(me_) + ": timed out (-T " + std::to_string(opts_.timeoutSec) +
                           " s) setting up connections; still waiting for:" + waiting);
      }
      sched_yield();
    }
  }
  return Status::Ok();
}

Status Runner::RegisterBuffers(std::size_t bytes) {
  bufBytes_ = (std::max<std::size_t>(bytes, 4096) + 4095) & ~std::size_t{4095};
  sendBuf_.reset(static_cast<char*>(std::aligned_alloc(4096, bufBytes_)));
  recvBuf_.reset(static_cast<char*>(std::aligned_alloc(4096, bufBytes_)));
  if (!sendBuf_ || !recvBuf_) return SystemError("cannot allocate 2 × " + std::to_string(bufBytes_) + " bytes");
  std::memset(sendBuf_.get(), 0, bufBytes_);
  Poison(recvBuf_.get(), bufBytes_);
  for (auto& c : sends_) {
    if (ncclResult_t r = net_.net->regMr(c->comm, sendBuf_.get(), bufBytes_, NCCL_PTR_HOST, &c->mhandle);
        r != ncclSuccess) {
      return Fail("regMr", c->peer, r, "send buffer, " + std::to_string(bufBytes_) + " bytes, NCCL_PTR_HOST");
    }
  }
  for (auto& c : recvs_) {
    if (ncclResult_t r = net_.net->regMr(c->comm, recvBuf_.get(), bufBytes_, NCCL_PTR_HOST, &c->mhandle);
        r != ncclSuccess) {
      return Fail("regMr", c->peer, r, "receive buffer, " + std::to_string(bufBytes_) + " bytes, NCCL_PTR_HOST");
    }
  }
  return Status::Ok();
}

void Runner::Prepare(const Layout& l, int key) {
  const std::size_t elems = l.perPeerBytes / kElemSize;
  for (auto& c : sends_) {
    const std::size_t off = SendOffset(l, c->peer);
    FillPattern(reinterpret_cast<Elem*>(sendBuf_.get() + off), elems, me_, key, off / kElemSize);
  }
  for (auto& c : recvs_) Poison(recvBuf_.get() + RecvOffset(l, c->peer), l.perPeerBytes);
}

std::size_t Runner::Verify(const Layout& l, int key) const {
  const std::size_t elems = l.perPeerBytes / kElemSize;
  std::size_t wrong = 0;
  for (const auto& c : recvs_) {
    // The sender filled its slot for this rank: index base = SendOffset(me) on its side.
    const std::size_t first = SendOffset(l, me_) / kElemSize;
    wrong += CountWrong(reinterpret_cast<const Elem*>(recvBuf_.get() + RecvOffset(l, c->peer)), elems, c->peer, key,
                        first);
  }
  return wrong;
}

Status Runner::Exchange(std::vector<Op>& ops, const char* phase) {
  for (auto& op : ops) {
    op.request = nullptr;
    op.posted = op.done = false;
  }
  std::size_t remaining = ops.size();
  std::uint64_t spins = 0;
  while (remaining > 0) {
    bool progress = false;
    for (auto& op : ops) {
      if (op.done) continue;
      Conn& c = *op.conn;
      if (!op.posted) {
        void* req = nullptr;
        ncclResult_t r;
        if (op.send) {
          r = net_.net->isend(c.comm, op.data, op.bytes, me_, c.mhandle, &req);  // tag = sender's rank
        } else {
          void* data = op.data;
          std::size_t size = op.bytes;
          int tag = c.peer;
          void* mh = c.mhandle;
          r = net_.net->irecv(c.comm, 1, &data, &size, &tag, &mh, &req);
        }
        if (r != ncclSuccess) return Fail(op.send ? "isend" : "irecv", c.peer, r, std::to_string(op.bytes) + " bytes");
        if (req == nullptr) continue;  // not yet: try again later
        op.request = req;
        op.posted = true;
        progress = true;
      }
      int done = 0;
      int sizes[1] = {kSizeUnwritten};
      if (ncclResult_t r = net_.net->test(op.request, &done, sizes); r != ncclSuccess) {
        return Fail("test", c.peer, r, std::string(op.send ? "isend" : "irecv") + " of " + std::to_string(op.bytes) + " bytes");
      }
      if (!done) continue;
      op.done = true;
      --remaining;
      progress = true;
      if (!op.send && sizes[0] == kSizeUnwritten) {
        // NCCL reads sizes[0] of a completed receive; a plugin that does not write it is
        // wrong, but the bytes may well be right (the data check still counts them).
        if (!warnedSizes_) {
          std::fprintf(stderr,
                       "railyard-perf: rank %d: WARN the plugin's test() completed an irecv from peer %d "
                       "without writing sizes[0] (NCCL reads it as the received size); continuing, "
                       "the data check still verifies the bytes\n",
                       me_, c.peer);
          warnedSizes_ = true;
        }
      } else if (!op.send && std::size_t(sizes[0]) != op.bytes) {
        return RemoteError("rank " + std::to_string(me_) + ": irecv from peer " + std::to_string(c.peer) +
                           " completed with " + std::to_string(sizes[0]) + " bytes, expected " +
                           std::to_string(op.bytes));
      }
    }
    if (!progress) {
      if ((++spins & 1023) == 0) {
        if (Status s = boot_.CheckPeers(); !s.ok()) {
          // A peer's process is gone. While ops of this rank are in flight, the plugin may
          // fail them itself in a moment (a cut cable times out on both ranks at about the
          // same time): keep testing them for kPeerGoneGrace, so that this rank reports the
          // plugin's error when it has one, and the peer's exit (secondary) only after.
          const bool inFlight = std::any_of(ops.begin(), ops.end(), [](const Op& o) { return o.posted && !o.done; });
          if (!peerGone_) peerGone_ = Clock::now();
          if (!inFlight || Clock::now() - *peerGone_ >= kPeerGoneGrace) {
            secondary_ = true;
            return s;
          }
        }
      }
      if ((spins & 1023) == 0 && Clock::now() > deadline_) {
        std::string waiting;
        for (auto& op : ops) {
          if (op.done) continue;
          waiting += std::string(" ") + (op.send ? "isend->" : "irecv<-") + std::to_string(op.conn->peer) +
                     (op.posted ? "(posted)" : "(not accepted yet)");
        }
        return SystemError("rank " + std::to_string(me_) + ": timed out (-T " + std::to_string(opts_.timeoutSec) +
                           " s) in " + phase + "; unfinished:" + waiting);
      }
      sched_yield();
    }
  }
  return Status::Ok();
}

Status Runner::RunSize(std::size_t sizeIndex, std::size_t requested, Row* row) {
  const Layout l = LayoutFor(opts_.pattern, requested, n_);
  std::vector<Op> ops;
  for (auto& c : recvs_) ops.push_back({false, c.get(), recvBuf_.get() + RecvOffset(l, c->peer), l.perPeerBytes});
  for (auto& c : sends_) ops.push_back({true, c.get(), sendBuf_.get() + SendOffset(l, c->peer), l.perPeerBytes});
  const int base = int(sizeIndex) * (opts_.iters + opts_.warmupIters + 1);

  Prepare(l, base);
  for (int w = 0; w < opts_.warmupIters; ++w) RY_RETURN_IF_ERROR(Exchange(ops, "a warm-up iteration"));

  double seconds = 0;
  std::size_t wrong = 0;
  if (opts_.check) {
    for (int it = 0; it < opts_.iters; ++it) {
      const int key = base + 1 + it;
      Prepare(l, key);
      RY_RETURN_IF_ERROR(Together(boot_.Barrier()));
      const auto t0 = Clock::now();
      RY_RETURN_IF_ERROR(Exchange(ops, "a timed iteration"));
      seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      wrong += Verify(l, key);
    }
  } else {
    RY_RETURN_IF_ERROR(Together(boot_.Barrier()));
    const auto t0 = Clock::now();
    for (int it = 0; it < opts_.iters; ++it) RY_RETURN_IF_ERROR(Exchange(ops, "a timed iteration"));
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  double t[1] = {seconds * 1e6 / opts_.iters};
  double w[1] = {double(wrong)};
  RY_RETURN_IF_ERROR(Together(boot_.AllReduce(t, ReduceOp::kMax)));
  RY_RETURN_IF_ERROR(Together(boot_.AllReduce(w, ReduceOp::kSum)));
  row->bytes = l.totalBytes;
  row->count = l.count;
  row->timeUs = t[0];
  row->algbw = AlgBw(l.totalBytes, t[0]);
  row->busbw = row->algbw * BusBwFactor(opts_.pattern, n_);
  row->wrong = opts_.check ? (long long)w[0] : -1;
  return Status::Ok();
}

Status Runner::Run(long long* wrongTotal) {
  SetLoggerRank(me_);
  RY_RETURN_IF_ERROR(Agree(CheckSameOptions(), "checking the ranks' options"));
  RY_RETURN_IF_ERROR(Agree(OpenPlugin(), "loading and initialising the net plugin"));

  peers_ = PeersOf(opts_.pattern, me_, n_);
  const std::vector<std::size_t> sizes =
      DistinctRows(SizeList(opts_), [&](std::size_t s) { return LayoutFor(opts_.pattern, s, n_).totalBytes; });
  std::size_t maxBuf = 0, maxPerPeer = 0;
  for (std::size_t s : sizes) {
    const Layout l = LayoutFor(opts_.pattern, s, n_);
    maxBuf = std::max(maxBuf, opts_.pattern == Pattern::kAllToAll ? l.totalBytes : l.perPeerBytes);
    maxPerPeer = std::max(maxPerPeer, l.perPeerBytes);
  }
  Status limits;
  if (maxPerPeer > props_.maxP2pBytes) {
    limits = InvalidUsage("messages of " + std::to_string(maxPerPeer) + " bytes exceed the device's maxP2pBytes (" +
                          std::to_string(props_.maxP2pBytes) + "); lower -e");
  }
  RY_RETURN_IF_ERROR(Agree(limits, "checking the message sizes"));

  // Per-rank description line, gathered for rank 0's header.
  char line[256];
  // The host as Railyard's own messages name it (RAILYARD_HOST_NAME, which the plugin's
  // peers and relays go by) when set, else the system host name (new-user trial: "on vm"
  // beside the plugin's "peer h1").
  char host[64] = "?";
  (void)gethostname(host, sizeof(host) - 1);
  if (const char* named = std::getenv("RAILYARD_HOST_NAME"); named != nullptr && named[0] != '\0') {
    std::snprintf(host, sizeof host, "%s", named);
  }
  std::snprintf(line, sizeof(line), "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] speed %d Mbps", me_,
                int(getpid()), host, opts_.dev, props_.name ? props_.name : "?", props_.speed);
  std::vector<char> lines(std::size_t(n_) * sizeof(line));
  RY_RETURN_IF_ERROR(Together(boot_.AllGather(line, sizeof(line), lines.data())));

  // A failure from here on is returned at once: the other ranks may be spinning
  // on plugin calls that wait for this one; they notice it has gone (the
  // launcher stops them, or CheckPeers sees the bootstrap socket close).
  RY_RETURN_IF_ERROR(Connect());
  RY_RETURN_IF_ERROR(Agree(RegisterBuffers(maxBuf), "registering buffers"));

  info_.devName = props_.name ? props_.name : "?";
  info_.speedMbps = props_.speed;
  for (int r = 0; r < n_; ++r) info_.rankLines.emplace_back(lines.data() + std::size_t(r) * sizeof(line));
  if (me_ == 0) {
    std::fputs(RunHeader(info_).c_str(), stdout);
    std::fputs(TableHeader().c_str(), stdout);
    std::fflush(stdout);
  }
  std::vector<Row> rows;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Row row;
    RY_RETURN_IF_ERROR(RunSize(i, sizes[i], &row));
    rows.push_back(row);
    if (me_ == 0) {
      std::fputs(TableRow(row).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  *wrongTotal = 0;
  for (const auto& r : rows) *wrongTotal += r.wrong > 0 ? r.wrong : 0;
  if (me_ == 0) {
    std::fputs(TableFooter(rows).c_str(), stdout);
    std::fflush(stdout);
  }
  Status json;
  if (me_ == 0 && !opts_.jsonPath.empty()) json = WriteJson(opts_.jsonPath, info_, rows);
  // Everyone has finished its last test() before anyone closes a connection.
  RY_RETURN_IF_ERROR(Together(boot_.Barrier()));
  return json;
}

void Runner::Cleanup() {
  if (!net_.net) return;
  auto warn = [&](const char* call, int peer, ncclResult_t r) {
    if (r != ncclSuccess) std::fprintf(stderr, "railyard-perf: %s\n", Fail(call, peer, r).message().c_str());
  };
  for (auto& c : sends_) {
    if (c->mhandle) warn("deregMr", c->peer, net_.net->deregMr(c->comm, c->mhandle));
    if (c->comm) warn("closeSend", c->peer, net_.net->closeSend(c->comm));
  }
  for (auto& c : recvs_) {
    if (c->mhandle) warn("deregMr", c->peer, net_.net->deregMr(c->comm, c->mhandle));
    if (c->comm) warn("closeRecv", c->peer, net_.net->closeRecv(c->comm));
    if (c->listenComm) warn("closeListen", c->peer, net_.net->closeListen(c->listenComm));
  }
  sends_.clear();
  recvs_.clear();
  warn("finalize", -1, net_.Close());
}

}  // namespace

int ReportRankFailure(Bootstrap& boot, const Status& s, bool connected) {
  std::string gone;
  const bool secondary =
      boot.PeerGoneWithin(connected ? std::chrono::milliseconds(kPeerGoneGrace) : std::chrono::milliseconds(0), &gone);
  boot.Leave();
  PrintRankError(boot.rank(), s.message() + (secondary ? "; " + gone : std::string()));
  return secondary ? kExitPeerFailed : kExitError;
}

int RunRank(const Options& opts, Bootstrap& boot) {
  if (IsCollective(opts.pattern)) return RunCollRank(opts, boot);
  if (IsGinPattern(opts.pattern)) return RunGinRank(opts, boot);  // the one-sided tables (gin_runner.h)
  Runner runner(opts, boot);
  long long wrong = 0;
  const Status s = runner.Run(&wrong);
  runner.Cleanup();
  if (!s.ok()) {
    if (!runner.quiet()) PrintRankError(boot.rank(), s.message());
    // A quiet rank failed like rank 0, which reports it: let the launcher wait for rank 0.
    if (runner.usageError()) return kExitUsage;
    return runner.secondary() || runner.quiet() ? kExitPeerFailed : kExitError;
  }
  if (wrong > 0) {
    if (boot.rank() == 0) {
      std::fprintf(stderr, "railyard-perf: data check FAILED: %lld wrong element(s) over all ranks\n", wrong);
    }
    return kExitWrongData;
  }
  return kExitOk;
}

}  // namespace railyard::perf
