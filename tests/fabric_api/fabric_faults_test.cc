// The fabric suite, processes and faults: FetchAdd from 4 processes x 10,000 on one
// counter (fork + real sockets); a target SIGKILLed or SIGSTOPped mid-operation
// ends in an error event within the timeout; 100 create/destroy cycles leave no
// threads or file descriptors behind. One body per test, run over every transport.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

using Ms = std::chrono::milliseconds;

/// Shared memory for children's results.
template <typename T>
T* SharedArray(size_t n) {
  void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<T*>(p);
}

class FabricFaults : public FabricTest {};

TEST_P(FabricFaults, FetchAddFromFourProcessesCountsExactlyAndEveryOldValueOnce) {
  if (!Has(kCapFetchAdd | kCapMultiProcess)) GTEST_SKIP() << "no FetchAdd across processes";
  constexpr int kProcs = 4, kEach = 10000, kDepth = 64;
  alignas(8) static uint64_t counter[8];
  std::fill(std::begin(counter), std::end(counter), 0);
  const Region* rc = Reg(b_, counter, sizeof counter, kAccessRemoteAtomic);
  const std::vector<uint8_t> key = rc->Key().Pack();
  const std::vector<uint8_t> address = b_.worker->Address();
  uint64_t* olds = SharedArray<uint64_t>(kProcs * kEach);
  ASSERT_NE(olds, nullptr);
  const TransportCase tc = GetParam();
  const Knobs knobs = knobs_;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: its own Domain, Worker and Endpoint; never returns.
      Side me;
      if (!tc.make(knobs, &me.domain).ok() || !me.domain->CreateWorker(&me.worker).ok()) _exit(10);
      std::unique_ptr<Endpoint> ep;
      RemoteKey k;
      if (!RemoteKey::Unpack(key, &k).ok() || !me.worker->Connect(address, &ep).ok()) _exit(11);
      int posted = 0, done = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (done < kEach && std::chrono::steady_clock::now() < deadline) {
        while (posted < kEach && posted - done < kDepth) {
          if (!ep->FetchAdd(k, k.base, 1, static_cast<uint64_t>(posted)).ok()) _exit(12);
          ++posted;
        }
        me.events.clear();
        me.worker->Progress(&me.events);
        for (const Event& e : me.events) {
          if (e.kind != EventKind::kDone || e.op != OpType::kFetchAdd) _exit(13);
          olds[p * kEach + static_cast<int>(e.cookie)] = e.value;
          ++done;
        }
      }
      _exit(done == kEach ? 0 : 14);
    }
    kids.push_back(pid);
  }
  int left = kProcs;
  std::vector<int> codes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    b_.worker->Progress(&b_.events);
    int st = 0;
    const pid_t w = waitpid(-1, &st, WNOHANG);
    if (w > 0) {
      --left;
      codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
    }
  }
  for (pid_t k : kids) {
    if (left > 0) kill(k, SIGKILL);
  }
  while (left > 0 && waitpid(-1, nullptr, 0) > 0) --left;
  for (int c : codes) EXPECT_EQ(c, 0) << "a child failed (exit code)";
  ASSERT_EQ(codes.size(), static_cast<size_t>(kProcs));
  EXPECT_EQ(counter[0], static_cast<uint64_t>(kProcs * kEach));
  std::vector<uint64_t> all(olds, olds + kProcs * kEach);
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i], i) << "old value " << i << " was not seen exactly once";
  }
  EXPECT_EQ(counter[1], 0u);
  munmap(olds, kProcs * kEach * sizeof(uint64_t));
}

/// Forks a target process (own Domain and Worker, a 64 MiB region open for remote
/// read and write) that progresses for up to 60 s; returns its pid and fills its
/// Worker address and the region's key.
pid_t StartTarget(const TransportCase& tc, const Knobs& knobs, std::vector<uint8_t>* address,
                  std::vector<uint8_t>* key) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    Side me;
    if (!tc.make(knobs, &me.domain).ok() || !me.domain->CreateWorker(&me.worker).ok()) _exit(10);
    static std::vector<uint8_t> mem(64u << 20);
    const Region* r = nullptr;
    if (!me.domain->Register(mem.data(), mem.size(), kAccessRemoteWrite | kAccessRemoteRead, MemoryKind::kHost, &r)
             .ok()) {
      _exit(11);
    }
    const std::vector<uint8_t> a = me.worker->Address(), k = r->Key().Pack();
    const uint32_t sizes[2] = {static_cast<uint32_t>(a.size()), static_cast<uint32_t>(k.size())};
    if (write(pipefd[1], sizes, sizeof sizes) != sizeof sizes || write(pipefd[1], a.data(), a.size()) < 0 ||
        write(pipefd[1], k.data(), k.size()) < 0) {
      _exit(12);
    }
    close(pipefd[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      me.events.clear();
      me.worker->Progress(&me.events);
    }
    _exit(0);
  }
  close(pipefd[1]);
  uint32_t sizes[2] = {};
  bool ok = read(pipefd[0], sizes, sizeof sizes) == sizeof sizes && sizes[0] < 4096 && sizes[1] < 4096;
  if (ok) {
    address->resize(sizes[0]);
    key->resize(sizes[1]);
    ok = read(pipefd[0], address->data(), sizes[0]) == static_cast<ssize_t>(sizes[0]) &&
         read(pipefd[0], key->data(), sizes[1]) == static_cast<ssize_t>(sizes[1]);
  }
  close(pipefd[0]);
  return ok ? pid : -1;
}

/// Streams 16 MiB Writes (or, with `records`, 64-byte Send records) with 4
/// outstanding to a forked target; once one has completed, sends `sig` to it;
/// returns the first error event and how long after the signal it came.
void StreamThenSignal(FabricTest* t, Side& a, const Knobs& knobs, int sig, Event* error, Ms* after,
                      bool records = false) {
  std::vector<uint8_t> address, keyBytes;
  const pid_t pid = StartTarget(t->GetParam(), knobs, &address, &keyBytes);
  ASSERT_GT(pid, 0);
  RemoteKey key;
  ASSERT_TRUE(RemoteKey::Unpack(keyBytes, &key).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a.worker->Connect(address, &ep).ok());
  const size_t n = 16u << 20;
  static std::vector<uint8_t> src(n, 0x3C);
  const Region* rs = nullptr;
  ASSERT_TRUE(a.domain->Register(src.data(), n, kAccessLocal, MemoryKind::kHost, &rs).ok());
  uint64_t cookie = 0;
  int completed = 0;
  bool signalled = false;
  std::chrono::steady_clock::time_point at;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool failed = false;
  while (!failed && std::chrono::steady_clock::now() < deadline) {
    while (ep->status().ok() && ep->Outstanding() < 4) {
      if (records) {
        ASSERT_TRUE(ep->Send(std::vector<uint8_t>(64, 0x3C), cookie).ok());
      } else {
        ASSERT_TRUE(ep->Write({rs, 0, n}, key, key.base + (cookie % 4) * n, cookie).ok());
      }
      ++cookie;
    }
    a.events.clear();
    a.worker->Progress(&a.events);
    for (const Event& e : a.events) {
      if (e.kind == EventKind::kDone) ++completed;
      if (e.kind == EventKind::kError && !failed) {
        failed = true;
        *error = e;
        *after = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - at);
      }
    }
    if (completed > 0 && !signalled) {
      ASSERT_EQ(kill(pid, sig), 0);
      signalled = true;
      at = std::chrono::steady_clock::now();
    }
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(signalled);
  EXPECT_TRUE(failed) << "no error event after the target was signalled";
  EXPECT_FALSE(ep->status().ok());
  EXPECT_FALSE(ep->Write({rs, 0, 8}, key, key.base, 999).ok()) << "the failed Endpoint took a new op";
  ep.reset();
  EXPECT_TRUE(a.domain->Deregister(rs).ok());
}

TEST_P(FabricFaults, TargetKilledMidWriteEndsInAnErrorEvent) {
  if (!Has(kCapMultiProcess)) GTEST_SKIP() << "in-process transport";
  Event e;
  Ms after{0};
  StreamThenSignal(this, a_, knobs_, SIGKILL, &e, &after);
  EXPECT_TRUE(e.error.errc == FabricErrc::kPeerClosed || e.error.errc == FabricErrc::kTimeout) << e.error.ToString();
  EXPECT_LT(after.count(), knobs_.timeoutMs + 2000) << e.error.ToString();
  EXPECT_NE(e.error.ToString().find("rail"), std::string::npos) << e.error.ToString();
  std::printf("[ fabric ] %s: error %lld ms after SIGKILL: %s\n", GetParam().name.c_str(),
              static_cast<long long>(after.count()), e.error.ToString().c_str());
}

class FabricFrozen : public FabricTest {
 protected:
  FabricFrozen() { knobs_.timeoutMs = 1500; }
};

TEST_P(FabricFrozen, TargetStoppedMidWriteTimesOut) {
  if (!Has(kCapMultiProcess)) GTEST_SKIP() << "in-process transport";
  // Over RDMA the target's HCA, not its CPU, answers one-sided Writes: they keep
  // landing in a stopped process (correctly). TargetStoppedMidRecordsTimesOut covers
  // a frozen peer there: records need its CPU to re-post buffers.
  if (!Has(kCapTargetCpuChecks)) GTEST_SKIP() << "one-sided Writes need no target CPU on this transport";
  Event e;
  Ms after{0};
  StreamThenSignal(this, a_, knobs_, SIGSTOP, &e, &after);
  EXPECT_EQ(e.error.errc, FabricErrc::kTimeout) << e.error.ToString();
  EXPECT_GE(after.count(), knobs_.timeoutMs - 100);
  EXPECT_LT(after.count(), knobs_.timeoutMs + 10000) << e.error.ToString();
  EXPECT_NE(e.error.ToString().find("rail"), std::string::npos) << e.error.ToString();
  std::printf("[ fabric ] %s: error %lld ms after SIGSTOP (timeout %d ms): %s\n", GetParam().name.c_str(),
              static_cast<long long>(after.count()), knobs_.timeoutMs, e.error.ToString().c_str());
}

TEST_P(FabricFrozen, TargetStoppedMidRecordsTimesOut) {
  if (!Has(kCapMultiProcess | kCapSend)) GTEST_SKIP() << "in-process transport";
  Event e;
  Ms after{0};
  StreamThenSignal(this, a_, knobs_, SIGSTOP, &e, &after, /*records=*/true);
  EXPECT_EQ(e.error.errc, FabricErrc::kTimeout) << e.error.ToString();
  EXPECT_GE(after.count(), knobs_.timeoutMs - 100);
  EXPECT_LT(after.count(), knobs_.timeoutMs + 10000) << e.error.ToString();
  EXPECT_NE(e.error.ToString().find("rail"), std::string::npos) << e.error.ToString();
  std::printf("[ fabric ] %s: records: error %lld ms after SIGSTOP (timeout %d ms): %s\n", GetParam().name.c_str(),
              static_cast<long long>(after.count()), knobs_.timeoutMs, e.error.ToString().c_str());
}

TEST_P(FabricFaults, HundredCreateDestroyCyclesLeaveNoThreadsOrFds) {
  auto cycle = [&] {
    Side x, y;
    ASSERT_TRUE(GetParam().make(knobs_, &x.domain).ok());
    ASSERT_TRUE(GetParam().make(knobs_, &y.domain).ok());
    ASSERT_TRUE(x.domain->CreateWorker(&x.worker).ok());
    ASSERT_TRUE(y.domain->CreateWorker(&y.worker).ok());
    std::unique_ptr<Endpoint> ep;
    ASSERT_TRUE(x.worker->Connect(y.worker->Address(), &ep).ok());
    alignas(8) uint8_t src[4096], dst[4096] = {};
    std::memset(src, 0x42, sizeof src);
    const Region *rs = nullptr, *rd = nullptr;
    ASSERT_TRUE(x.domain->Register(src, sizeof src, kAccessLocal, MemoryKind::kHost, &rs).ok());
    ASSERT_TRUE(y.domain->Register(dst, sizeof dst, kAccessRemoteWrite, MemoryKind::kHost, &rd).ok());
    ASSERT_TRUE(ep->Write({rs, 0, sizeof src}, rd->Key(), rd->base, 1).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (x.events.empty() && std::chrono::steady_clock::now() < deadline) {
      x.worker->Progress(&x.events);
      y.worker->Progress(&y.events);
    }
    ASSERT_EQ(x.events.size(), 1u);
    ASSERT_EQ(x.events[0].kind, EventKind::kDone);
    ASSERT_EQ(dst[4095], 0x42);
    ep.reset();
    // The target notices the close on its next Progress (no event: nothing was under way).
    y.worker->Progress(&y.events);
    EXPECT_EQ(y.events.size(), 0u);
  };
  cycle();  // warm-up: first-use allocations (random device, logging)
  const size_t fds = OpenFds(), threads = Threads();
  for (int i = 0; i < 100; ++i) {
    cycle();
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(OpenFds(), fds) << "file descriptors grew over 100 cycles";
  EXPECT_EQ(Threads(), threads) << "threads grew over 100 cycles";
  std::printf("[ fabric ] %s: 100 cycles, fds %zu -> %zu, threads %zu -> %zu\n", GetParam().name.c_str(), fds,
              OpenFds(), threads, Threads());
}

INSTANTIATE_TEST_SUITE_P(Transports, FabricFaults, ::testing::ValuesIn(FabricTransports()),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Transports, FabricFrozen, ::testing::ValuesIn(FabricTransports()),
                         CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
