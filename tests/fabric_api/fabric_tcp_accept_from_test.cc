// TcpOptions::acceptOnlyFrom (a relay's Forwarder ports: only the neighbour's ends of
// the cable): a socket from another source is closed as it is accepted, before its
// hello or any frame is read, and nothing lands; one from an allowed source is served.
// Sources are told apart on loopback by binding 127.0.0.1 or 127.0.0.2.
#include <sys/socket.h>
#include <unistd.h>

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
