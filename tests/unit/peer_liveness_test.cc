// proxy::SetPeerLiveness: the keepalive settings a silent connection (a verbs
// Endpoint's bootstrap socket) gets from RAILYARD_TIMEOUT_MS, read back from the
// kernel, and which socket errors count as "the peer's host stopped answering".
// That a cut cable then fails a verbs Endpoint with nothing under way is not checked
// end to end yet: cut_cable_then_reroute.fabric (the fabric comms, keepalive on) and
// the GIN phase of cut_cable_then_reroute cut with a stream under way, where the
// port-down event names the fault first. When a keepalive timeout is outvoted by a recent completion:
// VerbsBootstrap.AKeepaliveTimeoutIsOutvotedByARecentCompletion (fabric_verbs_wire_test).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cerrno>

#include "proxy/socket.h"

namespace railyard::proxy {
namespace {

struct Keepalive {
  int on = 0, idleS = 0, intervalS = 0, count = 0;
  unsigned userMs = 0;
};

Keepalive Read(int fd) {
  Keepalive k;
  socklen_t len = sizeof(int);
  EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &k.on, &len), 0);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k.idleS, &len), 0);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k.intervalS, &len), 0);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.count, &len), 0);
  len = sizeof(unsigned);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &k.userMs, &len), 0);
  return k;
}

TEST(PeerLiveness, ProbesFitInTheTimeout) {
  Fd fd(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  ASSERT_TRUE(SetPeerLiveness(fd.get(), 5000).ok());
  Keepalive k = Read(fd.get());
  EXPECT_EQ(k.on, 1);
  EXPECT_EQ(k.idleS, 2);  // half of 5 s idle, then 3 probes 1 s apart: dead at 5 s
  EXPECT_EQ(k.intervalS, 1);
  EXPECT_EQ(k.count, 3);
  EXPECT_EQ(k.userMs, 5000u);

  ASSERT_TRUE(SetPeerLiveness(fd.get(), 60000).ok());
  k = Read(fd.get());
  EXPECT_EQ(k.idleS, 30);
  EXPECT_EQ(k.intervalS, 10);
  EXPECT_EQ(k.idleS + k.count * k.intervalS, 60);
  EXPECT_EQ(k.userMs, 60000u);

  // Below a second the kernel's 1 s granularity sets the floor: 2 s in all.
  ASSERT_TRUE(SetPeerLiveness(fd.get(), 300).ok());
  k = Read(fd.get());
  EXPECT_EQ(k.idleS, 1);
  EXPECT_EQ(k.intervalS, 1);
  EXPECT_EQ(k.userMs, 1000u);
}

TEST(PeerLiveness, NotASocketIsANamedError) {
  Status s = SetPeerLiveness(-1, 5000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("keepalive"), std::string::npos) << s.message();
}

TEST(PeerLiveness, UnreachableIsTimeoutOrNoRouteNeverAClose) {
  EXPECT_TRUE(IsPeerUnreachable(ETIMEDOUT));
  EXPECT_TRUE(IsPeerUnreachable(EHOSTUNREACH));
  EXPECT_TRUE(IsPeerUnreachable(ENETUNREACH));
  EXPECT_TRUE(IsPeerUnreachable(EHOSTDOWN));
  EXPECT_FALSE(IsPeerUnreachable(ECONNRESET));
  EXPECT_FALSE(IsPeerUnreachable(EPIPE));
  EXPECT_FALSE(IsPeerUnreachable(EAGAIN));
}

}  // namespace
}  // namespace railyard::proxy
