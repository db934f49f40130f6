// Domain::RegisterDmaBuf over every transport: the argument checks, the refusal of a
// transport (or a rail) that cannot register DMA-BUFs, and, where the ports can and
// the kernel has /dev/udmabuf, a real DMA-BUF (a memfd exported by udmabuf) that a
// peer Writes into. There is no GPU here: a udmabuf is host memory behind a DMA-BUF
// fd, the same ibv_reg_dmabuf_mr path a CUDA DMA-BUF takes.
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "proxy/fabric/registration_cache.h"
#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

constexpr uint32_t kRw = kAccessLocal | kAccessRemoteWrite;

/// A memfd of `bytes` (a multiple of the page size) and, when /dev/udmabuf lets us,
/// a DMA-BUF fd over it. `why` says what was missing.
struct MemfdBuffer {
  int memfd = -1;
  int dmabuf = -1;
  void* map = nullptr;
  size_t bytes = 0;
  std::string why;

  explicit MemfdBuffer(size_t n) : bytes(n) {
    memfd = ::memfd_create("railyard-dmabuf-test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (memfd < 0) {
      why = std::string("memfd_create: ") + std::strerror(errno);
      return;
    }
    if (::ftruncate(memfd, static_cast<off_t>(n)) != 0 || ::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
      why = std::string("ftruncate/seal: ") + std::strerror(errno);
      return;
    }
    map = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) {
      map = nullptr;
      why = std::string("mmap: ") + std::strerror(errno);
      return;
    }
    const int dev = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
      why = std::string("/dev/udmabuf: ") + std::strerror(errno);
      return;
    }
    udmabuf_create c{};
    c.memfd = static_cast<uint32_t>(memfd);
    c.flags = UDMABUF_FLAGS_CLOEXEC;
    c.offset = 0;
    c.size = n;
    dmabuf = ::ioctl(dev, UDMABUF_CREATE, &c);
    if (dmabuf < 0) why = std::string("UDMABUF_CREATE: ") + std::strerror(errno);
    ::close(dev);
  }
  ~MemfdBuffer() {
    if (map != nullptr) ::munmap(map, bytes);
    if (dmabuf >= 0) ::close(dmabuf);
    if (memfd >= 0) ::close(memfd);
  }
};

using FabricDmaBufTest = FabricTest;

TEST_P(FabricDmaBufTest, ArgumentsAreCheckedBeforeTheDriverSeesThem) {
  Domain& d = *b_.domain;
  std::vector<uint8_t> buf(8192);
  const Region* r = nullptr;
  if (std::string(d.TransportName()) != "verbs") {
    // No DMA-BUF support: refused as unsupported whatever the arguments.
    ASSERT_FALSE(Has(kCapDmaBuf));
    Status s = d.RegisterDmaBuf(buf.data(), buf.size(), 0, 0, kRw, MemoryKind::kHost, &r);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("cannot register DMA-BUFs"), std::string::npos) << s.message();
    EXPECT_EQ(r, nullptr);
    return;
  }
  struct Bad {
    void* addr;
    uint64_t bytes;
    int fd;
    uint64_t offset;
    uint32_t access;
    const char* says;
  };
  const Bad cases[] = {
      {buf.data(), buf.size(), -1, 0, kRw, "fd -1"},
      {nullptr, buf.size(), 0, 0, kRw, "NULL address"},
      {buf.data(), 0, 0, 0, kRw, "0 bytes"},
      {reinterpret_cast<void*>(~uint64_t{0} - 10), 100, 0, 0, kRw, "wraps"},
      {buf.data(), buf.size(), 0, ~uint64_t{0} - 10, kRw, "offset + bytes wraps"},
      {buf.data(), buf.size(), 0, 0, 0, "access bits"},
      {buf.data(), buf.size(), 0, 0, 1u << 20, "access bits"},
  };
  for (const Bad& c : cases) {
    Status s = d.RegisterDmaBuf(c.addr, c.bytes, c.fd, c.offset, c.access, MemoryKind::kHost, &r);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.says << ": " << s.message();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    EXPECT_EQ(r, nullptr);
  }
}

TEST_P(FabricDmaBufTest, PortsWithoutDmaBufRefuseARealOneNamingTheRail) {
  if (std::string(b_.domain->TransportName()) != "verbs") GTEST_SKIP() << "verbs only";
  if (Has(kCapDmaBuf)) GTEST_SKIP() << "every port here registers DMA-BUFs";
  MemfdBuffer m(2 * 4096);
  ASSERT_NE(m.map, nullptr) << m.why;
  const int fd = m.dmabuf >= 0 ? m.dmabuf : m.memfd;  // refused before the driver sees the fd
  const Region* r = nullptr;
  Status s = b_.domain->RegisterDmaBuf(m.map, m.bytes, fd, 0, kRw, MemoryKind::kHost, &r);
  EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
  EXPECT_NE(s.message().find("rail 0 (" + b_.domain->rails()[0].device + ")"), std::string::npos) << s.message();
  EXPECT_EQ(r, nullptr);
  // The cache passes the refusal on and keeps nothing.
  RegistrationCache cache(*b_.domain);
  s = cache.AcquireDmaBuf(m.map, m.bytes, fd, 0, kRw, MemoryKind::kHost, &r);
  EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
  EXPECT_EQ(cache.stats().live, 0u);
}

TEST_P(FabricDmaBufTest, UdmabufRegionTakesAPeersWrite) {
  if (!Has(kCapDmaBuf)) GTEST_SKIP() << "the transport's ports cannot register DMA-BUFs (" << b_.domain->TransportName()
                                     << ")";
  MemfdBuffer m(4 * 4096);
  if (m.dmabuf < 0) GTEST_SKIP() << "no DMA-BUF to test with: " << m.why;
  // A region that is not a DMA-BUF fd is refused by the driver.
  const Region* bad = nullptr;
  Status s = b_.domain->RegisterDmaBuf(m.map, m.bytes, m.memfd, 0, kRw, MemoryKind::kHost, &bad);
  EXPECT_EQ(s.code(), Code::kSystemError) << s.message();
  RegistrationCache cache(*b_.domain);
  const Region* target = nullptr;
  ASSERT_TRUE(cache.AcquireDmaBuf(m.map, m.bytes, m.dmabuf, 0, kRw, MemoryKind::kHost, &target).ok());
  ASSERT_EQ(target->base, reinterpret_cast<uint64_t>(m.map));
  // A plain Acquire of the same range never gets the DMA-BUF region.
  const Region* plain = nullptr;
  ASSERT_TRUE(cache.Acquire(m.map, m.bytes, kRw, MemoryKind::kHost, &plain).ok());
  EXPECT_NE(plain, target);
  EXPECT_TRUE(cache.Release(plain).ok());
  std::memset(m.map, 0, m.bytes);
  Guarded src(m.bytes);
  FillPattern(src.data(), src.size(), 17);
  const Region* local = Reg(a_, src.data(), src.size(), kAccessLocal);
  ASSERT_TRUE(ep_->Write({local, 0, src.size()}, target->Key(), target->base, 1).ok());
  Event e = Wait(1);
  ASSERT_EQ(e.kind, EventKind::kDone) << e.error.ToString();
  EXPECT_EQ(FirstMismatch(static_cast<uint8_t*>(m.map), m.bytes, 17), -1);
  EXPECT_TRUE(cache.Release(target).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, FabricDmaBufTest, ::testing::ValuesIn(FabricTransports()), CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
