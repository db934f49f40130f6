// GinComm (proxy/gin) over fabric mode's Domain (proxy/runtime/cable_set_domain.h) in
// one process: a switchless ring of 4 hosts h0 - h1 - h2 - h3 - h0 on loopback
// addresses (h0 and h2 have no cable, nor h1 and h3), every host running the fabric
// relay (ForwarderHost at one fixed port) and one GIN rank, each rank's calls on its
// own thread. The comm's Endpoints to the opposite host are relayed (both ways round,
// as plugin/net.cc's fabric mode sets CableSetOptions::multiRoute).
//
// Checked by content: every rank iputSignals to every rank (itself, its neighbours
// and the opposite host), and each signal, once seen, finds its data in place; iget
// reads the opposite host's window through a relay; iflush after relayed puts means
// the bytes are at the target. A relay dropped mid-stream (its host's Forwarder gone,
// as when the host dies) fails the ranks streaming through it with an error naming
// rank, peer, rail and sequence, within the comm's timeout: no hang.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/relay/forwarder_host.h"
#include "proxy/gin/gin_comm.h"
#include "proxy/runtime/cable_set_domain.h"

namespace railyard::gin {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr int kTimeoutMs = 3000;  ///< RAILYARD_TIMEOUT_MS of the comms, relays and sockets

/// Host k's end of cable c (cable c joins host c and host c+1 mod 4).
std::string CableEnd(int cable, bool upper) {
  return "127.0." + std::to_string(60 + cable) + (upper ? ".2" : ".1");
}

/// A TCP port free on every address of `ips` (0 if none was found).
uint16_t FreePort(const std::vector<std::string>& ips) {
  for (int tries = 0; tries < 50; ++tries) {
    uint16_t port = 0;
    bool ok = true;
    for (const std::string& ip : ips) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
      a.sin_port = htons(port);
      socklen_t len = sizeof a;
      ok = ok && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
           ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
      port = ntohs(a.sin_port);
      ::close(fd);
    }
    if (ok && port != 0) return port;
  }
  return 0;
}

/// Runs body(rank) on one thread per rank and joins them.
void OnEveryRank(const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  for (int r = 0; r < kRanks; ++r) ts.emplace_back(body, r);
  for (auto& t : ts) t.join();
}

/// One host of the ring: its relay, its fabric-mode Domain and its GIN rank.
struct Host {
  std::atomic<bool> relaySeat{true};  ///< the ForwarderHost serves while true
  std::unique_ptr<fabric::relay::ForwarderHost> relay;
  std::unique_ptr<runtime::CableSetDomain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<GinComm> comm;
  uint8_t handle[kHandleBytes] = {};
};

class GinRelayRing : public ::testing::Test {
 protected:
  static constexpr uint64_t kHostId0 = 41;

  void SetUp() override {
    std::vector<std::string> all;
    for (int c = 0; c < kRanks; ++c) {
      all.push_back(CableEnd(c, false));
      all.push_back(CableEnd(c, true));
    }
    port_ = FreePort(all);
    ASSERT_NE(port_, 0);
    for (int k = 0; k < kRanks; ++k) graph_.AddHost(kHostId0 + k, "h" + std::to_string(k));
    for (int c = 0; c < kRanks; ++c) {
      const int a = c, b = (c + 1) % kRanks;
      graph_.AddLink({kHostId0 + a, "p" + std::to_string(c) + "a", CableEnd(c, false), 10000},
                     {kHostId0 + b, "p" + std::to_string(c) + "b", CableEnd(c, true), 10000});
    }
    fabric::relay::GraphFn gf = [this] { return graph_; };
    for (int k = 0; k < kRanks; ++k) {
      Host& h = hosts_[size_t(k)];
      fabric::relay::ForwarderHostOptions fo;
      fo.port = port_;
      fo.relay.timeoutMs = kTimeoutMs;
      fo.tcp.timeoutMs = kTimeoutMs;
      fo.retryMs = 20;
      ASSERT_TRUE(fabric::relay::ForwarderHost::Start(gf, kHostId0 + k, [&h] { return h.relaySeat.load(); }, fo,
                                                      &h.relay)
                      .ok());
    }
    for (int k = 0; k < kRanks; ++k) {
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (!hosts_[size_t(k)].relay->Serving() && Clock::now() < deadline) std::this_thread::yield();
      ASSERT_TRUE(hosts_[size_t(k)].relay->Serving()) << hosts_[size_t(k)].relay->lastProblem();
    }
    for (int k = 0; k < kRanks; ++k) {
      Host& h = hosts_[size_t(k)];
      runtime::CableSetOptions o;
      o.self = kHostId0 + k;
      o.graph = gf;
      o.tcp.timeoutMs = kTimeoutMs;
      o.relay.timeoutMs = kTimeoutMs;
      o.forwarderPort = port_;
      o.multiRoute = true;  // as plugin/net.cc's fabric mode: the opposite host both ways round
      o.rails.push_back({"lo", CableEnd(k, false), 10000});                 // to h(k+1)
      o.rails.push_back({"lo", CableEnd((k + kRanks - 1) % kRanks, true), 10000});  // to h(k-1)
      ASSERT_TRUE(runtime::CableSetDomain::Create(o, &h.domain).ok());
      h.cache = std::make_unique<fabric::RegistrationCache>(*h.domain);
      ASSERT_TRUE(h.domain->CreateWorker(&h.worker).ok());
      ASSERT_TRUE(PackHandle(h.worker->Address(), h.handle).ok());
    }
    std::vector<const uint8_t*> hs;
    for (Host& h : hosts_) hs.push_back(h.handle);
    std::array<Status, kRanks> st;
    GinOptions opts;
    opts.timeoutMs = kTimeoutMs;
    OnEveryRank([&](int r) {
      Host& h = hosts_[size_t(r)];
      st[size_t(r)] = GinComm::Connect(opts, *h.cache, *h.worker, hs, r, &h.comm);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << "rank " << r << ": " << st[size_t(r)].message();
  }

  void TearDown() override {
    for (Host& h : hosts_) {
      h.comm.reset();
      h.worker.reset();
    }
    for (Host& h : hosts_) h.relay.reset();
    for (Host& h : hosts_) {
      h.cache.reset();
      h.domain.reset();
    }
  }

  /// Registers one window of `bytes` per rank (every rank's `mem` must hold them),
  /// collectively; the ids in `*ids`.
  void RegisterAll(std::array<std::vector<uint8_t>, kRanks>& mem, uint64_t flags, std::array<uint64_t, kRanks>* ids) {
    std::array<Status, kRanks> st;
    OnEveryRank([&](int r) {
      st[size_t(r)] = hosts_[size_t(r)].comm->RegisterWindow(mem[size_t(r)].data(), mem[size_t(r)].size(),
                                                             fabric::MemoryKind::kHost, flags, &(*ids)[size_t(r)]);
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].message();
  }

  /// Tests every request of `reqs` once (dropping the done ones) and progresses.
  static Status Poll(GinComm& c, std::vector<Request*>* reqs) {
    for (size_t i = 0; i < reqs->size();) {
      bool done = false;
      RY_RETURN_IF_ERROR(c.Test((*reqs)[i], &done));
      if (done) {
        (*reqs)[i] = reqs->back();
        reqs->pop_back();
      } else {
        ++i;
      }
    }
    return c.Progress();
  }

  /// Which peers reach rank `r` through a relay (no cable between them).
  static bool Opposite(int r, int q) { return (r + 2) % kRanks == q; }

  topology::ClusterGraph graph_;
  uint16_t port_ = 0;
  std::array<Host, kRanks> hosts_;
};

/// The byte rank `src` puts at position `i` of its chunk for rank `dst` in round `round`.
uint8_t PatternByte(int src, int dst, int round, size_t i) {
  return uint8_t((i * 131 + size_t(src) * 37 + size_t(dst) * 11 + size_t(round) * 7 + 1) & 0xff);
}

// Every rank iputSignals a chunk to every rank, itself included (a loop-back
// Endpoint), its two neighbours (straight over a cable) and the opposite host (relayed
// through h(r+1) or h(r-1)); the signal is ADD (src + 1) into the target's word for
// that source. A receiver that sees a signal checks that source's chunk at once, by
// content: the data is visible before its signal. Three rounds of different sizes
// (one of several relay slots), a fresh pattern each round, so a stale chunk from an
// earlier round fails the check; signal totals checked at the end, guard bytes after
// each chunk intact.
TEST_F(GinRelayRing, EveryRankPutSignalsEveryRankThroughRelaysDataBeforeSignal) {
  const std::array<size_t, 3> sizes = {64, 70000, 1300000};
  const size_t maxChunk = 1300000 + 64;  // a guard gap after every chunk
  std::array<std::vector<uint8_t>, kRanks> data, sig;
  for (int r = 0; r < kRanks; ++r) {
    data[size_t(r)].assign(2 * kRanks * maxChunk, 0);  // [0, 4 chunks): send; then 4 receive chunks
    sig[size_t(r)].assign(8 * kRanks, 0);
  }
  std::array<uint64_t, kRanks> dataId{}, sigId{};
  RegisterAll(data, 0, &dataId);
  RegisterAll(sig, kMrFlagForceSo, &sigId);
  std::array<std::string, kRanks> problem;
  for (int round = 0; round < int(sizes.size()); ++round) {
    const size_t bytes = sizes[size_t(round)];
    for (int r = 0; r < kRanks; ++r) {
      for (int q = 0; q < kRanks; ++q) {
        uint8_t* send = data[size_t(r)].data() + size_t(q) * maxChunk;
        for (size_t i = 0; i < bytes; ++i) send[i] = PatternByte(r, q, round, i);
      }
    }
    OnEveryRank([&](int r) {
      GinComm& c = *hosts_[size_t(r)].comm;
      std::vector<Request*> reqs;
      for (int k = 0; k < kRanks; ++k) {
        const int q = (r + k) % kRanks;  // staggered: itself first, the opposite host third
        Request* req = nullptr;
        Status s = c.PutSignal(uint64_t(q) * maxChunk, dataId[size_t(r)], bytes,
                               uint64_t(kRanks + r) * maxChunk, dataId[size_t(r)], uint32_t(q), 8 * uint64_t(r),
                               sigId[size_t(r)], uint64_t(r + 1), kSignalOpAdd, true, &req);
        if (!s.ok() || req == nullptr) {
          problem[size_t(r)] = "iputSignal to " + std::to_string(q) + ": " + s.message();
          return;
        }
        reqs.push_back(req);
      }
      std::array<bool, kRanks> seen{};
      int seenCount = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while ((seenCount < kRanks || !reqs.empty()) && Clock::now() < deadline) {
        if (Status s = Poll(c, &reqs); !s.ok()) {
          problem[size_t(r)] = s.message();
          return;
        }
        for (int q = 0; q < kRanks; ++q) {
          if (seen[size_t(q)]) continue;
          const uint64_t v = __atomic_load_n(reinterpret_cast<uint64_t*>(sig[size_t(r)].data()) + q, __ATOMIC_ACQUIRE);
          if (v < uint64_t(round + 1) * uint64_t(q + 1)) continue;
          seen[size_t(q)] = true;
          ++seenCount;
          const uint8_t* got = data[size_t(r)].data() + size_t(kRanks + q) * maxChunk;
          for (size_t i = 0; i < bytes; ++i) {
            if (got[i] != PatternByte(q, r, round, i)) {
              problem[size_t(r)] = "round " + std::to_string(round) + ": rank " + std::to_string(r) + " saw rank " +
                                   std::to_string(q) + "'s signal before byte " + std::to_string(i) + " of " +
                                   std::to_string(bytes) + " landed";
              return;
            }
          }
          for (size_t i = bytes; i < bytes + 64; ++i) {
            if (got[i] != 0) problem[size_t(r)] = "a byte past rank " + std::to_string(q) + "'s chunk was written";
          }
        }
      }
      if (seenCount < kRanks || !reqs.empty()) problem[size_t(r)] = "round " + std::to_string(round) + " not done in 30 s";
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(problem[size_t(r)].empty()) << "rank " << r << ": " << problem[size_t(r)];
  }
  for (int r = 0; r < kRanks; ++r) {
    for (int q = 0; q < kRanks; ++q) {
      uint64_t v = 0;
      std::memcpy(&v, sig[size_t(r)].data() + 8 * q, 8);
      EXPECT_EQ(v, uint64_t(sizes.size()) * uint64_t(q + 1)) << "rank " << r << "'s signal from rank " << q;
    }
  }
  // The opposite host's bytes went through the relays (both of them: multiRoute).
  uint64_t forwarded = 0;
  for (const Host& h : hosts_) forwarded += h.relay->stats().bytesForwarded;
  EXPECT_GE(forwarded, uint64_t(kRanks) * (64 + 70000 + 1300000)) << "the opposite host was not reached by relay";
}

// Signals alone (size 0) from every rank into ONE word of every rank: the target's
// word takes adds arriving straight over a cable, through a relay and from its own
// loop-back Endpoint; none is lost (the total is exact on every rank).
TEST_F(GinRelayRing, SignalsFromEveryRankIntoOneWordAddUp) {
  constexpr int kEach = 25;
  std::array<std::vector<uint8_t>, kRanks> sig;
  for (auto& v : sig) v.assign(64, 0);
  std::array<uint64_t, kRanks> id{};
  RegisterAll(sig, kMrFlagForceSo, &id);
  std::array<std::string, kRanks> problem;
  std::atomic<int> finished{0};
  OnEveryRank([&](int r) {
    GinComm& c = *hosts_[size_t(r)].comm;
    std::vector<Request*> reqs;
    for (int k = 0; k < kEach; ++k) {
      for (int q = 0; q < kRanks; ++q) {
        Request* req = nullptr;
        Status s = c.PutSignal(0, 0, 0, 0, 0, uint32_t(q), 8, id[size_t(r)], 0, kSignalOpInc, false, &req);
        if (!s.ok()) {
          problem[size_t(r)] = s.message();
          ++finished;
          return;
        }
        reqs.push_back(req);
      }
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!reqs.empty() && Clock::now() < deadline) {
      if (Status s = Poll(c, &reqs); !s.ok()) problem[size_t(r)] = s.message();
      if (!problem[size_t(r)].empty()) break;
    }
    if (!reqs.empty() && problem[size_t(r)].empty()) problem[size_t(r)] = "signals not done in 30 s";
    ++finished;
    // Keep serving the others' adds until every rank's are done.
    while (finished.load() < kRanks && Clock::now() < deadline) (void)c.Progress();
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(problem[size_t(r)].empty()) << "rank " << r << ": " << problem[size_t(r)];
    uint64_t v = 0;
    std::memcpy(&v, sig[size_t(r)].data() + 8, 8);
    EXPECT_EQ(v, uint64_t(kRanks * kEach)) << "rank " << r << "'s shared signal word";
    for (size_t i = 0; i < 64; ++i) {
      if (i < 8 || i >= 16) {
        EXPECT_EQ(sig[size_t(r)][i], 0) << "rank " << r << " byte " << i;
      }
    }
  }
}

// RMA iget of the opposite host's window (through a relay) lands that host's bytes;
// relayed puts followed by an iflush: when the flush is done, the bytes are at the
// target (read there directly, in this process).
TEST_F(GinRelayRing, IgetAndFlushThroughARelay) {
  const size_t bytes = 900000;  // two relay slots
  std::array<std::vector<uint8_t>, kRanks> data;
  for (int r = 0; r < kRanks; ++r) {
    data[size_t(r)].assign(4 * bytes, 0);
    for (size_t i = 0; i < bytes; ++i) data[size_t(r)][i] = uint8_t(i * 3 + size_t(r) * 50 + 1);
  }
  std::array<uint64_t, kRanks> id{};
  RegisterAll(data, 0, &id);
  // Rank 0 gets rank 2's first area into its own second area.
  GinComm& c0 = *hosts_[0].comm;
  Request* get = nullptr;
  ASSERT_TRUE(c0.Get(0, id[0], bytes, bytes, id[0], 2, &get).ok());
  // Rank 0 puts the first half of its first area into rank 2's third area, twice (two
  // ops, each half of it), then flushes.
  std::vector<Request*> reqs{get};
  for (int k = 0; k < 2; ++k) {
    Request* put = nullptr;
    ASSERT_TRUE(c0.Put(0, id[0], bytes / 2, 2 * bytes + uint64_t(k) * (bytes / 2), id[0], 2, &put).ok());
    reqs.push_back(put);
  }
  Request* flush = nullptr;
  ASSERT_TRUE(c0.Flush(2, &flush).ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> others;
  for (int r = 1; r < kRanks; ++r) {
    others.emplace_back([&, r] {
      while (!stop.load()) (void)hosts_[size_t(r)].comm->Progress();
    });
  }
  bool flushed = false;
  Status s;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!flushed && s.ok() && Clock::now() < deadline) s = c0.Test(flush, &flushed);
  std::vector<uint8_t> atTarget(data[2].begin() + long(2 * bytes), data[2].begin() + long(3 * bytes));
  while (!reqs.empty() && s.ok() && Clock::now() < deadline) s = Poll(c0, &reqs);
  stop = true;
  for (auto& t : others) t.join();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(flushed) << "iflush to rank 2 not done in 30 s";
  // Read at rank 2 when the flush completed: both puts' bytes were there.
  for (size_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(atTarget[i], data[0][i % (bytes / 2)]) << "byte " << i << " of the puts was not at rank 2 at flush";
  }
  for (size_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(data[0][bytes + i], data[2][i]) << "iget byte " << i << " is not rank 2's";
  }
  EXPECT_NE(data[0][bytes], data[0][0]);  // the two ranks' patterns differ: the get read rank 2's
}

// A relay gone mid-stream: ranks 0 and 2 (no cable) stream puts to each other through
// h1 and h3; h1's Forwarder is dropped (as when h1 dies: its relay seat goes, its
// routes' sockets close). Both ranks fail with an error naming their rank, the peer,
// the rail and a sequence, no later than a bound of a few timeouts (the wait is a hang
// guard, not a measurement); the comms stay poisoned (later calls fail too).
TEST_F(GinRelayRing, RelayDroppedMidStreamIsNamedNoHang) {
  const size_t bytes = 1 << 20;
  std::array<std::vector<uint8_t>, kRanks> data;
  for (int r = 0; r < kRanks; ++r) data[size_t(r)].assign(2 * bytes, uint8_t(r + 1));
  std::array<uint64_t, kRanks> id{};
  RegisterAll(data, 0, &id);
  std::atomic<uint64_t> landed{0};
  std::array<Status, kRanks> result;
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int r : {0, 2}) {
    ts.emplace_back([&, r] {
      GinComm& c = *hosts_[size_t(r)].comm;
      std::vector<Request*> reqs;
      const auto deadline = Clock::now() + std::chrono::milliseconds(20 * kTimeoutMs);
      while (Clock::now() < deadline) {
        while (reqs.size() < 4) {
          Request* req = nullptr;
          Status s = c.Put(0, id[size_t(r)], bytes, bytes, id[size_t(r)], uint32_t((r + 2) % kRanks), &req);
          if (!s.ok()) {
            result[size_t(r)] = s;
            return;
          }
          reqs.push_back(req);
        }
        const size_t before = reqs.size();
        Status s = Poll(c, &reqs);
        if (!s.ok()) {
          result[size_t(r)] = s;
          return;
        }
        landed += (before - reqs.size()) * bytes;
      }
      result[size_t(r)] = SystemError("no error within " + std::to_string(20 * kTimeoutMs) + " ms (hang)");
    });
  }
  for (int r : {1, 3}) {
    ts.emplace_back([&, r] {
      while (!stop.load()) (void)hosts_[size_t(r)].comm->Progress();
    });
  }
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (landed.load() < 16 * bytes && Clock::now() < until) std::this_thread::yield();
  const bool streamed = landed.load() >= 16 * bytes;
  hosts_[1].relaySeat = false;  // h1's relay goes
  ts[0].join();
  ts[1].join();
  stop = true;
  ts[2].join();
  ts[3].join();
  ASSERT_TRUE(streamed) << "the stream never moved 16 MiB before the fault";
  for (int r : {0, 2}) {
    const Status& s = result[size_t(r)];
    const int peer = (r + 2) % kRanks;
    ASSERT_FALSE(s.ok()) << "rank " << r;
    EXPECT_NE(s.message().find("GIN rank " + std::to_string(r) + " to peer rank " + std::to_string(peer)),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("seq "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rail"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("no error within"), std::string::npos) << s.message();
    EXPECT_FALSE(hosts_[size_t(r)].comm->status().ok()) << "rank " << r << " is not poisoned";
    Request* req = nullptr;
    EXPECT_FALSE(hosts_[size_t(r)].comm->Put(0, id[size_t(r)], 8, 0, id[size_t(r)], uint32_t(peer), &req).ok());
  }
}

}  // namespace
}  // namespace railyard::gin
