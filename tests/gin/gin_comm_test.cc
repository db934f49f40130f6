// GinComm on the fabric, in one process: N ranks, each a Worker of its own Domain
// (the fake transport and TCP on loopback), each rank's blocking calls on its own
// thread. Every landed byte, every signal value and the guard bytes around every
// window are checked; bad input is refused with nothing written; version and
// timeout errors are named.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/gin/gin_comm.h"

namespace railyard::gin {
namespace {

using Clock = std::chrono::steady_clock;

struct Transport {
  const char* name;
  std::function<Status(std::unique_ptr<fabric::Domain>*)> make;
};

void PrintTo(const Transport& t, std::ostream* os) { *os << t.name; }

std::vector<Transport> Transports() {
  return {
      {"fake", [](std::unique_ptr<fabric::Domain>* d) { return fabric::fake::CreateFakeDomain({}, d); }},
      {"tcp",
       [](std::unique_ptr<fabric::Domain>* d) {
         fabric::tcp::TcpOptions o;
         o.rails = {fabric::RailInfo{"lo", "127.0.0.1", 10000}};
         o.timeoutMs = 5000;
         return fabric::tcp::CreateTcpDomain(o, d);
       }},
  };
}

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;

/// A window of `n` usable bytes with guard bytes on each side.
struct Guarded {
  explicit Guarded(size_t n) : mem(n + 2 * kGuard, kGuardByte), size(n) { std::memset(data(), 0, n); }
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

struct RankState {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<GinComm> comm;
  uint8_t handle[kHandleBytes];
};

/// Makes `n` ranks' Domains and Workers and their handles.
void MakeRanks(const Transport& t, int n, std::vector<RankState>* ranks) {
  ranks->resize(size_t(n));
  for (auto& r : *ranks) {
    ASSERT_TRUE(t.make(&r.domain).ok());
    r.cache = std::make_unique<fabric::RegistrationCache>(*r.domain);
    ASSERT_TRUE(r.domain->CreateWorker(&r.worker).ok());
    ASSERT_TRUE(PackHandle(r.worker->Address(), r.handle).ok());
  }
}

/// Runs body(rank) on one thread per rank and joins them.
void OnEveryRank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(body, r);
  for (auto& t : ts) t.join();
}

void ConnectAll(std::vector<RankState>& ranks, GinOptions opts = {}) {
  const int n = int(ranks.size());
  std::vector<const uint8_t*> hs;
  for (auto& r : ranks) hs.push_back(r.handle);
  std::vector<Status> st(static_cast<size_t>(n));
  OnEveryRank(n, [&](int r) {
    st[size_t(r)] = GinComm::Connect(opts, *ranks[size_t(r)].cache, *ranks[size_t(r)].worker, hs, r,
                                     &ranks[size_t(r)].comm);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << "rank " << r << ": " << st[size_t(r)].message();
}

/// Registers one window per rank, collectively.
void RegisterAll(std::vector<RankState>& ranks, std::vector<Guarded>& bufs, uint64_t flags,
                 std::vector<uint64_t>* ids) {
  const int n = int(ranks.size());
  ids->assign(size_t(n), 0);
  std::vector<Status> st(static_cast<size_t>(n));
  OnEveryRank(n, [&](int r) {
    st[size_t(r)] = ranks[size_t(r)].comm->RegisterWindow(bufs[size_t(r)].data(), bufs[size_t(r)].size,
                                                          fabric::MemoryKind::kHost, flags, &(*ids)[size_t(r)]);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].message();
}

/// Tests `req` until done (bounded), progressing every rank meanwhile (the TCP
/// transport moves bytes only in Progress, on each side).
Status WaitAll(std::vector<RankState>& ranks, int r, Request* req) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (int(i) != r) (void)ranks[i].comm->Progress();
    }
    bool done = false;
    Status s = ranks[size_t(r)].comm->Test(req, &done);
    if (!s.ok() || done) return s;
  }
  return SystemError("test: not done in 20 s");
}

class GinCommTest : public ::testing::TestWithParam<Transport> {};

// 3 ranks: every rank puts a pattern into every rank's window (itself included) at
// offset 64*src, then signals the peer with ADD (src+1). Every byte and every
// signal checked; guards intact.
TEST_P(GinCommTest, PutAndSignalEveryPairIncludingSelf) {
  const int n = 3;
  std::vector<RankState> ranks;
  MakeRanks(GetParam(), n, &ranks);
  ConnectAll(ranks);
  std::vector<Guarded> data, sig;
  for (int r = 0; r < n; ++r) {
    data.emplace_back(4096);
    sig.emplace_back(8 * n);
  }
  std::vector<uint64_t> dataId, sigId;
  RegisterAll(ranks, data, 0, &dataId);
  RegisterAll(ranks, sig, kMrFlagForceSo, &sigId);
  // Source bytes live in the first 1 KiB of each rank's own window.
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 64; ++i) data[size_t(r)].data()[i] = uint8_t(r * 64 + i + 1);
  }
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      Request* req = nullptr;
      ASSERT_TRUE(ranks[size_t(src)].comm->PutSignal(0, dataId[size_t(src)], 64, 1024 + 64 * uint64_t(src),
                                                     dataId[size_t(src)], uint32_t(dst), 8 * uint64_t(src),
                                                     sigId[size_t(src)], uint64_t(src + 1), kSignalOpAdd, true, &req)
                      .ok());
      ASSERT_NE(req, nullptr);
      Status s = WaitAll(ranks, src, req);
      ASSERT_TRUE(s.ok()) << s.message();
    }
  }
  for (int dst = 0; dst < n; ++dst) {
    for (int src = 0; src < n; ++src) {
      for (int i = 0; i < 64; ++i) {
        ASSERT_EQ(data[size_t(dst)].data()[1024 + 64 * src + i], uint8_t(src * 64 + i + 1))
            << "dst " << dst << " src " << src << " byte " << i;
      }
      uint64_t v;
      std::memcpy(&v, sig[size_t(dst)].data() + 8 * src, 8);
      EXPECT_EQ(v, uint64_t(src + 1)) << "signal of src " << src << " at dst " << dst;
    }
    EXPECT_TRUE(data[size_t(dst)].GuardsIntact());
    EXPECT_TRUE(sig[size_t(dst)].GuardsIntact());
  }
}

// A signal alone (size 0, unusable data handles) with INC; then a Get reads the peer's
// bytes back; Flush completes after them.
TEST_P(GinCommTest, SignalAloneGetAndFlush) {
  std::vector<RankState> ranks;
  MakeRanks(GetParam(), 2, &ranks);
  ConnectAll(ranks);
  std::vector<Guarded> data;
  data.emplace_back(1000);
  data.emplace_back(1000);
  std::vector<uint64_t> id;
  RegisterAll(ranks, data, 0, &id);
  for (int i = 0; i < 900; ++i) data[1].data()[i] = uint8_t(i * 7);  // the signal word at 992 stays 0
  Request* req = nullptr;
  for (int k = 0; k < 3; ++k) {
    ASSERT_TRUE(ranks[0].comm->PutSignal(0, 999999, 0, 0, 999999, 1, 992, id[0], 12345, kSignalOpInc, false, &req).ok());
    ASSERT_TRUE(WaitAll(ranks, 0, req).ok());
  }
  uint64_t v;
  std::memcpy(&v, data[1].data() + 992, 8);
  EXPECT_EQ(v, 3u);  // INC adds 1, not the value
  ASSERT_TRUE(ranks[0].comm->Get(100, id[0], 500, 200, id[0], 1, &req).ok());
  Request* flush = nullptr;
  ASSERT_TRUE(ranks[0].comm->Flush(0, &flush).ok());
  ASSERT_TRUE(WaitAll(ranks, 0, flush).ok());
  for (int i = 0; i < 500; ++i) ASSERT_EQ(data[0].data()[200 + i], uint8_t((100 + i) * 7)) << i;
  ASSERT_TRUE(WaitAll(ranks, 0, req).ok());
  EXPECT_TRUE(data[0].GuardsIntact());
}

// Device memory on a transport that cannot read it (fake and TCP have no
// kCapDeviceMemory): regMrSym and regMrSymDmaBuf of a CUDA buffer are InvalidUsage
// naming the transport and the capability, before anything is registered or sent;
// a DMA-BUF of host memory is refused naming DMA-BUF where the Domain has no DMA-BUF
// registration; fd < 0 is InvalidArgument. The comm stays usable: a host window
// registers collectively afterwards.
TEST_P(GinCommTest, DeviceMemoryAndDmaBufRefusedNamingTransport) {
  std::vector<RankState> ranks;
  MakeRanks(GetParam(), 2, &ranks);
  ConnectAll(ranks);
  std::vector<Guarded> data;
  data.emplace_back(4096);
  data.emplace_back(4096);
  const std::string transport = ranks[0].domain->TransportName();
  for (int r = 0; r < 2; ++r) {
    GinComm& c = *ranks[size_t(r)].comm;
    uint64_t id = 77;
    Status s = c.RegisterWindow(data[size_t(r)].data(), 4096, fabric::MemoryKind::kDevice, 0, &id);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("the " + transport + " fabric transport"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("kCapDeviceMemory"), std::string::npos) << s.message();
    s = c.RegisterWindowDmaBuf(data[size_t(r)].data(), 4096, 0, 0, fabric::MemoryKind::kDevice, 0, &id);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("kCapDeviceMemory"), std::string::npos) << s.message();
    s = c.RegisterWindowDmaBuf(data[size_t(r)].data(), 4096, 0, 0, fabric::MemoryKind::kHost, 0, &id);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("cannot register DMA-BUF fd 0"), std::string::npos) << s.message();
    s = c.RegisterWindowDmaBuf(data[size_t(r)].data(), 4096, -1, 0, fabric::MemoryKind::kHost, 0, &id);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
    EXPECT_EQ(id, 77u) << "a refused registration wrote the handle";
    EXPECT_EQ(ranks[size_t(r)].cache->stats().registrations, 0u) << "something was registered";
    EXPECT_TRUE(c.status().ok()) << c.status().message();
  }
  std::vector<uint64_t> id;
  RegisterAll(ranks, data, 0, &id);  // still collective and usable
  EXPECT_NE(id[0], 0u);
  EXPECT_TRUE(data[0].GuardsIntact() && data[1].GuardsIntact());
}

// The DMA-BUF path end to end through GinOptions::acquireDmaBuf (here standing in for
// the Domain's DMA-BUF registration with a host registration of the same range):
// the window it makes is exchanged like any other, a put into it lands, and its
// region goes back to the cache at deregistration.
TEST_P(GinCommTest, DmaBufWindowThroughTheDomainHook) {
  std::vector<RankState> ranks;
  MakeRanks(GetParam(), 2, &ranks);
  std::vector<int> seenFd(2, -1);
  std::vector<uint64_t> seenOffset(2, 0);
  const int n = 2;
  std::vector<const uint8_t*> hs;
  for (auto& r : ranks) hs.push_back(r.handle);
  std::vector<Status> st(2);
  OnEveryRank(n, [&](int r) {
    GinOptions o;
    RankState& rs = ranks[size_t(r)];
    o.acquireDmaBuf = [&rs, &seenFd, &seenOffset, r](void* d, uint64_t b, int fd, uint64_t off,
                                                      fabric::MemoryKind k, const fabric::Region** out) {
      seenFd[size_t(r)] = fd;
      seenOffset[size_t(r)] = off;
      return rs.cache->Acquire(d, b, fabric::kAccessAll, k, out);
    };
    st[size_t(r)] = GinComm::Connect(o, *rs.cache, *rs.worker, hs, r, &rs.comm);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].message();
  std::vector<Guarded> data;
  data.emplace_back(4096);
  data.emplace_back(4096);
  std::vector<uint64_t> id(2, 0);
  OnEveryRank(n, [&](int r) {
    st[size_t(r)] = ranks[size_t(r)].comm->RegisterWindowDmaBuf(data[size_t(r)].data(), 4096, 40 + r, 8192,
                                                                fabric::MemoryKind::kHost, 0, &id[size_t(r)]);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].message();
  EXPECT_EQ(seenFd[0], 40);
  EXPECT_EQ(seenFd[1], 41);
  EXPECT_EQ(seenOffset[1], 8192u);
  for (int i = 0; i < 512; ++i) data[0].data()[i] = uint8_t(i * 3 + 1);
  Request* req = nullptr;
  ASSERT_TRUE(ranks[0].comm->Put(0, id[0], 512, 1024, id[0], 1, &req).ok());
  ASSERT_TRUE(WaitAll(ranks, 0, req).ok());
  for (int i = 0; i < 512; ++i) ASSERT_EQ(data[1].data()[1024 + i], uint8_t(i * 3 + 1)) << i;
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(ranks[size_t(r)].comm->DeregisterWindow(id[size_t(r)]).ok());
    EXPECT_EQ(ranks[size_t(r)].cache->stats().live, 0u) << "the DMA-BUF region was not released";
  }
  EXPECT_TRUE(data[1].GuardsIntact());
}

// Offsets or sizes outside the window, unknown handles, peers out of range, a
// misaligned signal: InvalidArgument, no request, nothing written anywhere.
TEST_P(GinCommTest, BadInputIsRefusedAndWritesNothing) {
  std::vector<RankState> ranks;
  MakeRanks(GetParam(), 2, &ranks);
  ConnectAll(ranks);
  std::vector<Guarded> data;
  data.emplace_back(256);
  data.emplace_back(256);
  std::vector<uint64_t> id;
  RegisterAll(ranks, data, 0, &id);
  std::memset(data[0].data(), 0x11, 256);
  GinComm& c = *ranks[0].comm;
  Request* req = reinterpret_cast<Request*>(1);
  struct Case { const char* what; Status s; };
  std::vector<Case> cases = {
      {"dst past end", c.Put(0, id[0], 16, 250, id[0], 1, &req)},
      {"src past end", c.Put(250, id[0], 16, 0, id[0], 1, &req)},
      {"offset overflow", c.Put(0, id[0], 16, ~uint64_t{0} - 4, id[0], 1, &req)},
      {"unknown dst handle", c.Put(0, id[0], 16, 0, 77, 1, &req)},
      {"unknown src handle", c.Put(0, 0, 16, 0, id[0], 1, &req)},
      {"peer out of range", c.Put(0, id[0], 16, 0, id[0], 2, &req)},
      {"signal misaligned", c.PutSignal(0, id[0], 16, 0, id[0], 1, 3, id[0], 1, kSignalOpInc, true, &req)},
      {"signal past end", c.PutSignal(0, id[0], 16, 0, id[0], 1, 256, id[0], 1, kSignalOpInc, true, &req)},
      {"signal op unknown", c.PutSignal(0, id[0], 16, 0, id[0], 1, 0, id[0], 1, 9, true, &req)},
      {"get past end", c.Get(200, id[0], 100, 0, id[0], 1, &req)},
  };
  for (auto& k : cases) {
    EXPECT_EQ(k.s.code(), Code::kInvalidArgument) << k.what << ": " << k.s.message();
    EXPECT_EQ(req, nullptr) << k.what;
  }
  for (int i = 0; i < 100; ++i) (void)ranks[1].comm->Progress(), (void)c.Progress();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(data[1].data()[i], 0) << "peer byte " << i << " written";
  EXPECT_TRUE(data[1].GuardsIntact());
  EXPECT_TRUE(c.status().ok()) << "bad input must not poison the comm";
  EXPECT_EQ(c.DeregisterWindow(12345).code(), Code::kInvalidArgument);
  bool done = false;
  EXPECT_EQ(c.Test(reinterpret_cast<Request*>(&done), &done).code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Transports, GinCommTest, ::testing::ValuesIn(Transports()),
                         [](const auto& p) { return std::string(p.param.name); });

// A handle of another wire version fails before anything is connected, naming both.
TEST(GinWire, OtherVersionHandleNamesBoth) {
  std::vector<uint8_t> addr(40, 7);
  uint8_t h[kHandleBytes];
  ASSERT_TRUE(PackHandle(addr, h).ok());
  h[4] = 9;  // version u16 at byte 4
  std::vector<uint8_t> out;
  Status s = UnpackHandle(h, 3, &out);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("rank 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("version 9"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("this rank 1"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

TEST(GinWire, RecordRoundTripAndVersion) {
  Record r;
  r.kind = RecordKind::kWindow;
  r.rank = 2;
  r.nranks = 4;
  r.meshId = 99;
  r.seq = 5;
  r.bytes = 4096;
  r.key = fabric::RemoteKey{0x1000, 4096, 0xabc, fabric::kAccessAll, {}};
  std::vector<uint8_t> b = r.Pack();
  Record back;
  ASSERT_TRUE(Record::Unpack(b, &back).ok());
  EXPECT_EQ(back.key, r.key);
  EXPECT_EQ(back.seq, 5u);
  b[4] = 2;
  Status s = Record::Unpack(b, &back);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("rank 2 speaks GIN wire version 2, this rank 1"), std::string::npos) << s.message();
  b[4] = 1;
  b.pop_back();
  EXPECT_EQ(Record::Unpack(b, &back).code(), Code::kInvalidArgument);
}

// Handles out of rank order or a rank out of range: refused before any Endpoint.
TEST(GinConnect, BadRankOrHandlesRefused) {
  std::vector<RankState> ranks;
  MakeRanks(Transports()[0], 2, &ranks);
  std::vector<const uint8_t*> hs = {ranks[1].handle, ranks[0].handle};
  std::unique_ptr<GinComm> c;
  EXPECT_EQ(GinComm::Connect({}, *ranks[0].cache, *ranks[0].worker, hs, 0, &c).code(), Code::kInvalidArgument);
  EXPECT_EQ(GinComm::Connect({}, *ranks[0].cache, *ranks[0].worker, hs, 2, &c).code(), Code::kInvalidArgument);
  EXPECT_EQ(c, nullptr);
}

// A rank that never calls connect: the others' connect times out naming rank, the
// missing peer and the rails; the comm is not returned.
TEST(GinConnect, AbsentPeerTimesOutNamed) {
  std::vector<RankState> ranks;
  MakeRanks(Transports()[0], 3, &ranks);
  std::vector<const uint8_t*> hs = {ranks[0].handle, ranks[1].handle, ranks[2].handle};
  GinOptions opts;
  opts.timeoutMs = 300;
  std::vector<Status> st(2);
  OnEveryRank(2, [&](int r) {
    st[size_t(r)] = GinComm::Connect(opts, *ranks[size_t(r)].cache, *ranks[size_t(r)].worker, hs, r,
                                     &ranks[size_t(r)].comm);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[size_t(r)].code(), Code::kSystemError);
    EXPECT_NE(st[size_t(r)].message().find("rank " + std::to_string(r)), std::string::npos);
    EXPECT_NE(st[size_t(r)].message().find("peer rank(s) 2"), std::string::npos) << st[size_t(r)].message();
    EXPECT_NE(st[size_t(r)].message().find("rails 0("), std::string::npos) << st[size_t(r)].message();
    EXPECT_EQ(ranks[size_t(r)].comm, nullptr);
  }
}

// A Worker whose Connect refuses one peer's address as fabric mode's Domain does
// before its cabling graph knows a route ("no route from ..."), `refusals` times,
// then connects; everything else is the wrapped Worker's.
class UnroutedWorker : public fabric::Worker {
 public:
  UnroutedWorker(fabric::Worker& inner, std::vector<uint8_t> unrouted, int refusals)
      : inner_(inner), unrouted_(std::move(unrouted)), refusals_(refusals) {}
  std::vector<uint8_t> Address() const override { return inner_.Address(); }
  Status Connect(std::span<const uint8_t> peer, std::unique_ptr<fabric::Endpoint>* out) override {
    if (std::vector<uint8_t>(peer.begin(), peer.end()) == unrouted_ && refusals_ != 0) {
      if (refusals_ > 0) --refusals_;
      ++refused_;
      return InvalidUsage("no route from h0 to h2 in the cabling graph");
    }
    return inner_.Connect(peer, out);
  }
  size_t Progress(std::vector<fabric::Event>* events) override { return inner_.Progress(events); }
  fabric::WorkerStats stats() const override { return inner_.stats(); }
  int refused() const { return refused_; }

 private:
  fabric::Worker& inner_;
  std::vector<uint8_t> unrouted_;
  int refusals_;  ///< < 0: for ever
  int refused_ = 0;
};

bool NoRouteYet(const Status& s) { return s.message().find("no route from") != std::string::npos; }

// Connect tries a peer the Worker cannot route to yet again (GinOptions::routeMayCome)
// until it can: the comm connects and a put to that peer lands. Without the option the
// first refusal is final, naming the rank, the peer and the Worker's reason; with it and
// a route that never comes, the error says how long it waited.
TEST(GinConnect, UnroutedPeerIsRetriedUntilItsRouteComes) {
  for (const int refusals : {3, -1, 1}) {
    const bool retry = refusals != 1;  // the last round: no routeMayCome
    std::vector<RankState> ranks;
    MakeRanks(Transports()[0], 2, &ranks);
    UnroutedWorker w0(*ranks[0].worker, ranks[1].worker->Address(), refusals);
    std::vector<const uint8_t*> hs = {ranks[0].handle, ranks[1].handle};
    GinOptions opts;
    opts.timeoutMs = 500;
    if (retry) opts.routeMayCome = &NoRouteYet;
    std::vector<Status> st(2);
    OnEveryRank(2, [&](int r) {
      fabric::Worker& w = r == 0 ? static_cast<fabric::Worker&>(w0) : *ranks[1].worker;
      st[size_t(r)] = GinComm::Connect(opts, *ranks[size_t(r)].cache, w, hs, r, &ranks[size_t(r)].comm);
    });
    if (refusals == 3) {
      ASSERT_TRUE(st[0].ok()) << st[0].message();
      ASSERT_TRUE(st[1].ok()) << st[1].message();
      EXPECT_EQ(w0.refused(), 3);
      std::vector<Guarded> data;
      data.emplace_back(256);
      data.emplace_back(256);
      std::vector<uint64_t> id;
      RegisterAll(ranks, data, 0, &id);
      for (int i = 0; i < 64; ++i) data[0].data()[i] = uint8_t(i + 9);
      Request* req = nullptr;
      ASSERT_TRUE(ranks[0].comm->Put(0, id[0], 64, 128, id[0], 1, &req).ok());
      ASSERT_TRUE(WaitAll(ranks, 0, req).ok());
      for (int i = 0; i < 64; ++i) ASSERT_EQ(data[1].data()[128 + i], uint8_t(i + 9)) << i;
      continue;
    }
    EXPECT_EQ(st[0].code(), Code::kInvalidUsage) << st[0].message();
    EXPECT_NE(st[0].message().find("rank 0 to peer rank 1: no route from h0 to h2"), std::string::npos)
        << st[0].message();
    EXPECT_EQ(st[0].message().find("no route after") != std::string::npos, retry) << st[0].message();
    EXPECT_EQ(w0.refused() > 1, retry) << w0.refused();
    EXPECT_EQ(ranks[0].comm, nullptr);
    EXPECT_FALSE(st[1].ok()) << "rank 1 connected to a rank that never connected";
  }
}

}  // namespace
}  // namespace railyard::gin
