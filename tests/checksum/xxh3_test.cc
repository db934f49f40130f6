// storage/checksum: every XXH3-64 kernel this CPU runs gives Debian libxxhash's value,
// in one call and in pieces, at every length class of XXH3 (0-16, 17-128, 129-240,
// one stripe, one block, many blocks) and at every start alignment.
#include <xxhash.h>  // the reference: libxxhash.so, not our compilation

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/checksum/xxh3.h"
#include "storage/checksum/xxh3_kernels.h"

namespace railyard::checksum {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<const Xxh3Kernels*> Kernels() {
  int n = 0;
  const Xxh3Kernels* const* k = Xxh3RunnableKernels(&n);
  return {k, k + n};
}

// Lengths around each of XXH3's code paths (xxhash_spec.md) and past a 1 KiB block.
const size_t kLengths[] = {0,   1,   3,   4,   8,   9,    16,   17,   64,    128,    129,     200,
                           240, 241, 255, 256, 1023, 1024, 1025, 4096, 65535, 100003, 1 << 20};

// RAILYARD_XXH3_KERNEL as this process has it ("" when unset).
std::string WantedKernel() {
  const char* e = std::getenv("RAILYARD_XXH3_KERNEL");
  return e != nullptr ? e : "";
}

TEST(Xxh3, TheChosenKernelIsTheWidestTheCpuRuns) {
  if (!WantedKernel().empty() && WantedKernel() != "auto") GTEST_SKIP() << "RAILYARD_XXH3_KERNEL=" << WantedKernel();
  std::vector<const Xxh3Kernels*> k = Kernels();
  ASSERT_FALSE(k.empty());
  EXPECT_STREQ(Xxh3Kernel(), k.front()->name);
  // The portable one is always there, last.
  EXPECT_EQ(k.back(), &Xxh3PortableKernels());
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_STREQ(Xxh3Kernel(), "avx512");
    EXPECT_EQ(k.size(), 3u);  // avx512, avx2, sse2: every kernel runs, and EveryKernel* checks each
  } else if (__builtin_cpu_supports("avx2")) {
    EXPECT_STREQ(Xxh3Kernel(), "avx2");
  }
#endif
}

// ctest runs this file again with RAILYARD_XXH3_KERNEL=portable (tests/checksum/CMakeLists.txt).
TEST(Xxh3, TheVariableChoosesTheKernel) {
  if (WantedKernel() != "portable") GTEST_SKIP() << "runs with RAILYARD_XXH3_KERNEL=portable";
  EXPECT_STREQ(Xxh3Kernel(), Xxh3PortableKernels().name);
  const std::vector<uint8_t> bytes = RandomBytes(100003, 13);
  EXPECT_EQ(Xxh3(bytes.data(), bytes.size()), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST(Xxh3, AChoiceByNameFallsBackToTheWidestAndSaysWhy) {
  static const Xxh3Kernels wide{"avx512", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  static const Xxh3Kernels mid{"avx2", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  static const Xxh3Kernels own{"sse2", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  const Xxh3Kernels* all[] = {&wide, &mid, &own};
  std::string note;
  EXPECT_EQ(&ChooseXxh3Kernel("auto", all, 3, &note), &wide);
  EXPECT_EQ(&ChooseXxh3Kernel("portable", all, 3, &note), &own);
  EXPECT_EQ(&ChooseXxh3Kernel("avx2", all, 3, &note), &mid);
  EXPECT_EQ(&ChooseXxh3Kernel("sse2", all, 3, &note), &own);
  EXPECT_EQ(note, "");
  // A CPU with AVX2 only: avx512 is not among its kernels.
  const Xxh3Kernels* avx2Only[] = {&mid, &own};
  EXPECT_EQ(&ChooseXxh3Kernel("avx512", avx2Only, 2, &note), &mid);
  EXPECT_EQ(note, "RAILYARD_XXH3_KERNEL=avx512: this CPU runs only avx2, sse2; using avx2");
  // aarch64: one kernel, named portable.
  static const Xxh3Kernels neon{"portable", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  const Xxh3Kernels* arm[] = {&neon};
  note.clear();
  EXPECT_EQ(&ChooseXxh3Kernel("portable", arm, 1, &note), &neon);
  EXPECT_EQ(note, "");
  EXPECT_EQ(&ChooseXxh3Kernel("avx2", arm, 1, &note), &neon);
  EXPECT_EQ(note, "RAILYARD_XXH3_KERNEL=avx2: this CPU runs only portable; using portable");
}

TEST(Xxh3, EveryKernelMatchesLibxxhashInOneCall) {
  const std::vector<uint8_t> bytes = RandomBytes((1 << 20) + 64, 7);
  for (const Xxh3Kernels* k : Kernels()) {
    for (size_t n : kLengths) {
      for (size_t align : {0, 1, 7, 31}) {
        const uint8_t* p = bytes.data() + align;
        EXPECT_EQ(k->oneShot(p, n), XXH3_64bits(p, n)) << k->name << " " << n << " bytes at +" << align;
      }
    }
  }
  EXPECT_EQ(Xxh3(bytes.data(), 12345), XXH3_64bits(bytes.data(), 12345));
  EXPECT_EQ(Xxh3(nullptr, 0), XXH3_64bits(nullptr, 0));
}

TEST(Xxh3, EveryKernelMatchesLibxxhashInPieces) {
  const std::vector<uint8_t> bytes = RandomBytes(3 << 20, 11);
  std::mt19937 rng(5);
  for (const Xxh3Kernels* k : Kernels()) {
    for (size_t n : {size_t{0}, size_t{100}, size_t{4097}, size_t{3} << 20}) {
      void* s = k->createState();
      ASSERT_NE(s, nullptr);
      size_t at = 0;
      while (at < n) {
        const size_t take = std::min<size_t>(n - at, 1 + rng() % 300000);
        k->update(s, bytes.data() + at, take);
        at += take;
      }
      EXPECT_EQ(k->digest(s), XXH3_64bits(bytes.data(), n)) << k->name << " " << n << " bytes";
      k->reset(s);
      k->update(s, bytes.data(), 50);
      EXPECT_EQ(k->digest(s), XXH3_64bits(bytes.data(), 50)) << k->name << " after reset";
      k->freeState(s);
    }
  }
}

TEST(Xxh3, AStreamDigestsWhatWasAppendedAndGoesOn) {
  const std::vector<uint8_t> bytes = RandomBytes(1 << 20, 3);
  Xxh3Stream s;
  EXPECT_EQ(s.Digest(), XXH3_64bits(nullptr, 0));
  s.Update(bytes.data(), 1000);
  EXPECT_EQ(s.Digest(), XXH3_64bits(bytes.data(), 1000));
  s.Update(bytes.data() + 1000, bytes.size() - 1000);
  EXPECT_EQ(s.Digest(), XXH3_64bits(bytes.data(), bytes.size()));
  s.Reset();
  s.Update(bytes.data() + 5, 17);
  EXPECT_EQ(s.Digest(), XXH3_64bits(bytes.data() + 5, 17));
}

}  // namespace
}  // namespace railyard::checksum
