// RegistrationCache over every fabric transport: reuse of covering live regions
// with enough access, new registrations otherwise, counts, and the last release
// deregistering (a peer's Write into a released region is refused).
#include "proxy/fabric/registration_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

class RegistrationCacheTest : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override {
    Status s = GetParam().make(Knobs{}, &domain_);
    if (s.code() == Code::kInvalidUsage) GTEST_SKIP() << s.message();
    ASSERT_TRUE(s.ok()) << s.message();
    cache_ = std::make_unique<RegistrationCache>(*domain_);
  }
  void TearDown() override { cache_.reset(); }

  std::unique_ptr<Domain> domain_;
  std::unique_ptr<RegistrationCache> cache_;
  std::vector<uint8_t> mem_ = std::vector<uint8_t>(1 << 16);
};

TEST_P(RegistrationCacheTest, CoveredRangeWithLessAccessReusesTheRegion) {
  const Region* whole = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), mem_.size(), kAccessAll, MemoryKind::kHost, &whole).ok());
  const Region* inner = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data() + 100, 4000, kAccessLocal | kAccessRemoteRead,
                              MemoryKind::kHost, &inner).ok());
  EXPECT_EQ(inner, whole);
  EXPECT_EQ(cache_->References(whole), 2u);
  auto st = cache_->stats();
  EXPECT_EQ(st.registrations, 1u);
  EXPECT_EQ(st.reuses, 1u);
  EXPECT_EQ(st.live, 1u);
}

TEST_P(RegistrationCacheTest, MoreAccessOrARangeNotCoveredRegistersAgain) {
  const Region* ro = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 4096, kAccessLocal | kAccessRemoteRead, MemoryKind::kHost, &ro).ok());
  const Region* rw = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 4096, kAccessLocal | kAccessRemoteWrite, MemoryKind::kHost, &rw).ok());
  EXPECT_NE(rw, ro);
  const Region* past = nullptr;  // starts inside ro, ends beyond it
  ASSERT_TRUE(cache_->Acquire(mem_.data() + 2048, 4096, kAccessLocal | kAccessRemoteRead, MemoryKind::kHost, &past).ok());
  EXPECT_NE(past, ro);
  EXPECT_EQ(past->base, reinterpret_cast<uint64_t>(mem_.data() + 2048));
  EXPECT_EQ(past->length, 4096u);
  EXPECT_EQ(cache_->stats().registrations, 3u);
  EXPECT_EQ(cache_->stats().reuses, 0u);
}

TEST_P(RegistrationCacheTest, LastReleaseDeregisters) {
  const Region* a = nullptr;
  const Region* b = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 8192, kAccessAll, MemoryKind::kHost, &a).ok());
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 8192, kAccessAll, MemoryKind::kHost, &b).ok());
  ASSERT_EQ(a, b);
  ASSERT_TRUE(cache_->Release(a).ok());
  EXPECT_EQ(cache_->stats().live, 1u);
  ASSERT_TRUE(cache_->Release(a).ok());
  EXPECT_EQ(cache_->stats().live, 0u);
  EXPECT_EQ(cache_->References(a), 0u);
  Status again = cache_->Release(a);
  EXPECT_EQ(again.code(), Code::kInvalidArgument) << again.message();
  // A fresh Acquire of the same range registers anew.
  const Region* c = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 8192, kAccessAll, MemoryKind::kHost, &c).ok());
  EXPECT_EQ(cache_->stats().registrations, 2u);
  ASSERT_TRUE(cache_->Release(c).ok());
}

TEST_P(RegistrationCacheTest, BadInputIsTheDomainsErrorAndLeavesOutAlone) {
  const Region* sentinel = reinterpret_cast<const Region*>(0x1);
  const Region* out = sentinel;
  EXPECT_EQ(cache_->Acquire(nullptr, 64, kAccessAll, MemoryKind::kHost, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(cache_->Acquire(mem_.data(), 0, kAccessAll, MemoryKind::kHost, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(cache_->Acquire(mem_.data(), 64, 1u << 20, MemoryKind::kHost, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(out, sentinel);
  EXPECT_EQ(cache_->Release(nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(cache_->stats().live, 0u);
}

TEST_P(RegistrationCacheTest, DeviceMemoryIsNotServedByAHostRegion) {
  const Region* host = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 4096, kAccessAll, MemoryKind::kHost, &host).ok());
  const Region* dev = nullptr;
  Status s = cache_->Acquire(mem_.data(), 4096, kAccessAll, MemoryKind::kDevice, &dev);
  if (domain_->capabilities().Has(kCapDeviceMemory)) {
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_NE(dev, host);
  } else {
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_EQ(cache_->stats().live, 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RegistrationCacheTest, ::testing::ValuesIn(FabricTransports()), CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
