// Patterns: peers, bus-bandwidth factors, layouts and the data pattern.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tools/railyard-perf/patterns.h"
#include "tools/railyard-perf/report.h"

namespace railyard::perf {
namespace {

TEST(PerfPatterns, BusBwFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kRing, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllToAll, 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllToAll, 1), 0.0);
  // The collectives, as nccl-tests computes busbw (its doc/PERFORMANCE.md): AllReduce
  // 2(n-1)/n, AllGather and ReduceScatter (n-1)/n.
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllReduce, 3), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kReduceScatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kAllReduce, 1), 0.0);
}

TEST(PerfPatterns, Peers) {
  auto ring = PeersOf(Pattern::kRing, 0, 4);
  EXPECT_EQ(ring.sendTo, std::vector<int>{1});
  EXPECT_EQ(ring.recvFrom, std::vector<int>{3});
  auto pair = PeersOf(Pattern::kSendRecv, 3, 4);
  EXPECT_EQ(pair.sendTo, std::vector<int>{2});
  EXPECT_EQ(pair.recvFrom, std::vector<int>{2});
  auto a2a = PeersOf(Pattern::kAllToAll, 1, 4);
  EXPECT_EQ(a2a.sendTo, (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(a2a.recvFrom, (std::vector<int>{0, 3, 2}));
  EXPECT_FALSE(CheckRanks(Pattern::kSendRecv, 3).empty());
  EXPECT_TRUE(CheckRanks(Pattern::kSendRecv, 4).empty());
  EXPECT_TRUE(CheckRanks(Pattern::kRing, 3).empty());
  EXPECT_TRUE(CheckRanks(Pattern::kRing, 1).empty());
  EXPECT_FALSE(CheckRanks(Pattern::kAllToAll, 1).empty());
  // Every rank's sends are exactly the others' receives.
  for (Pattern p : {Pattern::kSendRecv, Pattern::kRing, Pattern::kAllToAll}) {
    const int n = 6;
    int sends[n][n] = {}, recvs[n][n] = {};
    for (int r = 0; r < n; ++r) {
      auto peers = PeersOf(p, r, n);
      for (int q : peers.sendTo) ++sends[r][q];
      for (int q : peers.recvFrom) ++recvs[q][r];
    }
    EXPECT_EQ(std::memcmp(sends, recvs, sizeof(sends)), 0) << PatternName(p);
  }
}

TEST(PerfPatterns, Layouts) {
  Layout ring = LayoutFor(Pattern::kRing, 1026, 4);
  EXPECT_EQ(ring.totalBytes, 1024u);
  EXPECT_EQ(ring.perPeerBytes, 1024u);
  EXPECT_EQ(ring.count, 256u);
  Layout a2a = LayoutFor(Pattern::kAllToAll, 1u << 20, 3);
  EXPECT_EQ(a2a.perPeerBytes % 16, 0u);
  EXPECT_EQ(a2a.totalBytes, a2a.perPeerBytes * 3);
  EXPECT_LE(a2a.totalBytes, 1u << 20);
  EXPECT_EQ(a2a.count, a2a.totalBytes / 4);
}

TEST(PerfPatterns, DataPatternDetectsWrongElements) {
  const std::size_t n = 4096;
  std::vector<Elem> buf(n);
  FillPattern(buf.data(), n, /*sender=*/2, /*iter=*/7, /*first=*/0);
  EXPECT_EQ(CountWrong(buf.data(), n, 2, 7, 0), 0u);
  buf[1234] += 1.0f;  // one wrong element
  EXPECT_EQ(CountWrong(buf.data(), n, 2, 7, 0), 1u);
  FillPattern(buf.data(), n, 2, 7, 0);
  // Wrong sender, stale iteration and shifted offset are all visible.
  EXPECT_GT(CountWrong(buf.data(), n, 3, 7, 0), n - 8);
  EXPECT_GT(CountWrong(buf.data(), n, 2, 6, 0), n - 8);
  EXPECT_GT(CountWrong(buf.data(), n, 2, 7, 1), n - 8);
  // The poison never passes.
  Poison(buf.data(), n * sizeof(Elem));
  EXPECT_EQ(CountWrong(buf.data(), n, 2, 7, 0), n);
  std::memset(buf.data(), 0, n * sizeof(Elem));
  EXPECT_EQ(CountWrong(buf.data(), n, 2, 7, 0), n);
}

TEST(PerfReport, RowsAndFooterLookLikeNcclTests) {
  Row r;
  r.bytes = 1024;
  r.count = 256;
  r.timeUs = 12.345;
  r.algbw = AlgBw(1024, 12.345);
  r.busbw = r.algbw;
  r.wrong = -1;
  const std::string line = TableRow(r);
  EXPECT_NE(line.find("        1024          256    float   none     -1   12.35   0.08   0.08    N/A"),
            std::string::npos)
      << line;
  r.wrong = 0;
  EXPECT_NE(TableRow(r).find("      0\n"), std::string::npos) << TableRow(r);
  EXPECT_NE(TableHeader().find("out-of-place"), std::string::npos);
  const std::string footer = TableFooter({r});
  EXPECT_NE(footer.find("# Out of bounds values : 0 OK"), std::string::npos) << footer;
  EXPECT_NE(footer.find("# Avg bus bandwidth    : "), std::string::npos) << footer;
  EXPECT_DOUBLE_EQ(AlgBw(1000000000, 1e6), 1.0);  // 1 GB in 1 s
}

}  // namespace
}  // namespace railyard::perf
