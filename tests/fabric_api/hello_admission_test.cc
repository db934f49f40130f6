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

}  // namespace
}  // namespace railyard::fabric
