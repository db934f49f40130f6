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
    TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    o.timeoutMs = 5000;
    o.acceptOnlyFrom = std::move(allowed);
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
    FrameHeader h = MakeHeader(FrameType::kHello);
    h.addr = 123;
    h.seq = 1;
    h.opBytes = 1;
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

// One source's idle sockets (never a hello) cannot keep the others out: at most 16 of
// them wait, the 17th is closed at once, a socket from another source is still served,
// and the idle ones are closed at the hello timeout (RAILYARD_ACCEPT_TIMEOUT_MS), not at
// RAILYARD_TIMEOUT_MS (hostile-peer probe: 256 idle sockets from one peer shut every new
// connection out for 30 s, renewably).
TEST_F(TcpAcceptFrom, IdleSocketsOfOneSourceNeitherShutOthersOutNorStay) {
  TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = 60000;
  o.helloTimeoutMs = 3000;  // the checks before it take milliseconds; ProgressUntil waits 10 s
  ASSERT_TRUE(CreateTcpDomain(o, &domain_).ok());
  ASSERT_TRUE(domain_->CreateWorker(&worker_).ok());
  std::memset(mem_, 0, sizeof mem_);
  ASSERT_TRUE(domain_->Register(mem_, sizeof mem_, kAccessRemoteWrite, MemoryKind::kHost, &region_).ok());
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
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
  // At the hello timeout every idle socket is closed.
  EXPECT_TRUE(ProgressUntil([&] {
    return std::all_of(idle.begin(), idle.end(), [](int fd) { return raw_peer::SawClose(fd); });
  }));
  close(extra);
  for (int fd : idle) close(fd);
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
