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

TEST_P(RegistrationCacheTest, AcquireLiveTakesOnlyACoveringLiveRegionAndNeverRegisters) {
  const Region* found = nullptr;
  EXPECT_FALSE(cache_->AcquireLive(mem_.data(), 4096, kAccessLocal, MemoryKind::kHost, &found));
  EXPECT_EQ(found, nullptr);
  EXPECT_EQ(cache_->stats().registrations, 0u);
  const Region* whole = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 8192, kAccessLocal | kAccessRemoteRead, MemoryKind::kHost, &whole).ok());
  ASSERT_TRUE(cache_->AcquireLive(mem_.data() + 100, 4000, kAccessLocal, MemoryKind::kHost, &found));
  EXPECT_EQ(found, whole);
  EXPECT_EQ(cache_->References(whole), 2u);
  // Past its end, more access than it grants, another memory kind: none, nothing registered.
  const Region* none = nullptr;
  EXPECT_FALSE(cache_->AcquireLive(mem_.data() + 4096, 8192, kAccessLocal, MemoryKind::kHost, &none));
  EXPECT_FALSE(cache_->AcquireLive(mem_.data(), 4096, kAccessLocal | kAccessRemoteWrite, MemoryKind::kHost, &none));
  EXPECT_FALSE(cache_->AcquireLive(mem_.data(), 4096, kAccessLocal, MemoryKind::kDevice, &none));
  EXPECT_FALSE(cache_->AcquireLive(nullptr, 4096, kAccessLocal, MemoryKind::kHost, &none));
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(cache_->stats().registrations, 1u);
  // Its count is released like any other: the region stays until both are gone.
  ASSERT_TRUE(cache_->Release(found).ok());
  EXPECT_EQ(cache_->stats().live, 1u);
  ASSERT_TRUE(cache_->Release(whole).ok());
  EXPECT_EQ(cache_->stats().live, 0u);
  EXPECT_FALSE(cache_->AcquireLive(mem_.data(), 4096, kAccessLocal, MemoryKind::kHost, &none));
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

TEST_P(RegistrationCacheTest, RetainKeepsARegionAliveAfterItsOwnersRelease) {
  const Region* a = nullptr;
  ASSERT_TRUE(cache_->Acquire(mem_.data(), 8192, kAccessAll, MemoryKind::kHost, &a).ok());
  ASSERT_TRUE(cache_->Retain(a).ok());
  EXPECT_EQ(cache_->References(a), 2u);
  ASSERT_TRUE(cache_->Release(a).ok());  // the owner's deregMr
  EXPECT_EQ(cache_->stats().live, 1u);    // still registered for the retainer
  EXPECT_TRUE(a->Contains(reinterpret_cast<uint64_t>(mem_.data()), 8192));
  ASSERT_TRUE(cache_->Release(a).ok());
  EXPECT_EQ(cache_->stats().live, 0u);
  // A released or foreign handle is refused by pointer, never read.
  Status gone = cache_->Retain(a);
  EXPECT_EQ(gone.code(), Code::kInvalidArgument) << gone.message();
  Status foreign = cache_->Retain(reinterpret_cast<const Region*>(0x1));
  EXPECT_EQ(foreign.code(), Code::kInvalidArgument) << foreign.message();
  EXPECT_EQ(cache_->Retain(nullptr).code(), Code::kInvalidArgument);
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

/// A Domain over another whose RegisterDmaBuf registers the range as plain memory
/// (the inner transport has no DMA-BUF path): lets the cache's DMA-BUF bookkeeping
/// run on every host.
class DmaBufAsPlain : public Domain {
 public:
  explicit DmaBufAsPlain(Domain& inner) : inner_(inner) {}
  const char* TransportName() const override { return inner_.TransportName(); }
  const Capabilities& capabilities() const override { return inner_.capabilities(); }
  const std::vector<RailInfo>& rails() const override { return inner_.rails(); }
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) override {
    return inner_.Register(addr, bytes, access, kind, out);
  }
  Status Deregister(const Region* region) override {
    ++deregistered;
    return inner_.Deregister(region);
  }
  Status RegisterDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t, uint32_t access, MemoryKind kind,
                        const Region** out) override {
    if (fd < 0) return InvalidArgument("fd");
    ++dmabufs;
    return inner_.Register(addr, bytes, access, kind, out);
  }
  Status CreateWorker(std::unique_ptr<Worker>* out) override { return inner_.CreateWorker(out); }
  int dmabufs = 0;
  int deregistered = 0;

 private:
  Domain& inner_;
};

TEST_P(RegistrationCacheTest, DmaBufRegionsAreNeverReused) {
  DmaBufAsPlain d(*domain_);
  RegistrationCache cache(d);
  const Region* buf1 = nullptr;
  ASSERT_TRUE(cache.AcquireDmaBuf(mem_.data(), 8192, 5, 0, kAccessAll, MemoryKind::kHost, &buf1).ok());
  // Another DMA-BUF at the same address (another fd may map other memory there).
  const Region* buf2 = nullptr;
  ASSERT_TRUE(cache.AcquireDmaBuf(mem_.data(), 8192, 6, 0, kAccessAll, MemoryKind::kHost, &buf2).ok());
  EXPECT_NE(buf1, buf2);
  // A plain Acquire inside them registers anew.
  const Region* plain = nullptr;
  ASSERT_TRUE(cache.Acquire(mem_.data() + 16, 64, kAccessLocal, MemoryKind::kHost, &plain).ok());
  EXPECT_NE(plain, buf1);
  EXPECT_NE(plain, buf2);
  EXPECT_EQ(d.dmabufs, 2);
  auto st = cache.stats();
  EXPECT_EQ(st.registrations, 3u);
  EXPECT_EQ(st.reuses, 0u);
  EXPECT_EQ(st.live, 3u);
  // Errors pass through and keep nothing.
  const Region* none = nullptr;
  EXPECT_EQ(cache.AcquireDmaBuf(mem_.data(), 8192, -1, 0, kAccessAll, MemoryKind::kHost, &none).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(cache.stats().live, 3u);
  // Each DMA-BUF region goes with its one release.
  EXPECT_TRUE(cache.Release(buf1).ok());
  EXPECT_EQ(d.deregistered, 1);
  EXPECT_FALSE(cache.Release(buf1).ok());
  EXPECT_TRUE(cache.Release(buf2).ok());
  EXPECT_TRUE(cache.Release(plain).ok());
  EXPECT_EQ(d.deregistered, 3);
  EXPECT_EQ(cache.stats().live, 0u);
}

TEST_P(RegistrationCacheTest, TransportsWithoutDmaBufRefuseIt) {
  if (domain_->capabilities().Has(kCapDmaBuf)) GTEST_SKIP() << "this transport registers DMA-BUFs";
  const Region* r = nullptr;
  Status s = cache_->AcquireDmaBuf(mem_.data(), 4096, 0, 0, kAccessAll, MemoryKind::kHost, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(cache_->stats().live, 0u);
}

INSTANTIATE_TEST_SUITE_P(Transports, RegistrationCacheTest, ::testing::ValuesIn(FabricTransports()), CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
