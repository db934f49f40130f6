// A legacy TCP send comm (proxy/tcp/tcp_send_comm.h) whose peer stops posting
// receives (a cut cable, a receiver that never calls irecv): the timeout names the
// receive sequence the send waits for and says that nothing was posted for it.
// Before the fix the message always said "seq 0" and "unmatched posted tags: none
// posted", whatever had been sent before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_send_comm.h"
#include "proxy/wire.h"

namespace p = railyard::proxy;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

TEST(TcpSendWaitTimeout, NamesTheAwaitedSequenceAndThatNothingWasPosted) {
  int c[2], d[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, d), 0);
  // The receiver posts one receive (seq 0, tag 3, 4 KiB); the sender completes it.
  std::vector<char> peerBuffer(4096);
  p::CtsRecord cts{};
  cts.header = p::MakeHeader(p::RecordKind::kCts);
  cts.seq = 0;
  cts.n = 1;
  cts.entries[0] = p::CtsEntry{reinterpret_cast<uint64_t>(peerBuffer.data()), peerBuffer.size(), 1, 3};
  ASSERT_EQ(::send(c[1], &cts, sizeof cts, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof cts));

  p::TcpConnection conn;
  conn.control = p::Fd(c[0]);
  conn.data.push_back(p::Fd(d[0]));
  conn.rails.push_back("t0");
  conn.peer.host = "receiver";
  conn.peer.address = "127.0.0.1:1";
  conn.peer.device = "t0";
  p::TcpOptions options;
  options.nsocks = 1;
  options.nthreads = 1;
  options.timeoutMs = 50;
  p::TcpSendComm comm(std::move(conn), options);
  std::vector<char> payload(1024, 'x');
  p::Request* r = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (r == nullptr && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(comm.Isend(payload.data(), payload.size(), 3, nullptr, &r).ok());
  }
  ASSERT_NE(r, nullptr);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    int sizes[1] = {-1};
    ASSERT_TRUE(comm.Test(r, &done, sizes).ok());
  }
  ASSERT_TRUE(done);

  // The second send waits for seq 1, which the peer never posts.
  railyard::Status s;
  p::Request* r2 = nullptr;
  while (s.ok() && r2 == nullptr && std::chrono::steady_clock::now() < deadline) {
    s = comm.Isend(payload.data(), payload.size(), 3, nullptr, &r2);
  }
  ASSERT_FALSE(s.ok()) << "the send should time out waiting for a receive";
  EXPECT_THAT(s.message(), HasSubstr("seq 1)"));
  EXPECT_THAT(s.message(), HasSubstr("posted no receive"));
  EXPECT_THAT(s.message(), Not(HasSubstr("none posted")));
  comm.Close();
  ::close(c[1]);
  ::close(d[1]);
}

}  // namespace
