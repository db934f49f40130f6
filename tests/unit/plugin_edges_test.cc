// The plugin edge (plugin/net.cc) on defects of issue 10, in one process over
// loopback (RAILYARD_SOCKET_IFNAME==lo, TCP transport): regMrDmaBuf of plain memory
// (fd -1) works outside pure verbs mode and a real DMA-BUF gets a clear refusal;
// ptrSupport claims CUDA/DMA-BUF only when every route of the device is RDMA.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "plugin/net.h"
#include "plugin/ptr_support.h"

namespace railyard::plugin {
namespace {

TEST(PluginEdges, PtrSupportClaimsDeviceMemoryOnlyWhenEveryRouteIsRdma) {
  RouteFacts f;
  f.gdrPeerMemory = f.portsDmaBuf = f.cudaDmaBuf = true;
  // Fabric mode with RDMA ports: relayed peers of the same device go over TCP.
  f.everyRouteRdma = false;
  EXPECT_EQ(PtrSupportFor(f), NCCL_PTR_HOST);
  f.everyRouteRdma = true;  // pure verbs mode
  EXPECT_EQ(PtrSupportFor(f), NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
  f.portsDmaBuf = false;
  EXPECT_EQ(PtrSupportFor(f), NCCL_PTR_HOST | NCCL_PTR_CUDA);
  f.gdrPeerMemory = false;
  EXPECT_EQ(PtrSupportFor(f), NCCL_PTR_HOST);
}

TEST(PluginEdges, RegMrDmaBufOfPlainMemoryWorksOverTcpAndADmaBufIsRefusedClearly) {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "off", 1);
  void* ctx = nullptr;
  ASSERT_EQ(Init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  ncclNetProperties_v11_t props{};
  ASSERT_EQ(GetProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, NCCL_PTR_HOST) << "TCP routes cannot read device memory";
  char handle[128] = {};
  void* listen = nullptr;
  ASSERT_EQ(Listen(ctx, 0, handle, &listen), ncclSuccess);
  void *send = nullptr, *recv = nullptr;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((send == nullptr || recv == nullptr) && std::chrono::steady_clock::now() < until) {
    if (send == nullptr) {
      ASSERT_EQ(Connect(ctx, 0, handle, &send), ncclSuccess);
    }
    if (recv == nullptr) {
      ASSERT_EQ(Accept(listen, &recv), ncclSuccess);
    }
  }
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  std::vector<char> buf(4096, 1);
  void* mh = nullptr;
  EXPECT_EQ(RegMrDmaBuf(send, buf.data(), buf.size(), NCCL_PTR_HOST, 0, -1, &mh), ncclSuccess)
      << "fd -1 is plain memory: a registration in every mode";
  ASSERT_NE(mh, nullptr);
  EXPECT_EQ(DeregMr(send, mh), ncclSuccess);
  void* mh2 = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(RegMrDmaBuf(recv, buf.data(), buf.size(), NCCL_PTR_CUDA, 0, 7, &mh2), ncclInvalidUsage)
      << "a DMA-BUF over TCP";
  EXPECT_EQ(mh2, nullptr);
  EXPECT_EQ(CloseSend(send), ncclSuccess);
  EXPECT_EQ(CloseRecv(recv), ncclSuccess);
  EXPECT_EQ(CloseListen(listen), ncclSuccess);
  EXPECT_EQ(Finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace railyard::plugin
