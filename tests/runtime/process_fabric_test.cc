// One Domain + RegistrationCache per process shared by NCCL and the tiers
// (proxy/runtime/process_fabric.h), in one process over loopback TCP
// (RAILYARD_SOCKET_IFNAME==lo, RAILYARD_TRANSPORT=tcp, RAILYARD_FABRIC=off: the plain
// TCP mode, whose NCCL comms run over the fabric): NCCL's regMr (plugin::RegMr, the
// implementation behind the exported net tables) and the expert tier's C API
// (railyard_expert_open, its arena) register a buffer once whichever comes first; either
// may finish first without the other losing its registration; 100 init/finalize cycles
// leave no thread or fd behind; the GIN table's regMrSymDmaBuf goes through the shared
// cache's AcquireDmaBuf and is refused on TCP naming why.
#include <dirent.h>
#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "plugin/gin_core.h"
#include "plugin/net.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/runtime/fabric_runtime.h"
#include "proxy/runtime/process_fabric.h"
#include "railyard/railyard.h"
#include "storage/expert/expert_server.h"
#include "tests/expert/expert_test_util.h"
#include "tests/unit/log_capture.h"

namespace railyard::runtime {
namespace {

void LoopbackTcpEnv() {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "off", 1);
}

/// Entries in /proc/self/<dir> (threads: "task", fds: "fd").
size_t CountProc(const char* dir) {
  const std::string path = std::string("/proc/self/") + dir;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return 0;
  size_t n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - (std::string(dir) == "fd" ? 1 : 0);  // the DIR's own fd
}

/// Polls `done` for up to 10 s (threads and sockets wind down on other threads).
bool Within10s(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

/// One plugin init with a connected send/recv pair on device 0 (lo).
struct Nccl {
  void* ctx = nullptr;
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;

  void Up() {
    ASSERT_EQ(plugin::Init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
    char handle[128] = {};
    ASSERT_EQ(plugin::Listen(ctx, 0, handle, &listen), ncclSuccess);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((send == nullptr || recv == nullptr) && std::chrono::steady_clock::now() < until) {
      if (send == nullptr) {
        ASSERT_EQ(plugin::Connect(ctx, 0, handle, &send), ncclSuccess);
      }
      if (recv == nullptr) {
        ASSERT_EQ(plugin::Accept(listen, &recv), ncclSuccess);
      }
    }
    ASSERT_NE(send, nullptr);
    ASSERT_NE(recv, nullptr);
    ASSERT_NE(Fabric(), nullptr) << "plain TCP mode runs the fabric comms";
  }
  void Down() {
    EXPECT_EQ(plugin::CloseSend(send), ncclSuccess);
    EXPECT_EQ(plugin::CloseRecv(recv), ncclSuccess);
    EXPECT_EQ(plugin::CloseListen(listen), ncclSuccess);
    EXPECT_EQ(plugin::Finalize(ctx), ncclSuccess);
    send = recv = listen = ctx = nullptr;
  }
  fabric::RegistrationCache& Cache() { return Fabric()->registrations(0); }
};

/// The fabric Region NCCL's regMr made on device 0.
const fabric::Region* NcclRegion(void* mhandle) {
  auto* h = static_cast<proxy::nccl::MemHandle*>(mhandle);
  return h != nullptr && !h->devices.empty() ? h->devices[0].region : nullptr;
}

/// An expert store of 2 layers x 3 experts served on 127.0.0.1 from a Domain of its own.
struct ExpertPeer {
  expert::testing::TempDir tmp;
  expert::Manifest m = expert::testing::SmallManifest(2, 3, 2000);
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<expert::ExpertServer> server;
  std::string peer;

  void Start() {
    ASSERT_TRUE(expert::testing::WritePatternStore(tmp.path + "/s", m).ok());
    std::unique_ptr<expert::Store> store;
    ASSERT_TRUE(expert::Store::Open(tmp.path + "/s", false, &store).ok());
    ASSERT_TRUE(expert::testing::LoopbackDomain(false, 5000, &domain).ok());
    ASSERT_TRUE(domain->CreateWorker(&worker).ok());
    expert::ServerOptions o;
    o.pinCapBytes = 1 << 30;
    ASSERT_TRUE(expert::ExpertServer::Start(std::move(store), domain.get(), worker.get(), o, &server).ok());
    peer = "127.0.0.1:" + std::to_string(server->port());
  }
  void Stop() {
    server.reset();
    worker.reset();
    domain.reset();
  }
  /// RDMA READ of (layer, expert) into `arena` + offset through the C API, checked by content.
  void FetchAndCheck(railyard_expert* h, const char* arena, uint32_t layer, uint64_t e, uint64_t offset) {
    ASSERT_EQ(railyard_expert_fetch(h, layer, e, offset), 0) << railyard_expert_last_error();
    EXPECT_EQ(std::string(arena + offset, m.recordStride), expert::testing::ExpectedRecord(m, layer, e));
  }
};

TEST(ProcessFabric, DeviceReachingPicksTheRailThatReachesThePeer) {
  const std::vector<std::vector<fabric::RailInfo>> rails = {
      {{"eth0", "10.0.0.1", 0}}, {{"eth1", "192.168.7.1", 0}, {"eth2", "172.16.0.1", 0}}};
  const std::vector<std::pair<std::string, int>> ifs = {{"10.0.0.1", 24}, {"192.168.7.1", 24}, {"172.16.0.1", 16}};
  EXPECT_EQ(DeviceReaching(rails, "192.168.7.1", ifs), 1u) << "the rail's own address";
  EXPECT_EQ(DeviceReaching(rails, "172.16.9.9", ifs), 1u) << "on eth2's /16";
  EXPECT_EQ(DeviceReaching(rails, "10.0.0.77", ifs), 0u) << "on eth0's /24";
  EXPECT_EQ(DeviceReaching(rails, "10.0.1.77", ifs), 0u) << "reached by no rail: device 0";
  EXPECT_EQ(DeviceReaching(rails, "192.168.8.1", {}), 0u) << "no prefix known: device 0";
  EXPECT_EQ(DeviceReaching(rails, "peer.example", ifs), 0u) << "not numeric: device 0";
}

// RegistrationCache::SetAccessFloor (what the lease sets on NCCL's device caches): a
// new registration grants the floor too, so a later request for it is a reuse; the
// floor never turns bad access bits into good ones.
TEST(ProcessFabric, AccessFloorWidensNewRegistrationsSoALaterRegMrReusesThem) {
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(expert::testing::LoopbackDomain(false, 5000, &d).ok());
  std::vector<char> buf(1 << 16);
  const uint32_t regMrAccess = fabric::kAccessLocal | fabric::kAccessRemoteWrite;
  {
    fabric::RegistrationCache plain(*d);
    const fabric::Region *tier = nullptr, *nccl = nullptr;
    ASSERT_TRUE(plain.Acquire(buf.data(), buf.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &tier).ok());
    ASSERT_TRUE(plain.Acquire(buf.data() + 64, 4096, regMrAccess, fabric::MemoryKind::kHost, &nccl).ok());
    EXPECT_NE(tier, nccl) << "without a floor a local-only region cannot take remote writes";
    EXPECT_EQ(plain.stats().registrations, 2u);
    EXPECT_TRUE(plain.Release(tier).ok());
    EXPECT_TRUE(plain.Release(nccl).ok());
  }
  fabric::RegistrationCache cache(*d);
  cache.SetAccessFloor(regMrAccess);
  const fabric::Region *tier = nullptr, *nccl = nullptr, *bad = nullptr;
  ASSERT_TRUE(cache.Acquire(buf.data(), buf.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &tier).ok());
  EXPECT_EQ(tier->access, regMrAccess);
  ASSERT_TRUE(cache.Acquire(buf.data() + 64, 4096, regMrAccess, fabric::MemoryKind::kHost, &nccl).ok());
  EXPECT_EQ(nccl, tier);
  EXPECT_EQ(cache.stats().registrations, 1u);
  EXPECT_EQ(cache.stats().reuses, 1u);
  Status s = cache.Acquire(buf.data(), 0, fabric::kAccessLocal, fabric::MemoryKind::kHost, &bad);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  s = cache.Acquire(buf.data(), 4096, 1u << 20, fabric::MemoryKind::kHost, &bad);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "bad access bits are refused with a floor too: " << s.message();
  EXPECT_EQ(bad, nullptr);
  EXPECT_TRUE(cache.Release(nccl).ok());
  EXPECT_TRUE(cache.Release(tier).ok());
  EXPECT_EQ(cache.stats().live, 0u);
}

TEST(ProcessFabric, WithoutNcclLesseesWithTheSameRailsShareAnOwnDomainUntilTheLast) {
  LoopbackTcpEnv();
  if (Fabric() != nullptr) GTEST_SKIP() << "an earlier test in this process made NCCL's runtime";
  const env::Config* cfg = nullptr;
  ASSERT_TRUE(env::Load(&cfg).ok());
  const ProcessFabricStats before = GetProcessFabricStats();
  LeaseOptions o;
  o.domain.loopbackWhenUnset = true;
  FabricLease a, b;
  ASSERT_TRUE(AcquireProcessFabric(*cfg, o, &a).ok());
  ASSERT_TRUE(AcquireProcessFabric(*cfg, o, &b).ok());
  EXPECT_EQ(a.ncclDevice, -1);
  EXPECT_EQ(a.domain, b.domain);
  EXPECT_EQ(a.cache, b.cache);
  EXPECT_EQ(GetProcessFabricStats().ownCreated, before.ownCreated + 1);
  std::vector<char> buf(1 << 16);
  const fabric::Region *ra = nullptr, *rb = nullptr;
  ASSERT_TRUE(a.cache->Acquire(buf.data(), buf.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &ra).ok());
  ASSERT_TRUE(b.cache->Acquire(buf.data() + 4096, 4096, fabric::kAccessLocal, fabric::MemoryKind::kHost, &rb).ok());
  EXPECT_EQ(ra, rb);
  EXPECT_EQ(a.cache->stats().registrations, 1u);
  EXPECT_EQ(a.cache->stats().reuses, 1u);
  EXPECT_TRUE(a.cache->Release(ra).ok());
  EXPECT_TRUE(b.cache->Release(rb).ok());
  ReleaseProcessFabric(&a);
  EXPECT_EQ(a.id, 0u);
  EXPECT_EQ(GetProcessFabricStats().ownDomains, before.ownDomains + 1) << "b still holds it";
  ReleaseProcessFabric(&b);
  ReleaseProcessFabric(&b);  // a second release is ignored
  EXPECT_EQ(GetProcessFabricStats().ownDomains, before.ownDomains);
  o.domain.maxRails = 0;
  FabricLease bad;
  EXPECT_EQ(AcquireProcessFabric(*cfg, o, &bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.id, 0u);
}

// NCCL registers first; the tier's arena over the same buffer is a cache hit. NCCL
// deregisters and finalizes first; the tier keeps reading into its arena.
TEST(ProcessFabric, NcclRegMrFirstTierArenaReusesItAndOutlivesNcclFinalize) {
  LoopbackTcpEnv();
  ExpertPeer peer;
  ASSERT_NO_FATAL_FAILURE(peer.Start());
  Nccl nccl;
  ASSERT_NO_FATAL_FAILURE(nccl.Up());
  std::vector<char> arena(6 * peer.m.recordStride);
  void* mh = nullptr;
  ASSERT_EQ(plugin::RegMr(nccl.send, arena.data(), arena.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  const fabric::Region* region = NcclRegion(mh);
  ASSERT_NE(region, nullptr);
  const auto s0 = nccl.Cache().stats();
  railyard_expert* h = nullptr;
  ASSERT_EQ(railyard_expert_open(peer.peer.c_str(), RAILYARD_EXPERT_TRANSPORT_READ, 1, arena.data(), arena.size(), &h), 0)
      << railyard_expert_last_error();
  const auto s1 = nccl.Cache().stats();
  EXPECT_EQ(s1.registrations, s0.registrations) << "the arena was registered again";
  EXPECT_EQ(s1.reuses, s0.reuses + 1);
  EXPECT_EQ(nccl.Cache().References(region), 2u) << "NCCL's count and the tier's";
  ASSERT_NO_FATAL_FAILURE(peer.FetchAndCheck(h, arena.data(), 1, 2, 0));
  // NCCL first: its deregMr and last finalize leave the tier's registration live.
  ASSERT_EQ(plugin::DeregMr(nccl.send, mh), ncclSuccess);
  nccl.Down();
  EXPECT_EQ(Fabric()->registrations(0).References(region), 1u);
  ASSERT_NO_FATAL_FAILURE(peer.FetchAndCheck(h, arena.data(), 0, 1, 3 * peer.m.recordStride));
  EXPECT_EQ(railyard_expert_close(h), 0) << railyard_expert_last_error();
  EXPECT_EQ(Fabric()->registrations(0).References(region), 0u) << "the last release deregisters";
  EXPECT_EQ(GetProcessFabricStats().ncclLeases, 0u);
  peer.Stop();
}

// The tier registers first; NCCL's regMr of the same buffer is a cache hit. The tier
// closes first; NCCL's registration stays until its deregMr.
TEST(ProcessFabric, TierArenaFirstNcclRegMrReusesItAndOutlivesTheTier) {
  LoopbackTcpEnv();
  ExpertPeer peer;
  ASSERT_NO_FATAL_FAILURE(peer.Start());
  Nccl nccl;
  ASSERT_NO_FATAL_FAILURE(nccl.Up());
  std::vector<char> arena(6 * peer.m.recordStride);
  const auto s0 = nccl.Cache().stats();
  railyard_expert* h = nullptr;
  ASSERT_EQ(railyard_expert_open(peer.peer.c_str(), RAILYARD_EXPERT_TRANSPORT_READ, 1, arena.data(), arena.size(), &h), 0)
      << railyard_expert_last_error();
  EXPECT_EQ(nccl.Cache().stats().registrations, s0.registrations + 1);
  void* mh = nullptr;
  ASSERT_EQ(plugin::RegMr(nccl.recv, arena.data() + 128, 4096, NCCL_PTR_HOST, &mh), ncclSuccess);
  const auto s1 = nccl.Cache().stats();
  EXPECT_EQ(s1.registrations, s0.registrations + 1) << "regMr registered the tier's arena again";
  EXPECT_EQ(s1.reuses, s0.reuses + 1);
  const fabric::Region* region = NcclRegion(mh);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->base, reinterpret_cast<uint64_t>(arena.data())) << "the tier's region, covering the whole arena";
  EXPECT_EQ(nccl.Cache().References(region), 2u);
  // The tier first.
  ASSERT_NO_FATAL_FAILURE(peer.FetchAndCheck(h, arena.data(), 1, 0, peer.m.recordStride));
  EXPECT_EQ(railyard_expert_close(h), 0) << railyard_expert_last_error();
  EXPECT_EQ(nccl.Cache().References(region), 1u) << "NCCL's registration must survive the tier";
  ASSERT_EQ(plugin::DeregMr(nccl.recv, mh), ncclSuccess);
  EXPECT_EQ(nccl.Cache().References(region), 0u);
  EXPECT_EQ(nccl.Cache().stats().live, s0.live);
  nccl.Down();
  peer.Stop();
}

// 100 cycles of plugin init, a tier handle sharing NCCL's Domain, a regMr the tier
// reuses, and both finishing (alternating which first): no thread or fd left behind.
TEST(ProcessFabric, HundredInitFinalizeCyclesWithATierLeaveNoThreadsOrFds) {
  LoopbackTcpEnv();
  std::vector<char> arena(6 * expert::testing::SmallManifest(2, 3, 2000).recordStride);
  uint64_t liveAfter = ~uint64_t{0};  // device 0's live regions after a cycle: the same every time
  auto cycle = [&](int i) {
    ExpertPeer peer;
    ASSERT_NO_FATAL_FAILURE(peer.Start());
    Nccl nccl;
    ASSERT_NO_FATAL_FAILURE(nccl.Up());
    void* mh = nullptr;
    ASSERT_EQ(plugin::RegMr(nccl.send, arena.data(), arena.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
    const auto s0 = nccl.Cache().stats();
    railyard_expert* h = nullptr;
    ASSERT_EQ(railyard_expert_open(peer.peer.c_str(), RAILYARD_EXPERT_TRANSPORT_READ, 1, arena.data(), arena.size(), &h),
              0)
        << railyard_expert_last_error();
    ASSERT_EQ(nccl.Cache().stats().registrations, s0.registrations) << "cycle " << i;
    ASSERT_NO_FATAL_FAILURE(peer.FetchAndCheck(h, arena.data(), uint32_t(i % 2), uint64_t(i % 3), 0));
    if (i % 2 == 0) {
      ASSERT_EQ(plugin::DeregMr(nccl.send, mh), ncclSuccess);
      nccl.Down();
      EXPECT_EQ(railyard_expert_close(h), 0);
    } else {
      EXPECT_EQ(railyard_expert_close(h), 0);
      ASSERT_EQ(plugin::DeregMr(nccl.send, mh), ncclSuccess);
      nccl.Down();
    }
    const uint64_t live = Fabric()->registrations(0).stats().live;
    if (liveAfter == ~uint64_t{0}) liveAfter = live;
    EXPECT_EQ(live, liveAfter) << "cycle " << i << " left a registration";
    peer.Stop();
  };
  ASSERT_NO_FATAL_FAILURE(cycle(0));  // warm-up: the first init makes the runtime for the process
  const size_t threads = CountProc("task"), fds = CountProc("fd");
  for (int i = 1; i <= 100; ++i) ASSERT_NO_FATAL_FAILURE(cycle(i));
  EXPECT_TRUE(Within10s([&] { return CountProc("task") <= threads; }))
      << CountProc("task") << " threads after 100 cycles, " << threads << " before";
  EXPECT_TRUE(Within10s([&] { return CountProc("fd") <= fds; }))
      << CountProc("fd") << " fds after 100 cycles, " << fds << " before";
  EXPECT_EQ(GetProcessFabricStats().ncclLeases, 0u);
}

/// A memfd and, where /dev/udmabuf allows, a DMA-BUF over it (as tests/fabric_api/
/// fabric_dmabuf_test.cc makes one: host memory behind a DMA-BUF fd).
struct MemfdBuffer {
  int memfd = -1;
  int dmabuf = -1;
  void* map = nullptr;
  size_t bytes = 0;
  explicit MemfdBuffer(size_t n) : bytes(n) {
    memfd = ::memfd_create("railyard-gin-dmabuf-test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(n)) != 0) return;
    (void)::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK);
    map = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) {
      map = nullptr;
      return;
    }
    const int dev = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
    if (dev < 0) return;
    udmabuf_create c{};
    c.memfd = static_cast<uint32_t>(memfd);
    c.flags = UDMABUF_FLAGS_CLOEXEC;
    c.size = n;
    dmabuf = ::ioctl(dev, UDMABUF_CREATE, &c);
    ::close(dev);
  }
  ~MemfdBuffer() {
    if (map != nullptr) ::munmap(map, bytes);
    if (dmabuf >= 0) ::close(dmabuf);
    if (memfd >= 0) ::close(memfd);
  }
};

// GinOptions::acquireDmaBuf is set (plugin/gin_runtime.cc) and goes to the shared
// cache's AcquireDmaBuf: over TCP the Domain itself refuses, naming the transport, and
// nothing is registered; the comm stays usable and regMrSym of the same memory lands
// in NCCL device 0's cache.
TEST(ProcessFabric, GinRegMrSymDmaBufGoesThroughTheSharedCacheAndTcpRefusesNamingWhy) {
  LoopbackTcpEnv();
  Nccl nccl;
  ASSERT_NO_FATAL_FAILURE(nccl.Up());
  void* ctx = nullptr;
  ASSERT_EQ(plugin::gin::Init(&ctx, 7, nullptr), ncclSuccess);
  char handle[128] = {};
  void* listen = nullptr;
  ASSERT_EQ(plugin::gin::Listen(ctx, 0, handle, &listen), ncclSuccess);
  void* handles[1] = {handle};
  void* coll = nullptr;
  ASSERT_EQ(plugin::gin::Connect(ctx, handles, 1, 0, listen, &coll), ncclSuccess);
  MemfdBuffer m(4 * 4096);
  ASSERT_NE(m.map, nullptr) << std::strerror(errno);
  const int fd = m.dmabuf >= 0 ? m.dmabuf : m.memfd;  // TCP refuses before any driver sees it
  const auto s0 = nccl.Cache().stats();
  void* mh = nullptr;
  {
    test_support::LogCapture log;
    EXPECT_EQ(plugin::gin::RegMrSymDmaBuf(coll, m.map, m.bytes, NCCL_PTR_HOST, 0, fd, 0, &mh), ncclInvalidUsage);
    std::string warned;
    for (const std::string& w : log.At(log::Level::kWarn)) warned += w + "\n";
    EXPECT_NE(warned.find("the tcp transport cannot register DMA-BUFs"), std::string::npos)
        << "not refused by the Domain through RegistrationCache::AcquireDmaBuf:\n"
        << warned;
    EXPECT_EQ(warned.find("no DMA-BUF registration in this Domain"), std::string::npos) << "the hook is unset:\n" << warned;
  }
  EXPECT_EQ(nccl.Cache().stats().live, s0.live) << "a refused DMA-BUF left a registration";
  ASSERT_EQ(plugin::gin::RegMrSym(coll, m.map, m.bytes, NCCL_PTR_HOST, 0, &mh), ncclSuccess);
  EXPECT_EQ(nccl.Cache().stats().registrations, s0.registrations + 1) << "GIN's window is in NCCL device 0's cache";
  EXPECT_EQ(plugin::gin::DeregMrSym(coll, mh), ncclSuccess);
  EXPECT_EQ(nccl.Cache().stats().live, s0.live);
  EXPECT_EQ(plugin::gin::CloseColl(coll), ncclSuccess);
  EXPECT_EQ(plugin::gin::CloseListen(listen), ncclSuccess);
  EXPECT_EQ(plugin::gin::Finalize(ctx), ncclSuccess);
  nccl.Down();
}

}  // namespace
}  // namespace railyard::runtime
