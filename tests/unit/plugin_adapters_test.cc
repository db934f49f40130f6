// Tests of plugin/adapters.{h,cc}: v11 -> v10/v9/v8 property copies (every
// field written), getProperties/makeVDevice forwarding, v8 int-size
// conversions and the process-wide legacy ctx. All v11 callees are test doubles.
#include "plugin/adapters.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace {

namespace ad = railyard::plugin::adapters;

char kName[] = "ry0+ry1";
char kPci[] = "/sys/devices/pci0000:00/0000:00:01.0";

// A v11 source first filled with a pattern, then field by field.
ncclNetProperties_v11_t FilledV11() {
  ncclNetProperties_v11_t p;
  std::memset(&p, 0xC3, sizeof(p));
  p.name = kName;
  p.pciPath = kPci;
  p.guid = 0x1122334455667788ull;
  p.ptrSupport = NCCL_PTR_HOST | NCCL_PTR_DMABUF;
  p.regIsGlobal = 1;
  p.forceFlush = 0;
  p.speed = 200000;
  p.port = 2;
  p.latency = 1.5f;
  p.maxComms = 65536;
  p.maxRecvs = 16;  // above kMaxV8Recvs, to check the v8 cap
  p.netDeviceType = NCCL_NET_DEVICE_HOST;
  p.netDeviceVersion = 0;
  p.vProps.ndevs = 2;
  p.vProps.devs[0] = 0;
  p.vProps.devs[1] = 3;
  p.vProps.devs[2] = 0;
  p.vProps.devs[3] = 0;
  p.maxP2pBytes = 1ull << 30;
  p.maxCollBytes = 512ull << 20;
  p.maxMultiRequestSize = 1;
  return p;
}

using Range = std::pair<size_t, size_t>;  // [first, last) byte offsets of padding

// Byte offsets that still hold `pattern` after CopyProperties, padding excluded.
template <typename Props>
std::vector<size_t> UnwrittenBytes(unsigned char pattern, const std::vector<Range>& padding) {
  Props dst;
  std::memset(&dst, pattern, sizeof(dst));
  ad::CopyProperties(FilledV11(), &dst);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&dst);
  std::vector<size_t> out;
  for (size_t i = 0; i < sizeof(dst); ++i) {
    bool pad = false;
    for (const auto& r : padding) pad = pad || (i >= r.first && i < r.second);
    if (!pad && bytes[i] == pattern) out.push_back(i);
  }
  return out;
}

// A byte is unwritten only if it kept the pattern in both runs (a written
// field may contain 0xA5 or 0x5A by chance, but not the one that was there).
template <typename Props>
void ExpectEveryFieldWritten(const std::vector<Range>& padding) {
  auto a = UnwrittenBytes<Props>(0xA5, padding);
  auto b = UnwrittenBytes<Props>(0x5A, padding);
  std::vector<size_t> both;
  for (size_t i : a)
    for (size_t j : b)
      if (i == j) both.push_back(i);
  EXPECT_TRUE(both.empty()) << "first unwritten byte offset: " << (both.empty() ? 0 : both[0])
                            << " (" << both.size() << " bytes)";
}

template <typename Props>
std::vector<Range> V9LayoutPadding() {
  return {{offsetof(Props, vProps) + sizeof(Props::vProps), offsetof(Props, maxP2pBytes)}};
}

TEST(CopyProperties, EveryV10FieldWritten) {
  ExpectEveryFieldWritten<ncclNetProperties_v10_t>(V9LayoutPadding<ncclNetProperties_v10_t>());
}

TEST(CopyProperties, EveryV9FieldWritten) {
  ExpectEveryFieldWritten<ncclNetProperties_v9_t>(V9LayoutPadding<ncclNetProperties_v9_t>());
}

TEST(CopyProperties, EveryV8FieldWritten) {
  ExpectEveryFieldWritten<ncclNetProperties_v8_t>(
      {{offsetof(ncclNetProperties_v8_t, netDeviceVersion) + sizeof(int),
        sizeof(ncclNetProperties_v8_t)}});
}

TEST(CopyProperties, PaddingIsWhatTheTestAssumes) {
  // If a field is ever added, these ranges must be revisited.
  EXPECT_EQ(V9LayoutPadding<ncclNetProperties_v10_t>()[0], Range(84, 88));
  EXPECT_EQ(offsetof(ncclNetProperties_v8_t, netDeviceVersion) + sizeof(int), 60u);
}

template <typename Props>
void ExpectV9LayoutValues(const Props& d, const ncclNetProperties_v11_t& s) {
  EXPECT_EQ(d.name, s.name);
  EXPECT_EQ(d.pciPath, s.pciPath);
  EXPECT_EQ(d.guid, s.guid);
  EXPECT_EQ(d.ptrSupport, s.ptrSupport);
  EXPECT_EQ(d.regIsGlobal, s.regIsGlobal);
  EXPECT_EQ(d.forceFlush, s.forceFlush);
  EXPECT_EQ(d.speed, s.speed);
  EXPECT_EQ(d.port, s.port);
  EXPECT_EQ(d.latency, s.latency);
  EXPECT_EQ(d.maxComms, s.maxComms);
  EXPECT_EQ(d.maxRecvs, s.maxRecvs);
  EXPECT_EQ(d.netDeviceType, s.netDeviceType);
  EXPECT_EQ(d.netDeviceVersion, s.netDeviceVersion);
  EXPECT_EQ(d.vProps.ndevs, s.vProps.ndevs);
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) EXPECT_EQ(d.vProps.devs[i], s.vProps.devs[i]);
  EXPECT_EQ(d.maxP2pBytes, s.maxP2pBytes);
  EXPECT_EQ(d.maxCollBytes, s.maxCollBytes);
}

TEST(CopyProperties, ValuesV10V9) {
  const auto s = FilledV11();
  ncclNetProperties_v10_t d10;
  ad::CopyProperties(s, &d10);
  ExpectV9LayoutValues(d10, s);
  ncclNetProperties_v9_t d9;
  ad::CopyProperties(s, &d9);
  ExpectV9LayoutValues(d9, s);
}

TEST(CopyProperties, ValuesV8) {
  const auto s = FilledV11();
  ncclNetProperties_v8_t d;
  ad::CopyProperties(s, &d);
  EXPECT_EQ(d.name, s.name);
  EXPECT_EQ(d.pciPath, s.pciPath);
  EXPECT_EQ(d.guid, s.guid);
  EXPECT_EQ(d.ptrSupport, s.ptrSupport);
  EXPECT_EQ(d.regIsGlobal, s.regIsGlobal);
  EXPECT_EQ(d.speed, s.speed);
  EXPECT_EQ(d.port, s.port);
  EXPECT_EQ(d.latency, s.latency);
  EXPECT_EQ(d.maxComms, s.maxComms);
  EXPECT_EQ(d.maxRecvs, ad::kMaxV8Recvs);  // capped from 16
  EXPECT_EQ(d.netDeviceType, s.netDeviceType);
  EXPECT_EQ(d.netDeviceVersion, s.netDeviceVersion);
}

// ---- getProperties forwarding ----

int g_last_dev = -1;
ncclResult_t FakeGetProperties(int dev, ncclNetProperties_v11_t* props) {
  g_last_dev = dev;
  *props = FilledV11();
  return ncclSuccess;
}
ncclResult_t FailingGetProperties(int, ncclNetProperties_v11_t*) { return ncclSystemError; }

TEST(GetPropertiesAdapter, ForwardsAndCopies) {
  ncclNetProperties_v8_t p8;
  std::memset(&p8, 0xA5, sizeof(p8));
  ASSERT_EQ(ad::GetProperties(&FakeGetProperties, 3, &p8), ncclSuccess);
  EXPECT_EQ(g_last_dev, 3);
  EXPECT_EQ(p8.speed, 200000);
  ncclNetProperties_v9_t p9;
  ASSERT_EQ(ad::GetProperties(&FakeGetProperties, 1, &p9), ncclSuccess);
  EXPECT_EQ(p9.vProps.devs[1], 3);
  ncclNetProperties_v10_t p10;
  ASSERT_EQ(ad::GetProperties(&FakeGetProperties, 2, &p10), ncclSuccess);
  EXPECT_EQ(p10.maxCollBytes, 512ull << 20);
}

TEST(GetPropertiesAdapter, ErrorsPassThroughAndLeaveOutputAlone) {
  ncclNetProperties_v10_t p;
  std::memset(&p, 0x5A, sizeof(p));
  EXPECT_EQ(ad::GetProperties(&FailingGetProperties, 0, &p), ncclSystemError);
  const auto* b = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = 0; i < sizeof(p); ++i) ASSERT_EQ(b[i], 0x5A);
  EXPECT_EQ(ad::GetProperties(&FakeGetProperties, 0, static_cast<ncclNetProperties_v8_t*>(nullptr)),
            ncclInternalError);
}

// ---- makeVDevice ----

ncclNetVDeviceProps_v11_t g_vprops{};
ncclResult_t FakeMakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  g_vprops = *props;
  *d = 7;
  return ncclSuccess;
}

TEST(MakeVDeviceAdapter, ConvertsV10AndV9) {
  ncclNetVDeviceProps_v10_t v10{3, {0, 1, 2, 99}};
  int d = -1;
  ASSERT_EQ(ad::MakeVDevice(&FakeMakeVDevice, &d, &v10), ncclSuccess);
  EXPECT_EQ(d, 7);
  EXPECT_EQ(g_vprops.ndevs, 3);
  EXPECT_EQ(g_vprops.devs[2], 2);
  EXPECT_EQ(g_vprops.devs[3], 0);  // beyond ndevs: not copied
  ncclNetVDeviceProps_v9_t v9{2, {4, 5, 0, 0}};
  ASSERT_EQ(ad::MakeVDevice(&FakeMakeVDevice, &d, &v9), ncclSuccess);
  EXPECT_EQ(g_vprops.ndevs, 2);
  EXPECT_EQ(g_vprops.devs[1], 5);
}

TEST(MakeVDeviceAdapter, RejectsBadInput) {
  ncclNetVDeviceProps_v10_t v10{NCCL_NET_MAX_DEVS_PER_NIC + 1, {0, 1, 2, 3}};
  int d = -1;
  EXPECT_EQ(ad::MakeVDevice(&FakeMakeVDevice, &d, &v10), ncclInvalidArgument);
  v10.ndevs = -1;
  EXPECT_EQ(ad::MakeVDevice(&FakeMakeVDevice, &d, &v10), ncclInvalidArgument);
  EXPECT_EQ(ad::MakeVDevice(&FakeMakeVDevice, nullptr, &v10), ncclInternalError);
}

// ---- v8 isend / irecv ----

struct SendCall {
  int calls = 0;
  size_t size = 0;
  void* phandle = reinterpret_cast<void*>(1);
} g_send;
ncclResult_t FakeIsend(void*, void*, size_t size, int, void*, void* phandle, void** request) {
  ++g_send.calls;
  g_send.size = size;
  g_send.phandle = phandle;
  *request = &g_send;
  return ncclSuccess;
}

TEST(IsendV8, ConvertsSizeAndDropsPhandle) {
  g_send = {};
  void* req = nullptr;
  ASSERT_EQ(ad::IsendV8(&FakeIsend, nullptr, nullptr, 4096, 1, nullptr, &req), ncclSuccess);
  EXPECT_EQ(g_send.calls, 1);
  EXPECT_EQ(g_send.size, 4096u);
  EXPECT_EQ(g_send.phandle, nullptr);
  EXPECT_EQ(req, &g_send);
}

TEST(IsendV8, RejectsNegativeSize) {
  g_send = {};
  void* req = &g_send;
  EXPECT_EQ(ad::IsendV8(&FakeIsend, nullptr, nullptr, -1, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(g_send.calls, 0);
  EXPECT_EQ(req, nullptr);
}

struct RecvCall {
  int calls = 0;
  int n = 0;
  size_t sizes[ad::kMaxV8Recvs] = {};
  void** phandles = reinterpret_cast<void**>(1);
  void* request_in = nullptr;
} g_recv;
ncclResult_t FakeIrecv(void*, int n, void**, size_t* sizes, int*, void**, void** phandles,
                       void** request) {
  ++g_recv.calls;
  g_recv.n = n;
  for (int i = 0; i < n; ++i) g_recv.sizes[i] = sizes[i];
  g_recv.phandles = phandles;
  g_recv.request_in = *request;
  *request = &g_recv;
  return ncclSuccess;
}

TEST(IrecvV8, ConvertsSizesAndPassesSentinel) {
  g_recv = {};
  int sizes[3] = {0, 1 << 20, 0x7fffffff};
  int tags[3] = {0, 1, 2};
  void* req = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
  ASSERT_EQ(ad::IrecvV8(&FakeIrecv, nullptr, 3, nullptr, sizes, tags, nullptr, &req), ncclSuccess);
  EXPECT_EQ(g_recv.calls, 1);
  EXPECT_EQ(g_recv.n, 3);
  EXPECT_EQ(g_recv.sizes[0], 0u);
  EXPECT_EQ(g_recv.sizes[1], 1u << 20);
  EXPECT_EQ(g_recv.sizes[2], 0x7fffffffu);
  EXPECT_EQ(g_recv.phandles, nullptr);
  EXPECT_EQ(g_recv.request_in, reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION));
  EXPECT_EQ(req, &g_recv);
}

TEST(IrecvV8, RejectsBadCountsAndSizes) {
  g_recv = {};
  int sizes[ad::kMaxV8Recvs + 1] = {};
  void* req = &g_recv;
  EXPECT_EQ(ad::IrecvV8(&FakeIrecv, nullptr, ad::kMaxV8Recvs + 1, nullptr, sizes, nullptr, nullptr,
                        &req),
            ncclInvalidArgument);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(ad::IrecvV8(&FakeIrecv, nullptr, 0, nullptr, sizes, nullptr, nullptr, &req),
            ncclInvalidArgument);
  sizes[1] = -5;
  EXPECT_EQ(ad::IrecvV8(&FakeIrecv, nullptr, 2, nullptr, sizes, nullptr, nullptr, &req),
            ncclInvalidArgument);
  EXPECT_EQ(g_recv.calls, 0);
  // n == kMaxV8Recvs is accepted.
  sizes[1] = 5;
  EXPECT_EQ(ad::IrecvV8(&FakeIrecv, nullptr, ad::kMaxV8Recvs, nullptr, sizes, nullptr, nullptr,
                        &req),
            ncclSuccess);
  EXPECT_EQ(g_recv.n, ad::kMaxV8Recvs);
}

// ---- legacy ctx ----

struct InitLog {
  int init_calls = 0;
  int finalize_calls = 0;
  bool fail_next = false;
  uint64_t comm_id = 99;
  ncclNetCommConfig_v11_t* config = reinterpret_cast<ncclNetCommConfig_v11_t*>(1);
  void* finalized_ctx = nullptr;
} g_init;
int g_ctx_storage = 0;

ncclResult_t FakeInit(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                      ncclDebugLogger_t, ncclProfilerCallback_t) {
  ++g_init.init_calls;
  g_init.comm_id = commId;
  g_init.config = config;
  if (g_init.fail_next) {
    *ctx = nullptr;
    return ncclSystemError;
  }
  *ctx = &g_ctx_storage;
  return ncclSuccess;
}
ncclResult_t FakeFinalize(void* ctx) {
  ++g_init.finalize_calls;
  g_init.finalized_ctx = ctx;
  return ncclSuccess;
}

TEST(LegacyContext, FailedInitFinalizesAndRetries) {
  g_init = {};
  ad::LegacyContext legacy;
  g_init.fail_next = true;
  EXPECT_EQ(legacy.Init(&FakeInit, &FakeFinalize, nullptr, nullptr), ncclSystemError);
  EXPECT_EQ(g_init.finalize_calls, 1);
  EXPECT_FALSE(legacy.initialized());
  EXPECT_EQ(legacy.ctx(), nullptr);

  g_init.fail_next = false;
  EXPECT_EQ(legacy.Init(&FakeInit, &FakeFinalize, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(g_init.init_calls, 2);
  EXPECT_EQ(g_init.comm_id, 0u);
  EXPECT_EQ(g_init.config, nullptr);
  EXPECT_TRUE(legacy.initialized());
  EXPECT_EQ(legacy.ctx(), &g_ctx_storage);
}

TEST(LegacyContext, InitsOnceThenOnlySucceeds) {
  g_init = {};
  ad::LegacyContext legacy;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(legacy.Init(&FakeInit, &FakeFinalize, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(g_init.init_calls, 1);
  EXPECT_EQ(g_init.finalize_calls, 0);
  EXPECT_EQ(legacy.ctx(), &g_ctx_storage);
}

}  // namespace
