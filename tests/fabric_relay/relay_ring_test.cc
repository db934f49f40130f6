// proxy/relay/relay_ring.h: a relayed socket's bytes for one direction take room only
// as they need it (64 KiB, then doubled while full, up to the cap), and come out in
// order across the wrap and every growth.
#include "proxy/relay/relay_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace railyard::proxy {
namespace {

/// Reads up to `n` bytes into `ring` from a counter (byte i is i % 251), as readv would.
void Fill(Ring& ring, size_t n, uint64_t* next) {
  iovec iov[2];
  const int k = ring.FreeIov(iov);
  size_t put = 0;
  for (int i = 0; i < k && put < n; ++i) {
    auto* p = static_cast<uint8_t*>(iov[i].iov_base);
    for (size_t j = 0; j < iov[i].iov_len && put < n; ++j, ++put) p[j] = static_cast<uint8_t>((*next)++ % 251);
  }
  ring.len += put;
}

/// Takes up to `n` bytes out of `ring`, as sendmsg would, checking they continue the count.
bool Drain(Ring& ring, size_t n, uint64_t* expect) {
  iovec iov[2];
  const int k = ring.DataIov(iov);
  size_t took = 0;
  for (int i = 0; i < k && took < n; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    for (size_t j = 0; j < iov[i].iov_len && took < n; ++j, ++took) {
      if (p[j] != static_cast<uint8_t>((*expect)++ % 251)) return false;
    }
  }
  ring.Consumed(took);
  return true;
}

TEST(RelayRing, TakesRoomOnlyAsItNeedsItUpToTheCap) {
  Ring ring;
  ring.cap = size_t{1} << 20;
  EXPECT_EQ(ring.Space(), ring.cap);
  EXPECT_TRUE(ring.buf.empty()) << "room before any data";
  EXPECT_EQ(ring.Ensure(), Ring::kFirstBytes);  // the first byte: 64 KiB, not the cap
  uint64_t next = 0;
  Fill(ring, 1, &next);
  EXPECT_EQ(ring.Ensure(), 0u) << "grown with room left";
  Fill(ring, Ring::kFirstBytes - 1, &next);  // full
  EXPECT_EQ(ring.Ensure(), Ring::kFirstBytes);  // doubled
  EXPECT_EQ(ring.buf.size(), 2 * Ring::kFirstBytes);
  for (size_t room = 2 * Ring::kFirstBytes; room < ring.cap; room *= 2) {
    Fill(ring, room - ring.len, &next);
    EXPECT_EQ(ring.Ensure(), room);
  }
  EXPECT_EQ(ring.buf.size(), ring.cap);
  Fill(ring, ring.cap, &next);
  EXPECT_EQ(ring.Space(), 0u);
  EXPECT_EQ(ring.Ensure(), 0u) << "never past the cap";
  uint64_t expect = 0;
  EXPECT_TRUE(Drain(ring, ring.cap, &expect));
  EXPECT_EQ(expect, ring.cap);
}

TEST(RelayRing, BytesComeOutInOrderAcrossTheWrapAndAGrowth) {
  Ring ring;
  ring.cap = 4 * Ring::kFirstBytes;
  (void)ring.Ensure();
  uint64_t next = 0, expect = 0;
  Fill(ring, Ring::kFirstBytes - 100, &next);
  ASSERT_TRUE(Drain(ring, Ring::kFirstBytes - 200, &expect));  // head near the end
  Fill(ring, Ring::kFirstBytes - 100, &next);                   // wraps: full again
  ASSERT_EQ(ring.len, Ring::kFirstBytes);
  EXPECT_EQ(ring.Ensure(), Ring::kFirstBytes);  // grown, the wrapped bytes moved to the front in order
  EXPECT_EQ(ring.head, 0u);
  Fill(ring, 1000, &next);
  EXPECT_TRUE(Drain(ring, ring.len, &expect));
  EXPECT_EQ(expect, next);
  EXPECT_EQ(ring.len, 0u);
}

}  // namespace
}  // namespace railyard::proxy
