// Relayed Writes of every size class through one Forwarder over the fake transport:
// chunks small enough to travel inside their slot's header Write (InlineChunk) and
// larger ones (payload Write, then the header) land whole, each Write's
// immediate after all of its bytes and in post order, with the target seeing the
// Write's size; and which chunks are sent inline (host memory, at most the limit).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/relayed_endpoint.h"

namespace railyard::fabric::relay {
namespace {

TEST(RelayInline, OnlyHostChunksUpToTheLimitGoInline) {
  Region host;
  host.kind = MemoryKind::kHost;
  Region device;
  device.kind = MemoryKind::kDevice;
  EXPECT_TRUE(InlineChunk(host, 1, 65536));
  EXPECT_TRUE(InlineChunk(host, 65536, 65536));
  EXPECT_FALSE(InlineChunk(host, 65537, 65536));
  EXPECT_FALSE(InlineChunk(device, 1, 65536));
}

TEST(RelayInline, WritesOfEverySizeLandWholeBeforeTheirImmediatesInOrder) {
  std::unique_ptr<Domain> srcD, relayD, dstD;
  for (auto* d : {&srcD, &relayD, &dstD}) ASSERT_TRUE(fake::CreateFakeDomain({}, d).ok());
  std::unique_ptr<Worker> dstW;
  ASSERT_TRUE(dstD->CreateWorker(&dstW).ok());
  const RelayOptions o;
  std::unique_ptr<Forwarder> fwd;
  ASSERT_TRUE(Forwarder::Create({relayD.get()}, o, [](std::span<const uint8_t>, NextHop* out) {
                *out = NextHop{};
                return Status::Ok();
              }, &fwd).ok());
  std::unique_ptr<RelayClient> client;
  ASSERT_TRUE(RelayClient::Create(*srcD, o, &client).ok());
  const uint64_t record = std::min<uint64_t>(srcD->capabilities().maxRecordBytes, o.PayloadBytes());
  const uint64_t inl = std::min(record, kMaxInlineChunkBytes);
  // Inline at the limit and one byte over it, tiny ones, and one of two slots.
  const std::vector<uint64_t> sizes = {1, 8, 4096, inl, inl + 1, record, record + 1, 3000, o.PayloadBytes() + 1, 64, inl};
  uint64_t total = 0;
  for (uint64_t n : sizes) total += n;
  std::vector<uint8_t> src(total), dst(total + 64, 0);
  for (size_t i = 0; i < total; ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
  const Region *rs = nullptr, *rd = nullptr;
  ASSERT_TRUE(srcD->Register(src.data(), src.size(), kAccessLocal, MemoryKind::kHost, &rs).ok());
  ASSERT_TRUE(dstD->Register(dst.data(), dst.size(), kAccessRemoteWrite, MemoryKind::kHost, &rd).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(client->Connect(fwd->Address(0), dstW->Address(), &ep).ok());
  // Every Write posted at once, back to back (more slots' worth than the ring holds).
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    offsets.push_back(off);
    ASSERT_TRUE(ep->Write({rs, off, sizes[i]}, rd->Key(), rd->base + 16 + off, 100 + i, static_cast<uint32_t>(0x900 + i)).ok());
    off += sizes[i];
  }
  std::vector<Event> ev, dstEv;
  std::vector<uint32_t> imms;
  std::vector<uint64_t> immBytes;
  size_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (done < sizes.size() && std::chrono::steady_clock::now() < deadline) {
    ev.clear();
    client->Progress(&ev);
    fwd->Progress();
    dstEv.clear();
    dstW->Progress(&dstEv);
    for (const Event& e : dstEv) {
      if (e.kind != EventKind::kImmediate) continue;
      const size_t i = imms.size();
      ASSERT_LT(i, sizes.size());
      imms.push_back(static_cast<uint32_t>(e.value));
      immBytes.push_back(e.bytes);
      // This Write's bytes (and every earlier one's) are all there when its immediate is.
      const auto end = static_cast<std::ptrdiff_t>(offsets[i] + sizes[i]);
      EXPECT_TRUE(std::equal(src.begin(), src.begin() + end, dst.begin() + 16)) << "immediate " << i << " before its data";
    }
    for (const Event& e : ev) {
      ASSERT_EQ(e.kind, EventKind::kDone) << e.error.ToString();
      EXPECT_EQ(e.cookie, 100 + done) << "completions out of post order";
      ++done;
    }
  }
  ASSERT_EQ(done, sizes.size()) << "relay: " << fwd->lastRefusal();
  ASSERT_EQ(imms.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(imms[i], 0x900 + i);
    EXPECT_EQ(immBytes[i], sizes[i]);
  }
  EXPECT_TRUE(std::all_of(dst.begin(), dst.begin() + 16, [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(std::all_of(dst.begin() + 16 + static_cast<std::ptrdiff_t>(total), dst.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(fwd->stats().routesFailed, 0u) << fwd->lastRefusal();
  ep.reset();
  client.reset();
  fwd.reset();
}

}  // namespace
}  // namespace railyard::fabric::relay
