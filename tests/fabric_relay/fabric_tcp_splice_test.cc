// A TCP Endpoint through a relay that splices sockets (proxy/fabric/tcp SpliceRoute,
// TcpWorker::ConnectSpliced), against a small relay in this process on loopback: it
// reads each socket's relay record, connects to the port the record names and copies
// bytes both ways, as proxy/relay's RelayService does. Checked: the relay gets exactly
// the record the plan carries before any frame; a striped Write with immediate lands
// whole at the target; the Endpoint's peer name says which relay; a relay that refuses
// the socket (its RejectRecord) fails the op with CONNECT_FAILED quoting the relay's
// reason; a relay that closes the socket fails the op naming the relay, and saying
// that the peer or any relay on the path may have ended it; a relay that stalls times
// the op out saying the rail named is only the first hop.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_endpoint.h"
#include "proxy/fabric/tcp/tcp_worker.h"
#include "proxy/routing/router.h"
#include "proxy/wire.h"
#include "tests/common/free_port.h"

namespace railyard::fabric::tcp {
namespace {

using Clock = std::chrono::steady_clock;

/// What the test relay does with a socket once its relay record is read.
/// kStall: reads the record, then neither forwards nor closes (a relay frozen, or a
/// cable cut beyond it) until the relay stops.
enum class RelayMode { kSplice, kReject, kClose, kStall };

/// A relay on 127.0.0.1 (an ephemeral port): one thread per socket.
class TestRelay {
 public:
  /// `cutAfter` > 0 (kSplice): each socket's leg closes, both ways, once that many bytes
  /// went towards the target (a relay killed mid-stream).
  TestRelay(RelayMode mode, size_t recordBytes, size_t cutAfter = 0)
      : mode_(mode), recordBytes_(recordBytes), cutAfter_(cutAfter) {
    listen_ = test_support::ListenLoopback(&port_);
    EXPECT_GE(listen_, 0);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~TestRelay() {
    stop_ = true;
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    acceptor_.join();
    for (auto& t : legs_) t.join();
  }
  uint16_t port() const { return port_; }
  /// The relay records read so far, one per socket.
  std::vector<std::vector<uint8_t>> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  void Accept() {
    for (;;) {
      const int fd = accept(listen_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      legs_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  static bool ReadExactly(int fd, uint8_t* p, size_t n) {
    for (size_t got = 0; got < n;) {
      const ssize_t r = recv(fd, p + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  void Serve(int in) {
    std::vector<uint8_t> record(recordBytes_);
    if (!ReadExactly(in, record.data(), record.size())) {
      close(in);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_.push_back(record);
    }
    if (mode_ == RelayMode::kReject) {
      proxy::RejectRecord r{};
      r.header = proxy::MakeHeader(proxy::RecordKind::kReject);
      std::snprintf(r.reason, sizeof r.reason, "relay on hR: refused: no route to host 7");
      (void)send(in, &r, sizeof r, MSG_NOSIGNAL);
      close(in);
      return;
    }
    if (mode_ == RelayMode::kClose) {
      close(in);
      return;
    }
    if (mode_ == RelayMode::kStall) {
      pollfd p{in, 0, 0};  // no events asked: wakes only on an error or hang-up
      while (!stop_ && poll(&p, 1, 50) >= 0 && (p.revents & (POLLHUP | POLLERR)) == 0) {
      }
      close(in);
      return;
    }
    proxy::RelayRecord rec;
    std::memcpy(&rec, record.data(), sizeof rec);
    const int out = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(rec.destPort);
    if (connect(out, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      close(in);
      close(out);
      return;
    }
    // Copy both ways until either side closes or the relay stops.
    pollfd p[2] = {{in, POLLIN, 0}, {out, POLLIN, 0}};
    char buf[65536];
    size_t forwarded = 0;  // towards the target
    while (!stop_) {
      if (poll(p, 2, 50) < 0) break;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        size_t want = sizeof buf;
        if (i == 0 && cutAfter_ > 0) want = std::min(want, cutAfter_ - forwarded);
        const ssize_t n = recv(p[i].fd, buf, want, 0);
        if (n <= 0) {
          done = true;
          break;
        }
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = send(p[1 - i].fd, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) {
            done = true;
            break;
          }
          sent += w;
        }
        if (i == 0) forwarded += static_cast<size_t>(n);
        if (cutAfter_ > 0 && forwarded >= cutAfter_) done = true;
      }
      if (done) break;
    }
    close(in);
    close(out);
  }

  RelayMode mode_;
  size_t recordBytes_;
  size_t cutAfter_;
  int listen_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> legs_;                ///< guarded by mu_
  std::vector<std::vector<uint8_t>> records_;   ///< guarded by mu_
};

struct Side {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<Worker> worker;
  std::vector<Event> events;
};

void MakeSide(Side* s, int timeoutMs = 20000) {
  TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = timeoutMs;
  o.socketsPerRail = 2;
  ASSERT_TRUE(CreateTcpDomain(o, &s->domain).ok());
  ASSERT_TRUE(s->domain->CreateWorker(&s->worker).ok());
}

/// The plan of a route from `a` to `b` through `relay`: every socket dials the relay
/// with the relay record naming b's listener.
SpliceRoute Route(const Side& b, uint16_t relayPort) {
  WorkerAddress to;
  EXPECT_TRUE(WorkerAddress::Unpack(b.worker->Address(), &to).ok());
  SpliceRoute r;
  r.localRail = {0};
  r.via = "hR (127.0.0.1:" + std::to_string(relayPort) + ")";
  const uint16_t destPort = to.rails[0].port;
  r.dial = [relayPort, destPort](int, int socket, DialPlan* plan) {
    plan->local.sin_family = AF_INET;
    plan->local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    plan->remote.sin_family = AF_INET;
    plan->remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    plan->remote.sin_port = htons(relayPort);
    plan->via = "hR (127.0.0.1:" + std::to_string(relayPort) + ")";
    return proxy::MakeRelayPrefix(7, destPort, 40 + socket, 0, "hA", 5, nullptr, &plan->preamble);
  };
  return r;
}

/// Progresses both sides until `pred` holds or 20 s pass.
template <class Pred>
bool Until(Side& a, Side& b, Pred pred) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    a.worker->Progress(&a.events);
    b.worker->Progress(&b.events);
    if (pred()) return true;
  }
  return pred();
}

const Event* Find(const std::vector<Event>& events, EventKind kind) {
  for (const Event& e : events) {
    if (e.kind == kind) return &e;
  }
  return nullptr;
}

/// Two sides, `src` registered at a (local) and `dst` at b (remote write), and a's
/// Endpoint to b spliced through `relay`.
struct SplicedPair {
  Side a, b;
  const Region* srcR = nullptr;
  const Region* dstR = nullptr;
  std::unique_ptr<Endpoint> ep;
};

void ConnectThrough(const TestRelay& relay, std::vector<uint8_t>& src, std::vector<uint8_t>& dst, SplicedPair* p) {
  MakeSide(&p->a);
  MakeSide(&p->b);
  ASSERT_TRUE(p->a.domain->Register(src.data(), src.size(), kAccessLocal, MemoryKind::kHost, &p->srcR).ok());
  ASSERT_TRUE(p->b.domain->Register(dst.data(), dst.size(), kAccessRemoteWrite, MemoryKind::kHost, &p->dstR).ok());
  auto* tcp = dynamic_cast<TcpWorker*>(p->a.worker.get());
  ASSERT_NE(tcp, nullptr);
  ASSERT_TRUE(tcp->ConnectSpliced(p->b.worker->Address(), Route(p->b, relay.port()), &p->ep).ok());
}

TEST(TcpSplice, AWriteWithImmediateLandsThroughTheRelay) {
  TestRelay relay(RelayMode::kSplice, sizeof(proxy::RelayRecord));
  std::vector<uint8_t> src(1 << 20), dst((1 << 20) + 64, 0xee);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  SplicedPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectThrough(relay, src, dst, &pair));
  Side& a = pair.a;
  Side& b = pair.b;
  const Region* srcR = pair.srcR;
  const Region* dstR = pair.dstR;
  std::unique_ptr<Endpoint>& ep = pair.ep;
  EXPECT_NE(ep->PeerName().find("via hR (127.0.0.1:" + std::to_string(relay.port()) + ")"), std::string::npos)
      << ep->PeerName();
  ASSERT_TRUE(ep->Write(LocalSlice{srcR, 0, src.size()}, dstR->Key(), dstR->base + 32, 11, 0xabcdu).ok());
  ASSERT_TRUE(Until(a, b, [&] { return Find(a.events, EventKind::kDone) && Find(b.events, EventKind::kImmediate); }))
      << "the Write did not complete through the relay";
  const Event* imm = Find(b.events, EventKind::kImmediate);
  EXPECT_EQ(imm->value, 0xabcdu);
  EXPECT_EQ(imm->bytes, src.size());
  EXPECT_EQ(Find(a.events, EventKind::kDone)->cookie, 11u);
  EXPECT_EQ(Find(a.events, EventKind::kError), nullptr);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 32));
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(dst[i], 0xee) << i;  // guard bytes untouched
  for (size_t i = 32 + src.size(); i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xee) << i;
  // Each of the two sockets sent exactly its plan's relay record first. The relay's
  // thread reads the second socket's record on its own schedule (the Write may finish
  // over the first alone: CI once saw 1 of 2 here), so wait for it, progressing both.
  ASSERT_TRUE(Until(a, b, [&] { return relay.records().size() >= 2; })) << relay.records().size() << " records";
  const auto records = relay.records();
  ASSERT_EQ(records.size(), 2u);
  WorkerAddress to;
  ASSERT_TRUE(WorkerAddress::Unpack(b.worker->Address(), &to).ok());
  std::vector<int> indices;
  for (const auto& bytes : records) {
    proxy::RelayRecord rec;
    std::memcpy(&rec, bytes.data(), sizeof rec);
    EXPECT_EQ(rec.header.magic, proxy::kMagic);
    EXPECT_EQ(rec.header.kind, static_cast<uint16_t>(proxy::RecordKind::kRelay));
    EXPECT_EQ(rec.destHost, 7u);
    EXPECT_EQ(rec.originHost, 5u);
    EXPECT_EQ(rec.destPort, to.rails[0].port);
    EXPECT_EQ(rec.hops, 0);
    EXPECT_EQ(rec.flags, 0);
    EXPECT_STREQ(rec.originName, "hA");
    indices.push_back(rec.sockIndex);
  }
  std::sort(indices.begin(), indices.end());
  EXPECT_EQ(indices, (std::vector<int>{40, 41}));
  ep.reset();
}

// D5 (hostile-peer probe): the target named the host its sockets came from with no
// hint that, on a spliced route, that host is the last relay and not the origin. The
// hello now says it was spliced (wire version 3), and the target's error says so: here
// the relay cuts every socket after the hello and part of the first Write.
TEST(TcpSplice, TheTargetsErrorNamesTheHostItArrivesFromAsTheRoutesLastRelay) {
  TestRelay relay(RelayMode::kSplice, sizeof(proxy::RelayRecord), /*cutAfter=*/64 + 64 + 1000);
  std::vector<uint8_t> src(1 << 20, 0x5a), dst(1 << 20, 0xee);
  SplicedPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectThrough(relay, src, dst, &pair));
  Side& a = pair.a;
  Side& b = pair.b;
  std::unique_ptr<Endpoint>& ep = pair.ep;
  ASSERT_TRUE(ep->Write(LocalSlice{pair.srcR, 0, src.size()}, pair.dstR->Key(), pair.dstR->base, 12).ok());
  ASSERT_TRUE(Until(a, b, [&] { return Find(b.events, EventKind::kError) != nullptr; }))
      << "the target saw no error when the relay cut its sockets mid-Write";
  const std::string peer = Find(b.events, EventKind::kError)->error.site.peer;
  EXPECT_NE(peer.find("arriving from 127.0.0.1, the last relay of its route"), std::string::npos) << peer;
  EXPECT_NE(peer.find("w="), std::string::npos) << peer;  // the origin's Worker id stays in the name
  ep.reset();
}

/// Sends a record from a to b through a test relay of `mode` and returns a's error
/// event (cookie 21), which the test checks; the Endpoint stays failed.
Event FailThroughRelay(RelayMode mode, uint16_t* relayPort, int timeoutMs = 20000) {
  Side a, b;
  MakeSide(&a, timeoutMs);
  MakeSide(&b);
  TestRelay relay(mode, sizeof(proxy::RelayRecord));
  *relayPort = relay.port();
  auto* tcp = dynamic_cast<TcpWorker*>(a.worker.get());
  EXPECT_NE(tcp, nullptr);
  if (tcp == nullptr) return {};
  std::unique_ptr<Endpoint> ep;
  EXPECT_TRUE(tcp->ConnectSpliced(b.worker->Address(), Route(b, relay.port()), &ep).ok());
  if (!ep) return {};
  EXPECT_TRUE(ep->Send(std::vector<uint8_t>{1, 2, 3}, 21).ok());
  EXPECT_TRUE(Until(a, b, [&] { return Find(a.events, EventKind::kError) != nullptr; }));
  EXPECT_EQ(Find(b.events, EventKind::kRecord), nullptr);  // nothing reached the target
  EXPECT_FALSE(ep->status().ok());
  const Event* e = Find(a.events, EventKind::kError);
  return e != nullptr ? *e : Event{};
}

TEST(TcpSplice, ARelayThatRefusesFailsTheOpQuotingItsReason) {
  uint16_t port = 0;
  const Event e = FailThroughRelay(RelayMode::kReject, &port);
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.cookie, 21u);
  EXPECT_EQ(e.error.errc, FabricErrc::kConnectFailed) << e.error.ToString();
  const std::string text = e.error.ToString();
  EXPECT_NE(text.find("the relay hR (127.0.0.1:" + std::to_string(port) + ") refused the socket"), std::string::npos)
      << text;
  EXPECT_NE(text.find("relay on hR: refused: no route to host 7"), std::string::npos) << text;
}

TEST(TcpSplice, ARelayThatClosesTheSocketFailsTheOpNamingTheRelay) {
  uint16_t port = 0;
  const Event e = FailThroughRelay(RelayMode::kClose, &port);
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.cookie, 21u);
  const std::string text = e.error.ToString();
  EXPECT_NE(text.find("via hR (127.0.0.1:" + std::to_string(port) + ")"), std::string::npos) << text;
  EXPECT_NE(text.find("rail 0"), std::string::npos) << text;
  // It cannot know whether the relay or the peer ended it, and says so.
  EXPECT_EQ(e.error.errc, FabricErrc::kPeerClosed) << text;
  EXPECT_NE(text.find("through relays: the peer or any relay on the path may have ended it"), std::string::npos)
      << text;
}

TEST(TcpSplice, AStallBeyondTheFirstHopTimesOutSayingTheRailIsOnlyTheFirstHop) {
  uint16_t port = 0;
  const Event e = FailThroughRelay(RelayMode::kStall, &port, 500);
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.cookie, 21u);
  EXPECT_EQ(e.error.errc, FabricErrc::kTimeout) << e.error.ToString();
  const std::string text = e.error.ToString();
  EXPECT_NE(text.find("via hR (127.0.0.1:" + std::to_string(port) + ")"), std::string::npos) << text;
  EXPECT_NE(text.find("no progress for 500 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("through relays: the rail named is this host's first hop"), std::string::npos) << text;
}

TEST(TcpSplice, APlanThatDoesNotFitThePeerIsRefused) {
  Side a, b;
  MakeSide(&a);
  MakeSide(&b);
  auto* tcp = dynamic_cast<TcpWorker*>(a.worker.get());
  ASSERT_NE(tcp, nullptr);
  SpliceRoute r = Route(b, 1);
  r.localRail = {0, 0};  // the peer has one rail
  std::unique_ptr<Endpoint> ep;
  Status s = tcp->ConnectSpliced(b.worker->Address(), r, &ep);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("2 peer rails planned for a peer of 1"), std::string::npos) << s.message();
  r = Route(b, 1);
  r.localRail = {3};  // this side has one rail
  s = tcp->ConnectSpliced(b.worker->Address(), r, &ep);
  EXPECT_NE(s.message().find("local rail 3 of 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::fabric::tcp
