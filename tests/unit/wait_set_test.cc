// fabric::WaitSet: one epoll set over inner Workers' descriptors, synced to the set
// named each time (issue 10: the NCCL comms' helper sleeps on a cable set's Workers).
#include "proxy/fabric/wait_set.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

namespace railyard::fabric {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

void Signal(int fd) {
  const uint64_t one = 1;
  ASSERT_EQ(::write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
}

void Drain(int fd) {
  uint64_t n = 0;
  (void)!::read(fd, &n, sizeof n);
}

TEST(WaitSet, ReadableExactlyWhileAMemberIsAndOnlyForCurrentMembers) {
  WaitSet set;
  ASSERT_GE(set.fd(), 0);
  const int a = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), b = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(set.Sync(std::vector<int>{a, b}));
  EXPECT_FALSE(Readable(set.fd()));
  Signal(b);
  EXPECT_TRUE(Readable(set.fd()));
  Drain(b);
  EXPECT_FALSE(Readable(set.fd())) << "level-triggered: quiet again once the member is";
  // b is dropped: its input no longer wakes the set.
  ASSERT_TRUE(set.Sync(std::vector<int>{a}));
  Signal(b);
  EXPECT_FALSE(Readable(set.fd()));
  Signal(a);
  EXPECT_TRUE(Readable(set.fd()));
  Drain(a);
  ::close(a);
  ::close(b);
}

TEST(WaitSet, AClosedAndReusedNumberIsWatchedAgainAndMinusOneRefusesToSleep) {
  WaitSet set;
  int a = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_TRUE(set.Sync(std::vector<int>{a}));
  ::close(a);  // the kernel drops it from the set
  const int again = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_EQ(again, a) << "the lowest free number comes back";
  ASSERT_TRUE(set.Sync(std::vector<int>{again}));
  Signal(again);
  EXPECT_TRUE(Readable(set.fd())) << "the new descriptor behind the old number is watched";
  Drain(again);
  EXPECT_FALSE(set.Sync(std::vector<int>{again, -1})) << "an inner Worker with no descriptor: no sleep";
  ::close(again);
}

}  // namespace
}  // namespace railyard::fabric
