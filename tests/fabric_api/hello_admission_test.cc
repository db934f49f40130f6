// AdmitPending (proxy/fabric/hello_admission.h): below the table's size every socket
// waits for its hello whatever its source; at the size, the source holding the most
// gives way: another source's socket evicts that source's oldest, and its own new
// socket (or a tied source's) is refused.
#include "proxy/fabric/hello_admission.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace railyard::fabric {
namespace {

constexpr uint32_t kA = 0x0100007f, kB = 0x0200007f, kC = 0x0300007f;

TEST(HelloAdmission, BelowTheSizeEverySocketWaitsWhateverItsSource) {
  const std::vector<uint32_t> waiting(7, kA);  // one source holding all
  const Admission a = AdmitPending(waiting, kA, 8);
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.evict, Admission::kNone);
  EXPECT_TRUE(AdmitPending({}, kB, 1).admit);
}

TEST(HelloAdmission, AtTheSizeAnotherSourceEvictsTheBiggestHoldersOldest) {
  const std::vector<uint32_t> waiting = {kB, kA, kC, kA, kA, kB};  // A holds 3, oldest at 1
  const Admission a = AdmitPending(waiting, kC, 6);
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.evict, 1u);
  // A source that holds nothing yet is admitted the same way.
  const Admission fresh = AdmitPending(waiting, 0x0900007f, 6);
  EXPECT_TRUE(fresh.admit);
  EXPECT_EQ(fresh.evict, 1u);
}

TEST(HelloAdmission, AtTheSizeTheBiggestHoldersOwnSocketIsRefused) {
  const std::vector<uint32_t> waiting = {kB, kA, kC, kA, kA, kB};
  const Admission a = AdmitPending(waiting, kA, 6);
  EXPECT_FALSE(a.admit);
  EXPECT_EQ(a.evict, Admission::kNone);
}

TEST(HelloAdmission, AtTheSizeASourceTiedWithTheBiggestIsRefused) {
  // A and B hold 2 each: B's new socket would only take A's place and A's would take B's.
  const std::vector<uint32_t> waiting = {kA, kB, kA, kB, kC};
  EXPECT_FALSE(AdmitPending(waiting, kB, 5).admit);
  EXPECT_FALSE(AdmitPending(waiting, kA, 5).admit);
  const Admission c = AdmitPending(waiting, kC, 5);
  EXPECT_TRUE(c.admit);
  EXPECT_EQ(c.evict, 0u);  // A reached 2 first: its oldest
}

TEST(HelloAdmission, AFloodFromOneSourceKeepsNoOtherOut) {
  // 256 idle sockets from A; then 100 sockets from 100 other sources arrive one by
  // one: each is admitted, each evicting one of A's, oldest first.
  std::vector<uint32_t> waiting(256, kA);
  for (uint32_t i = 0; i < 100; ++i) {
    const uint32_t source = 0x0a000000u + i;
    const Admission a = AdmitPending(waiting, source, 256);
    ASSERT_TRUE(a.admit) << i;
    ASSERT_EQ(a.evict, 0u) << i;  // A's oldest is always at the front
    waiting.erase(waiting.begin());
    waiting.push_back(source);
  }
  EXPECT_EQ(std::count(waiting.begin(), waiting.end(), kA), 156);
  EXPECT_FALSE(AdmitPending(waiting, kA, 256).admit);
}

// AdmitIdle: a server's connected clients, some under way.
TEST(IdleAdmission, BelowTheSizeEveryClientIsAdmitted) {
  const std::vector<HeldConnection> held(3, HeldConnection{kA, false});
  const Admission a = AdmitIdle(held, kA, 4);
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.evict, Admission::kNone);
}

TEST(IdleAdmission, AtTheSizeTheBiggestSourcesOldestIdleOneGivesWay) {
  // A holds 3 (its oldest, at 1, busy; its oldest idle at 3), B 2, C 1.
  const std::vector<HeldConnection> held = {{kB, true}, {kA, false}, {kC, true}, {kA, true}, {kA, true}, {kB, true}};
  const Admission a = AdmitIdle(held, kC, 6);
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.evict, 3u);
  // B, with fewer than A, gets in the same way.
  EXPECT_EQ(AdmitIdle(held, kB, 6).evict, 3u);
  // A itself does not: it holds the most.
  EXPECT_FALSE(AdmitIdle(held, kA, 6).admit);
}

TEST(IdleAdmission, BusyConnectionsCountInTheShareButAreNeverClosed) {
  // A's 3 are all under way: the newcomer is refused, not another source's idle one taken.
  const std::vector<HeldConnection> held = {{kB, true}, {kA, false}, {kA, false}, {kA, false}};
  const Admission a = AdmitIdle(held, kC, 4);
  EXPECT_FALSE(a.admit);
  EXPECT_EQ(a.evict, Admission::kNone);
}

TEST(IdleAdmission, TiesGoToTheSourceThatReachedTheMostFirst) {
  // A and B hold 2 each; A's second (index 2) came before B's (index 3).
  const std::vector<HeldConnection> held = {{kB, true}, {kA, true}, {kA, true}, {kB, true}};
  const Admission a = AdmitIdle(held, kC, 4);
  EXPECT_TRUE(a.admit);
  EXPECT_EQ(a.evict, 1u);
  EXPECT_FALSE(AdmitIdle(held, kA, 4).admit) << "one of the most";
  EXPECT_FALSE(AdmitIdle(held, kB, 4).admit) << "tied with the most";
}

TEST(IdleAdmission, IdleClientsFromManyAddressesKeepNoOtherOut) {
  // The probe: 4 addresses x 64 idle clients fill 256 seats; 100 clients from other
  // addresses arrive one by one and each gets in, the fullest address giving way.
  std::vector<HeldConnection> held;
  for (uint32_t s : {kA, kB, kC, 0x0400007fu}) {
    for (int i = 0; i < 64; ++i) held.push_back({s, true});
  }
  for (uint32_t i = 0; i < 100; ++i) {
    const uint32_t source = 0x0a000000u + i;
    const Admission a = AdmitIdle(held, source, 256);
    ASSERT_TRUE(a.admit) << i;
    ASSERT_NE(a.evict, Admission::kNone) << i;
    ASSERT_TRUE(held[a.evict].source != source) << i;
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(a.evict));
    held.push_back({source, false});  // the newcomer, busy at its handshake
  }
  for (uint32_t s : {kA, kB, kC, 0x0400007fu}) {
    EXPECT_EQ(std::count_if(held.begin(), held.end(), [&](const HeldConnection& h) { return h.source == s; }), 39);
  }
}

}  // namespace
}  // namespace railyard::fabric
