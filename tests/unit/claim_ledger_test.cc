// ClaimLedger: the byte-range claims a posted buffer takes before remote bytes land.
// Overlaps are refused whatever the order, a message completes only when its claims
// cover [0, total) and every claimed byte landed, and a refused call changes nothing.
#include "proxy/protocol/claim_ledger.h"

#include <gtest/gtest.h>

#include <string>

namespace railyard::proxy {
namespace {

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(ClaimLedger, CompletesOnlyWhenEveryClaimedByteLanded) {
  ClaimLedger l;
  l.Reset(8192);
  ASSERT_TRUE(l.Claim(0, 4096, 8192).ok());
  ASSERT_TRUE(l.Claim(4096, 4096, 8192).ok());
  EXPECT_EQ(l.claimed(), 8192u);
  EXPECT_FALSE(l.Complete()) << "claimed but nothing landed";
  bool whole = false;
  ASSERT_TRUE(l.Land(4096, 4096, &whole).ok());
  EXPECT_TRUE(whole);
  EXPECT_FALSE(l.Complete()) << "claim [0, 4096) has not landed";
  ASSERT_TRUE(l.Land(0, 1000, &whole).ok());
  EXPECT_FALSE(whole);
  EXPECT_EQ(l.outstanding(), 1u);
  ASSERT_TRUE(l.Land(0, 3096, &whole).ok());
  EXPECT_TRUE(whole);
  EXPECT_TRUE(l.Complete());
  EXPECT_EQ(l.landed(), 8192u);
  EXPECT_EQ(l.outstanding(), 0u);
}

TEST(ClaimLedger, LandedClaimsWithoutTheRestOfTheMessageDoNotComplete) {
  ClaimLedger l;
  l.Reset(8192);
  ASSERT_TRUE(l.Claim(0, 4096, 8192).ok());
  bool whole = false;
  ASSERT_TRUE(l.Land(0, 4096, &whole).ok());
  EXPECT_FALSE(l.Complete()) << "only 4096 of 8192 bytes were ever claimed";
}

TEST(ClaimLedger, OverlappingClaimsAreRefusedInEitherOrder) {
  ClaimLedger l;
  l.Reset(1 << 20);
  ASSERT_TRUE(l.Claim(4096, 4096, 1 << 20).ok());
  for (auto [off, len] : {std::pair<uint64_t, uint64_t>{4096, 4096}, {0, 4097}, {8191, 10}, {5000, 1}, {0, 1 << 20}}) {
    const Status s = l.Claim(off, len, 1 << 20);
    EXPECT_EQ(s.code(), Code::kRemoteError) << off << "+" << len;
    EXPECT_TRUE(Has(s, "overlap")) << s.message();
  }
  EXPECT_EQ(l.claimed(), 4096u) << "a refused claim must change nothing";
  EXPECT_TRUE(l.Claim(0, 4096, 1 << 20).ok()) << "touching, not overlapping";
  EXPECT_TRUE(l.Claim(8192, 100, 1 << 20).ok());
  // Landed claims merge but still refuse overlaps.
  bool whole = false;
  ASSERT_TRUE(l.Land(0, 4096, &whole).ok());
  ASSERT_TRUE(l.Land(4096, 4096, &whole).ok());
  EXPECT_TRUE(Has(l.Claim(2000, 10, 1 << 20), "overlap"));
  EXPECT_TRUE(Has(l.Claim(8000, 10, 1 << 20), "overlap"));
}

TEST(ClaimLedger, RangesOutsideTheMessageOrTheBufferAreRefused) {
  ClaimLedger l;
  l.Reset(4096);
  EXPECT_FALSE(l.Claim(0, 100, 8192).ok()) << "message larger than the buffer";
  EXPECT_FALSE(l.Claim(4000, 200, 4096).ok()) << "past the message end";
  EXPECT_FALSE(l.Claim(~0ull - 10, 100, 4096).ok()) << "wraps";
  EXPECT_FALSE(l.Claim(0, 0, 4096).ok()) << "empty claim of a non-empty message";
  ASSERT_TRUE(l.Claim(0, 100, 200).ok());
  const Status s = l.Claim(100, 100, 300);
  EXPECT_TRUE(Has(s, "differs")) << s.message();
  EXPECT_EQ(l.total(), 200);
}

TEST(ClaimLedger, EmptyMessageCompletesWithItsClaimOnce) {
  ClaimLedger l;
  l.Reset(64);
  EXPECT_FALSE(l.Complete());
  ASSERT_TRUE(l.Claim(0, 0, 0).ok());
  EXPECT_TRUE(l.Complete());
  EXPECT_TRUE(Has(l.Claim(0, 0, 0), "already complete"));
}

TEST(ClaimLedger, LandingNeedsAnOutstandingClaimAndStaysInsideIt) {
  ClaimLedger l;
  l.Reset(4096);
  bool whole = false;
  EXPECT_FALSE(l.Land(0, 1, &whole).ok()) << "nothing claimed";
  ASSERT_TRUE(l.Claim(0, 100, 4096).ok());
  EXPECT_FALSE(l.Land(50, 10, &whole).ok()) << "no claim starts at 50";
  EXPECT_FALSE(l.Land(0, 101, &whole).ok()) << "overruns the claim";
  EXPECT_EQ(l.landed(), 0u);
  ASSERT_TRUE(l.Land(0, 100, &whole).ok());
  EXPECT_FALSE(l.Land(0, 1, &whole).ok()) << "claim already whole";
}

TEST(ClaimLedger, ResetForgetsEverything) {
  ClaimLedger l;
  l.Reset(4096);
  ASSERT_TRUE(l.Claim(0, 4096, 4096).ok());
  l.Reset(4096);
  EXPECT_EQ(l.claimed(), 0u);
  EXPECT_EQ(l.total(), -1);
  bool whole = false;
  EXPECT_FALSE(l.Land(0, 4096, &whole).ok()) << "a claim from before Reset must not land";
  EXPECT_TRUE(l.Claim(0, 4096, 4096).ok());
}

TEST(ClaimLedger, ManySmallChunksInAnyOrderComplete) {
  ClaimLedger l;
  constexpr uint64_t kChunk = 1000, kN = 500;
  l.Reset(kChunk * kN);
  for (uint64_t i = 0; i < kN; ++i) {
    const uint64_t k = (i * 7919) % kN;  // a permutation (7919 is prime, kN not a multiple)
    ASSERT_TRUE(l.Claim(k * kChunk, kChunk, kChunk * kN).ok()) << k;
  }
  bool whole = false;
  for (uint64_t i = 0; i < kN; ++i) {
    const uint64_t k = (i * 211) % kN;
    ASSERT_FALSE(l.Complete());
    ASSERT_TRUE(l.Land(k * kChunk, kChunk, &whole).ok()) << k;
  }
  EXPECT_TRUE(l.Complete());
}

}  // namespace
}  // namespace railyard::proxy
