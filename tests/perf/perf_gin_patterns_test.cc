// railyard-perf's gin-* patterns: names, rank rules and factors, and each pattern run
// end to end (2 or 4 local ranks, -c 1) over the built plugin's one-sided tables,
// every row checked with #wrong 0.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/railyard-perf/patterns.h"

namespace railyard::perf {
namespace {

TEST(PerfGinPatterns, NamesRanksAndFactors) {
  for (Pattern p : {Pattern::kGinPut, Pattern::kGinSignal, Pattern::kGinAllToAll}) {
    ASSERT_TRUE(ParsePattern(PatternName(p)).has_value()) << PatternName(p);
    EXPECT_EQ(*ParsePattern(PatternName(p)), p);
    EXPECT_TRUE(IsGinPattern(p));
  }
  EXPECT_FALSE(IsGinPattern(Pattern::kAllToAll));
  EXPECT_FALSE(CheckRanks(Pattern::kGinPut, 3).empty());
  EXPECT_TRUE(CheckRanks(Pattern::kGinSignal, 4).empty());
  EXPECT_FALSE(CheckRanks(Pattern::kGinAllToAll, 1).empty());
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kGinAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Pattern::kGinPut, 2), 1.0);
  EXPECT_EQ(LayoutFor(Pattern::kGinAllToAll, 1000, 4).perPeerBytes, 240u);
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The plugin is found by railyard-perf's ../lib fallback from the build tree.
TEST(PerfGinPatterns, EachPatternRunsOverEachTable) {
  struct Run { const char* pattern; int np; const char* table; };
  for (const Run& run : {Run{"gin-put", 2, "rma-v14"}, Run{"gin-signal", 2, "gin-v11"},
                         Run{"gin-alltoall", 4, "rma-v13"}, Run{"gin-put-oneway", 2, "rma-v14"}}) {
    SCOPED_TRACE(std::string(run.pattern) + " " + run.table);
    const std::string out = ::testing::TempDir() + "perf_gin_" + std::to_string(getpid()) + ".out";
    const std::string cmd = std::string(RAILYARD_PERF_BIN) + " -np " + std::to_string(run.np) + " -p " + run.pattern +
                            " --one-sided " + run.table + " -b 1K -e 256K -f 16 -n 3 -w 1 -c 1 -T 50 >" + out + " 2>&1";
    const int st = std::system(cmd.c_str());
    const std::string text = Slurp(out);
    std::remove(out.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << text;
    EXPECT_NE(text.find(std::string("railyard-perf ") + run.pattern + " over " + run.table), std::string::npos) << text;
    EXPECT_NE(text.find("# Out of bounds values : 0 OK"), std::string::npos) << text;
    // 1K, 16K, 256K: three rows, each ending in #wrong 0.
    size_t rows = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] != '#' && line.find("float") != std::string::npos) {
        ++rows;
        EXPECT_EQ(line.substr(line.find_last_not_of(' ')), "0") << line;
      }
    }
    EXPECT_EQ(rows, 3u) << text;
  }
}

}  // namespace
}  // namespace railyard::perf
