// proxy/mr_cache: the MrBackend hook the verbs transport uses for hardware
// registration. A fake backend records every call and fills two devices' keys;
// the cache must call it once per new region, undo it with the last reference,
// leave nothing behind when it fails, and pass DMA-BUF fd/offset through unrounded.
#include "proxy/mr_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "env/status.h"

namespace railyard::proxy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kHostPtr = 1;  // NCCL_PTR_HOST
constexpr int kCudaPtr = 2;  // NCCL_PTR_CUDA

struct RegisterCall {
  uint64_t base;
  uint64_t len;
  int fd;
  uint64_t offset;
};

class FakeBackend : public MrBackend {
 public:
  Status Register(MemoryRegion* region, int dmabufFd, uint64_t dmabufOffset) override {
    registers.push_back({region->base, region->len, dmabufFd, dmabufOffset});
    if (!fail.ok()) return fail;
    const uint32_t n = static_cast<uint32_t>(registers.size());
    // Two devices; handles and keys distinct per device and per call.
    region->hcaMr = {reinterpret_cast<void*>(uintptr_t{0x1000} + n),
                     reinterpret_cast<void*>(uintptr_t{0x2000} + n)};
    region->hcaLkey = {100 * n + 0, 100 * n + 1};
    region->hcaRkey = {100 * n + 50, 100 * n + 51};
    return Status::Ok();
  }
  void Deregister(MemoryRegion* region) override {
    deregisters.push_back(region);
    deregisteredBases.push_back(region->base);
  }

  Status fail;
  std::vector<RegisterCall> registers;
  std::vector<MemoryRegion*> deregisters;
  std::vector<uint64_t> deregisteredBases;
};

uint64_t Page() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// A page-aligned buffer of a few pages (addresses only; the cache never touches bytes).
struct Buffer {
  explicit Buffer(size_t pages) : raw((pages + 1) * Page()) {
    const uint64_t a = reinterpret_cast<uint64_t>(raw.data());
    base = (a + Page() - 1) & ~(Page() - 1);
  }
  char* at(uint64_t off) const { return reinterpret_cast<char*>(base + off); }
  std::vector<char> raw;
  uint64_t base = 0;
};

TEST(MrCacheBackend, RegisterCallsBackendOncePerNewRegion) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  Buffer buf(4);

  MemoryRegion* r = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(0), 2 * Page(), kHostPtr, &r).ok());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(be.registers.size(), 1u);
  EXPECT_EQ(be.registers[0].base, buf.base);
  EXPECT_EQ(be.registers[0].len, 2 * Page());
  EXPECT_EQ(be.registers[0].fd, -1);
  EXPECT_EQ(be.registers[0].offset, 0u);
  // The backend's per-device state lands on the region handed out.
  ASSERT_EQ(r->hcaMr.size(), 2u);
  EXPECT_EQ(r->hcaMr[0], reinterpret_cast<void*>(uintptr_t{0x1001}));
  EXPECT_EQ(r->hcaMr[1], reinterpret_cast<void*>(uintptr_t{0x2001}));
  EXPECT_THAT(r->hcaLkey, ElementsAre(100u, 101u));
  EXPECT_THAT(r->hcaRkey, ElementsAre(150u, 151u));
  EXPECT_NE(r->rkey, 0u);
  EXPECT_EQ(r->refs, 1);

  // A sub-range of the cached region reuses it: no backend call.
  MemoryRegion* sub = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(100), Page(), kHostPtr, &sub).ok());
  EXPECT_EQ(sub, r);
  EXPECT_EQ(r->refs, 2);
  EXPECT_EQ(be.registers.size(), 1u);
  EXPECT_EQ(cache.Size(), 1u);

  // A range outside it is a new region: one more backend call.
  MemoryRegion* other = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(3 * Page()), 16, kHostPtr, &other).ok());
  EXPECT_NE(other, r);
  ASSERT_EQ(be.registers.size(), 2u);
  EXPECT_EQ(be.registers[1].base, buf.base + 3 * Page());
  EXPECT_EQ(be.registers[1].len, Page());
  EXPECT_THAT(other->hcaLkey, ElementsAre(200u, 201u));
  EXPECT_EQ(cache.Size(), 2u);

  ASSERT_TRUE(cache.Deregister(sub).ok());
  ASSERT_TRUE(cache.Deregister(r).ok());
  ASSERT_TRUE(cache.Deregister(other).ok());
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, DifferentPtrTypeIsANewRegion) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  Buffer buf(2);
  MemoryRegion* host = nullptr;
  MemoryRegion* cuda = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kHostPtr, &host).ok());
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kCudaPtr, &cuda).ok());
  EXPECT_NE(host, cuda);
  EXPECT_EQ(be.registers.size(), 2u);
  ASSERT_TRUE(cache.Deregister(host).ok());
  ASSERT_TRUE(cache.Deregister(cuda).ok());
  EXPECT_EQ(be.deregisters.size(), 2u);
}

TEST(MrCacheBackend, DeregisterCallsBackendOnlyForLastRef) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  Buffer buf(2);

  MemoryRegion* a = nullptr;
  MemoryRegion* b = nullptr;
  MemoryRegion* c = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kHostPtr, &a).ok());
  ASSERT_TRUE(cache.Register(buf.at(8), 8, kHostPtr, &b).ok());
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kHostPtr, &c).ok());
  ASSERT_EQ(a, b);
  ASSERT_EQ(a, c);
  EXPECT_EQ(a->refs, 3);

  ASSERT_TRUE(cache.Deregister(a).ok());
  EXPECT_TRUE(be.deregisters.empty());
  ASSERT_TRUE(cache.Deregister(b).ok());
  EXPECT_TRUE(be.deregisters.empty());
  EXPECT_TRUE(cache.IsRegistered(c));
  EXPECT_EQ(cache.Size(), 1u);

  const uint32_t rkey = c->rkey;
  ASSERT_TRUE(cache.Deregister(c).ok());  // last reference
  ASSERT_EQ(be.deregisters.size(), 1u);
  EXPECT_EQ(be.deregisters[0], c);
  EXPECT_THAT(be.deregisteredBases, ElementsAre(buf.base));
  EXPECT_FALSE(cache.IsRegistered(c));
  EXPECT_FALSE(cache.Contains(rkey, buf.base, 1));
  EXPECT_EQ(cache.Size(), 0u);

  // A double deregister is refused and does not reach the backend again.
  const Status st = cache.Deregister(c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(be.deregisters.size(), 1u);
}

TEST(MrCacheBackend, FailingBackendFailsRegisterAndLeavesNothing) {
  FakeBackend be;
  be.fail = SystemError("ibv_reg_mr on mlx5_0: Cannot allocate memory (errno 12)");
  MrCache cache;
  cache.SetBackend(&be);
  Buffer buf(2);

  MemoryRegion* r = nullptr;
  const Status st = cache.Register(buf.at(0), Page(), kHostPtr, &r);
  EXPECT_EQ(st.code(), Code::kSystemError);
  EXPECT_EQ(st.message(), "ibv_reg_mr on mlx5_0: Cannot allocate memory (errno 12)");
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(be.registers.size(), 1u);
  EXPECT_EQ(cache.Size(), 0u);
  EXPECT_FALSE(cache.IsRegistered(nullptr));
  // Nothing under the first key either.
  EXPECT_FALSE(cache.Contains(1, buf.base, 1));
  EXPECT_TRUE(be.deregisters.empty());

  // The failed entry is not reused: a retry calls the backend again.
  const Status st2 = cache.Register(buf.at(8), 8, kHostPtr, &r);
  EXPECT_EQ(st2.code(), Code::kSystemError);
  EXPECT_EQ(be.registers.size(), 2u);
  EXPECT_EQ(cache.Size(), 0u);

  // Once the backend recovers, registration works and the first key is still free.
  be.fail = Status::Ok();
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kHostPtr, &r).ok());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(cache.Size(), 1u);
  EXPECT_TRUE(cache.IsRegistered(r));
  ASSERT_TRUE(cache.Deregister(r).ok());
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, FailingBackendLeavesExistingRegionsAlone) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  Buffer buf(4);
  MemoryRegion* good = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(0), Page(), kHostPtr, &good).ok());
  be.fail = SystemError("device gone");
  MemoryRegion* bad = nullptr;
  const Status st = cache.Register(buf.at(2 * Page()), Page(), kHostPtr, &bad);
  EXPECT_EQ(st.code(), Code::kSystemError);
  EXPECT_EQ(cache.Size(), 1u);
  EXPECT_TRUE(cache.IsRegistered(good));
  EXPECT_EQ(good->refs, 1);
  ASSERT_TRUE(cache.Deregister(good).ok());
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, DmaBufWithoutBackendIsInvalidUsage) {
  MrCache cache;
  Buffer buf(1);
  MemoryRegion* r = nullptr;
  const Status st = cache.RegisterDmaBuf(buf.at(0), 4096, kCudaPtr, 5, 0, &r);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("regMrDmaBuf"));
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, DmaBufPassesFdAndOffsetAndKeepsExactRange) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  // Device memory addresses: deliberately not page-aligned in start or length.
  const uint64_t addr = 0x7f12'3456'7890ull + 0x123;
  const size_t bytes = 3 * 4096 + 77;
  MemoryRegion* r = nullptr;
  const Status st = cache.RegisterDmaBuf(reinterpret_cast<const void*>(addr), bytes, kCudaPtr, 42,
                                         0x1000'0abcull, &r);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->base, addr);
  EXPECT_EQ(r->len, bytes);
  EXPECT_EQ(r->ptrType, kCudaPtr);
  ASSERT_EQ(be.registers.size(), 1u);
  EXPECT_EQ(be.registers[0].base, addr);
  EXPECT_EQ(be.registers[0].len, bytes);
  EXPECT_EQ(be.registers[0].fd, 42);
  EXPECT_EQ(be.registers[0].offset, 0x1000'0abcull);
  EXPECT_EQ(r->hcaMr.size(), 2u);
  EXPECT_TRUE(cache.Contains(r->rkey, addr, bytes));
  EXPECT_FALSE(cache.Contains(r->rkey, addr - 1, 1));
  EXPECT_FALSE(cache.Contains(r->rkey, addr + bytes, 1));
  EXPECT_EQ(cache.Size(), 1u);

  ASSERT_TRUE(cache.Deregister(r).ok());
  EXPECT_EQ(be.deregisters.size(), 1u);
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, DmaBufBadFdIsInvalidArgument) {
  FakeBackend be;
  MrCache cache;
  cache.SetBackend(&be);
  MemoryRegion* r = nullptr;
  const Status st =
      cache.RegisterDmaBuf(reinterpret_cast<const void*>(0x7f00'0000'1000ull), 4096, kCudaPtr, -1, 0, &r);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("fd -1"));
  EXPECT_EQ(r, nullptr);
  EXPECT_TRUE(be.registers.empty());
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, DmaBufFailureLeavesNothing) {
  FakeBackend be;
  be.fail = SystemError("ibv_reg_dmabuf_mr on mlx5_0: Bad address (errno 14)");
  MrCache cache;
  cache.SetBackend(&be);
  MemoryRegion* r = nullptr;
  const Status st =
      cache.RegisterDmaBuf(reinterpret_cast<const void*>(0x7f00'0000'1000ull), 4096, kCudaPtr, 7, 0, &r);
  EXPECT_EQ(st.code(), Code::kSystemError);
  EXPECT_THAT(st.message(), HasSubstr("ibv_reg_dmabuf_mr"));
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(be.registers.size(), 1u);
  EXPECT_EQ(cache.Size(), 0u);
}

TEST(MrCacheBackend, NoBackendMeansNoHardwareState) {
  MrCache cache;
  Buffer buf(1);
  MemoryRegion* r = nullptr;
  ASSERT_TRUE(cache.Register(buf.at(0), 64, kHostPtr, &r).ok());
  EXPECT_TRUE(r->hcaMr.empty());
  EXPECT_TRUE(r->hcaLkey.empty());
  EXPECT_TRUE(r->hcaRkey.empty());
  ASSERT_TRUE(cache.Deregister(r).ok());
  EXPECT_EQ(cache.Size(), 0u);
}

}  // namespace
}  // namespace railyard::proxy
