// The fabric-mode Domain (proxy/runtime/cable_set_domain.h) in one process on
// loopback addresses: hosts A - R - B (graph by hand), R running the fabric relay
// (ForwarderHost at a fixed port). An Endpoint from A's Worker reaches R straight
// and B through R, and B reaches A back through R; Writes with immediates checked
// by content; one registration serves every cable; host addresses are validated;
// the NCCL comms (proxy/nccl/) over it, A to B through R, message contents checked.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <tuple>
#include <thread>

#include "proxy/fabric/relay/forwarder_host.h"
#include "proxy/mr_cache.h"
#include "proxy/nccl/comm_worker.h"
#include "proxy/nccl/fabric_listen_comm.h"
#include "proxy/nccl/fabric_recv_comm.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/nccl/nccl_records.h"
#include "proxy/fabric/relay/multi_route_endpoint.h"
#include "proxy/runtime/cable_endpoint.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "tests/common/free_port.h"

namespace railyard::runtime {
namespace {

constexpr uint64_t kA = 1, kR = 2, kB = 3;

/// A TCP port free on every address of `ips` (0 if none was found); by default R's two.
uint16_t FreePort(std::vector<const char*> ips = {"127.0.1.2", "127.0.2.2"}) { return test_support::FreePort(ips); }

topology::ClusterGraph Graph() {
  topology::ClusterGraph g;
  g.AddHost(kA, "hA");
  g.AddHost(kR, "hR");
  g.AddHost(kB, "hB");
  g.AddLink({kA, "a0", "127.0.1.1", 10000}, {kR, "r0", "127.0.1.2", 10000});
  g.AddLink({kR, "r1", "127.0.2.2", 10000}, {kB, "b0", "127.0.2.3", 10000});
  return g;
}

template <class F>
bool Within(int ms, F cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return cond();
}

/// The options of the tests' relays: the fixed `port`, 3 s timeouts (relay legs and
/// TCP), `idleMs` before a socket's first record, a retry every 20 ms.
fabric::relay::ForwarderHostOptions RelayOptions(uint16_t port, int idleMs) {
  fabric::relay::ForwarderHostOptions fo;
  fo.port = port;
  fo.relay.timeoutMs = 3000;
  fo.relay.idleMs = idleMs;
  fo.tcp.timeoutMs = 3000;
  fo.retryMs = 20;
  return fo;
}

/// Starts a ForwarderHost (options `fo`, graph `gf`) as host r1Id into `*r1` and
/// another as r2Id into `*r2`; fails the test unless both serve within 5 s.
void StartTwoRelays(const fabric::relay::GraphFn& gf, const fabric::relay::ForwarderHostOptions& fo,
                    uint64_t r1Id, std::unique_ptr<fabric::relay::ForwarderHost>* r1, uint64_t r2Id,
                    std::unique_ptr<fabric::relay::ForwarderHost>* r2) {
  ASSERT_TRUE(fabric::relay::ForwarderHost::Start(gf, r1Id, [] { return true; }, fo, r1).ok());
  ASSERT_TRUE(fabric::relay::ForwarderHost::Start(gf, r2Id, [] { return true; }, fo, r2).ok());
  ASSERT_TRUE(Within(5000, [&] { return (*r1)->Serving() && (*r2)->Serving(); }))
      << (*r1)->lastProblem() << " / " << (*r2)->lastProblem();
}

/// A cable-set Domain for host `self` (graph `gf`, relays at `port`), one rail on
/// interface lo at each address of `ips`, 3 s timeouts, `idleMs` as the sources'
/// relay idle limit; `multiRoute` as CableSetOptions'. Null (test failed) if refused.
std::unique_ptr<CableSetDomain> MakeDomain(uint64_t self, const fabric::relay::GraphFn& gf, uint16_t port,
                                           const std::vector<std::string>& ips, bool multiRoute = false,
                                           int idleMs = 10000) {
  CableSetOptions o;
  o.self = self;
  o.graph = gf;
  o.tcp.timeoutMs = 3000;
  o.relay.timeoutMs = 3000;
  o.relay.idleMs = idleMs;
  o.forwarderPort = port;
  o.multiRoute = multiRoute;
  for (const auto& ip : ips) o.rails.push_back({"lo", ip, 10000});
  std::unique_ptr<CableSetDomain> d;
  EXPECT_TRUE(CableSetDomain::Create(o, &d).ok());
  return d;
}

/// Progresses `workers` (at most 10 s) until the Write posted with `cookie` is done
/// and the immediate `imm` it carried arrived, or an error event came. Returns that
/// error's text ("" when both came; "neither done nor failed within 10 s" else);
/// `*landed` gets the byte count the immediate reported.
std::string AwaitWrite(const std::vector<fabric::Worker*>& workers, uint64_t cookie, uint64_t imm, uint64_t* landed) {
  bool done = false, arrived = false;
  std::string err;
  std::vector<fabric::Event> ev;
  const bool ended = Within(10000, [&] {
    ev.clear();
    for (fabric::Worker* w : workers) w->Progress(&ev);
    for (const auto& e : ev) {
      if (e.kind == fabric::EventKind::kDone && e.cookie == cookie) done = true;
      if (e.kind == fabric::EventKind::kImmediate && e.value == imm) {
        arrived = true;
        *landed = e.bytes;
      }
      if (e.kind == fabric::EventKind::kError) err = e.error.ToString();
    }
    return (done && arrived) || !err.empty();
  });
  if (!ended) return "neither done nor failed within 10 s";
  return err;
}

/// Checks that `dst` holds `src` at offset 8 with 8 zero guard bytes either side.
void ExpectLandedWithGuards(const std::vector<char>& dst, const std::vector<char>& src) {
  const size_t bytes = src.size();
  ASSERT_EQ(dst.size(), bytes + 16);
  EXPECT_EQ(std::memcmp(dst.data() + 8, src.data(), bytes), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[i], 0) << "guard byte " << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[bytes + 8 + i], 0) << "guard byte after " << i;
}

/// Writes `bytes` (a pattern of `imm`) from `from` (Domain `fromD`) into a region of
/// `to`'s Domain `toD` at offset 8 with the immediate `imm`, progressing `workers`;
/// checks the Write's bytes, the immediate's count and the guards around them.
/// `problem` adds context to a failure (a relay's last problem, say).
void WriteAndCheckWith(const std::vector<fabric::Worker*>& workers, fabric::Worker& from, fabric::Domain& fromD,
                       fabric::Worker& to, fabric::Domain& toD, size_t bytes, uint32_t imm,
                       const std::function<std::string()>& problem = [] { return std::string(); }) {
  std::vector<char> src(bytes), dst(bytes + 16, 0);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 13 + imm);
  const fabric::Region* s = nullptr;
  const fabric::Region* d = nullptr;
  ASSERT_TRUE(fromD.Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &s).ok());
  ASSERT_TRUE(toD.Register(dst.data(), dst.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &d).ok());
  std::unique_ptr<fabric::Endpoint> ep;
  ASSERT_TRUE(from.Connect(to.Address(), &ep).ok());
  ASSERT_TRUE(ep->Write(fabric::LocalSlice{s, 0, bytes}, d->Key(), d->base + 8, 5, imm).ok());
  uint64_t landed = 0;
  const std::string err = AwaitWrite(workers, 5, imm, &landed);
  ASSERT_TRUE(err.empty()) << err << " (" << problem() << ")";
  EXPECT_EQ(landed, bytes);
  ExpectLandedWithGuards(dst, src);
  ep.reset();
  EXPECT_TRUE(fromD.Deregister(s).ok());
  EXPECT_TRUE(toD.Deregister(d).ok());
}

class CableSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    ASSERT_NE(port_, 0);
    graph_ = Graph();
    ASSERT_TRUE(
        fabric::relay::ForwarderHost::Start(GraphFn(), kR, [] { return true; }, RelayOptions(port_, idleMs_), &relay_)
            .ok());
    ASSERT_TRUE(Within(5000, [&] { return relay_->Serving(); })) << relay_->lastProblem();
    a_ = Make(kA, {"127.0.1.1"});
    r_ = Make(kR, {"127.0.1.2", "127.0.2.2"});
    b_ = Make(kB, {"127.0.2.3"});
    ASSERT_TRUE(a_->CreateWorker(&aw_).ok());
    ASSERT_TRUE(r_->CreateWorker(&rw_).ok());
    ASSERT_TRUE(b_->CreateWorker(&bw_).ok());
  }
  void TearDown() override {
    aw_.reset();
    rw_.reset();
    bw_.reset();
    relay_.reset();
  }
  fabric::relay::GraphFn GraphFn() {
    return [this] { return graph_; };
  }
  std::unique_ptr<CableSetDomain> Make(uint64_t self, std::vector<std::string> ips) {
    return MakeDomain(self, GraphFn(), port_, ips, false, idleMs_);
  }
  /// Writes `bytes` from `from` into `to`'s region with an immediate; checks content.
  void WriteAndCheck(fabric::Worker& from, fabric::Domain& fromD, fabric::Worker& to, fabric::Domain& toD,
                     size_t bytes, uint32_t imm) {
    WriteAndCheckWith({aw_.get(), rw_.get(), bw_.get()}, from, fromD, to, toD, bytes, imm,
                      [this] { return relay_->lastProblem(); });
  }

  /// The NCCL comms over A's and B's Domains, one message of each size A -> B, the
  /// comms left idle for `pauseMs` after each message.
  void RunNccl(const std::vector<size_t>& sizes, int pauseMs = 0);

  int idleMs_ = 10000;  ///< RAILYARD_RELAY_IDLE_MS of the relay and the sources
  uint16_t port_ = 0;
  topology::ClusterGraph graph_;
  std::unique_ptr<fabric::relay::ForwarderHost> relay_;
  std::unique_ptr<CableSetDomain> a_, r_, b_;
  std::unique_ptr<fabric::Worker> aw_, rw_, bw_;
};

TEST_F(CableSetTest, StraightToANeighbour) {
  WriteAndCheck(*aw_, *a_, *rw_, *r_, 300000, 11);
  EXPECT_EQ(relay_->stats().routesOpened, 0u);  // a neighbour: no relay
}

TEST_F(CableSetTest, RelayedBothWays) {
  WriteAndCheck(*aw_, *a_, *bw_, *b_, 1 << 20, 21);
  EXPECT_EQ(relay_->stats().routesOpened, 1u);
  WriteAndCheck(*bw_, *b_, *aw_, *a_, 4097, 22);
  EXPECT_EQ(relay_->stats().routesOpened, 2u);
  EXPECT_GE(relay_->stats().bytesForwarded, (1u << 20) + 4097u);
}

TEST_F(CableSetTest, TheRelayHostsOwnWorkerHasTwoCables) {
  HostAddress r;
  ASSERT_TRUE(HostAddress::Unpack(rw_->Address(), &r).ok());
  ASSERT_EQ(r.rails.size(), 2u);
  in_addr x{};
  inet_pton(AF_INET, "127.0.1.2", &x);
  EXPECT_EQ(r.rails[0].ipv4, x.s_addr);
  WriteAndCheck(*bw_, *b_, *rw_, *r_, 1000, 31);  // B reaches R on R's other cable
}

/// Progresses `w` until it says Quiet() (a call may arm and need one more pass), at
/// most 10 s. True when it did.
bool ProgressUntilQuiet(fabric::Worker& w) {
  std::vector<fabric::Event> ev;
  return Within(10000, [&] {
    w.Progress(&ev);
    return w.Quiet();
  });
}

/// True when `fd` polls readable within 10 s; `others` are progressed meanwhile (the
/// Worker of `fd` never).
bool ReadableWhile(int fd, const std::vector<fabric::Worker*>& others) {
  std::vector<fabric::Event> ev;
  return Within(10000, [&] {
    for (fabric::Worker* w : others) w->Progress(&ev);
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 1) == 1;
  });
}

// The NCCL comms' helper sleeps on a quiet cable-set Worker's WaitFd (it polled every
// 2 ms, 7-8 % of a ring guest's CPU): the descriptor is one set of every cable's and
// route's Workers, silent while nothing comes, and readable when a Write's immediate
// lands, from a neighbour and through the relay, on a Worker nobody progresses.
TEST_F(CableSetTest, AQuietWorkerIsWokenThroughItsDescriptorDirectAndRelayed) {
  std::vector<char> src(4096), toR(4096, 0), toB(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  const fabric::Region *s = nullptr, *dr = nullptr, *db = nullptr;
  ASSERT_TRUE(a_->Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &s).ok());
  ASSERT_TRUE(r_->Register(toR.data(), toR.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &dr).ok());
  ASSERT_TRUE(b_->Register(toB.data(), toB.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &db).ok());
  std::unique_ptr<fabric::Endpoint> epR, epB;
  ASSERT_TRUE(aw_->Connect(rw_->Address(), &epR).ok());
  ASSERT_TRUE(aw_->Connect(bw_->Address(), &epB).ok());
  uint64_t landed = 0;
  // First Writes set the cable connection and the relayed route up.
  ASSERT_TRUE(epR->Write(fabric::LocalSlice{s, 0, 64}, dr->Key(), dr->base, 5, 1).ok());
  ASSERT_EQ(AwaitWrite({aw_.get(), rw_.get(), bw_.get()}, 5, 1, &landed), "");
  ASSERT_TRUE(epB->Write(fabric::LocalSlice{s, 0, 64}, db->Key(), db->base, 5, 2).ok());
  ASSERT_EQ(AwaitWrite({aw_.get(), rw_.get(), bw_.get()}, 5, 2, &landed), "");

  for (fabric::Worker* w : {aw_.get(), rw_.get(), bw_.get()}) {
    ASSERT_TRUE(ProgressUntilQuiet(*w)) << "a Worker never said Quiet";
    ASSERT_GE(w->WaitFd(), 0);
  }
  pollfd quiet[3] = {{aw_->WaitFd(), POLLIN, 0}, {rw_->WaitFd(), POLLIN, 0}, {bw_->WaitFd(), POLLIN, 0}};
  EXPECT_EQ(::poll(quiet, 3, 0), 0) << "nothing came, yet a descriptor is readable";

  ASSERT_TRUE(epR->Write(fabric::LocalSlice{s, 0, src.size()}, dr->Key(), dr->base, 6, 0x77).ok());
  EXPECT_TRUE(ReadableWhile(rw_->WaitFd(), {aw_.get()})) << "the neighbour was not woken";
  ASSERT_TRUE(epB->Write(fabric::LocalSlice{s, 0, src.size()}, db->Key(), db->base, 7, 0x78).ok());
  EXPECT_TRUE(ReadableWhile(bw_->WaitFd(), {aw_.get()})) << "the relayed peer was not woken";
  // Both Writes complete, both immediates report every byte (one loop: each wait
  // progresses every Worker and would drop the other's events).
  int done = 0;
  std::vector<uint64_t> immBytes;
  std::string err;
  std::vector<fabric::Event> ev;
  ASSERT_TRUE(Within(10000, [&] {
    ev.clear();
    for (fabric::Worker* w : {aw_.get(), rw_.get(), bw_.get()}) w->Progress(&ev);
    for (const fabric::Event& e : ev) {
      if (e.kind == fabric::EventKind::kDone && (e.cookie == 6 || e.cookie == 7)) ++done;
      if (e.kind == fabric::EventKind::kImmediate && (e.value == 0x77 || e.value == 0x78)) immBytes.push_back(e.bytes);
      if (e.kind == fabric::EventKind::kError) err = e.error.ToString();
    }
    return (done == 2 && immBytes.size() == 2) || !err.empty();
  })) << done << " done, " << immBytes.size() << " immediates";
  ASSERT_EQ(err, "");
  EXPECT_EQ(immBytes, std::vector<uint64_t>(2, src.size()));
  EXPECT_EQ(std::memcmp(toR.data(), src.data(), src.size()), 0);
  EXPECT_EQ(std::memcmp(toB.data(), src.data(), src.size()), 0);
  epR.reset();
  epB.reset();
  EXPECT_TRUE(a_->Deregister(s).ok());
  EXPECT_TRUE(r_->Deregister(dr).ok());
  EXPECT_TRUE(b_->Deregister(db).ok());
}

TEST_F(CableSetTest, HostAddressesAreValidated) {
  HostAddress h;
  std::vector<uint8_t> good = aw_->Address();
  ASSERT_TRUE(HostAddress::Unpack(good, &h).ok());
  EXPECT_EQ(h.Pack(), good);
  std::vector<uint8_t> bad = good;
  bad.pop_back();
  EXPECT_EQ(HostAddress::Unpack(bad, &h).code(), Code::kInvalidArgument);
  bad = good;
  bad[0] ^= 1;
  EXPECT_EQ(HostAddress::Unpack(bad, &h).code(), Code::kInvalidArgument);
  bad = good;
  bad[16 + 6] = 3;  // rail 0's transport (0 TCP, 1 verbs, 2 host-local)
  EXPECT_EQ(HostAddress::Unpack(bad, &h).code(), Code::kInvalidArgument);
  HostAddress notLoopback;  // a host-local rail must be on 127/8
  notLoopback.workerId = 9;
  in_addr ten{};
  inet_pton(AF_INET, "10.0.0.1", &ten);
  notLoopback.rails.push_back({ten.s_addr, 4000, false, 0, true});
  Status n = HostAddress::Unpack(notLoopback.Pack(), &h);
  EXPECT_EQ(n.code(), Code::kInvalidArgument);
  EXPECT_NE(n.message().find("host-local but not on 127/8"), std::string::npos) << n.message();
  // A host address whose rails are on no cable of the graph is refused at Connect.
  HostAddress off;
  off.workerId = 9;
  in_addr x{};
  inet_pton(AF_INET, "127.0.9.9", &x);
  off.rails.push_back({x.s_addr, 4000});
  std::unique_ptr<fabric::Endpoint> ep;
  Status s = aw_->Connect(off.Pack(), &ep);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("no rail"), std::string::npos) << s.message();
}

// A host whose rail is on no cable yet (kC, 127.0.3.4, not in the graph): its Workers
// start on the host-local rail (HostLocalIpv4(kC), the address's only rail), reach each
// other over it (a Write with its immediate, content checked), and a Worker of another
// host is told the peer had no cable.
TEST_F(CableSetTest, AHostWithNoCableIsReachedOverItsHostLocalRail) {
  constexpr uint64_t kC = 4;
  std::unique_ptr<CableSetDomain> c = Make(kC, {"127.0.3.4"});
  ASSERT_NE(c, nullptr);
  std::unique_ptr<fabric::Worker> c1, c2;
  ASSERT_TRUE(c->CreateWorker(&c1).ok());
  ASSERT_TRUE(c->CreateWorker(&c2).ok());
  HostAddress h;
  ASSERT_TRUE(HostAddress::Unpack(c1->Address(), &h).ok());
  ASSERT_EQ(h.rails.size(), 1u);
  EXPECT_TRUE(h.rails[0].hostLocal);
  EXPECT_EQ(h.rails[0].ipv4, HostLocalIpv4(kC));
  EXPECT_NE(HostLocalIpv4(kC), HostLocalIpv4(kA));
  EXPECT_EQ(ntohl(HostLocalIpv4(kC)) >> 24, 127u);

  WriteAndCheckWith({c1.get(), c2.get()}, *c2, *c, *c1, *c, 70000, 41);

  std::unique_ptr<fabric::Endpoint> fromA;
  Status refused = aw_->Connect(c1->Address(), &fromA);
  EXPECT_EQ(refused.code(), Code::kInvalidUsage);
  EXPECT_NE(refused.message().find("had no cable when its address was taken"), std::string::npos)
      << refused.message();
}

proxy::nccl::MemHandle* Reg(fabric::Domain& d, void* data, size_t bytes) {
  auto* h = new proxy::nccl::MemHandle();
  EXPECT_TRUE(proxy::GlobalMrCache().Register(data, bytes, 1, &h->legacy).ok());
  h->devices.resize(1);
  EXPECT_TRUE(d.Register(data, std::max<size_t>(bytes, 1), fabric::kAccessLocal | fabric::kAccessRemoteWrite,
                         fabric::MemoryKind::kHost, &h->devices[0].region)
                  .ok());
  h->devices[0].packedKey = h->devices[0].region->Key().Pack();
  return h;
}
void Dereg(fabric::Domain& d, proxy::nccl::MemHandle* h) {
  EXPECT_TRUE(proxy::GlobalMrCache().Deregister(h->legacy).ok());
  EXPECT_TRUE(d.Deregister(h->devices[0].region).ok());
  delete h;
}

TEST_F(CableSetTest, NcclCommsThroughTheRelay) {
  // Up to one relay slot (511.75 KiB of payload): the receiver learns the size from
  // the data Write's immediate event, which the relay delivers with the full size.
  RunNccl({1, 70000, 500000});
}

// A message larger than one relay slot is cut into slot-sized Writes at the relay;
// the relay delivers the last one with Endpoint::WriteFinal, so the target's one
// immediate event reports the whole message (issue 10: it used to report the last
// chunk's 1536 B for 3 MiB).
TEST_F(CableSetTest, NcclCommsMessageLargerThanASlot) { RunNccl({3u << 20}); }

// NCCL comms sit idle between iterations for as long as the job likes: the relay
// must not close a route for idleness (RAILYARD_RELAY_IDLE_MS bounds only the socket
// relay's wait for a socket's first record). A route ends when its source closes it
// or a leg fails. Here the comms idle for 6x the idle limit, three times, and the
// same two routes carry every message (none reopened, none failed).
class CableSetIdleTest : public CableSetTest {
 protected:
  void SetUp() override {
    idleMs_ = 50;
    CableSetTest::SetUp();
  }
};

TEST_F(CableSetIdleTest, RelayedCommsSurviveIdleLongerThanTheIdleLimit) {
  RunNccl({4096, 70000, 1u << 20}, 6 * idleMs_);
  EXPECT_EQ(relay_->stats().routesOpened, 2u);  // never reopened
  EXPECT_EQ(relay_->stats().routesClosed, 2u);  // by their sources, when RunNccl closed the comms
  EXPECT_EQ(relay_->stats().routesFailed, 0u);
}

// A chain A - R1 - R2 - B: the route A -> B goes through R1's Forwarder, which
// carries it on through R2's (each relay host's Forwarder binds the fixed port on its
// own rails). R1's onward route needs a Worker of its own on the cable to R2: it used
// to be made on the port Domain listening at the fixed port, and failed with
// "bind: Address already in use" (fabric.chain-end-to-end over the fabric comms).
TEST(CableSetChainTest, TwoRelaysCarryARouteEndToEnd) {
  constexpr uint64_t kA1 = 11, kR1 = 12, kR2 = 13, kB1 = 14;
  const uint16_t port = FreePort({"127.0.5.2", "127.0.6.1", "127.0.6.2", "127.0.7.1"});
  ASSERT_NE(port, 0);
  topology::ClusterGraph graph;
  graph.AddHost(kA1, "hA");
  graph.AddHost(kR1, "hR1");
  graph.AddHost(kR2, "hR2");
  graph.AddHost(kB1, "hB");
  graph.AddLink({kA1, "a0", "127.0.5.1", 10000}, {kR1, "r0", "127.0.5.2", 10000});
  graph.AddLink({kR1, "r1", "127.0.6.1", 10000}, {kR2, "s0", "127.0.6.2", 10000});
  graph.AddLink({kR2, "s1", "127.0.7.1", 10000}, {kB1, "b0", "127.0.7.2", 10000});
  fabric::relay::GraphFn gf = [&graph] { return graph; };
  std::unique_ptr<fabric::relay::ForwarderHost> r1, r2;
  ASSERT_NO_FATAL_FAILURE(StartTwoRelays(gf, RelayOptions(port, 10000), kR1, &r1, kR2, &r2));
  std::unique_ptr<CableSetDomain> a = MakeDomain(kA1, gf, port, {"127.0.5.1"});
  std::unique_ptr<CableSetDomain> b = MakeDomain(kB1, gf, port, {"127.0.7.2"});
  std::unique_ptr<fabric::Worker> aw, bw;
  ASSERT_TRUE(a->CreateWorker(&aw).ok());
  ASSERT_TRUE(b->CreateWorker(&bw).ok());
  const size_t bytes = 1300000;  // several relay slots
  std::vector<char> src(bytes), dst(bytes + 16, 0);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 7 + 1);
  const fabric::Region* s = nullptr;
  const fabric::Region* d = nullptr;
  ASSERT_TRUE(a->Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &s).ok());
  ASSERT_TRUE(b->Register(dst.data(), dst.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &d).ok());
  std::unique_ptr<fabric::Endpoint> ep;
  ASSERT_TRUE(aw->Connect(bw->Address(), &ep).ok());
  EXPECT_NE(ep->PeerName().find("via hR1 (127.0.5.2:" + std::to_string(port) + ")"), std::string::npos)
      << ep->PeerName();
  ASSERT_TRUE(ep->Write(fabric::LocalSlice{s, 0, bytes}, d->Key(), d->base + 8, 7, 77u).ok());
  uint64_t landed = 0;
  const std::string err = AwaitWrite({aw.get(), bw.get()}, 7, 77u, &landed);
  ASSERT_TRUE(err.empty()) << err << " (" << r1->lastProblem() << " / " << r2->lastProblem() << ")";
  EXPECT_EQ(landed, bytes);
  ExpectLandedWithGuards(dst, src);
  EXPECT_EQ(r1->stats().routesOpened, 1u);
  EXPECT_EQ(r2->stats().routesOpened, 1u);
  ep.reset();
  EXPECT_TRUE(a->Deregister(s).ok());
  EXPECT_TRUE(b->Deregister(d).ok());
  aw.reset();
  bw.reset();
}

// A ring A - R1 - B - R2 - A: B is two hops from A both ways round. A's Endpoint to B
// gets a route through each relay and uses them in turn (a Write moves to the other
// route once everything before it completed), so both relays carry bytes; every
// Write's data and immediate arrive intact (by content).
/// A ring A - R1 - B - R2 - A on loopback addresses, a ForwarderHost on each relay,
/// cable-set Domains and Workers for A and B (multiRoute as the options' default).
struct Ring {
  static constexpr uint64_t kA1 = 21, kR1 = 22, kB1 = 23, kR2 = 24;
  topology::ClusterGraph graph;
  std::unique_ptr<fabric::relay::ForwarderHost> r1, r2;
  std::unique_ptr<CableSetDomain> a, b;
  std::unique_ptr<fabric::Worker> aw, bw;

  void Start() {
    const uint16_t port = FreePort({"127.0.8.2", "127.0.10.1", "127.0.11.1", "127.0.9.2"});
    ASSERT_NE(port, 0);
    graph.AddHost(kA1, "hA");
    graph.AddHost(kR1, "hR1");
    graph.AddHost(kB1, "hB");
    graph.AddHost(kR2, "hR2");
    graph.AddLink({kA1, "a0", "127.0.8.1", 10000}, {kR1, "r0", "127.0.8.2", 10000});
    graph.AddLink({kR1, "r1", "127.0.10.1", 10000}, {kB1, "b0", "127.0.10.2", 10000});
    graph.AddLink({kB1, "b1", "127.0.11.2", 10000}, {kR2, "s0", "127.0.11.1", 10000});
    graph.AddLink({kR2, "s1", "127.0.9.2", 10000}, {kA1, "a1", "127.0.9.1", 10000});
    fabric::relay::GraphFn gf = [this] { return graph; };
    ASSERT_NO_FATAL_FAILURE(StartTwoRelays(gf, RelayOptions(port, 10000), kR1, &r1, kR2, &r2));
    // multiRoute: as the NetRuntime's fabric mode (proxy/runtime/net_fabric_mode.cc).
    a = MakeDomain(kA1, gf, port, {"127.0.8.1", "127.0.9.1"}, /*multiRoute=*/true);
    b = MakeDomain(kB1, gf, port, {"127.0.10.2", "127.0.11.2"}, /*multiRoute=*/true);
    ASSERT_TRUE(a->CreateWorker(&aw).ok());
    ASSERT_TRUE(b->CreateWorker(&bw).ok());
  }
  std::string Problems() const { return r1->lastProblem() + " / " + r2->lastProblem(); }
};

TEST(CableSetRingTest, OppositeHostUsesBothRelaysInTurn) {
  Ring ring;
  ASSERT_NO_FATAL_FAILURE(ring.Start());
  auto [a, b, aw, bw, r1, r2] = std::tie(ring.a, ring.b, ring.aw, ring.bw, ring.r1, ring.r2);
  const size_t bytes = 700000;  // two relay slots
  std::vector<char> src(bytes), dst(bytes + 16, 0);
  const fabric::Region* s = nullptr;
  const fabric::Region* d = nullptr;
  ASSERT_TRUE(a->Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &s).ok());
  ASSERT_TRUE(b->Register(dst.data(), dst.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &d).ok());
  std::unique_ptr<fabric::Endpoint> ep;
  ASSERT_TRUE(aw->Connect(bw->Address(), &ep).ok());
  auto* multi = dynamic_cast<fabric::relay::MultiRouteEndpoint*>(ep.get());
  ASSERT_NE(multi, nullptr) << ep->PeerName();
  EXPECT_EQ(multi->routes(), 2u);
  EXPECT_NE(ep->PeerName().find("via hR1 ("), std::string::npos) << ep->PeerName();
  EXPECT_NE(ep->PeerName().find("via hR2 ("), std::string::npos) << ep->PeerName();
  for (uint32_t k = 0; k < 4; ++k) {
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 5 + k);
    ASSERT_TRUE(ep->Write(fabric::LocalSlice{s, 0, bytes}, d->Key(), d->base + 8, 100 + k, 200 + k).ok());
    uint64_t landed = 0;
    const std::string err = AwaitWrite({aw.get(), bw.get()}, 100 + k, 200 + k, &landed);
    ASSERT_TRUE(err.empty()) << err << " (" << ring.Problems() << ")";
    EXPECT_EQ(landed, bytes);
    ASSERT_EQ(std::memcmp(dst.data() + 8, src.data(), bytes), 0) << "write " << k;
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[i], 0) << "guard byte " << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[bytes + 8 + i], 0) << "guard byte after " << i;
  // Two Writes each way round.
  EXPECT_GE(r1->stats().bytesForwarded, 2 * bytes);
  EXPECT_GE(r2->stats().bytesForwarded, 2 * bytes);
  ep.reset();
  EXPECT_TRUE(a->Deregister(s).ok());
  EXPECT_TRUE(b->Deregister(d).ok());
  aw.reset();
  bw.reset();
}

/// The NCCL comms over A's Domain `a` and B's `b`, one message of each size A -> B
/// (content and guard bytes checked), the comms left idle for `pauseMs` after each;
/// `problem` names what the relays last refused, for failure messages; `beforeClose`,
/// when given, runs with both CommWorkers once every message is through.
void NcclMessages(CableSetDomain* a, CableSetDomain* b, const std::vector<size_t>& sizes, int pauseMs,
                  const std::function<std::string()>& problem,
                  const std::function<void(proxy::nccl::CommWorker&, proxy::nccl::CommWorker&)>& beforeClose = {}) {
  using namespace proxy::nccl;
  CommWorker ca(a, "railyard[a0]"), cb(b, "railyard[b0]");
  ASSERT_TRUE(ca.Start().ok());
  ASSERT_TRUE(cb.Start().ok());
  auto rankA = std::make_shared<proxy::RankSource>(), rankB = std::make_shared<proxy::RankSource>();
  {
    char handle[128] = {};
    std::unique_ptr<FabricListenComm> listen;
    ASSERT_TRUE(FabricListenComm::Create(&cb, 0, {"hB", 2}, &proxy::GlobalMrCache(), rankB, &listen, handle).ok());
    FabricHandle to;
    ASSERT_TRUE(DecodeFabricHandle(handle, &to).ok());
    std::unique_ptr<FabricSendComm> send;
    ASSERT_TRUE(FabricSendComm::Create(&ca, 0, to, {"hA", 1}, 3000, rankA, &send).ok());
    proxy::RecvComm* rc = nullptr;
    ASSERT_TRUE(Within(10000, [&] { return listen->Accept(&rc).ok() && rc != nullptr; }));
    std::unique_ptr<FabricRecvComm> recv(static_cast<FabricRecvComm*>(rc));
    // B reaches A through a relay: the receive comm names that route as its own (its
    // clear-to-sends'), not as the one A's data takes (a trial read it so).
    EXPECT_NE(recv->PeerText().find("clear-to-sends to "), std::string::npos) << recv->PeerText();
    EXPECT_NE(recv->PeerText().find(" via "), std::string::npos) << recv->PeerText();
    for (size_t size : sizes) {
      std::vector<char> src(size), dst(size + 64, 'G');
      for (size_t i = 0; i < size; ++i) src[i] = static_cast<char>(i * 11 + 3);
      MemHandle* smh = Reg(*a, src.data(), src.size());
      MemHandle* rmh = Reg(*b, dst.data(), dst.size());
      void* data = dst.data();
      size_t cap = size;
      int tag = 9;
      proxy::Request* rr = nullptr;
      ASSERT_TRUE(recv->IrecvFabric(1, &data, &cap, &tag, &rmh, &rr).ok());
      proxy::Request* sr = nullptr;
      ASSERT_TRUE(Within(10000, [&] { return send->IsendFabric(src.data(), size, 9, smh, &sr).ok() && sr != nullptr; }));
      int sent = -1, got = -1, sdone = 0, rdone = 0;
      Status st;
      ASSERT_TRUE(Within(20000, [&] {
        if (!sdone) st = send->Test(sr, &sdone, &sent);
        if (st.ok() && !rdone) st = recv->Test(rr, &rdone, &got);
        return !st.ok() || (sdone && rdone);
      })) << problem();
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(sent, static_cast<int>(size));
      EXPECT_EQ(got, static_cast<int>(size));
      EXPECT_EQ(std::memcmp(dst.data(), src.data(), size), 0) << size;
      for (size_t i = size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 'G') << "guard byte " << i;
      Dereg(*a, smh);
      Dereg(*b, rmh);
      // Idle on purpose (the condition under test, not a wait for anything).
      if (pauseMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));
    }
    if (beforeClose) beforeClose(ca, cb);
    send->Close();
    recv->Close();
  }
  ca.Stop();
  cb.Stop();
}

void CableSetTest::RunNccl(const std::vector<size_t>& sizes, int pauseMs) {
  NcclMessages(a_.get(), b_.get(), sizes, pauseMs, [this] { return relay_->lastProblem(); });
  EXPECT_GE(relay_->stats().routesOpened, 2u);  // A -> B (data) and B -> A (clear-to-send)
}

// Idle comms cost their helpers a wake-up per 50 ms, not per 2 ms: once a pass finds
// nothing the helper sleeps on the cable-set Worker's descriptor (it polled every 2 ms:
// 500 passes a second, 7-8 % of a ring guest). Over 1 s of idleness (the condition
// under test, not a wait for anything) each helper makes well under 100 passes; a
// descriptor that stayed readable while Quiet would spin it far past that.
TEST_F(CableSetTest, IdleCommsLetTheirHelpersSleep) {
  uint64_t passesA = 0, passesB = 0;
  NcclMessages(a_.get(), b_.get(), {4096}, 0, [this] { return relay_->lastProblem(); },
               [&](proxy::nccl::CommWorker& ca, proxy::nccl::CommWorker& cb) {
                 // Let the helpers find the comms quiet first (a few ms of passes).
                 std::this_thread::sleep_for(std::chrono::milliseconds(100));
                 const uint64_t a0 = ca.helperPasses(), b0 = cb.helperPasses();
                 std::this_thread::sleep_for(std::chrono::seconds(1));
                 passesA = ca.helperPasses() - a0;
                 passesB = cb.helperPasses() - b0;
               });
  std::printf("helper passes in 1 s of idle comms: sender %llu, receiver %llu\n",
              static_cast<unsigned long long>(passesA), static_cast<unsigned long long>(passesB));
  EXPECT_LT(passesA, 100u) << "the sender's helper did not sleep";
  EXPECT_LT(passesB, 100u) << "the receiver's helper did not sleep";
  EXPECT_GT(passesA + passesB, 0u) << "the helpers stopped altogether (the 50 ms bound keeps them passing)";
}

// The NCCL comms to the opposite host of a ring: the send comm's Endpoint has a
// route through each relay and the receive comm's Endpoint back has one too, so data
// immediates reach B from two relay Workers and clear-to-sends reach A from two
// (PeerWorkers admits one per route); every message arrives intact and both relays
// carry data (it used to fail with "a data immediate for this comm came from another
// worker").
TEST(CableSetRingTest, NcclCommsToTheOppositeHostOverBothRelays) {
  Ring ring;
  ASSERT_NO_FATAL_FAILURE(ring.Start());
  ring.aw.reset();  // NcclMessages makes the Workers of its CommWorkers
  ring.bw.reset();
  const std::vector<size_t> sizes = {1, 4096, 70000, 600000, 600000, 1u << 20, 3u << 20, 8, 200000};
  NcclMessages(ring.a.get(), ring.b.get(), sizes, 0, [&] { return ring.Problems(); });
  size_t total = 0;
  for (size_t n : sizes) total += n;
  const uint64_t f1 = ring.r1->stats().bytesForwarded, f2 = ring.r2->stats().bytesForwarded;
  EXPECT_GE(f1 + f2, total);
  EXPECT_GT(f1, 0u) << "relay 1 carried nothing";
  EXPECT_GT(f2, 0u) << "relay 2 carried nothing";
  EXPECT_EQ(ring.r1->stats().routesFailed + ring.r2->stats().routesFailed, 0u);
}

// A draining relay (railyardd after SIGTERM): the route open already carries on
// until its source closes it, a new one is refused with the drain named, and Drain
// returns once no route is open.
TEST(CableSetRingTest, ADrainingRelayKeepsItsRoutesAndRefusesNewOnes) {
  Ring ring;
  ASSERT_NO_FATAL_FAILURE(ring.Start());
  std::vector<char> src(100000, 'q'), dst(100000, 0);
  const fabric::Region* s = nullptr;
  const fabric::Region* d = nullptr;
  ASSERT_TRUE(ring.a->Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &s).ok());
  ASSERT_TRUE(ring.b->Register(dst.data(), dst.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &d).ok());
  auto write = [&](fabric::Endpoint& ep, uint64_t cookie) {
    std::string err;
    bool done = false;
    EXPECT_TRUE(ep.Write(fabric::LocalSlice{s, 0, src.size()}, d->Key(), d->base, cookie, 7).ok());
    std::vector<fabric::Event> ev;
    EXPECT_TRUE(Within(10000, [&] {
      ev.clear();
      ring.aw->Progress(&ev);
      ring.bw->Progress(&ev);
      for (const auto& e : ev) {
        if (e.kind == fabric::EventKind::kDone && e.cookie == cookie) done = true;
        if (e.kind == fabric::EventKind::kError) err = e.error.ToString();
      }
      return done || !err.empty();
    })) << ring.Problems();
    return err;
  };
  std::unique_ptr<fabric::Endpoint> ep;
  ASSERT_TRUE(ring.aw->Connect(ring.bw->Address(), &ep).ok());
  ASSERT_EQ(ep->Routes(), 2u);
  EXPECT_EQ(write(*ep, 1), "");
  EXPECT_EQ(write(*ep, 2), "");  // the second Write goes round the other way
  ASSERT_EQ(ring.r1->stats().routesOpen, 1u);
  ring.r1->BeginDrain();
  EXPECT_EQ(ring.r1->Drain(0), 1u);  // still open: nothing waits here
  for (uint64_t k = 3; k < 7; ++k) EXPECT_EQ(write(*ep, k), "") << "write " << k << " while R1 drains";
  // A new Endpoint: its route through R1 is refused, naming the drain.
  std::unique_ptr<fabric::Endpoint> late;
  ASSERT_TRUE(ring.aw->Connect(ring.bw->Address(), &late).ok());
  std::string refused;
  for (uint64_t k = 10; k < 12 && refused.empty(); ++k) refused = write(*late, k);
  EXPECT_NE(refused.find("the relay is draining"), std::string::npos) << refused;
  late.reset();
  ep.reset();  // the source closes its routes: the drain ends
  std::vector<fabric::Event> ev;
  ASSERT_TRUE(Within(10000, [&] {
    ev.clear();
    ring.aw->Progress(&ev);
    ring.bw->Progress(&ev);
    return ring.r1->stats().routesOpen == 0;
  }));
  EXPECT_EQ(ring.r1->Drain(5000), 0u);
  EXPECT_TRUE(ring.r1->Serving());  // never dropped while draining
  EXPECT_TRUE(ring.a->Deregister(s).ok());
  EXPECT_TRUE(ring.b->Deregister(d).ok());
}

// A cable that comes up after a Worker was made (railyardd's tier tunnels start once
// the agent settled; GIN's Workers at listen): the Worker takes it, its Address()
// grows by that cable's rails, and a host on the new cable is reached straight, both
// ways, checked by content.
TEST(CableSetLateCableTest, ACableThatComesUpLaterIsTakenAndReachedBothWays) {
  struct Shared {
    std::mutex mutex;
    topology::ClusterGraph graph;
  };
  auto shared = std::make_shared<Shared>();
  shared->graph.AddHost(kA, "hA");
  shared->graph.AddHost(kR, "hR");
  shared->graph.AddLink({kA, "a0", "127.0.1.1", 10000}, {kR, "r0", "127.0.1.2", 10000});
  const fabric::relay::GraphFn gf = [shared] {
    std::lock_guard<std::mutex> lock(shared->mutex);
    return shared->graph;
  };
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  auto r = MakeDomain(kR, gf, port, {"127.0.1.2", "127.0.2.2"});
  ASSERT_NE(r, nullptr);
  std::unique_ptr<fabric::Worker> rw;
  ASSERT_TRUE(r->CreateWorker(&rw).ok());
  HostAddress before;
  ASSERT_TRUE(HostAddress::Unpack(rw->Address(), &before).ok());
  ASSERT_EQ(before.rails.size(), 1u);  // the one cable known then
  {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->graph.AddHost(kB, "hB");
    shared->graph.AddLink({kR, "r1", "127.0.2.2", 10000}, {kB, "b0", "127.0.2.3", 10000});
  }
  auto b = MakeDomain(kB, gf, port, {"127.0.2.3"});
  ASSERT_NE(b, nullptr);
  std::unique_ptr<fabric::Worker> bw;
  ASSERT_TRUE(b->CreateWorker(&bw).ok());
  std::vector<fabric::Event> ev;
  HostAddress after;
  ASSERT_TRUE(Within(5000, [&] {
    rw->Progress(&ev);
    return HostAddress::Unpack(rw->Address(), &after).ok() && after.rails.size() == 2;
  })) << "R's Worker never took the cable to B";
  EXPECT_EQ(after.rails[0], before.rails[0]);  // the earlier rail keeps its place
  in_addr x{};
  inet_pton(AF_INET, "127.0.2.2", &x);
  EXPECT_EQ(after.rails[1].ipv4, x.s_addr);
  uint32_t imm = 40;
  for (auto [from, fromD, to, toD] : {std::tuple{bw.get(), b.get(), rw.get(), r.get()},
                                      std::tuple{rw.get(), r.get(), bw.get(), b.get()}}) {
    ++imm;
    const size_t bytes = 200000;
    std::vector<char> src(bytes), dst(bytes + 16, 0);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 7 + imm);
    const fabric::Region* sr = nullptr;
    const fabric::Region* dr = nullptr;
    ASSERT_TRUE(fromD->Register(src.data(), src.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &sr).ok());
    ASSERT_TRUE(toD->Register(dst.data(), dst.size(), fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost, &dr).ok());
    std::unique_ptr<fabric::Endpoint> ep;
    ASSERT_TRUE(from->Connect(to->Address(), &ep).ok()) << "write " << imm;
    ASSERT_TRUE(ep->Write(fabric::LocalSlice{sr, 0, bytes}, dr->Key(), dr->base + 8, 5, imm).ok());
    uint64_t landed = 0;
    const std::string err = AwaitWrite({rw.get(), bw.get()}, 5, imm, &landed);
    ASSERT_TRUE(err.empty()) << err;
    EXPECT_EQ(landed, bytes);
    ExpectLandedWithGuards(dst, src);
    ep.reset();
    EXPECT_TRUE(fromD->Deregister(sr).ok());
    EXPECT_TRUE(toD->Deregister(dr).ok());
  }
}

uint32_t Ip4(const char* text) {
  in_addr a{};
  EXPECT_EQ(inet_pton(AF_INET, text, &a), 1);
  return a.s_addr;
}

// Version 2 of the host address (issue 10, fabric mode over RDMA): every rail's
// transport and fabric rail index survive a round trip, and each new byte is checked.
TEST(HostAddressV2, TransportAndRailIndexAreCarriedAndChecked) {
  HostAddress h;
  h.workerId = 77;
  h.rails.push_back({Ip4("10.0.0.1"), 40100, true, 2});
  h.rails.push_back({Ip4("10.0.1.1"), 40100, true, 3});
  h.rails.push_back({Ip4("10.3.0.2"), 51000, false, 0});
  const std::vector<uint8_t> packed = h.Pack();
  ASSERT_EQ(packed.size(), 16u + 8u * 3);
  HostAddress back;
  ASSERT_TRUE(HostAddress::Unpack(packed, &back).ok());
  EXPECT_EQ(back, h);
  auto refused = [&](size_t at, uint8_t value, const char* words) {
    std::vector<uint8_t> bad = packed;
    bad[at] = value;
    HostAddress x;
    Status s = HostAddress::Unpack(bad, &x);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << at;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  refused(16 + 6, 3, "transport 3");         // rail 0's transport byte
  refused(16 + 6, 2, "host-local but not on 127/8");  // transport 2 on 10.0.0.1
  refused(16 + 8 + 7, 16, "rail index 16");  // rail 1's rail index
  // A version-1 address (8-byte rails) is refused by version.
  std::vector<uint8_t> v1 = packed;
  v1[4] = 1;
  HostAddress x;
  EXPECT_NE(HostAddress::Unpack(v1, &x).message().find("version 1"), std::string::npos);
}

// A peer's verbs cable becomes one verbs Worker address (bootstrap on its first rail,
// as many rails as the cable has) with the peer's key slots; TCP cables stay TCP.
TEST(HostAddressV2, VerbsCableGroupsAreVerbsAddresses) {
  topology::ClusterGraph g;
  g.AddHost(kA, "hA");
  g.AddHost(kB, "hB");
  g.AddLink({kA, "a0", "10.0.0.1", 10000}, {kB, "b0", "10.0.0.2", 10000});
  g.AddLink({kA, "a1", "10.0.1.1", 10000}, {kB, "b1", "10.0.1.2", 10000});
  HostAddress b;
  b.workerId = 5;
  b.rails.push_back({Ip4("10.0.0.2"), 40200, true, 1});
  b.rails.push_back({Ip4("10.0.1.2"), 40200, true, 0});
  std::vector<CableGroup> groups;
  ASSERT_TRUE(PickCableGroups(g, kA, b, &groups).ok());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_TRUE(groups[0].verbs);
  EXPECT_EQ(groups[0].railIndices, (std::vector<uint8_t>{1, 0}));
  fabric::verbs::VerbsAddress v;
  ASSERT_TRUE(fabric::verbs::VerbsAddress::Unpack(groups[0].address, &v).ok());
  EXPECT_EQ(v.ipv4, Ip4("10.0.0.2"));
  EXPECT_EQ(v.port, 40200);
  EXPECT_EQ(v.rails, 2u);
  EXPECT_EQ(v.workerId, 5u);
  // One cable cannot mix transports.
  b.rails[1].verbs = false;
  EXPECT_EQ(PickCableGroups(g, kA, b, &groups).code(), Code::kInvalidUsage);
}

// The peer's key cut to its cable's rails: the rkeys at the slots, in that order.
TEST(HostAddressV2, RemoteKeysAreCutToThePeersCableRails) {
  fabric::RemoteKey k{0x1000, 4096, 99, fabric::kAccessRemoteWrite, {11, 22, 33, 44}};
  fabric::RemoteKey cut;
  ASSERT_TRUE(CutRemoteKey(k, {3, 1}, &cut).ok());
  EXPECT_EQ(cut.railRkeys, (std::vector<uint32_t>{44, 22}));
  EXPECT_EQ(cut.base, k.base);
  EXPECT_EQ(cut.length, k.length);
  EXPECT_EQ(cut.softwareKey, k.softwareKey);
  Status s = CutRemoteKey(k, {4}, &cut);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("slot 4"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::runtime
