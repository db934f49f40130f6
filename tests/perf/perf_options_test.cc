// railyard-perf flag parsing: size suffixes, flag combinations, size walk.
#include <gtest/gtest.h>

#include <vector>

#include "tools/railyard-perf/options.h"

namespace railyard::perf {
namespace {

std::size_t Size(const char* text) {
  std::size_t v = 0;
  Status s = ParseSize(text, &v);
  EXPECT_TRUE(s.ok()) << text << ": " << s.message();
  return v;
}

TEST(PerfOptions, SizeSuffixesArePowersOf1024) {
  EXPECT_EQ(Size("0"), 0u);
  EXPECT_EQ(Size("64"), 64u);
  EXPECT_EQ(Size("1K"), 1024u);
  EXPECT_EQ(Size("1k"), 1024u);
  EXPECT_EQ(Size("32M"), 32u << 20);
  EXPECT_EQ(Size("1G"), 1u << 30);
  EXPECT_EQ(Size("4KB"), 4096u);
}

TEST(PerfOptions, BadSizesAreRejected) {
  std::size_t v = 0;
  for (const char* bad : {"", "K", "1T", "1KK", "-1", "1.5M", "12x", "99999999999999999999"}) {
    EXPECT_FALSE(ParseSize(bad, &v).ok()) << bad;
  }
  EXPECT_FALSE(ParseSize("17179869184G", &v).ok());  // overflows 64 bits after the shift
  // A fraction is named as one (it was "unknown suffix").
  const Status fraction = ParseSize("1.5K", &v);
  EXPECT_NE(fraction.message().find("a whole number only"), std::string::npos) << fraction.message();
}

TEST(PerfOptions, FormatSize) {
  EXPECT_EQ(FormatSize(1024), "1K");
  EXPECT_EQ(FormatSize(32u << 20), "32M");
  EXPECT_EQ(FormatSize(1u << 30), "1G");
  EXPECT_EQ(FormatSize(1000), "1000");
}

Status Parse(std::vector<const char*> args, Options* o) {
  args.insert(args.begin(), "railyard-perf");
  bool exitNow = false;
  return ParseOptions(int(args.size()), args.data(), o, &exitNow);
}

TEST(PerfOptions, DefaultsFollowNcclTests) {
  Options o;
  ASSERT_TRUE(Parse({}, &o).ok());
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.maxBytes, 32u << 20);
  EXPECT_EQ(o.stepBytes, 1u << 20);
  EXPECT_EQ(o.stepFactor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.pattern, Pattern::kRing);
  EXPECT_EQ(o.np, 1);
  EXPECT_EQ(o.timeoutSec, 600);
  EXPECT_FALSE(o.plugin.has_value());
}

TEST(PerfOptions, MpiStyleNpAndNcclTestsFlags) {
  Options o;
  Status s = Parse({"-np", "4", "-b", "1K", "-e", "64M", "-f", "4", "-c", "0", "-p", "alltoall", "--plugin",
                    "railyard", "-n", "3", "-w", "0", "--json", "/tmp/x.json"},
                   &o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 4u);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.pattern, Pattern::kAllToAll);
  EXPECT_EQ(o.plugin.value_or(""), "railyard");
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmupIters, 0);
  EXPECT_EQ(o.jsonPath, "/tmp/x.json");
}

// tools/setup.sh runs `railyard-perf -np 4 -p ring -b 64K -e 64M -f 4 -c 1 "$@"`: a flag the
// user passes again wins, as with nccl-tests' getopt (new-user trial: CLI11 refused it).
TEST(PerfOptions, AFlagGivenTwiceTakesItsLastValue) {
  Options o;
  Status s = Parse({"-np", "4", "-p", "ring", "-b", "64K", "-e", "64M", "-f", "4", "-c", "1", "-b", "1M", "-e", "4M",
                    "-p", "sendrecv", "-np", "2"},
                   &o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(o.minBytes, 1u << 20);
  EXPECT_EQ(o.maxBytes, 4u << 20);
  EXPECT_EQ(o.stepFactor, 4u);
  EXPECT_EQ(o.pattern, Pattern::kSendRecv);
  EXPECT_EQ(o.np, 2);
}

// A run whose every size rounds down to nothing would move 0 B and print a clean row for
// a size never measured (new-user trial): refused, naming the smallest size that moves bytes.
TEST(PerfOptions, SizesThatMoveNothingAreRefused) {
  Options o;
  Status s = Parse({"-np", "2", "-p", "sendrecv", "-b", "3", "-e", "3"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-e 3 moves nothing with -p sendrecv"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at least 4 B"), std::string::npos) << s.message();
  s = Parse({"-np", "4", "-p", "alltoall", "-b", "8", "-e", "8"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at least 64 B"), std::string::npos) << s.message();
  EXPECT_TRUE(Parse({"-np", "4", "-p", "alltoall", "-b", "64", "-e", "1K"}, &o).ok());
  EXPECT_TRUE(Parse({"-np", "2", "-p", "sendrecv", "-b", "0", "-e", "64", "-f", "2"}, &o).ok());  // 1, 2 B fold into 0
  EXPECT_TRUE(Parse({"-np", "2", "-p", "sendrecv", "-b", "1", "-e", "8M", "-f", "8"}, &o).ok());  // 1 B: nccl-tests' 0 row
  EXPECT_TRUE(Parse({"-np", "2", "-p", "allreduce", "-d", "int8", "-b", "3", "-e", "3"}, &o).ok());  // collectives: -d
  // The collectives by the same rule: whole elements (allreduce), per rank (allgather,
  // reducescatter), of the -d type (new-user trial: allgather -b 1 -e 1 ran a 0 B row).
  s = Parse({"-np", "2", "-p", "allgather", "-b", "1", "-e", "1"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-e 1 moves nothing with -p allgather -d float: each of the 2 ranks holds whole "
                             "4-byte elements, so at least 8 B"),
            std::string::npos)
      << s.message();
  s = Parse({"-np", "3", "-p", "reducescatter", "-d", "half", "-b", "4", "-e", "5"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at least 6 B"), std::string::npos) << s.message();
  s = Parse({"-np", "2", "-p", "allreduce", "-d", "double", "-b", "7", "-e", "7"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the size counts whole 8-byte elements, so at least 8 B"), std::string::npos) << s.message();
  EXPECT_TRUE(Parse({"-np", "2", "-p", "allgather", "-b", "8", "-e", "8"}, &o).ok());
  EXPECT_TRUE(Parse({"-np", "2", "-p", "allgather", "-b", "1", "-e", "1K", "-f", "2"}, &o).ok());  // a sweep: 0 B rows as nccl-tests
  EXPECT_TRUE(Parse({"-np", "2", "-p", "allgather", "-b", "0", "-e", "0"}, &o).ok());
  // From 0 with the default linear step (1M) the sweep is the 0 B size alone (new-user
  // trial: -b 0 -e 8 ran one row of 0 B and exited 0).
  s = Parse({"-np", "2", "-p", "sendrecv", "-b", "0", "-e", "8"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-b 0 -e 8 runs the 0 B size alone: the next, 0 + -i 1M, is past -e"), std::string::npos)
      << s.message();
  EXPECT_TRUE(Parse({"-np", "2", "-p", "sendrecv", "-b", "0", "-e", "8", "-i", "4"}, &o).ok());
}

// An empty --json is refused (new-user trial: --json "" ran and wrote nothing).
TEST(PerfOptions, AnEmptyJsonPathIsRefused) {
  Options o;
  const Status s = Parse({"-np", "2", "--json", ""}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("--json needs a file name"), std::string::npos) << s.message();
}

// A sweep whose steps skip every size that moves data is refused too (new-user trial:
// -b 3 -e 7 with the default -i 1M runs 3 alone, one row of 0 B), and one whose first
// sizes move nothing gets a note naming the first size that moves data.
TEST(PerfOptions, ASweepWhoseStepsRunOnlyEmptySizesIsRefusedAndAnEmptyFirstRowIsNoted) {
  Options o;
  Status s = Parse({"-np", "2", "-p", "ring", "-b", "3", "-e", "7"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-b 3 -e 7 (whose steps run no size above 3) moves nothing with -p ring"),
            std::string::npos)
      << s.message();
  ASSERT_TRUE(Parse({"-np", "2", "-p", "ring", "-b", "3", "-e", "7", "-i", "4"}, &o).ok());  // 3, 7
  EXPECT_EQ(RowBytes(o, 3), 0u);
  EXPECT_EQ(RowBytes(o, 7), 4u);
  EXPECT_EQ(SizeNote(o),
            "-b 3 moves nothing with -p ring: the sizes below 7 give one row of 0 B (count 0, as nccl-tests prints "
            "it); the first size that moves data is 7, which moves 4 B");
  ASSERT_TRUE(Parse({"-np", "4", "-p", "alltoall", "-b", "3", "-e", "128", "-f", "2"}, &o).ok());
  EXPECT_NE(SizeNote(o).find("the sizes below 96 give one row of 0 B"), std::string::npos) << SizeNote(o);
  EXPECT_NE(SizeNote(o).find("the first size that moves data is 96, which moves 64 B"), std::string::npos)
      << SizeNote(o);
  // A collective says the share of each rank is what is rounded (new-user trial: "too
  // small to move a whole element" for 4 B of int32 over 3 ranks read as wrong).
  ASSERT_TRUE(Parse({"-np", "3", "-p", "allgather", "-d", "int32", "-b", "4", "-e", "64", "-f", "2"}, &o).ok());
  EXPECT_NE(SizeNote(o).find("-b 4 moves nothing with -p allgather over 3 ranks (each rank's share is rounded down "
                             "to whole int32 elements)"),
            std::string::npos)
      << SizeNote(o);
  ASSERT_TRUE(Parse({"-np", "3", "-p", "allreduce", "-d", "int32", "-b", "1", "-e", "64", "-f", "2"}, &o).ok());
  EXPECT_NE(SizeNote(o).find("-b 1 moves nothing with -p allreduce (the size is rounded down to whole int32 "
                             "elements)"),
            std::string::npos)
      << SizeNote(o);
  ASSERT_TRUE(Parse({"-np", "2", "-p", "ring", "-b", "4", "-e", "64", "-f", "2"}, &o).ok());
  EXPECT_EQ(SizeNote(o), "");  // the first size moves data
  ASSERT_TRUE(Parse({"-np", "2", "-p", "ring", "-b", "0", "-e", "64", "-f", "2"}, &o).ok());
  EXPECT_EQ(SizeNote(o), "");  // -b 0 asks for the empty row
}

TEST(PerfOptions, RejectsBadCombinations) {
  Options o;
  EXPECT_FALSE(Parse({"-e", "2G"}, &o).ok());                       // above 1 GiB
  EXPECT_FALSE(Parse({"-b", "2M", "-e", "1M"}, &o).ok());            // min > max
  EXPECT_FALSE(Parse({"-p", "allreduce-tree"}, &o).ok());   // no such pattern
  EXPECT_FALSE(Parse({"-c", "2"}, &o).ok());
  EXPECT_FALSE(Parse({"--rank", "0"}, &o).ok());                     // needs --nranks and --root
  EXPECT_FALSE(Parse({"--rank", "2", "--nranks", "2", "--root", "127.0.0.1:5000"}, &o).ok());
  EXPECT_FALSE(Parse({"-np", "2", "--rank", "0", "--nranks", "2", "--root", "127.0.0.1:5000"}, &o).ok());
  EXPECT_FALSE(Parse({"--rank", "0", "--nranks", "2", "--root", "127.0.0.1"}, &o).ok());
  EXPECT_TRUE(Parse({"--rank", "1", "--nranks", "2", "--root", "127.0.0.1:5000"}, &o).ok());
  EXPECT_EQ(o.np, 0);
  EXPECT_TRUE(Parse({"-e", "1G"}, &o).ok());
}

// A linear walk of more than kMaxSizes sizes is refused before any rank builds the list
// (-b 0 -e 1G -i 1 grew every rank's size list towards 8 GiB: 532 MB after 3 s).
TEST(PerfOptions, TooManySizesAreRefused) {
  Options o;
  Status s = Parse({"-b", "0", "-e", "1G", "-i", "1"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-b 0 -e 1G -i 1 makes 1073741825 sizes (at most 65536)"), std::string::npos)
      << s.message();
  ASSERT_TRUE(Parse({"-b", "0", "-e", "65535", "-i", "1"}, &o).ok());  // exactly 65536 sizes
  EXPECT_EQ(SizeList(o).size(), kMaxSizes);
  EXPECT_FALSE(Parse({"-b", "0", "-e", "65536", "-i", "1"}, &o).ok());
  EXPECT_TRUE(Parse({"-b", "0", "-e", "1G", "-f", "2"}, &o).ok());  // a factor walk is short
}

// A negative --dev or --rank names the int range it must lie in; CLI11's NonNegativeNumber
// printed "not in range 0.000000 to 1797693134862315708145274237317043567980...".
TEST(PerfOptions, NegativeDevAndRankNameAnIntRange) {
  Options o;
  Status s = Parse({"--dev", "-1"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--dev: '-1' is out of range: expected 0..2147483647"), std::string::npos) << s.message();
  EXPECT_LT(s.message().size(), 120u) << s.message();
  s = Parse({"--rank", "-1", "--nranks", "2", "--root", "127.0.0.1:5000"}, &o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--rank: '-1' is out of range: expected 0..1023"), std::string::npos) << s.message();
  EXPECT_TRUE(Parse({"--dev", "3"}, &o).ok());
  EXPECT_EQ(o.dev, 3);
}

TEST(PerfOptions, SizeListWalksLikeNcclTests) {
  Options o;
  o.minBytes = 1024;
  o.maxBytes = 64u << 20;
  o.stepFactor = 4;
  const auto sizes = SizeList(o);
  ASSERT_EQ(sizes.size(), 9u);  // 1K 4K 16K 64K 256K 1M 4M 16M 64M
  EXPECT_EQ(sizes.front(), 1024u);
  EXPECT_EQ(sizes.back(), 64u << 20);
  o.stepFactor = 1;
  o.minBytes = 1u << 20;
  o.maxBytes = 3u << 20;
  o.stepBytes = 1u << 20;
  EXPECT_EQ(SizeList(o), (std::vector<std::size_t>{1u << 20, 2u << 20, 3u << 20}));
}

// -b 0 is one row of 0 bytes, as in nccl-tests, and no row repeats: with -f 2 the sizes
// 0, 1, 2 all rounded to a 0-byte row of floats (three rows of 0 before).
TEST(PerfOptions, SizeZeroIsOneRowAndRowsDoNotRepeat) {
  Options o;
  o.minBytes = 0;
  o.maxBytes = 0;
  EXPECT_EQ(SizeList(o), (std::vector<std::size_t>{0}));
  o.maxBytes = 32;
  o.stepFactor = 2;
  const auto sizes = SizeList(o);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{0, 1, 2, 4, 8, 16, 32}));
  auto floats = [](std::size_t s) { return s / 4 * 4; };
  EXPECT_EQ(DistinctRows(sizes, floats), (std::vector<std::size_t>{0, 4, 8, 16, 32}));
  EXPECT_EQ(DistinctRows({0, 0, 8, 8}, [](std::size_t s) { return s; }), (std::vector<std::size_t>{0, 8}));
}

// Issue 8.6: ranks started with different options are told so, flag by flag.
TEST(PerfOptions, ShapeDifferenceNamesEveryFlagThatDiffers) {
  Options a, b;
  EXPECT_EQ(ShapeDifference(ShapeOf(a), 1, ShapeOf(b), 0), "");
  b.minBytes = 1u << 20;
  EXPECT_EQ(ShapeDifference(ShapeOf(b), 1, ShapeOf(a), 0), "-b 1M on rank 1 but 32M on rank 0");
  b.iters = 5;
  b.pattern = Pattern::kAllToAll;
  b.check = 0;
  EXPECT_EQ(ShapeDifference(ShapeOf(b), 3, ShapeOf(a), 0),
            "-b 1M on rank 3 but 32M on rank 0, -n 5 on rank 3 but 20 on rank 0, -c 0 on rank 3 but 1 on rank 0, "
            "-p alltoall on rank 3 but ring on rank 0");
  Options c;
  c.dev = 3;        // each rank picks its own device: not compared
  c.timeoutSec = 5;  // nor its own deadline
  EXPECT_EQ(ShapeDifference(ShapeOf(c), 1, ShapeOf(a), 0), "");
  // -z is compared for the collectives (a rank waiting for each iteration while the
  // other posts them back to back fails much later; new-user trial), ignored otherwise.
  Options z0, z1;
  z0.pattern = z1.pattern = Pattern::kAllReduce;
  z1.blocking = 1;
  EXPECT_EQ(ShapeDifference(ShapeOf(z1), 1, ShapeOf(z0), 0), "-z 1 on rank 1 but 0 on rank 0");
  z0.pattern = z1.pattern = Pattern::kRing;
  EXPECT_EQ(ShapeDifference(ShapeOf(z1), 1, ShapeOf(z0), 0), "");
}

}  // namespace
}  // namespace railyard::perf
