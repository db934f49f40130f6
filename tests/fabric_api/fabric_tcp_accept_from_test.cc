// TcpOptions::acceptOnlyFrom (a relay's Forwarder ports: only the neighbour's ends of
// the cable): a socket from another source is closed as it is accepted, before its
// hello or any frame is read, and nothing lands; one from an allowed source is served.
// Sources are told apart on loopback by binding 127.0.0.1 or 127.0.0.2.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "tests/fabric_api/tcp_raw_peer.h"

namespace railyard::fabric::tcp {
namespace {

class TcpAcceptFrom : public ::testing::Test {
 protected:
  /// A Worker on 127.0.0.1 that accepts sockets only from `allowed`.
  void Start(std::vector<std::string> allowed) {
    TcpOptions o = OnLoopback(5000);
    o.acceptOnlyFrom = std::move(allowed);
    StartWith(o);
  }
  /// Options of one rail on 127.0.0.1 with RAILYARD_TIMEOUT_MS `timeoutMs`.
  static TcpOptions OnLoopback(int timeoutMs) {
    TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    o.timeoutMs = timeoutMs;
    return o;
  }
  /// A Worker of `o` and the 64-byte region peers write into.
  void StartWith(const TcpOptions& o) {
    ASSERT_TRUE(CreateTcpDomain(o, &domain_).ok());
    ASSERT_TRUE(domain_->CreateWorker(&worker_).ok());
    std::memset(mem_, 0, sizeof mem_);
    ASSERT_TRUE(domain_->Register(mem_, sizeof mem_, kAccessRemoteWrite, MemoryKind::kHost, &region_).ok());
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    worker_.reset();
    domain_.reset();
  }
  /// Connects to the Worker's rail 0 from `source` (bound, port 0) and sends a hello
  /// and an 8-byte Write of "landed!!" at the region's start.
  void ConnectAndWrite(const char* source) {
    fd_ = raw_peer::ConnectToRail0(*worker_, source);
    ASSERT_GE(fd_, 0);
    FrameHeader h = raw_peer::Hello();
    FrameHeader w = MakeHeader(FrameType::kWrite);
    w.seq = 0;
    w.addr = region_->base;
    w.opBytes = 8;
    w.key = region_->softwareKey;
    w.payloadBytes = 8;
    std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
    bytes.append(reinterpret_cast<const char*>(&w), sizeof w);
    bytes.append("landed!!");
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  /// Progresses the Worker until `done()`, for at most 10 s; whether it came.
  bool ProgressUntil(const std::function<bool()>& done) {
    std::vector<Event> events;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         std::chrono::steady_clock::now() < until;) {
      worker_->Progress(&events);
      if (done()) return true;
    }
    return false;
  }
  std::string Landed() const { return std::string(reinterpret_cast<const char*>(mem_), 8); }

  std::unique_ptr<Domain> domain_;
  std::unique_ptr<Worker> worker_;
  uint8_t mem_[64];
  const Region* region_ = nullptr;
  int fd_ = -1;  ///< the raw peer
};

TEST_F(TcpAcceptFrom, ASocketFromAnotherSourceIsClosedBeforeAnythingIsRead) {
  Start({"127.0.0.2"});
  ConnectAndWrite("127.0.0.1");
  EXPECT_TRUE(ProgressUntil([&] { return raw_peer::SawClose(fd_); }));
  EXPECT_EQ(worker_->stats().peerConnections, 0u);
  EXPECT_EQ(Landed(), std::string(8, '\0'));
}

TEST_F(TcpAcceptFrom, ASocketFromAnAllowedSourceIsServed) {
  Start({"127.0.0.9", "127.0.0.2"});
  ConnectAndWrite("127.0.0.2");
  EXPECT_TRUE(ProgressUntil([&] { return Landed() == "landed!!"; })) << Landed();
  EXPECT_EQ(worker_->stats().peerConnections, 1u);
}

// One source's idle sockets (never a hello) cannot keep the others out: 256 of them
// wait (the table's size, AdmitPending), the 257th from that source is closed at once,
// a socket from another source is served and the flooder's oldest waiting socket is
// closed for it, and the idle ones are closed at the hello timeout
// (RAILYARD_ACCEPT_TIMEOUT_MS), not at RAILYARD_TIMEOUT_MS (hostile-peer probe: 256 idle
// sockets from one peer shut every new connection out for 30 s, renewably).
TEST_F(TcpAcceptFrom, IdleSocketsOfOneSourceNeitherShutOthersOutNorStay) {
  TcpOptions o = OnLoopback(60000);
  o.helloTimeoutMs = 4000;  // the checks before it take well under a second; ProgressUntil waits 10 s
  ASSERT_NO_FATAL_FAILURE(StartWith(o));
  std::vector<int> idle;
  for (int i = 0; i < 256; ++i) {
    idle.push_back(raw_peer::ConnectToRail0(*worker_, "127.0.0.3"));
    ASSERT_GE(idle.back(), 0);
    // Accepted before the next: the Worker counts what waits.
    std::vector<Event> events;
    worker_->Progress(&events);
  }
  const int extra = raw_peer::ConnectToRail0(*worker_, "127.0.0.3");
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(ProgressUntil([&] { return raw_peer::SawClose(extra); }));
  for (int fd : idle) EXPECT_FALSE(raw_peer::SawClose(fd));  // still waiting for their hellos
  ConnectAndWrite("127.0.0.2");  // another source is served meanwhile
  EXPECT_TRUE(ProgressUntil([&] { return Landed() == "landed!!"; })) << Landed();
  // Room was made by closing the flooder's oldest socket, and only that one.
  EXPECT_TRUE(raw_peer::SawClose(idle.front()));
  for (size_t i = 1; i < idle.size(); ++i) EXPECT_FALSE(raw_peer::SawClose(idle[i])) << "idle socket " << i;
  // At the hello timeout every idle socket is closed.
  EXPECT_TRUE(ProgressUntil([&] {
    return std::all_of(idle.begin(), idle.end(), [](int fd) { return raw_peer::SawClose(fd); });
  }));
  close(extra);
  for (int fd : idle) close(fd);
}

// A flood spread over 8 sources (25 idle sockets each) fills most of the table; a
// real host then opens 60 sockets at once, each with its hello sent. Within the one
// accept pass that host holds the most sockets, but its hellos have arrived: they are
// taken before anything is evicted, so every one of the 60 is served (with the fair
// share alone, the host was the biggest holder and its sockets were refused).
TEST_F(TcpAcceptFrom, HellosThatArrivedAreTakenBeforeAFullTableEvicts) {
  TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = 60000;
  o.helloTimeoutMs = 30000;  // the flood must still wait while the host's sockets come
  ASSERT_TRUE(CreateTcpDomain(o, &domain_).ok());
  ASSERT_TRUE(domain_->CreateWorker(&worker_).ok());
  std::vector<int> idle;
  for (int src = 0; src < 8; ++src) {
    const std::string from = "127.0.0." + std::to_string(10 + src);
    for (int i = 0; i < 25; ++i) {
      idle.push_back(raw_peer::ConnectToRail0(*worker_, from.c_str()));
      ASSERT_GE(idle.back(), 0);
      std::vector<Event> events;
      worker_->Progress(&events);
    }
  }
  std::vector<int> host;
  for (int i = 0; i < 60; ++i) {
    host.push_back(raw_peer::ConnectToRail0(*worker_, "127.0.0.2"));
    ASSERT_GE(host.back(), 0);
    FrameHeader h = raw_peer::Hello(1000 + static_cast<uint64_t>(i));  // 60 peers' connections of one socket each
    ASSERT_EQ(send(host.back(), &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  }
  EXPECT_TRUE(ProgressUntil([&] { return worker_->stats().peerConnections == 60; }))
      << worker_->stats().peerConnections << " of 60 served";
  for (int fd : host) EXPECT_FALSE(raw_peer::SawClose(fd));
  for (int fd : host) close(fd);
  for (int fd : idle) close(fd);
}

// Hostile-peer probe: 1100 idle connections (a hello each) from one source filled the
// Worker's table of peer connections, and every later peer was refused. Now, the table
// full, the source holding the most idle connections gives way: a new one from another
// source closes that source's oldest idle connection, one more from it is refused.
TEST_F(TcpAcceptFrom, IdleConnectionsOfOneSourceDoNotShutOthersOut) {
  TcpOptions o = OnLoopback(60000);
  o.maxPeerConnections = 4;
  ASSERT_NO_FATAL_FAILURE(StartWith(o));
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(raw_peer::ConnectToRail0(*worker_, "127.0.0.3"));
    ASSERT_GE(idle.back(), 0);
    FrameHeader h = raw_peer::Hello(1000 + static_cast<uint64_t>(i));
    ASSERT_EQ(send(idle.back(), &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
    // Served before the next arrives: the oldest is the first.
    ASSERT_TRUE(ProgressUntil([&] { return worker_->stats().peerConnections == static_cast<size_t>(i + 1); }));
  }
  const int more = raw_peer::ConnectToRail0(*worker_, "127.0.0.3");
  ASSERT_GE(more, 0);
  FrameHeader h = raw_peer::Hello(2000);
  ASSERT_EQ(send(more, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  EXPECT_TRUE(ProgressUntil([&] { return raw_peer::SawClose(more); })) << "a fifth connection of the flooder was served";
  for (int fd : idle) EXPECT_FALSE(raw_peer::SawClose(fd));
  ConnectAndWrite("127.0.0.2");  // another source: served, in place of the flooder's oldest
  EXPECT_TRUE(ProgressUntil([&] { return Landed() == "landed!!"; })) << Landed();
  EXPECT_TRUE(raw_peer::SawClose(idle.front()));
  for (size_t i = 1; i < idle.size(); ++i) EXPECT_FALSE(raw_peer::SawClose(idle[i])) << "idle connection " << i;
  EXPECT_EQ(worker_->stats().peerConnections, 4u);
  close(more);
  for (int fd : idle) close(fd);
}

// Review: counting idle connections only, a source that kept its own busy (half an op
// each) held no share and could close every other source's idle connection, one hello
// at a time. Shares count every connection: that source holds the most, so its next
// connection is refused, and another source's newcomer closes nothing of a third's
// (the biggest source has none idle): refused too, the idle one stays.
TEST_F(TcpAcceptFrom, ASourceKeepingItsConnectionsBusyClosesNoOtherSources) {
  TcpOptions o = OnLoopback(60000);
  o.maxPeerConnections = 4;
  ASSERT_NO_FATAL_FAILURE(StartWith(o));
  auto open = [&](const char* from, uint64_t worker, bool halfWrite) {
    const int fd = raw_peer::ConnectToRail0(*worker_, from);
    EXPECT_GE(fd, 0);
    std::string bytes;
    FrameHeader h = raw_peer::Hello(worker);
    bytes.append(reinterpret_cast<const char*>(&h), sizeof h);
    if (halfWrite) {  // op 0: 8 bytes announced, 2 sent: under way for as long as it likes
      FrameHeader w = MakeHeader(FrameType::kWrite);
      w.seq = 0;
      w.addr = region_->base + 8 * (worker % 8);
      w.opBytes = 8;
      w.key = region_->softwareKey;
      w.payloadBytes = 8;
      bytes.append(reinterpret_cast<const char*>(&w), sizeof w);
      bytes.append("AB");
    }
    EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    return fd;
  };
  const int idle = open("127.0.0.2", 1, false);
  ASSERT_TRUE(ProgressUntil([&] { return worker_->stats().peerConnections == 1; }));
  std::vector<int> busy;
  for (uint64_t i = 0; i < 3; ++i) {
    busy.push_back(open("127.0.0.3", 100 + i, true));
    ASSERT_TRUE(ProgressUntil([&] { return worker_->stats().peerConnections == i + 2; }));
  }
  const int more = open("127.0.0.3", 200, false);
  EXPECT_TRUE(ProgressUntil([&] { return raw_peer::SawClose(more); })) << "the busy source's 5th was served";
  const int third = open("127.0.0.4", 300, false);
  EXPECT_TRUE(ProgressUntil([&] { return raw_peer::SawClose(third); })) << "a newcomer was served in a full table";
  EXPECT_FALSE(raw_peer::SawClose(idle)) << "the idle connection of 127.0.0.2 was closed";
  for (int fd : busy) EXPECT_FALSE(raw_peer::SawClose(fd));
  EXPECT_EQ(worker_->stats().peerConnections, 4u);
  for (int fd : busy) close(fd);
  close(more);
  close(third);
  close(idle);
}

// One host opens many sockets at once and every one is served: three Endpoints of 16
// sockets each (NCCL_NSOCKS_PERTHREAD=16) dial one Worker before it makes a single
// pass, so all 48 wait in one accept pass from one source. A cap of 16 per source
// closed 32 of them and failed two Endpoints (a CI run: 4 processes through a relay,
// FetchAddFromFourProcesses, one child's FetchAdds failed).
TEST(TcpAcceptBurst, FortyEightSocketsFromOneSourceAreAllServed) {
  auto make = [](int socketsPerRail, std::unique_ptr<Domain>* d, std::unique_ptr<Worker>* w) {
    TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    o.socketsPerRail = socketsPerRail;
    o.timeoutMs = 20000;
    ASSERT_TRUE(CreateTcpDomain(o, d).ok());
    ASSERT_TRUE((*d)->CreateWorker(w).ok());
  };
  std::unique_ptr<Domain> targetDomain;
  std::unique_ptr<Worker> target;
  make(1, &targetDomain, &target);
  constexpr int kHosts = 3;
  std::unique_ptr<Domain> domains[kHosts];
  std::unique_ptr<Worker> workers[kHosts];
  std::unique_ptr<Endpoint> eps[kHosts];
  for (int i = 0; i < kHosts; ++i) {
    make(16, &domains[i], &workers[i]);
    ASSERT_TRUE(workers[i]->Connect(target->Address(), &eps[i]).ok());
    ASSERT_TRUE(eps[i]->Send(std::vector<uint8_t>{static_cast<uint8_t>(10 + i)}, 100 + i).ok());
  }
  std::vector<uint8_t> records;
  int done = 0;
  std::vector<Event> events;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       std::chrono::steady_clock::now() < until && (done < kHosts || records.size() < kHosts);) {
    for (int i = 0; i < kHosts; ++i) {
      events.clear();
      workers[i]->Progress(&events);
      for (const Event& e : events) {
        EXPECT_EQ(e.kind, EventKind::kDone) << e.error.ToString();
        EXPECT_EQ(e.cookie, static_cast<uint64_t>(100 + i));
        ++done;
      }
    }
    events.clear();
    target->Progress(&events);
    for (const Event& e : events) {
      ASSERT_EQ(e.kind, EventKind::kRecord) << e.error.ToString();
      ASSERT_EQ(e.record.size(), 1u);
      records.push_back(e.record[0]);
    }
  }
  EXPECT_EQ(done, kHosts);
  std::sort(records.begin(), records.end());
  EXPECT_EQ(records, (std::vector<uint8_t>{10, 11, 12}));
  for (int i = 0; i < kHosts; ++i) EXPECT_TRUE(eps[i]->status().ok()) << eps[i]->status().message();
  EXPECT_EQ(target->stats().peerConnections, static_cast<size_t>(kHosts));
}

TEST_F(TcpAcceptFrom, AnAddressThatIsNotIpv4IsRefusedWithTheOptions) {
  TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.acceptOnlyFrom = {"h1"};
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("accepted source 'h1' is not an IPv4 address"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::fabric::tcp
