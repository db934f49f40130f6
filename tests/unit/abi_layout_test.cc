// Runtime mirror of the static_asserts in plugin/abi/*.h: sizes and offsets of
// NCCL 2.28.9's net ABI as given by shared/docs/nccl-net-abi.md §2.1-§2.4, §3.1.
#include <gtest/gtest.h>

#include <cstddef>

#include "plugin/abi/collnet_v11.h"
#include "plugin/abi/common.h"
#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

namespace {

TEST(AbiLayout, Constants) {
  EXPECT_EQ(ncclSuccess, 0);
  EXPECT_EQ(ncclUnhandledCudaError, 1);
  EXPECT_EQ(ncclSystemError, 2);
  EXPECT_EQ(ncclInternalError, 3);
  EXPECT_EQ(ncclInvalidArgument, 4);
  EXPECT_EQ(ncclInvalidUsage, 5);
  EXPECT_EQ(ncclRemoteError, 6);
  EXPECT_EQ(ncclInProgress, 7);
  EXPECT_EQ(NCCL_NET_HANDLE_MAXSIZE, 128);
  EXPECT_EQ(NCCL_NET_MAX_REQUESTS, 32);
  EXPECT_EQ(NCCL_NET_MAX_DEVS_PER_NIC, 4);
  EXPECT_EQ(NCCL_MAX_NET_SIZE_BYTES, 1ull << 40);
  EXPECT_EQ(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF, 0x7);
  EXPECT_EQ(NCCL_NET_OPTIONAL_RECV_COMPLETION, 0x1);
  EXPECT_EQ(NCCL_NET_DEVICE_HOST, 0);
  EXPECT_EQ(NCCL_NET_DEVICE_UNPACK, 1);
  EXPECT_EQ(NCCL_NET_DEVICE_GIN_PROXY, 2);
  EXPECT_EQ(NCCL_NET_DEVICE_GIN_GDAKI, 3);
  EXPECT_EQ(NCCL_NET_DEVICE_UNPACK_VERSION, 0x7);
  EXPECT_EQ(NCCL_NET_TRAFFIC_CLASS_UNDEF, -1);
  EXPECT_EQ(NCCL_LOG_TRACE, 5);
  EXPECT_EQ(NCCL_NET, 0x10);
}

TEST(AbiLayout, TableSizes) {
  EXPECT_EQ(sizeof(ncclNet_v11_t), 176u);
  EXPECT_EQ(sizeof(ncclNet_v10_t), 160u);
  EXPECT_EQ(sizeof(ncclNet_v9_t), 160u);
  EXPECT_EQ(sizeof(ncclNet_v8_t), 152u);
  EXPECT_EQ(sizeof(ncclCollNet_v11_t), 152u);
  EXPECT_EQ(offsetof(ncclNet_v11_t, setNetAttr), 21u * 8);
  EXPECT_EQ(offsetof(ncclNet_v10_t, makeVDevice), 19u * 8);
  EXPECT_EQ(offsetof(ncclNet_v9_t, makeVDevice), 19u * 8);
  EXPECT_EQ(offsetof(ncclNet_v8_t, irecvConsumed), 18u * 8);
}

TEST(AbiLayout, SmallStructs) {
  EXPECT_EQ(sizeof(ncclNetDeviceHandle_v11_t), 32u);
  EXPECT_EQ(sizeof(ncclNetVDeviceProps_v11_t), 20u);
  EXPECT_EQ(sizeof(ncclNetVDeviceProps_v10_t), 20u);
  EXPECT_EQ(sizeof(ncclNetVDeviceProps_v9_t), 20u);
  EXPECT_EQ(sizeof(ncclNetCommAttr_v11_t), 16u);
  EXPECT_EQ(sizeof(ncclNetAttr_v11_t), 44u);
  EXPECT_EQ(sizeof(ncclNetSGE_v11_t), 24u);
  EXPECT_EQ(sizeof(ncclNetCommConfig_v11_t), 4u);
  EXPECT_EQ(sizeof(ncclNetCommConfig_v10_t), 4u);
}

TEST(AbiLayout, PropertiesV11) {
  EXPECT_EQ(sizeof(ncclNetProperties_v11_t), 112u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, forceFlush), 32u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, speed), 36u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, latency), 44u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, netDeviceType), 56u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, vProps), 64u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, maxP2pBytes), 88u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, maxCollBytes), 96u);
  EXPECT_EQ(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize), 104u);
}

TEST(AbiLayout, PropertiesV10V9SameLayout) {
  EXPECT_EQ(sizeof(ncclNetProperties_v10_t), 104u);
  EXPECT_EQ(sizeof(ncclNetProperties_v9_t), 104u);
#define RY_SAME(f) EXPECT_EQ(offsetof(ncclNetProperties_v10_t, f), offsetof(ncclNetProperties_v11_t, f)) << #f; \
                   EXPECT_EQ(offsetof(ncclNetProperties_v9_t, f), offsetof(ncclNetProperties_v11_t, f)) << #f
  RY_SAME(name); RY_SAME(pciPath); RY_SAME(guid); RY_SAME(ptrSupport); RY_SAME(regIsGlobal);
  RY_SAME(forceFlush); RY_SAME(speed); RY_SAME(port); RY_SAME(latency); RY_SAME(maxComms);
  RY_SAME(maxRecvs); RY_SAME(netDeviceType); RY_SAME(netDeviceVersion); RY_SAME(vProps);
  RY_SAME(maxP2pBytes); RY_SAME(maxCollBytes);
#undef RY_SAME
}

TEST(AbiLayout, PropertiesV8ShiftedByMissingForceFlush) {
  EXPECT_EQ(sizeof(ncclNetProperties_v8_t), 64u);
  EXPECT_EQ(offsetof(ncclNetProperties_v8_t, regIsGlobal), 28u);
  // Every field after regIsGlobal sits 4 bytes earlier than in v9+.
#define RY_SHIFT(f) EXPECT_EQ(offsetof(ncclNetProperties_v8_t, f) + 4, offsetof(ncclNetProperties_v9_t, f)) << #f
  RY_SHIFT(speed); RY_SHIFT(port); RY_SHIFT(latency); RY_SHIFT(maxComms); RY_SHIFT(maxRecvs);
  RY_SHIFT(netDeviceType); RY_SHIFT(netDeviceVersion);
#undef RY_SHIFT
}

}  // namespace
