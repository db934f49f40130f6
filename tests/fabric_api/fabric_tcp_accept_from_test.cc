// TcpOptions::acceptOnlyFrom (a relay's Forwarder ports: only the neighbour's ends of
// the cable): a socket from another source is closed as it is accepted, before its
// hello or any frame is read, and nothing lands; one from an allowed source is served.
// Sources are told apart on loopback by binding 127.0.0.1 or 127.0.0.2.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
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
    WorkerAddress a;
    ASSERT_TRUE(WorkerAddress::Unpack(worker_->Address(), &a).ok());
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ASSERT_EQ(inet_pton(AF_INET, source, &from.sin_addr), 1);
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = a.rails[0].ipv4;
    to.sin_port = htons(a.rails[0].port);
    ASSERT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
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
  /// Progresses the Worker until `done()` or 10 s.
  bool Pump(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      worker_->Progress(&events_);
      if (done()) return true;
    }
    return false;
  }
  bool ClosedByWorker() {
    return Pump([&] {
      char c;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return false;
      const ssize_t n = recv(fd_, &c, 1, MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno == ECONNRESET);
    });
  }
  std::string Landed() const { return std::string(reinterpret_cast<const char*>(mem_), 8); }

  std::unique_ptr<Domain> domain_;
  std::unique_ptr<Worker> worker_;
  const Region* region_ = nullptr;
  uint8_t mem_[64];
  int fd_ = -1;
  std::vector<Event> events_;
};

TEST_F(TcpAcceptFrom, ASocketFromAnotherSourceIsClosedBeforeAnythingIsRead) {
  Start({"127.0.0.2"});
  ConnectAndWrite("127.0.0.1");
  EXPECT_TRUE(ClosedByWorker());
  EXPECT_EQ(worker_->stats().peerConnections, 0u);
  EXPECT_EQ(Landed(), std::string(8, '\0'));
}

TEST_F(TcpAcceptFrom, ASocketFromAnAllowedSourceIsServed) {
  Start({"127.0.0.9", "127.0.0.2"});
  ConnectAndWrite("127.0.0.2");
  EXPECT_TRUE(Pump([&] { return Landed() == "landed!!"; })) << Landed();
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
