// proxy::RecvAllWithin: a read bounded as a whole, for what a peer sends before it is
// trusted (the snapshot handshake). SO_RCVTIMEO alone restarts with every byte, so a
// peer sending one byte a little within it held a connection for ever (hostile-peer
// probe). Over a socketpair: no timing beyond "the deadline has passed", which a bound
// of 0 ms makes certain.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "proxy/socket.h"

namespace railyard::proxy {
namespace {

struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~Pair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
};

TEST(RecvAllWithin, BytesAlreadyThereAreReadWhateverTheBound) {
  Pair p;
  ASSERT_EQ(::send(p.fd[1], "abcd", 4, 0), 4);
  char buf[4] = {};
  const Status s = RecvAllWithin(p.fd[0], buf, sizeof buf, "handshake", 0);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(std::string(buf, 4), "abcd");
}

TEST(RecvAllWithin, APeerStillShortOfTheBytesAtTheBoundIsTooSlow) {
  Pair p;
  ASSERT_EQ(::send(p.fd[1], "a", 1, 0), 1);  // 1 of 2 bytes, and the bound (0 ms) has passed
  char buf[2] = {};
  const Status s = RecvAllWithin(p.fd[0], buf, sizeof buf, "snapshot handshake", 0);
  EXPECT_EQ(s.code(), Code::kSystemError) << s.message();
  EXPECT_EQ(s.message(), "snapshot handshake: the peer sent 1 of 2 bytes in 0 ms: too slow");
}

TEST(RecvAllWithin, APeerSilentPastTheBoundIsTooSlowWithoutWaitingMore) {
  Pair p;  // nothing sent, no SO_RCVTIMEO: only the bound ends the wait
  char buf[2] = {};
  const Status s = RecvAllWithin(p.fd[0], buf, sizeof buf, "snapshot handshake", 0);
  EXPECT_EQ(s.message(), "snapshot handshake: the peer sent 0 of 2 bytes in 0 ms: too slow");
}

TEST(RecvAllWithin, AnOrderlyCloseBeforeTheFirstByteIsEofAndAfterItAnError) {
  Pair p;
  ::shutdown(p.fd[1], SHUT_WR);
  char buf[2] = {};
  bool eof = false;
  ASSERT_TRUE(RecvAllWithin(p.fd[0], buf, sizeof buf, "handshake", 1000, &eof).ok());
  EXPECT_TRUE(eof);
  Pair q;
  ASSERT_EQ(::send(q.fd[1], "a", 1, 0), 1);
  ::shutdown(q.fd[1], SHUT_WR);
  const Status s = RecvAllWithin(q.fd[0], buf, sizeof buf, "handshake", 1000, &eof);
  EXPECT_FALSE(eof);
  EXPECT_NE(s.message().find("connection closed by peer after 1 of 2 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::proxy
