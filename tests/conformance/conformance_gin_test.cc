// Conformance of the one-sided tables (ncclGinPlugin_v11, ncclRmaPlugin_v14,
// ncclRmaPlugin_v13) across processes on loopback, driven as NCCL's GIN proxy
// thread drives them (gin_proxy_driver.h): a producer thread standing in for the
// GPU fills per-peer descriptor queues; the consumer dispatches puts, puts with
// signals and inline puts, polls test, bumps counters and advances the consumer
// indices. Every landed byte, every signal, every counter and the guard bytes
// around every window are checked. Also: bad input refused with nothing written,
// a peer killed mid-stream failing the others with an error naming it, and a peer
// frozen with SIGSTOP mid-stream (named error within the timeout on TCP; on verbs
// the HCA keeps serving a stopped process's memory, so the stream goes on), and
// NCCL 2.30's host RMA path: connect handed the net plugin's context, two progress
// threads putting on one comm at once; a strong signal after striped puts; the proxy
// queue depth of puts in flight to one peer.
// Multi-host variants (namespace ring, soft-RoCE guests) belong to the lanes.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/gin_proxy_driver.h"
#include "tests/conformance/harness.h"

namespace railyard::conformance {
namespace {

using perf::OneSidedKind;
using perf::OneSidedTable;

constexpr size_t kGuard = 4096;
constexpr uint8_t kGuardByte = 0xA5;
constexpr size_t kChunk = 3001;  // odd, so chunk boundaries fall everywhere
constexpr int kChunksPerPeer = 24;
constexpr size_t kPerPeer = kChunk * kChunksPerPeer;

/// A window with guard bytes on both sides.
struct GuardedWindow {
  explicit GuardedWindow(size_t n) : mem(n + 2 * kGuard, kGuardByte), size(n) { std::memset(data(), 0, n); }
  uint8_t* data() { return mem.data() + kGuard; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (mem[i] != kGuardByte || mem[mem.size() - 1 - i] != kGuardByte) return false;
    }
    return true;
  }
  std::vector<uint8_t> mem;
  size_t size;
};

/// Allgathers the 128-byte handles over the harness channels.
bool AllgatherHandles(Rank& r, const uint8_t* mine, std::vector<std::vector<uint8_t>>* all) {
  all->assign(size_t(r.nranks()), std::vector<uint8_t>(NCCL_NET_HANDLE_MAXSIZE));
  std::memcpy((*all)[size_t(r.rank())].data(), mine, NCCL_NET_HANDLE_MAXSIZE);
  for (int p = 0; p < r.nranks(); ++p) {
    if (p != r.rank() && !r.Send(p, mine, NCCL_NET_HANDLE_MAXSIZE)) return false;
  }
  for (int p = 0; p < r.nranks(); ++p) {
    if (p != r.rank() && !r.Recv(p, (*all)[size_t(p)].data(), NCCL_NET_HANDLE_MAXSIZE)) return false;
  }
  return true;
}

/// Opens the plugin, inits the table, listens on device 0, allgathers, connects
/// (handing connect `connectCtx` instead of the table's context when not null).
void Connect(Rank& r, Plugin& plugin, OneSidedTable& t, int* maxRecvs, void* connectCtx = nullptr) {
  ASSERT_TRUE(t.ok()) << "table " << OneSidedKindName(t.kind()) << " not exported";
  ASSERT_EQ(t.Init(1, &CapturingLogger), ncclSuccess) << CapturedWarnings();
  int ndev = 0;
  ASSERT_EQ(t.Devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  int type = -1;
  ASSERT_EQ(t.Properties(0, &type, maxRecvs), ncclSuccess);
  ASSERT_EQ(type, NCCL_NET_DEVICE_GIN_PROXY);
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  ASSERT_EQ(t.Listen(0, handle), ncclSuccess) << CapturedWarnings();
  std::vector<std::vector<uint8_t>> all;
  ASSERT_TRUE(AllgatherHandles(r, handle, &all));
  std::vector<void*> hs;
  for (auto& h : all) hs.push_back(h.data());
  r.Note("connect");
  ASSERT_EQ(t.Connect(hs, r.rank(), 1, connectCtx), ncclSuccess) << CapturedWarnings();
  (void)plugin;
}

/// Rank::Barrier with a thread calling the progress entry meanwhile, as NCCL's GIN
/// progress thread keeps running: over the TCP fabric a target's replies (a FetchAdd's
/// old value, a Write's landing ack) leave only when that rank progresses.
bool BarrierProgressing(Rank& r, OneSidedTable& t) {
  std::atomic<bool> stop{false};
  std::thread progress([&] {
    while (!stop.load(std::memory_order_acquire)) (void)t.Progress();
  });
  const bool ok = r.Barrier();
  stop.store(true, std::memory_order_release);
  progress.join();
  return ok;
}

/// A table's name as a test name part: "rma-v14" -> "rma_v14".
std::string TableTestName(OneSidedKind kind) {
  std::string k = OneSidedKindName(kind);
  for (char& c : k) c = c == '-' ? '_' : c;
  return k;
}

uint8_t PatternByte(int src, int dst, size_t i) { return uint8_t((src * 131 + dst * 17 + i * 7 + (i >> 8)) & 0xff); }

struct GinCase {
  OneSidedKind kind;
  int nranks;
};

class ConformanceGin : public ::testing::TestWithParam<GinCase> {};

// Proves the proxy path end to end: every rank streams kChunksPerPeer odd-sized
// chunks to every rank (itself included) through the descriptor queues, each chunk
// a put with a signal (INC for even chunks, ADD of 3 for odd ones) and a local
// counter, plus one inline put per peer; then checks every byte landed from every
// source, every signal (12×1 + 12×3 = 48 per source), every counter, the inline
// values and the guards. Then bad puts (past the window, unknown handle, rank out
// of range) are refused and change nothing.
TEST_P(ConformanceGin, ProxyDriverLandsEveryByteAndSignal) {
  const GinCase gc = GetParam();
  RunRanks({.nranks = gc.nranks, .timeout = Ms(60000), .pluginTimeoutMs = 15000}, [gc](Rank& r) {
    const int n = r.nranks();
    const int me = r.rank();
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    OneSidedTable t(plugin.lib, gc.kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs);
    if (::testing::Test::HasFailure()) return;
    const int queueSize = 32 * maxRecvs;
    // Windows: data = [sources: n × kPerPeer][landing: n × kPerPeer][inline landing: n × 8].
    GuardedWindow data(2 * n * kPerPeer + 8 * size_t(n));
    GuardedWindow signals(8 * size_t(n));
    std::vector<uint64_t> scratch(size_t(n) * size_t(queueSize), 0);
    for (int dst = 0; dst < n; ++dst) {
      for (size_t i = 0; i < kPerPeer; ++i) data.data()[dst * kPerPeer + i] = PatternByte(me, dst, i);
    }
    void *dataMh = nullptr, *sigMh = nullptr, *inlineMh = nullptr;
    r.Note("regMrSym");
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess) << CapturedWarnings();
    ASSERT_EQ(t.RegMrSym(signals.data(), signals.size, NCCL_NET_MR_FLAG_FORCE_SO, &sigMh), ncclSuccess);
    ASSERT_EQ(t.RegMrSym(scratch.data(), scratch.size() * 8, 0, &inlineMh), ncclSuccess);
    ASSERT_NE(dataMh, nullptr);
    ASSERT_EQ(uint64_t(uintptr_t(dataMh)) >> 63, 0u) << "handles travel in 63-bit fields";

    std::vector<std::atomic<uint64_t>> counters(static_cast<size_t>(n));
    for (auto& c : counters) c.store(0);
    ProxyQueues queues(n, queueSize);
    ProxyConsumer consumer(t, queues, {sigMh, inlineMh, scratch.data(), counters.data()},
                           /*strongSignals=*/gc.kind != OneSidedKind::kRmaV14);
    const auto deadline = r.deadline();
    std::atomic<bool> producerOk{true};
    // The GPU's part: interleave peers, chunk by chunk.
    std::thread producer([&] {
      const uint64_t mh = uintptr_t(dataMh);
      for (int c = 0; c < kChunksPerPeer && producerOk; ++c) {
        for (int k = 0; k < n; ++k) {
          const int dst = (me + k) % n;
          GfdFields f;
          f.op = kGfdPut | kGfdCounter | (c % 2 == 0 ? kGfdSignalInc : kGfdSignalAdd);
          f.size = kChunk;
          f.srcOff = uint64_t(dst) * kPerPeer + uint64_t(c) * kChunk;
          f.srcHandle = mh;
          f.dstOff = uint64_t(n) * kPerPeer + uint64_t(me) * kPerPeer + uint64_t(c) * kChunk;
          f.dstHandle = mh;
          f.counterId = uint16_t(dst);
          f.signalId = uint16_t(me);
          f.signalValue = 3;
          if (!queues.Post(dst, f, deadline)) producerOk = false;
        }
      }
      for (int dst = 0; dst < n && producerOk; ++dst) {
        GfdFields f;  // inline put of a value naming source and target
        f.op = kGfdPut | kGfdInline;
        f.size = 8;
        const uint64_t v = 0xC0DE000000000000ull | (uint64_t(me) << 16) | uint64_t(dst);
        f.srcOff = v & ((1ull << 48) - 1);
        f.srcHandle = v >> 48;
        f.dstOff = 2 * uint64_t(n) * kPerPeer + 8 * uint64_t(me);
        f.dstHandle = mh;
        if (!queues.Post(dst, f, deadline)) producerOk = false;
      }
    });
    r.Note("proxy loop");
    ncclResult_t rc = ncclSuccess;
    const uint64_t total = uint64_t(n) * (kChunksPerPeer + 1);
    while (rc == ncclSuccess && Clock::now() < deadline && (consumer.dispatched() < total || !queues.Drained())) {
      rc = consumer.Pass();
    }
    producer.join();
    ASSERT_EQ(rc, ncclSuccess) << consumer.error() << "\n" << CapturedWarnings();
    ASSERT_TRUE(producerOk) << "the producer timed out waiting for queue room";
    ASSERT_TRUE(queues.Drained());
    // Signals from every source: keep progressing (the TCP target moves bytes in progress).
    r.Note("wait for signals");
    auto sig = [&](int src) {
      uint64_t v;
      std::memcpy(&v, signals.data() + 8 * src, 8);
      return v;
    };
    const uint64_t want = (kChunksPerPeer / 2) * 1 + (kChunksPerPeer / 2) * 3;
    bool all = false;
    while (!all && Clock::now() < deadline) {
      all = true;
      for (int src = 0; src < n; ++src) {
        all = all && __atomic_load_n(reinterpret_cast<uint64_t*>(signals.data() + 8 * src), __ATOMIC_ACQUIRE) == want;
      }
      if (!all) {
        ASSERT_EQ(t.Progress(), ncclSuccess) << CapturedWarnings();
      }
    }
    ASSERT_TRUE(BarrierProgressing(r, t));
    for (int src = 0; src < n; ++src) EXPECT_EQ(sig(src), want) << "signal of source " << src;
    for (int dst = 0; dst < n; ++dst) {
      EXPECT_EQ(counters[size_t(dst)].load(), uint64_t(kChunksPerPeer)) << "counter of peer " << dst;
    }
    for (int src = 0; src < n; ++src) {
      const uint8_t* land = data.data() + size_t(n) * kPerPeer + size_t(src) * kPerPeer;
      size_t bad = SIZE_MAX;
      for (size_t i = 0; i < kPerPeer && bad == SIZE_MAX; ++i) {
        if (land[i] != PatternByte(src, me, i)) bad = i;
      }
      EXPECT_EQ(bad, SIZE_MAX) << "byte " << bad << " from source " << src << " is wrong";
      uint64_t v;
      std::memcpy(&v, data.data() + 2 * size_t(n) * kPerPeer + 8 * size_t(src), 8);
      EXPECT_EQ(v, 0xC0DE000000000000ull | (uint64_t(src) << 16) | uint64_t(me)) << "inline put from " << src;
    }
    EXPECT_TRUE(data.GuardsIntact());
    EXPECT_TRUE(signals.GuardsIntact());

    // Bad input: refused, no request, nothing written (peers check their windows).
    r.Note("bad input");
    void* req = reinterpret_cast<void*>(1);
    const int peer = (me + 1) % n;
    EXPECT_EQ(t.Iput(0, dataMh, 16, data.size - 8, dataMh, uint32_t(peer), &req), ncclInvalidArgument);
    EXPECT_EQ(t.Iput(0, dataMh, 16, 0, reinterpret_cast<void*>(uintptr_t(4242)), uint32_t(peer), &req),
              ncclInvalidArgument);
    EXPECT_EQ(t.Iput(0, dataMh, 16, 0, dataMh, uint32_t(n), &req), ncclInvalidArgument);
    EXPECT_EQ(t.IputSignal(0, dataMh, 0, 0, nullptr, uint32_t(peer), signals.size, sigMh, 1, NCCL_NET_SIGNAL_OP_INC,
                           true, &req),
              ncclInvalidArgument);
    EXPECT_EQ(req, nullptr);
    EXPECT_NE(FindWarning({"outside"}), "") << CapturedWarnings();
    for (int i = 0; i < 200; ++i) ASSERT_EQ(t.Progress(), ncclSuccess) << "bad input poisoned the comm";
    ASSERT_TRUE(BarrierProgressing(r, t));
    EXPECT_TRUE(data.GuardsIntact());
    EXPECT_TRUE(signals.GuardsIntact());
    for (int src = 0; src < n; ++src) EXPECT_EQ(sig(src), want);

    // The flush NCCL's RMA proxy does: an 8-byte self put (2.30 sheet §5.3), and iflush.
    void* self = nullptr;
    ASSERT_EQ(t.Iput(0, dataMh, 8, 0, dataMh, uint32_t(me), &self), ncclSuccess);
    int done = 0;
    while (!done && Clock::now() < deadline) ASSERT_EQ(t.Test(self, &done), ncclSuccess);
    EXPECT_TRUE(done);
    if (gc.kind != OneSidedKind::kGinV11) {
      void* fl = nullptr;
      ASSERT_EQ(t.Iflush(nullptr, uint32_t(me), &fl), ncclSuccess);
      ASSERT_NE(fl, nullptr);
      done = 0;
      while (!done && Clock::now() < deadline) ASSERT_EQ(t.Test(fl, &done), ncclSuccess);
      EXPECT_TRUE(done);
      // iget: read the peer's source area for us back into our landing slot of that peer.
      void* g = nullptr;
      ASSERT_EQ(t.Iget(uint64_t(me) * kPerPeer, dataMh, 4096, size_t(n) * kPerPeer + size_t(peer) * kPerPeer, dataMh,
                       uint32_t(peer), &g),
                ncclSuccess);
      done = 0;
      while (!done && Clock::now() < deadline) ASSERT_EQ(t.Test(g, &done), ncclSuccess);
      for (size_t i = 0; i < 4096; ++i) {
        ASSERT_EQ(data.data()[size_t(n) * kPerPeer + size_t(peer) * kPerPeer + i], PatternByte(peer, me, i)) << i;
      }
    }
    ASSERT_TRUE(BarrierProgressing(r, t));  // nobody closes while a peer still reads
    EXPECT_EQ(t.DeregMrSym(inlineMh), ncclSuccess);
    EXPECT_EQ(t.DeregMrSym(sigMh), ncclSuccess);
    EXPECT_EQ(t.DeregMrSym(dataMh), ncclSuccess);
    EXPECT_EQ(t.Close(), ncclSuccess);
    EXPECT_EQ(t.Finalize(), ncclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Tables, ConformanceGin,
                         ::testing::Values(GinCase{OneSidedKind::kGinV11, 2}, GinCase{OneSidedKind::kGinV11, 4},
                                           GinCase{OneSidedKind::kRmaV14, 2}, GinCase{OneSidedKind::kRmaV14, 4},
                                           GinCase{OneSidedKind::kRmaV13, 2}, GinCase{OneSidedKind::kRmaV13, 4}),
                         [](const ::testing::TestParamInfo<GinCase>& i) {
                           return TableTestName(i.param.kind) + "_" + std::to_string(i.param.nranks) + "Ranks";
                         });

class ConformanceGinFault : public ::testing::TestWithParam<OneSidedKind> {};

// Proves a peer killed mid-stream ends in an error naming it on the others, with no
// hang: 3 ranks; ranks 0 and 1 stream puts with signals to rank 2; after 50 of its
// own completed, rank 0 has rank 2 SIGKILLed; both survivors then get a failed
// call (bounded by the run's deadline) and a WARN naming "peer rank 2", and later
// calls keep failing.
TEST_P(ConformanceGinFault, KilledPeerIsNamedNoHang) {
  const OneSidedKind kind = GetParam();
  RunRanks({.nranks = 3, .timeout = Ms(40000), .pluginTimeoutMs = 3000}, [kind](Rank& r) {
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    OneSidedTable t(plugin.lib, kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs);
    if (::testing::Test::HasFailure()) return;
    GuardedWindow data(1 << 20);
    GuardedWindow signals(64);
    void *dataMh = nullptr, *sigMh = nullptr;
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess);
    ASSERT_EQ(t.RegMrSym(signals.data(), signals.size, NCCL_NET_MR_FLAG_FORCE_SO, &sigMh), ncclSuccess);
    ASSERT_TRUE(BarrierProgressing(r, t));
    const auto deadline = r.deadline();
    if (r.rank() == 2) {
      r.Note("victim progressing until killed");
      while (Clock::now() < deadline) (void)t.Progress();
      return;
    }
    r.Note("streaming to rank 2");
    std::deque<void*> inflight;
    uint64_t completed = 0;
    bool killed = false;
    ncclResult_t failure = ncclSuccess;
    while (failure == ncclSuccess && Clock::now() < deadline) {
      if (inflight.size() < 16) {
        void* req = nullptr;
        failure = t.IputSignal(0, dataMh, 65536, 65536, dataMh, 2, 8 * uint64_t(r.rank()), sigMh, 1,
                               NCCL_NET_SIGNAL_OP_INC, true, &req);
        if (failure != ncclSuccess) break;
        inflight.push_back(req);
      }
      int done = 0;
      failure = t.Test(inflight.front(), &done);
      if (done) {
        inflight.pop_front();
        ++completed;
      }
      if (r.rank() == 0 && !killed && completed >= 50) {
        r.Note("killing rank 2");
        ASSERT_TRUE(r.Kill(2));
        killed = true;
      }
    }
    ASSERT_NE(failure, ncclSuccess) << "no error within the deadline after rank 2 died (completed " << completed << ")";
    EXPECT_NE(WaitForWarning([](const std::string& w) { return w.find("peer rank 2") != std::string::npos; },
                             deadline),
              "")
        << CapturedWarnings();
    void* req = nullptr;
    EXPECT_NE(t.Iput(0, dataMh, 8, 0, dataMh, 2, &req), ncclSuccess) << "a poisoned comm must keep failing";
    (void)t.Close();
    (void)t.Finalize();
  });
}

/// True when process `pid` is stopped (state 'T' or 't' in /proc/pid/stat) or gone.
bool StoppedOrGone(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return true;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

// Proves a peer frozen mid-stream (SIGSTOP: alive, connections open, its process
// doing nothing) never hangs the others. 3 ranks; ranks 0 and 1 stream puts with
// signals to rank 2, which stops itself once 20 signals from each have landed.
// Over TCP the target's CPU moves the bytes, so requests stop completing: both
// survivors get a failed call within RAILYARD_TIMEOUT_MS (+ slack) of seeing rank 2
// stopped, a WARN naming "peer rank 2" and the sequence, and later calls keep
// failing. Over verbs the HCA serves a stopped process (RDMA needs no target CPU):
// 200 more requests complete with no error after the stop, and every one of them is
// tested, so nothing hangs either way.
TEST_P(ConformanceGinFault, FrozenPeerIsNamedNoHang) {
  const OneSidedKind kind = GetParam();
  const bool hcaServes = TransportName() == "verbs";
  RunRanks({.nranks = 3, .timeout = Ms(40000), .pluginTimeoutMs = 3000}, [kind, hcaServes](Rank& r) {
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    OneSidedTable t(plugin.lib, kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs);
    if (::testing::Test::HasFailure()) return;
    GuardedWindow data(1 << 20);
    GuardedWindow signals(64);
    void *dataMh = nullptr, *sigMh = nullptr;
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess);
    ASSERT_EQ(t.RegMrSym(signals.data(), signals.size, NCCL_NET_MR_FLAG_FORCE_SO, &sigMh), ncclSuccess);
    uint64_t victim = 0;
    if (r.rank() == 2) {
      ASSERT_TRUE(r.SendU64(0, uint64_t(getpid())) && r.SendU64(1, uint64_t(getpid())));
    } else {
      ASSERT_TRUE(r.RecvU64(2, &victim));
    }
    ASSERT_TRUE(BarrierProgressing(r, t));
    const auto deadline = r.deadline();
    if (r.rank() == 2) {
      r.Note("victim progressing until 20 signals from each source, then SIGSTOP");
      auto landed = [&](int src) {
        return __atomic_load_n(reinterpret_cast<uint64_t*>(signals.data() + 8 * src), __ATOMIC_ACQUIRE);
      };
      while (Clock::now() < deadline && (landed(0) < 20 || landed(1) < 20)) (void)t.Progress();
      ASSERT_GE(landed(0), 20u);
      raise(SIGSTOP);  // rank 0 SIGKILLs this process through the parent at the end
      return;
    }
    r.Note("streaming to rank 2");
    std::deque<void*> inflight;
    uint64_t completed = 0, completedAtStop = 0;
    Clock::time_point stoppedAt{};
    bool stopped = false;
    ncclResult_t failure = ncclSuccess;
    while (failure == ncclSuccess && Clock::now() < deadline) {
      if (!stopped && StoppedOrGone(pid_t(victim))) {
        stopped = true;
        stoppedAt = Clock::now();
        completedAtStop = completed;
        r.Note("rank 2 is stopped");
      }
      if (hcaServes && stopped && completed >= completedAtStop + 200) break;
      if (inflight.size() < 16) {
        void* req = nullptr;
        failure = t.IputSignal(0, dataMh, 65536, 65536, dataMh, 2, 8 * uint64_t(r.rank()), sigMh, 1,
                               NCCL_NET_SIGNAL_OP_INC, true, &req);
        if (failure != ncclSuccess) break;
        inflight.push_back(req);
      }
      int done = 0;
      failure = t.Test(inflight.front(), &done);
      if (done) {
        inflight.pop_front();
        ++completed;
      }
    }
    ASSERT_TRUE(stopped) << "rank 2 never stopped (completed " << completed << ")";
    if (hcaServes) {
      EXPECT_EQ(failure, ncclSuccess) << "verbs: a stopped target's HCA still serves RDMA\n" << CapturedWarnings();
      EXPECT_GE(completed, completedAtStop + 200) << "the stream stalled on a stopped peer";
      while (failure == ncclSuccess && !inflight.empty() && Clock::now() < deadline) {
        int done = 0;
        failure = t.Test(inflight.front(), &done);
        if (done) inflight.pop_front();
      }
      EXPECT_EQ(failure, ncclSuccess);
      EXPECT_TRUE(inflight.empty()) << inflight.size() << " requests never completed";
    } else {
      ASSERT_NE(failure, ncclSuccess) << "no error within the deadline after rank 2 froze (completed " << completed
                                      << ")";
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - stoppedAt).count();
      EXPECT_LE(took, r.pluginTimeoutMs() + 5000) << "the error came " << took << " ms after rank 2 stopped";
      const std::string w = WaitForWarning(
          [](const std::string& m) { return m.find("peer rank 2") != std::string::npos; }, deadline);
      EXPECT_NE(w, "") << CapturedWarnings();
      EXPECT_NE(w.find("seq"), std::string::npos) << w;
      void* req = nullptr;
      EXPECT_NE(t.Iput(0, dataMh, 8, 0, dataMh, 2, &req), ncclSuccess) << "a poisoned comm must keep failing";
    }
    if (r.rank() == 1) {
      ASSERT_TRUE(r.SendU64(0, 1));  // rank 1 is done with rank 2
    } else {
      uint64_t one = 0;
      ASSERT_TRUE(r.RecvU64(1, &one));
      r.Note("killing the stopped rank 2");
      ASSERT_TRUE(r.Kill(2));
    }
    (void)t.Close();
    (void)t.Finalize();
  });
}

INSTANTIATE_TEST_SUITE_P(Tables, ConformanceGinFault,
                         ::testing::Values(OneSidedKind::kGinV11, OneSidedKind::kRmaV14, OneSidedKind::kRmaV13),
                         [](const ::testing::TestParamInfo<OneSidedKind>& i) { return TableTestName(i.param); });

class ConformanceRmaThreads : public ::testing::TestWithParam<OneSidedKind> {};

// NCCL 2.30's host RMA path (nccl-2.30-abi.md §5.3, §5.4): listen gets the RMA table's
// context but connect the NET plugin's (here from ncclNetPlugin_v12's init), and two
// threads ("NCCL GIN Progress" and "NCCL RMA Proxy Progress") call iputSignal, test and
// the progress entry on one comm at once. Each rank runs two such threads, each
// streaming kPuts odd-sized puts to every rank (itself included) into its own landing
// area, each put with a strong ADD signal of the thread's weight (1 and 1000) on the
// word of (source, thread); at most 8 requests in flight a thread. Checks every landed
// byte, every signal total (kPuts x weight), and the guards.
TEST_P(ConformanceRmaThreads, TwoProgressThreadsOverConnectWithTheNetContext) {
  const OneSidedKind kind = GetParam();
  RunRanks({.nranks = 3, .timeout = Ms(60000), .pluginTimeoutMs = 15000}, [kind](Rank& r) {
    constexpr int kThreads = 2;
    constexpr int kPuts = 30;
    constexpr size_t kPut = 2999;
    constexpr size_t kPerThread = kPuts * kPut;
    const int n = r.nranks();
    const int me = r.rank();
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    const auto* net = static_cast<const ncclNet_v12_t*>(dlsym(plugin.lib, "ncclNetPlugin_v12"));
    ASSERT_NE(net, nullptr);
    void* netCtx = nullptr;
    ncclNetCommConfig_v12_t config{};
    ASSERT_EQ(net->init(&netCtx, 1, &config, &CapturingLogger, nullptr), ncclSuccess) << CapturedWarnings();
    ASSERT_NE(netCtx, nullptr);
    OneSidedTable t(plugin.lib, kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs, netCtx);
    if (::testing::Test::HasFailure()) return;
    // data = [own sources: kThreads x kPerThread][landing: n sources x kThreads x kPerThread]
    GuardedWindow data(kThreads * kPerThread + size_t(n) * kThreads * kPerThread);
    GuardedWindow signals(8 * size_t(n) * kThreads);
    for (int th = 0; th < kThreads; ++th) {
      for (size_t i = 0; i < kPerThread; ++i) data.data()[th * kPerThread + i] = PatternByte(me, th, i);
    }
    void *dataMh = nullptr, *sigMh = nullptr;
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess) << CapturedWarnings();
    ASSERT_EQ(t.RegMrSym(signals.data(), signals.size, NCCL_NET_MR_FLAG_FORCE_SO, &sigMh), ncclSuccess);
    const auto deadline = r.deadline();
    std::atomic<bool> failed{false};
    std::vector<std::string> why(kThreads);
    auto stream = [&](int th) {
      const uint64_t weight = th == 0 ? 1 : 1000;
      std::deque<void*> inflight;
      auto retire = [&](size_t keep) {
        while (inflight.size() > keep && !failed && Clock::now() < deadline) {
          int done = 0;
          const ncclResult_t rc = t.Test(inflight.front(), &done);
          if (rc != ncclSuccess) {
            why[th] = "test failed";
            failed = true;
          } else if (done) {
            inflight.pop_front();
          } else if (t.Progress() != ncclSuccess) {
            why[th] = "progress failed";
            failed = true;
          }
        }
      };
      for (int k = 0; k < kPuts && !failed; ++k) {
        for (int d = 0; d < n && !failed; ++d) {
          const int dst = (me + d) % n;
          const uint64_t src = uint64_t(th) * kPerThread + uint64_t(k) * kPut;
          const uint64_t land = kThreads * kPerThread + (uint64_t(me) * kThreads + th) * kPerThread + uint64_t(k) * kPut;
          void* req = nullptr;
          if (t.IputSignal(src, dataMh, kPut, land, dataMh, uint32_t(dst), 8 * (uint64_t(me) * kThreads + th), sigMh,
                           weight, NCCL_NET_SIGNAL_OP_ADD, true, &req) != ncclSuccess) {
            why[th] = "iputSignal failed";
            failed = true;
            break;
          }
          inflight.push_back(req);
          retire(7);
        }
      }
      retire(0);
      if (!inflight.empty() && why[th].empty()) why[th] = std::to_string(inflight.size()) + " requests never completed";
    };
    r.Note("two progress threads");
    std::thread second(stream, 1);
    stream(0);
    second.join();
    ASSERT_TRUE(why[0].empty() && why[1].empty()) << why[0] << " / " << why[1] << "\n" << CapturedWarnings();
    // Every source's signals: keep progressing (the TCP target lands bytes in progress).
    auto sig = [&](int src, int th) {
      return __atomic_load_n(reinterpret_cast<uint64_t*>(signals.data() + 8 * (size_t(src) * kThreads + th)),
                             __ATOMIC_ACQUIRE);
    };
    bool all = false;
    while (!all && Clock::now() < deadline) {
      all = true;
      for (int src = 0; src < n; ++src) all = all && sig(src, 0) == uint64_t(kPuts) && sig(src, 1) == 1000ull * kPuts;
      if (!all) {
        ASSERT_EQ(t.Progress(), ncclSuccess) << CapturedWarnings();
      }
    }
    ASSERT_TRUE(BarrierProgressing(r, t));
    for (int src = 0; src < n; ++src) {
      EXPECT_EQ(sig(src, 0), uint64_t(kPuts)) << "thread 0 signals of source " << src;
      EXPECT_EQ(sig(src, 1), 1000ull * kPuts) << "thread 1 signals of source " << src;
      for (int th = 0; th < kThreads; ++th) {
        const uint8_t* land = data.data() + kThreads * kPerThread + (size_t(src) * kThreads + th) * kPerThread;
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < kPerThread && bad == SIZE_MAX; ++i) {
          if (land[i] != PatternByte(src, th, i)) bad = i;
        }
        EXPECT_EQ(bad, SIZE_MAX) << "byte " << bad << " of source " << src << " thread " << th;
      }
    }
    EXPECT_TRUE(data.GuardsIntact());
    EXPECT_TRUE(signals.GuardsIntact());
    ASSERT_TRUE(BarrierProgressing(r, t));
    EXPECT_EQ(t.DeregMrSym(sigMh), ncclSuccess);
    EXPECT_EQ(t.DeregMrSym(dataMh), ncclSuccess);
    EXPECT_EQ(t.Close(), ncclSuccess);
    EXPECT_EQ(t.Finalize(), ncclSuccess);
    EXPECT_EQ(net->finalize(netCtx), ncclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Tables, ConformanceRmaThreads, ::testing::Values(OneSidedKind::kRmaV14, OneSidedKind::kRmaV13),
                         [](const ::testing::TestParamInfo<OneSidedKind>& i) { return TableTestName(i.param); });

class ConformanceGinProxyRules : public ::testing::TestWithParam<OneSidedKind> {};

// A strong signal (nccl-2.30-abi.md §5.3: "with isStrongSignal, after every earlier
// operation on the context"; GIN v11 and RMA v13 signals are always strong) is seen by
// the target only once every earlier put of the source to it has landed, however the
// puts were striped: per round, rank 0 puts kPuts chunks of 200,003 bytes (over the
// 64 KiB stripe threshold) with no signal, then a signal alone (size 0, strong, ADD 1);
// rank 1 progresses until the signal reads the round's number and then, at once, checks
// every byte of that round's chunks (no progress between: what the signal promised
// must already be there). Each round lands in its own area.
TEST_P(ConformanceGinProxyRules, StrongSignalComesAfterEveryEarlierPut) {
  const OneSidedKind kind = GetParam();
  RunRanks({.nranks = 2, .timeout = Ms(60000), .pluginTimeoutMs = 15000}, [kind](Rank& r) {
    constexpr int kRounds = 4;
    constexpr int kPuts = 6;
    constexpr size_t kPut = 200003;
    constexpr size_t kRound = kPuts * kPut;
    const int me = r.rank();
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    OneSidedTable t(plugin.lib, kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs);
    if (::testing::Test::HasFailure()) return;
    // data = [source: kRounds x kRound][landing: kRounds x kRound]
    GuardedWindow data(2 * kRounds * kRound);
    GuardedWindow signals(8);
    for (size_t i = 0; i < kRounds * kRound; ++i) data.data()[i] = PatternByte(me, int(i / kRound), i);
    void *dataMh = nullptr, *sigMh = nullptr;
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess) << CapturedWarnings();
    ASSERT_EQ(t.RegMrSym(signals.data(), signals.size, NCCL_NET_MR_FLAG_FORCE_SO, &sigMh), ncclSuccess);
    const auto deadline = r.deadline();
    if (me == 0) {
      std::deque<void*> inflight;
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kPuts; ++k) {
          const uint64_t off = uint64_t(round) * kRound + uint64_t(k) * kPut;
          void* req = nullptr;
          ASSERT_EQ(t.Iput(off, dataMh, kPut, kRounds * kRound + off, dataMh, 1, &req), ncclSuccess) << CapturedWarnings();
          inflight.push_back(req);
        }
        void* sig = nullptr;
        ASSERT_EQ(t.IputSignal(0, nullptr, 0, 0, nullptr, 1, 0, sigMh, 1, NCCL_NET_SIGNAL_OP_ADD, true, &sig),
                  ncclSuccess)
            << CapturedWarnings();
        inflight.push_back(sig);
        while (!inflight.empty() && Clock::now() < deadline) {
          int done = 0;
          ASSERT_EQ(t.Test(inflight.front(), &done), ncclSuccess) << CapturedWarnings();
          if (done) inflight.pop_front();
        }
        ASSERT_TRUE(inflight.empty()) << "round " << round << ": requests never completed";
      }
    } else {
      for (int round = 0; round < kRounds; ++round) {
        while (__atomic_load_n(reinterpret_cast<uint64_t*>(signals.data()), __ATOMIC_ACQUIRE) < uint64_t(round + 1) &&
               Clock::now() < deadline) {
          ASSERT_EQ(t.Progress(), ncclSuccess) << CapturedWarnings();
        }
        ASSERT_GE(__atomic_load_n(reinterpret_cast<uint64_t*>(signals.data()), __ATOMIC_ACQUIRE), uint64_t(round + 1))
            << "round " << round << ": no signal";
        const uint8_t* land = data.data() + kRounds * kRound + size_t(round) * kRound;
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < kRound && bad == SIZE_MAX; ++i) {
          if (land[i] != PatternByte(0, round, size_t(round) * kRound + i)) bad = i;
        }
        ASSERT_EQ(bad, SIZE_MAX) << "round " << round << ": byte " << bad << " (put " << bad / kPut
                                 << ") not there when the strong signal was";
      }
    }
    ASSERT_TRUE(BarrierProgressing(r, t));
    EXPECT_TRUE(data.GuardsIntact());
    EXPECT_TRUE(signals.GuardsIntact());
    EXPECT_EQ(t.DeregMrSym(sigMh), ncclSuccess);
    EXPECT_EQ(t.DeregMrSym(dataMh), ncclSuccess);
    EXPECT_EQ(t.Close(), ncclSuccess);
    EXPECT_EQ(t.Finalize(), ncclSuccess);
  });
}

// The proxy queue depth (nccl-2.30-abi.md §5.3: "at most 32 x maxRecvs requests are in
// flight per target per rmaCtx"; GIN v11 proxy mode the same per peer): rank 0 posts
// that many 8-byte puts to rank 1, each to its own slot, without a test() between;
// every post is accepted with a request, then every request completes and rank 1
// finds every value.
TEST_P(ConformanceGinProxyRules, QueueDepthOfPutsInFlightToOnePeer) {
  const OneSidedKind kind = GetParam();
  RunRanks({.nranks = 2, .timeout = Ms(60000), .pluginTimeoutMs = 15000}, [kind](Rank& r) {
    Plugin plugin = OpenPlugin();
    ASSERT_NE(plugin.lib, nullptr);
    OneSidedTable t(plugin.lib, kind);
    int maxRecvs = 0;
    Connect(r, plugin, t, &maxRecvs);
    if (::testing::Test::HasFailure()) return;
    ASSERT_GE(maxRecvs, 1);
    const size_t depth = 32 * size_t(maxRecvs);
    // data = [source values: depth x 8][landing: depth x 8]
    GuardedWindow data(2 * 8 * depth);
    for (size_t i = 0; i < depth; ++i) {
      const uint64_t v = 0x5EED000000000000ull | (uint64_t(r.rank()) << 32) | i;
      std::memcpy(data.data() + 8 * i, &v, 8);
    }
    void* dataMh = nullptr;
    ASSERT_EQ(t.RegMrSym(data.data(), data.size, 0, &dataMh), ncclSuccess) << CapturedWarnings();
    const auto deadline = r.deadline();
    if (r.rank() == 0) {
      std::vector<void*> reqs(depth, nullptr);
      for (size_t i = 0; i < depth; ++i) {
        ASSERT_EQ(t.Iput(8 * i, dataMh, 8, 8 * depth + 8 * i, dataMh, 1, &reqs[i]), ncclSuccess)
            << "put " << i << " of " << depth << "\n" << CapturedWarnings();
        ASSERT_NE(reqs[i], nullptr) << "put " << i;
      }
      size_t done = 0;
      std::vector<bool> finished(depth, false);
      while (done < depth && Clock::now() < deadline) {
        for (size_t i = 0; i < depth; ++i) {
          if (finished[i]) continue;
          int d = 0;
          ASSERT_EQ(t.Test(reqs[i], &d), ncclSuccess) << CapturedWarnings();
          if (d) {
            finished[i] = true;
            ++done;
          }
        }
      }
      ASSERT_EQ(done, depth) << "requests never completed";
    }
    ASSERT_TRUE(BarrierProgressing(r, t));
    if (r.rank() == 1) {
      for (size_t i = 0; i < depth; ++i) {
        uint64_t v = 0;
        std::memcpy(&v, data.data() + 8 * depth + 8 * i, 8);
        ASSERT_EQ(v, 0x5EED000000000000ull | i) << "slot " << i << " of " << depth;
      }
    }
    EXPECT_TRUE(data.GuardsIntact());
    ASSERT_TRUE(BarrierProgressing(r, t));
    EXPECT_EQ(t.DeregMrSym(dataMh), ncclSuccess);
    EXPECT_EQ(t.Close(), ncclSuccess);
    EXPECT_EQ(t.Finalize(), ncclSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Tables, ConformanceGinProxyRules,
                         ::testing::Values(OneSidedKind::kGinV11, OneSidedKind::kRmaV14, OneSidedKind::kRmaV13),
                         [](const ::testing::TestParamInfo<OneSidedKind>& i) { return TableTestName(i.param); });

}  // namespace
}  // namespace railyard::conformance
