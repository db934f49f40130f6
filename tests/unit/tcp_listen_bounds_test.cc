// TcpListenComm under pressure, in process: strays are dropped without an error,
// silent sockets expire, the pending cap holds, and a connection whose sockets
// straddle a full listener is not expired while the listener itself held it up.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "proxy/mr_cache.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_connector.h"
#include "proxy/tcp/tcp_listen_comm.h"

namespace railyard::proxy {
namespace {

using Ms = std::chrono::milliseconds;

class TcpListenBounds : public ::testing::Test {
 protected:
  void Listen(int maxPending, int timeoutMs, int nsocks = 4) {
    sockaddr_storage lo{};
    auto* a = reinterpret_cast<sockaddr_in*>(&lo);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    options_.nsocks = nsocks;
    options_.maxPendingSockets = maxPending;
    options_.acceptTimeoutMs = timeoutMs;
    options_.device = "lo";
    Status s = TcpListenComm::Create(lo, sizeof(sockaddr_in), options_, "test", &cache_, &listen_, &addr_);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  /// A raw socket connected to the listener, sending `bytes` of `data`.
  int Raw(const void* data = nullptr, size_t bytes = 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr_.addr), addr_.len), 0);
    if (bytes > 0) {
      EXPECT_EQ(::send(fd, data, bytes, 0), static_cast<ssize_t>(bytes));
    }
    raw_.push_back(fd);
    return fd;
  }
  /// A TcpConnector with every socket connected and its hello sent.
  std::unique_ptr<TcpConnector> Connector(TcpConnection* conn) {
    std::unique_ptr<TcpConnector> c;
    EXPECT_TRUE(TcpConnector::Start(addr_, options_, "peer", &c).ok());
    bool done = false;
    for (int i = 0; i < 100000 && !done; ++i) EXPECT_TRUE(c->ProgressConnection(conn, &done).ok());
    EXPECT_TRUE(done);
    return c;
  }
  void TearDown() override {
    for (int fd : raw_) ::close(fd);
  }

  MrCache cache_;
  TcpOptions options_;
  std::unique_ptr<TcpListenComm> listen_;
  ListenAddress addr_;
  std::vector<int> raw_;
};

TEST_F(TcpListenBounds, StraysAreDroppedWithoutAnError) {
  Listen(256, 10000);
  char noise[64];
  for (size_t i = 0; i < sizeof noise; ++i) noise[i] = static_cast<char>(i * 37 + 11);
  const int fd = Raw(noise, sizeof noise);
  TcpConnection conn;
  bool got = false;
  const auto until = std::chrono::steady_clock::now() + Ms(5000);
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 0) == 0 && std::chrono::steady_clock::now() < until) {
    const Status s = listen_->AcceptConnection(&conn, &got);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_FALSE(got);
    std::this_thread::sleep_for(Ms(1));
  }
  EXPECT_EQ(listen_->PendingSockets(), 0u);
  RejectRecord r{};
  EXPECT_EQ(::recv(fd, &r, sizeof r, MSG_WAITALL), static_cast<ssize_t>(sizeof r)) << "the stray gets a reject";
  EXPECT_NE(std::string(r.reason).find("another plugin"), std::string::npos) << r.reason;
}

TEST_F(TcpListenBounds, PendingCapHoldsAndSilentSocketsExpire) {
  Listen(5, 100);
  for (int i = 0; i < 12; ++i) Raw();
  TcpConnection conn;
  bool got = false;
  ASSERT_TRUE(listen_->AcceptConnection(&conn, &got).ok());
  EXPECT_EQ(listen_->PendingSockets(), 5u) << "at most the cap";
  // Bounded wait for the deadline to pass and the sweep to drop them.
  const auto until = std::chrono::steady_clock::now() + Ms(5000);
  size_t dropped = 0;
  while (dropped < 12 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(listen_->AcceptConnection(&conn, &got).ok());
    EXPECT_LE(listen_->PendingSockets(), 5u);
    dropped = 0;
    for (int fd : raw_) {
      char b;
      dropped += ::recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) >= 0;  // reject record or EOF: closed by the listener
    }
    std::this_thread::sleep_for(Ms(5));
  }
  EXPECT_EQ(dropped, 12u) << "every silent socket is closed after RAILYARD_ACCEPT_TIMEOUT_MS";
}

TEST_F(TcpListenBounds, AConnectionHeldUpByAFullListenerIsNotExpired) {
  // Cap 6: two silent sockets and four of the connector's five fill it; the silent
  // ones expire in the same sweep as the connection's clock would.
  Listen(6, 200);
  Raw();
  Raw();
  TcpConnection out;
  auto c = Connector(&out);
  TcpConnection conn;
  bool got = false;
  ASSERT_TRUE(listen_->AcceptConnection(&conn, &got).ok());
  ASSERT_FALSE(got);
  ASSERT_EQ(listen_->PendingSockets(), 6u);
  const auto until = std::chrono::steady_clock::now() + Ms(5000);
  while (!got && std::chrono::steady_clock::now() < until) {
    const Status s = listen_->AcceptConnection(&conn, &got);
    ASSERT_TRUE(s.ok()) << s.message();
    std::this_thread::sleep_for(Ms(5));
  }
  EXPECT_TRUE(got) << "the connection was dropped while its last socket waited behind expiring silent ones";
  EXPECT_EQ(conn.data.size(), 4u);
  EXPECT_EQ(listen_->PendingSockets(), 0u);
}

TEST_F(TcpListenBounds, HalfOpenConnectionExpires) {
  Listen(256, 100);
  HelloRecord h{};
  h.header = MakeHeader(RecordKind::kHello);
  h.listenId = addr_.listenId;
  h.connId = 42;
  h.sockIndex = 0;
  h.nsocks = 64;
  const int fd = Raw(&h, sizeof h);
  TcpConnection conn;
  bool got = false;
  ASSERT_TRUE(listen_->AcceptConnection(&conn, &got).ok());
  EXPECT_EQ(listen_->PendingSockets(), 1u);
  const auto until = std::chrono::steady_clock::now() + Ms(5000);
  while (listen_->PendingSockets() != 0 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(listen_->AcceptConnection(&conn, &got).ok());
    std::this_thread::sleep_for(Ms(5));
  }
  EXPECT_EQ(listen_->PendingSockets(), 0u) << "socket 0 of 64 was kept past its deadline";
  char b;
  EXPECT_EQ(::recv(fd, &b, 1, 0), 0) << "closed";
}

}  // namespace
}  // namespace railyard::proxy
