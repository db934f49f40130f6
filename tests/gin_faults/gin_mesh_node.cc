// One rank of a GIN/RMA full mesh on a netns testbed host (driven by
// gin_relay_lane.py). It loads the plugin as NCCL does (dlopen of the library, the
// RMA v14 table unless --table says otherwise), joins a small TCP bootstrap over
// the management network (railyard-perf's), connects the mesh over every rank and
// runs one mode:
//
//   mesh    NCCL's GIN proxy thread over every peer, itself included
//           (tests/conformance/gin_proxy_driver.h: 64-byte descriptor queues, a
//           producer thread standing in for the GPU, the consumer loop): per round,
//           every rank iputSignals one chunk to every rank (ADD 1 into the target's
//           word for this source); a rank that sees a source's signal reach the
//           round checks that source's chunk at once, by content (the data is
//           visible before the signal). Then (RMA tables) an iget of the opposite
//           rank's send area and an iflush, checked by content. Prints
//           "mesh ok: ..." on success.
//   stream  puts to rank (me + nranks/2) % nranks until the plugin fails or
//           --seconds pass (the fault cases: a relay killed mid-stream); exits 3
//           with the plugin's first WARN on stderr after a failure.
//   bench   rank 0 only: iput bandwidth to rank 1 (cabled) and to rank 2 (relayed on
//           a ring of 4), 8 puts in flight, the last of each batch with a strong
//           signal; 5 interleaved rounds (direct, relayed, ...); prints each round
//           and "bench medians: direct X GB/s relayed Y GB/s ratio (relayed / direct) Z".
//
// Usage: gin_mesh_node PLUGIN_LIB MODE RANK NRANKS ROOT_HOST ROOT_PORT [BYTES] [ROUNDS|SECONDS]
// Exit: 0 ok, 1 setup or plugin error, 2 wrong data, 3 plugin error in stream mode.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/gin_proxy_driver.h"
#include "tools/railyard-perf/bootstrap.h"
#include "tools/railyard-perf/gin_runner.h"
#include "tools/railyard-perf/nccl_logger.h"
#include "tools/railyard-perf/one_sided_table.h"

namespace railyard::conformance {
namespace {

using Clock = std::chrono::steady_clock;

int Die(int rank, const std::string& what, int code = 1) {
  std::fprintf(stderr, "gin_mesh_node: rank %d: %s\n", rank, what.c_str());
  return code;
}

uint8_t Pattern(int src, int dst, int round, size_t i) {
  return uint8_t((i * 131 + size_t(src) * 37 + size_t(dst) * 11 + size_t(round) * 7 + 1) & 0xff);
}

struct Node {
  perf::OneSidedTable* table = nullptr;
  perf::Bootstrap boot;
  int me = 0, n = 0;
  size_t chunk = 0;
  std::vector<uint8_t> data;  ///< [0, n chunks): send area (chunk q for rank q); [n, 2n): receive (chunk q from q)
  std::vector<uint64_t> signals;
  void* dataMh = nullptr;
  void* sigMh = nullptr;

  /// A bootstrap step with a thread progressing the plugin meanwhile (over the TCP
  /// fabric a target's acks leave only when it progresses).
  Status WithProgress(const std::function<Status()>& fn) { return perf::WithProgressOf(*table, fn); }
  uint64_t Signal(int q) const { return __atomic_load_n(&signals[size_t(q)], __ATOMIC_ACQUIRE); }
};

/// Tests every request in `reqs` once, removing the done ones; false (the rest kept)
/// when a test fails (the plugin's WARN says why).
bool TestOnce(perf::OneSidedTable& t, std::vector<void*>* reqs) {
  for (size_t i = 0; i < reqs->size();) {
    int done = 0;
    if (t.Test((*reqs)[i], &done) != ncclSuccess) return false;
    if (done) {
      (*reqs)[i] = reqs->back();
      reqs->pop_back();
    } else {
      ++i;
    }
  }
  return true;
}

/// Tests `req` until done, progressing; bounded by `deadline`.
Status Wait(perf::OneSidedTable& t, void* req, Clock::time_point deadline, const char* what) {
  while (Clock::now() < deadline) {
    int done = 0;
    if (ncclResult_t rc = t.Test(req, &done); rc != ncclSuccess) {
      return SystemError(std::string(what) + ": test returned " + std::to_string(int(rc)));
    }
    if (done) return Status::Ok();
    (void)t.Progress();
  }
  return SystemError(std::string(what) + ": not done in time");
}

int Mesh(Node& nd, int rounds) {
  const int me = nd.me, n = nd.n;
  ProxyQueues queues(n, 32);
  ProxyWindows w;
  w.signalsMh = nd.sigMh;
  ProxyConsumer consumer(*nd.table, queues, w, true);
  for (int round = 0; round < rounds; ++round) {
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < nd.chunk; ++i) nd.data[size_t(q) * nd.chunk + i] = Pattern(me, q, round, i);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    std::atomic<bool> posted{false}, postFailed{false};
    std::thread producer([&] {
      for (int k = 0; k < n; ++k) {
        const int q = (me + k) % n;  // itself first, the opposite rank in the middle
        GfdFields f;
        f.op = kGfdPut | kGfdSignalAdd;
        f.size = nd.chunk;
        f.srcOff = uint64_t(q) * nd.chunk;
        f.srcHandle = uint64_t(reinterpret_cast<uintptr_t>(nd.dataMh));
        f.dstOff = uint64_t(n + me) * nd.chunk;
        f.dstHandle = f.srcHandle;
        f.signalId = uint16_t(me);
        f.signalValue = 1;
        if (!queues.Post(q, f, deadline)) postFailed = true;
      }
      posted = true;
    });
    std::vector<bool> seen(size_t(n), false);
    int seenCount = 0;
    std::string wrong;
    while (Clock::now() < deadline && !postFailed) {
      if (ncclResult_t rc = consumer.Pass(); rc != ncclSuccess) {
        producer.join();
        return Die(me, "round " + std::to_string(round) + ": " + consumer.error() + ": " + perf::TakeFirstWarn());
      }
      for (int q = 0; q < n; ++q) {
        if (seen[size_t(q)] || nd.Signal(q) < uint64_t(round + 1)) continue;
        seen[size_t(q)] = true;
        ++seenCount;
        const uint8_t* got = nd.data.data() + size_t(n + q) * nd.chunk;
        for (size_t i = 0; i < nd.chunk && wrong.empty(); ++i) {
          if (got[i] != Pattern(q, me, round, i)) {
            wrong = "round " + std::to_string(round) + ": rank " + std::to_string(q) + "'s signal arrived before byte " +
                    std::to_string(i) + " of its " + std::to_string(nd.chunk) + "-byte chunk (got " +
                    std::to_string(got[i]) + ", want " + std::to_string(Pattern(q, me, round, i)) + ")";
          }
        }
      }
      if (posted && queues.Drained() && seenCount == n) break;
    }
    producer.join();
    if (!wrong.empty()) return Die(me, wrong, 2);
    if (seenCount != n || !queues.Drained()) return Die(me, "round " + std::to_string(round) + " not done in 60 s");
    if (Status s = nd.WithProgress([&] { return nd.boot.Barrier(); }); !s.ok()) return Die(me, s.message());
  }
  std::string extra;
  if (nd.table->kind() != perf::OneSidedKind::kGinV11) {
    // iget the opposite rank's send chunk meant for this rank (last round's pattern), then iflush.
    const int q = (me + n / 2) % n;
    const int round = rounds - 1;
    std::vector<uint8_t> before(nd.data.begin(), nd.data.begin() + long(nd.chunk));
    void* req = nullptr;
    // Into this rank's own send chunk for itself (already delivered): local offset me × chunk.
    if (nd.table->Iget(uint64_t(me) * nd.chunk, nd.dataMh, nd.chunk, uint64_t(me) * nd.chunk, nd.dataMh, uint32_t(q),
                       &req) != ncclSuccess) {
      return Die(me, "iget from rank " + std::to_string(q) + ": " + perf::TakeFirstWarn());
    }
    void* flush = nullptr;
    if (nd.table->Iflush(nd.dataMh, uint32_t(q), &flush) != ncclSuccess) {
      return Die(me, "iflush to rank " + std::to_string(q) + ": " + perf::TakeFirstWarn());
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    if (Status s = Wait(*nd.table, flush, deadline, "iflush"); !s.ok()) return Die(me, s.message() + " " + perf::TakeFirstWarn());
    // The flush is done only once every earlier request is: the iget's bytes are here.
    const uint8_t* got = nd.data.data() + size_t(me) * nd.chunk;
    for (size_t i = 0; i < nd.chunk; ++i) {
      if (got[i] != Pattern(q, me, round, i)) {
        return Die(me, "iget from rank " + std::to_string(q) + ": byte " + std::to_string(i) + " is not that rank's", 2);
      }
    }
    if (Status s = Wait(*nd.table, req, deadline, "iget"); !s.ok()) return Die(me, s.message() + " " + perf::TakeFirstWarn());
    extra = ", iget+iflush from rank " + std::to_string(q) + " checked";
  }
  if (Status s = nd.WithProgress([&] { return nd.boot.Barrier(); }); !s.ok()) return Die(me, s.message());
  std::printf("mesh ok: rank %d: %d rounds of %zu B to all %d ranks (itself included), every chunk checked after its "
              "signal%s\n",
              me, rounds, nd.chunk, n, extra.c_str());
  return 0;
}

int Stream(Node& nd, int seconds) {
  const int peer = (nd.me + nd.n / 2) % nd.n;
  std::vector<void*> reqs;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  uint64_t puts = 0;
  while (Clock::now() < end) {
    while (reqs.size() < 8) {
      void* req = nullptr;
      if (nd.table->Iput(0, nd.dataMh, nd.chunk, uint64_t(nd.n) * nd.chunk, nd.dataMh, uint32_t(peer), &req) !=
          ncclSuccess) {
        return Die(nd.me, "iput to rank " + std::to_string(peer) + " after " + std::to_string(puts) +
                              " puts failed: " + perf::TakeFirstWarn(), 3);
      }
      reqs.push_back(req);
      ++puts;
    }
    if (!TestOnce(*nd.table, &reqs)) {
      return Die(nd.me, "test of a put to rank " + std::to_string(peer) + " after " + std::to_string(puts) +
                            " puts failed: " + perf::TakeFirstWarn(), 3);
    }
    (void)nd.table->Progress();
  }
  std::printf("stream: rank %d: %llu puts, no error in %d s\n", nd.me, (unsigned long long)puts, seconds);
  return 0;
}

/// Seconds for `count` puts of chunk bytes to `peer` (8 in flight, the last with a strong signal).
Status TimePuts(Node& nd, int peer, int count, double* seconds) {
  std::vector<void*> reqs;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  const auto t0 = Clock::now();
  for (int k = 0; k < count; ++k) {
    while (reqs.size() >= 8) {
      if (!TestOnce(*nd.table, &reqs)) return SystemError("test failed: " + perf::TakeFirstWarn());
      (void)nd.table->Progress();
      if (Clock::now() > deadline) return SystemError("puts not done in 120 s");
    }
    void* req = nullptr;
    ncclResult_t rc = k + 1 < count ? nd.table->Iput(0, nd.dataMh, nd.chunk, uint64_t(nd.n) * nd.chunk, nd.dataMh,
                                                     uint32_t(peer), &req)
                                    : nd.table->IputSignal(0, nd.dataMh, nd.chunk, uint64_t(nd.n) * nd.chunk, nd.dataMh,
                                                           uint32_t(peer), 0, nd.sigMh, 1, NCCL_NET_SIGNAL_OP_INC, true,
                                                           &req);
    if (rc != ncclSuccess) return SystemError("iput failed: " + perf::TakeFirstWarn());
    reqs.push_back(req);
  }
  for (void* r : reqs) RY_RETURN_IF_ERROR(Wait(*nd.table, r, deadline, "iput"));
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::Ok();
}

int Bench(Node& nd, int count) {
  if (nd.n < 3) return Die(nd.me, "bench needs 3 or more ranks (rank 1 cabled, rank 2 relayed)");
  constexpr int kRounds = 5;
  if (nd.me == 0) {
    double warm = 0;
    if (Status s = TimePuts(nd, 1, 4, &warm); !s.ok()) return Die(0, s.message());
    if (Status s = TimePuts(nd, 2, 4, &warm); !s.ok()) return Die(0, s.message());
    // Interleaved rounds (direct, relayed, direct, ...) so both see the same load; medians.
    std::vector<double> direct, relayed;
    const double gb = double(nd.chunk) * count / 1e9;
    for (int round = 0; round < kRounds; ++round) {
      double d = 0, r = 0;
      if (Status s = TimePuts(nd, 1, count, &d); !s.ok()) return Die(0, s.message());
      if (Status s = TimePuts(nd, 2, count, &r); !s.ok()) return Die(0, s.message());
      direct.push_back(gb / d);
      relayed.push_back(gb / r);
      std::printf("round %d: direct %.3f GB/s relayed %.3f GB/s\n", round, gb / d, gb / r);
    }
    std::sort(direct.begin(), direct.end());
    std::sort(relayed.begin(), relayed.end());
    const double md = direct[kRounds / 2], mr = relayed[kRounds / 2];
    std::printf("bench medians: direct %.3f GB/s relayed %.3f GB/s ratio (relayed / direct) %.2f "
                "(%d rounds of %d puts of %zu B, 8 in flight)\n",
                md, mr, mr / md, kRounds, count, nd.chunk);
  }
  if (Status s = nd.WithProgress([&] { return nd.boot.Barrier(); }); !s.ok()) return Die(nd.me, s.message());
  return 0;
}

int Run(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: gin_mesh_node PLUGIN_LIB mesh|stream|bench RANK NRANKS ROOT_HOST ROOT_PORT [BYTES] "
                         "[ROUNDS|SECONDS|PUTS]\n");
    return 1;
  }
  const std::string lib = argv[1], mode = argv[2];
  Node nd;
  nd.me = std::atoi(argv[3]);
  nd.n = std::atoi(argv[4]);
  const std::string host = argv[5];
  const int port = std::atoi(argv[6]);
  nd.chunk = argc > 7 ? size_t(std::strtoull(argv[7], nullptr, 10)) : 1 << 20;
  const int count = argc > 8 ? std::atoi(argv[8]) : 3;
  const char* tableName = std::getenv("GIN_MESH_TABLE");
  const perf::OneSidedKind kind = tableName && std::string(tableName) == "gin-v11"   ? perf::OneSidedKind::kGinV11
                                  : tableName && std::string(tableName) == "rma-v13" ? perf::OneSidedKind::kRmaV13
                                                                                      : perf::OneSidedKind::kRmaV14;
  perf::SetLoggerRank(nd.me);
  void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return Die(nd.me, std::string("dlopen: ") + ::dlerror());
  perf::OneSidedTable table(handle, kind);
  if (!table.ok()) return Die(nd.me, "the library exports no " + std::string(perf::OneSidedKindName(kind)) + " table");
  nd.table = &table;
  const auto deadline = perf::DeadlineIn(300);
  Status s;
  if (nd.me == 0) {
    perf::Listener l;
    s = perf::ListenTcp(host, port, &l);
    if (s.ok()) s = perf::Bootstrap::CreateRoot(l.fd, nd.n, deadline, &nd.boot);
  } else {
    s = perf::Bootstrap::Join(host, port, nd.me, nd.n, deadline, &nd.boot);
  }
  if (!s.ok()) return Die(nd.me, "bootstrap: " + s.message());
  if (table.Init(1, &perf::NcclLogger) != ncclSuccess) return Die(nd.me, "init: " + perf::TakeFirstWarn());
  uint8_t h[NCCL_NET_HANDLE_MAXSIZE] = {};
  if (table.Listen(0, h) != ncclSuccess) return Die(nd.me, "listen: " + perf::TakeFirstWarn());
  std::vector<uint8_t> all(size_t(nd.n) * sizeof h);
  if (Status a = nd.boot.AllGather(h, sizeof h, all.data()); !a.ok()) return Die(nd.me, a.message());
  std::vector<void*> hs;
  for (int r = 0; r < nd.n; ++r) hs.push_back(all.data() + size_t(r) * sizeof h);
  if (table.Connect(hs, nd.me) != ncclSuccess) return Die(nd.me, "connect: " + perf::TakeFirstWarn());
  nd.data.assign(2 * size_t(nd.n) * nd.chunk, 0);
  nd.signals.assign(size_t(nd.n), 0);
  if (table.RegMrSym(nd.data.data(), nd.data.size(), 0, &nd.dataMh) != ncclSuccess ||
      table.RegMrSym(nd.signals.data(), nd.signals.size() * 8, NCCL_NET_MR_FLAG_FORCE_SO, &nd.sigMh) != ncclSuccess) {
    return Die(nd.me, "regMrSym: " + perf::TakeFirstWarn());
  }
  if (Status b = nd.WithProgress([&] { return nd.boot.Barrier(); }); !b.ok()) return Die(nd.me, b.message());
  const int rc = mode == "mesh" ? Mesh(nd, count) : mode == "stream" ? Stream(nd, count) : Bench(nd, count);
  if (rc == 0) {
    (void)table.DeregMrSym(nd.sigMh);
    (void)table.DeregMrSym(nd.dataMh);
    (void)table.Close();
    (void)table.Finalize();
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace
}  // namespace railyard::conformance

int main(int argc, char** argv) { return railyard::conformance::Run(argc, argv); }
