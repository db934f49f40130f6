// The CollNet implementation behind the exported tables (plugin/collnet_core.h), in
// one process with one thread per rank: properties as NCCL reads them (v12 railId /
// planeId written, maxCollBytes, host pointers only), the reduceSupport matrix, a
// failed connect that leaves nothing behind, and iallgather / ireducescatter byte
// windows with several SGE parts, as NCCL passes them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "plugin/collnet_core.h"

namespace railyard::plugin::collnet {
namespace {

class CollNetCore : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
    ASSERT_EQ(Init(&ctx_, 1, nullptr), ncclSuccess);
  }
  void TearDown() override { EXPECT_EQ(Finalize(ctx_), ncclSuccess); }

  /// Listens and connects `n` ranks (one thread each: connect is blocking).
  void ConnectAll(int n, std::vector<void*>* comms) {
    std::vector<std::vector<char>> handles(static_cast<size_t>(n), std::vector<char>(NCCL_NET_HANDLE_MAXSIZE));
    std::vector<void*> listens(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) ASSERT_EQ(Listen(ctx_, 0, handles[r].data(), &listens[r]), ncclSuccess);
    std::vector<void*> hp;
    for (auto& h : handles) hp.push_back(h.data());
    comms->assign(static_cast<size_t>(n), nullptr);
    std::vector<ncclResult_t> res(static_cast<size_t>(n));
    std::vector<std::thread> t;
    for (int r = 0; r < n; ++r) {
      t.emplace_back([&, r] { res[r] = Connect(hp.data(), n, r, listens[r], &(*comms)[r]); });
    }
    for (auto& th : t) th.join();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
      EXPECT_EQ(CloseListen(listens[r]), ncclSuccess);
    }
  }
  static void WaitAll(const std::vector<void*>& reqs) {
    for (void* q : reqs) {
      int done = 0;
      while (!done) {
        ASSERT_EQ(::railyard::plugin::collnet::Test(q, &done, nullptr), ncclSuccess);
      }
    }
  }

  void* ctx_ = nullptr;
};

TEST_F(CollNetCore, PropertiesAsNcclReadsThem) {
  int ndev = 0;
  ASSERT_EQ(Devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);
  ncclNetProperties_v12_t p;
  std::memset(&p, 0xAB, sizeof p);  // NCCL passes an uninitialised struct
  ASSERT_EQ(GetPropertiesV12(0, &p), ncclSuccess);
  EXPECT_EQ(p.railId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(p.planeId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(p.maxCollBytes, MAX_COLLNET_SIZE);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_NE(p.name, nullptr);
  EXPECT_EQ(GetPropertiesV12(1, &p), ncclInvalidArgument);
  int supported = -1;
  for (int t = 0; t < 12; ++t) {
    for (int op = 0; op < 5; ++op) {
      ASSERT_EQ(ReduceSupport(static_cast<ncclDataType_t>(t), static_cast<ncclRedOp_t>(op), &supported), ncclSuccess);
      EXPECT_EQ(supported, 1) << t << " " << op;
    }
  }
  ASSERT_EQ(ReduceSupport(static_cast<ncclDataType_t>(12), ncclSum, &supported), ncclSuccess);
  EXPECT_EQ(supported, 0);
  ASSERT_EQ(ReduceSupport(ncclFloat32, static_cast<ncclRedOp_t>(5), &supported), ncclSuccess);
  EXPECT_EQ(supported, 0);  // PreMulSum and other dynamic ops
  int d = -1;
  int devs[2] = {0, 0};
  EXPECT_EQ(MakeVDevice(&d, 1, devs), ncclSuccess);
  EXPECT_EQ(d, 0);
  EXPECT_NE(MakeVDevice(&d, 2, devs), ncclSuccess);
}

TEST_F(CollNetCore, FailedConnectReturnsAnErrorAndNoComm) {
  std::vector<char> h0(NCCL_NET_HANDLE_MAXSIZE), bogus(NCCL_NET_HANDLE_MAXSIZE, 0x5a);
  void* l0 = nullptr;
  ASSERT_EQ(Listen(ctx_, 0, h0.data(), &l0), ncclSuccess);
  void* hp[2] = {h0.data(), bogus.data()};
  void* comm = reinterpret_cast<void*>(0x1);
  EXPECT_NE(Connect(hp, 2, 0, l0, &comm), ncclSuccess);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(CloseListen(l0), ncclSuccess);
  // A rank outside the group, and a listen on another device: errors, nothing kept.
  void* l1 = nullptr;
  ASSERT_EQ(Listen(ctx_, 0, h0.data(), &l1), ncclSuccess);
  EXPECT_NE(Connect(hp, 2, 2, l1, &comm), ncclSuccess);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(CloseListen(l1), ncclSuccess);
  void* l2 = nullptr;
  EXPECT_NE(Listen(ctx_, 1, h0.data(), &l2), ncclSuccess);
  EXPECT_EQ(l2, nullptr);
}

TEST_F(CollNetCore, WindowsAndSeveralSgeParts) {
  constexpr int n = 3;
  constexpr size_t bpr = 1000;                 // bytes per rank (250 floats)
  constexpr size_t wo = 600, wb = 1500;        // window: rank 0's last 400 B, rank 1, rank 2's first 100 B
  std::vector<void*> comms;
  ConnectAll(n, &comms);
  ASSERT_EQ(comms.size(), size_t(n));
  // Allgather: each rank's whole block; sendData advanced into the window.
  std::vector<std::vector<float>> full(n, std::vector<float>(bpr / 4));
  std::vector<std::vector<uint8_t>> partA(n, std::vector<uint8_t>(700, 0xEE)), partB(n, std::vector<uint8_t>(800, 0xEE));
  std::vector<void*> reqs(n);
  std::vector<ncclResult_t> res(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < full[r].size(); ++i) full[r][i] = float(r * 1000 + i);
  }
  for (int r = 0; r < n; ++r) {
    const size_t lo = std::max(size_t(r) * bpr, wo);
    void* send = reinterpret_cast<uint8_t*>(full[r].data()) + (lo - size_t(r) * bpr);
    ncclNetSGE_v12_t parts[2] = {{nullptr, partA[r].data(), 700}, {nullptr, partB[r].data(), 800}};
    res[r] = Iallgather(comms[r], send, 2, parts, bpr, wo, wb, nullptr, &reqs[r]);
    ASSERT_EQ(res[r], ncclSuccess);
  }
  WaitAll(reqs);
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> got(partA[r]);
    got.insert(got.end(), partB[r].begin(), partB[r].end());
    for (size_t b = 0; b < wb; ++b) {
      const size_t g = wo + b, owner = g / bpr, off = g % bpr;
      ASSERT_EQ(got[b], reinterpret_cast<const uint8_t*>(full[owner].data())[off]) << "rank " << r << " byte " << b;
    }
  }
  // Reducescatter: the window of the full (n x bpr) input in two parts; each rank
  // gets its block's part of the window, reduced.
  std::vector<std::vector<float>> in(n, std::vector<float>(n * bpr / 4));
  std::vector<std::vector<float>> out(n, std::vector<float>(bpr / 4, -1.f));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = float((r + 1) * (i % 100));
  }
  for (int r = 0; r < n; ++r) {
    uint8_t* win = reinterpret_cast<uint8_t*>(in[r].data()) + wo;
    ncclNetSGE_v12_t parts[2] = {{nullptr, win, 1000}, {nullptr, win + 1000, 500}};
    ASSERT_EQ(Ireducescatter(comms[r], 2, parts, out[r].data(), bpr, wo, wb, ncclFloat32, ncclSum, nullptr, &reqs[r]),
              ncclSuccess);
  }
  WaitAll(reqs);
  for (int r = 0; r < n; ++r) {
    const size_t lo = std::max(size_t(r) * bpr, wo), hi = std::min(size_t(r + 1) * bpr, wo + wb);
    for (size_t b = lo; b < hi; b += 4) {
      const size_t e = b / 4;
      ASSERT_EQ(out[r][(b - lo) / 4], float(6 * (e % 100))) << "rank " << r << " element " << e;
    }
    if (hi > lo && (hi - lo) / 4 < out[r].size()) {
      EXPECT_EQ(out[r][(hi - lo) / 4], -1.f) << "written past rank " << r << "'s part";
    }
  }
  // An allreduce through a registered buffer, then iflush.
  std::vector<std::vector<double>> ar(n, std::vector<double>(1001, 0));
  std::vector<void*> mh(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < ar[r].size(); ++i) ar[r][i] = double(r + i);
    ASSERT_EQ(RegMr(comms[r], ar[r].data(), ar[r].size() * 8, NCCL_PTR_HOST, &mh[r]), ncclSuccess);
    void* bad = nullptr;
    EXPECT_EQ(RegMr(comms[r], ar[r].data(), 8, NCCL_PTR_CUDA, &bad), ncclInvalidUsage);
    ASSERT_EQ(Iallreduce(comms[r], ar[r].data(), ar[r].data(), ar[r].size(), ncclFloat64, ncclAvg, mh[r], mh[r], &reqs[r]),
              ncclSuccess);
  }
  WaitAll(reqs);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < ar[r].size(); ++i) {
      ASSERT_EQ(ar[r][i], double(1 + i)) << i;  // (0+1+2)/3 + i
    }
    void* fr = nullptr;
    ASSERT_EQ(Iflush(comms[r], ar[r].data(), 8, mh[r], &fr), ncclSuccess);
    int done = 0, size = -1;
    ASSERT_EQ(::railyard::plugin::collnet::Test(fr, &done, &size), ncclSuccess);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(DeregMr(comms[r], mh[r]), ncclSuccess);
  }
  for (void* c : comms) EXPECT_EQ(CloseColl(c), ncclSuccess);
}

}  // namespace
}  // namespace railyard::plugin::collnet
