// The exported CollNet tables (ncclCollNetPlugin_v8 through _v12), loaded from the
// built plugin with dlopen as NCCL loads them, with iallgather / ireducescatter called
// the way NCCL's CollNet proxy calls them (../shared/docs/nccl-net-abi.md §3.2, 2.30
// §3): one SGE part per call (2.28.9 and 2.30 always pass 1), the nranks x bytesPerRank
// result walked in byte windows that start and end inside ranks' blocks, sendData
// advanced into the rank's own block when the window starts inside it, recvData of a
// reducescatter advanced likewise; the v8 table's uint32_t SGE size and int count;
// regMrDmaBuf as NCCL calls it (host memory) and refusing a device pointer.
// Three ranks in one process, one thread each (connect is blocking and collective).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin/abi/collnet_v10.h"
#include "plugin/abi/collnet_v11.h"
#include "plugin/abi/collnet_v12.h"
#include "plugin/abi/collnet_v8.h"

#ifndef RAILYARD_PLUGIN_PATH
#error "RAILYARD_PLUGIN_PATH: the built libnccl-net-railyard.so"
#endif

namespace {

constexpr int kRanks = 3;
constexpr size_t kBytesPerRank = 3000;  // 750 int32 per rank
constexpr size_t kWindow = 1300;        // windows cut every block somewhere inside

void* Lib() {
  static void* lib = [] {
    setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
    setenv("RAILYARD_TIMEOUT_MS", "20000", 1);
    return dlopen(RAILYARD_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  }();
  return lib;
}

/// Drives one table of type T (SGE type S) through listen/connect, the windows and close.
template <typename T, typename S>
void RunTable(const char* symbol) {
  ASSERT_NE(Lib(), nullptr) << dlerror();
  const T* t = static_cast<const T*>(dlsym(Lib(), symbol));
  ASSERT_NE(t, nullptr) << symbol;
  constexpr bool kLegacy = !requires { t->finalize; };  // v8-v10: init(logger), listen(dev, ...)
  void* ctx = nullptr;
  if constexpr (kLegacy) {
    ASSERT_EQ(t->init(nullptr), ncclSuccess);
  } else {
    ASSERT_EQ(t->init(&ctx, 42, nullptr), ncclSuccess);
  }
  std::vector<std::vector<char>> handles(kRanks, std::vector<char>(NCCL_NET_HANDLE_MAXSIZE));
  std::vector<void*> listens(kRanks), comms(kRanks), hp(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    if constexpr (kLegacy) {
      ASSERT_EQ(t->listen(0, handles[r].data(), &listens[r]), ncclSuccess);
    } else {
      ASSERT_EQ(t->listen(ctx, 0, handles[r].data(), &listens[r]), ncclSuccess);
    }
    hp[r] = handles[r].data();
  }
  std::vector<ncclResult_t> res(kRanks);
  {
    std::vector<std::thread> th;
    for (int r = 0; r < kRanks; ++r) th.emplace_back([&, r] { res[r] = t->connect(hp.data(), kRanks, r, listens[r], &comms[r]); });
    for (auto& x : th) x.join();
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(res[r], ncclSuccess) << symbol << " connect rank " << r;
    EXPECT_EQ(t->closeListen(listens[r]), ncclSuccess);
  }
  auto wait = [&](std::vector<void*>& reqs) {
    for (void* q : reqs) {
      int done = 0, size = -1;
      while (!done) {
        ASSERT_EQ(t->test(q, &done, &size), ncclSuccess) << symbol;
      }
    }
  };
  const size_t total = kRanks * kBytesPerRank;
  // Inputs: rank r's allgather block, and its reducescatter input over the whole space.
  std::vector<std::vector<int32_t>> block(kRanks, std::vector<int32_t>(kBytesPerRank / 4));
  std::vector<std::vector<int32_t>> rsIn(kRanks, std::vector<int32_t>(total / 4));
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < block[r].size(); ++i) block[r][i] = int32_t(r * 100000 + i);
    for (size_t i = 0; i < rsIn[r].size(); ++i) rsIn[r][i] = int32_t((r + 1) * (i % 977));
  }
  std::vector<std::vector<uint8_t>> agOut(kRanks, std::vector<uint8_t>(total, 0xEE));
  std::vector<std::vector<int32_t>> rsOut(kRanks, std::vector<int32_t>(kBytesPerRank / 4, -1));
  std::vector<void*> mh(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(t->regMr(comms[r], agOut[r].data(), total, NCCL_PTR_HOST, &mh[r]), ncclSuccess);
  }
  {
    // regMrDmaBuf: NCCL passes host memory only (getProperties offers no DMA-BUF), which
    // registers as regMr does; a device pointer is refused with no handle.
    std::vector<uint8_t> buf(4096);
    void* h = nullptr;
    ASSERT_EQ(t->regMrDmaBuf(comms[0], buf.data(), buf.size(), NCCL_PTR_HOST, 0, -1, &h), ncclSuccess) << symbol;
    EXPECT_NE(h, nullptr);
    EXPECT_EQ(t->deregMr(comms[0], h), ncclSuccess);
    h = reinterpret_cast<void*>(0x1);
    EXPECT_NE(t->regMrDmaBuf(comms[0], buf.data(), buf.size(), NCCL_PTR_CUDA, 0, 7, &h), ncclSuccess) << symbol;
    EXPECT_EQ(h, nullptr);
  }
  int windows = 0;
  for (size_t off = 0; off < total; off += kWindow, ++windows) {
    const size_t wb = std::min(kWindow, total - off);
    std::vector<void*> reqs(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      const size_t own = size_t(r) * kBytesPerRank;
      const size_t skip = off > own ? std::min(off - own, kBytesPerRank) : 0;  // sendData advanced into the block
      S part{};
      part.mhandle = mh[r];
      part.address = agOut[r].data() + off;
      part.size = static_cast<decltype(part.size)>(wb);
      ASSERT_EQ(t->iallgather(comms[r], reinterpret_cast<uint8_t*>(block[r].data()) + skip, 1, &part, kBytesPerRank,
                              off, wb, nullptr, &reqs[r]),
                ncclSuccess)
          << symbol << " window " << off;
    }
    wait(reqs);
    for (int r = 0; r < kRanks; ++r) {
      const size_t own = size_t(r) * kBytesPerRank;
      const size_t lo = std::max(own, off), hi = std::min(own + kBytesPerRank, off + wb);
      const size_t skip = off > own ? std::min(off - own, kBytesPerRank) : 0;
      S part{};
      part.mhandle = nullptr;
      part.address = reinterpret_cast<uint8_t*>(rsIn[r].data()) + off;
      part.size = static_cast<decltype(part.size)>(wb);
      void* recv = reinterpret_cast<uint8_t*>(rsOut[r].data()) + (hi > lo ? lo - own : skip % kBytesPerRank);
      ASSERT_EQ(t->ireducescatter(comms[r], 1, &part, recv, kBytesPerRank, off, wb, ncclInt32, ncclSum, nullptr,
                                  &reqs[r]),
                ncclSuccess)
          << symbol << " window " << off;
    }
    wait(reqs);
  }
  EXPECT_EQ(windows, int((total + kWindow - 1) / kWindow));
  for (int r = 0; r < kRanks; ++r) {
    for (size_t b = 0; b < total; ++b) {
      const size_t owner = b / kBytesPerRank;
      ASSERT_EQ(agOut[r][b], reinterpret_cast<const uint8_t*>(block[owner].data())[b % kBytesPerRank])
          << symbol << " allgather rank " << r << " byte " << b;
    }
    for (size_t i = 0; i < rsOut[r].size(); ++i) {
      const size_t e = size_t(r) * kBytesPerRank / 4 + i;
      ASSERT_EQ(rsOut[r][i], int32_t(6 * (e % 977))) << symbol << " reducescatter rank " << r << " element " << i;
    }
    EXPECT_EQ(t->deregMr(comms[r], mh[r]), ncclSuccess);
  }
  // No parts, or parts that hold less than the window: refused, no request.
  void* req = reinterpret_cast<void*>(0x1);
  S small{};
  small.address = agOut[0].data();
  small.size = 10;
  EXPECT_NE(t->iallgather(comms[0], block[0].data(), 0, &small, kBytesPerRank, 0, 100, nullptr, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  req = reinterpret_cast<void*>(0x1);
  EXPECT_NE(t->iallgather(comms[0], block[0].data(), 1, &small, kBytesPerRank, 0, 100, nullptr, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  // An allreduce through the table's own count type (int on v8).
  std::vector<std::vector<int32_t>> ar(kRanks, std::vector<int32_t>(1001));
  std::vector<void*> reqs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < ar[r].size(); ++i) ar[r][i] = int32_t(r + i);
    ASSERT_EQ(t->iallreduce(comms[r], ar[r].data(), ar[r].data(), 1001, ncclInt32, ncclMax, nullptr, nullptr, &reqs[r]),
              ncclSuccess);
  }
  wait(reqs);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < ar[r].size(); ++i) {
      ASSERT_EQ(ar[r][i], int32_t(2 + i)) << symbol;
    }
    EXPECT_EQ(t->closeColl(comms[r]), ncclSuccess);
  }
  if constexpr (!kLegacy) {
    EXPECT_EQ(t->finalize(ctx), ncclSuccess);
  }
}

TEST(CollNetTables, V12WindowsAndOnePartAsNcclPasses) { RunTable<ncclCollNet_v12_t, ncclNetSGE_v12_t>("ncclCollNetPlugin_v12"); }
TEST(CollNetTables, V11WindowsAndOnePartAsNcclPasses) { RunTable<ncclCollNet_v11_t, ncclNetSGE_v11_t>("ncclCollNetPlugin_v11"); }
TEST(CollNetTables, V10WindowsAndOnePartAsNcclPasses) { RunTable<ncclCollNet_v10_t, ncclNetSGE_v10_t>("ncclCollNetPlugin_v10"); }
TEST(CollNetTables, V9WindowsAndOnePartAsNcclPasses) { RunTable<ncclCollNet_v9_t, ncclNetSGE_v9_t>("ncclCollNetPlugin_v9"); }
TEST(CollNetTables, V8WindowsWithItsUint32SgeSize) { RunTable<ncclCollNet_v8_t, ncclNetSGE_v8_t>("ncclCollNetPlugin_v8"); }

}  // namespace
