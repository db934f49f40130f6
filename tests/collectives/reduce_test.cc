// The reduction kernels (proxy/collectives/reduce.h) and narrow-float conversions
// (small_float.h): every datatype x op against a double reference, exact
// conversions, and results independent of how a buffer is split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "proxy/collectives/reduce.h"
#include "proxy/collectives/small_float.h"
#include "proxy/collectives/reference.h"

namespace railyard::collectives {
namespace {
using testing::Get;
using testing::InputValue;
using testing::Reference;
using testing::Set;
using testing::Tolerance;

/// Reduces `nranks` inputs the way a collective owner does: widen rank 0's, combine
/// the others in rank order in AccumType, round once.
std::vector<uint8_t> ReduceRanks(DataType t, RedOp op, int nranks, size_t count) {
  const size_t tb = TypeBytes(t), ab = TypeBytes(AccumType(t));
  std::vector<uint8_t> acc(count * ab + 1), in(count * tb + 1), wide(count * ab + 1);
  std::vector<uint8_t> out(count * tb + 1);
  for (int r = 0; r < nranks; ++r) {
    for (size_t i = 0; i < count; ++i) Set(t, in.data(), i, InputValue(t, op, r, i));
    if (r == 0) {
      ToAccum(t, acc.data(), in.data(), count);
    } else {
      ToAccum(t, wide.data(), in.data(), count);
      ReduceInPlace(AccumType(t), op, acc.data(), wide.data(), count);
    }
  }
  FromAccum(t, out.data(), acc.data(), count, op == RedOp::kAvg ? nranks : 1);
  return out;
}

class ReduceEveryTypeOp : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ReduceEveryTypeOp, MatchesDoubleReference) {
  const DataType t = static_cast<DataType>(std::get<0>(GetParam()));
  const RedOp op = static_cast<RedOp>(std::get<1>(GetParam()));
  for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{4099}}) {
    for (int nranks : {2, 3, 8}) {
      const std::vector<uint8_t> out = ReduceRanks(t, op, nranks, count);
      for (size_t i = 0; i < count; ++i) {
        const double ref = Reference(t, op, nranks, i);
        ASSERT_NEAR(Get(t, out.data(), i), ref, Tolerance(t, ref))
            << TypeName(t) << " " << OpName(op) << " count " << count << " nranks " << nranks
            << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceEveryTypeOp,
                         ::testing::Combine(::testing::Range(0, kNumDataTypes),
                                            ::testing::Range(0, kNumRedOps)),
                         [](const auto& p) {
                           return std::string(TypeName(static_cast<DataType>(std::get<0>(p.param)))) +
                                  "_" + OpName(static_cast<RedOp>(std::get<1>(p.param)));
                         });

TEST(Reduce, SplitDoesNotChangeBits) {
  // The same float inputs reduced whole and in odd pieces give identical bits (the
  // kernel is element-wise, so vector width and tails cannot matter).
  const size_t n = 10007;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) { a[i] = std::sin(i * 0.37f) * 1e3f; b[i] = std::cos(i * 0.11f) / 7.f; }
  std::vector<float> whole = a, pieces = a;
  ReduceInPlace(DataType::kFloat32, RedOp::kSum, whole.data(), b.data(), n);
  for (size_t off = 0; off < n;) {
    const size_t len = std::min<size_t>(n - off, 1 + (off * 7919) % 61);
    ReduceInPlace(DataType::kFloat32, RedOp::kSum, pieces.data() + off, b.data() + off, len);
    off += len;
  }
  EXPECT_EQ(std::memcmp(whole.data(), pieces.data(), n * 4), 0);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(whole[i], a[i] + b[i]) << i;
}

TEST(Reduce, IntegerSumAndProductWrap) {
  std::vector<int8_t> a = {127, -128, 100}, b = {1, -1, 3};
  ReduceInPlace(DataType::kInt8, RedOp::kSum, a.data(), b.data(), 3);
  EXPECT_EQ(a, (std::vector<int8_t>{-128, 127, 103}));
  std::vector<uint64_t> x = {~0ull, 3}, y = {2, 5};
  ReduceInPlace(DataType::kUint64, RedOp::kProd, x.data(), y.data(), 2);
  EXPECT_EQ(x, (std::vector<uint64_t>{~0ull - 1, 15}));
  std::vector<int64_t> m = {-5, 7}, k = {3, -9};
  ReduceInPlace(DataType::kInt64, RedOp::kMin, m.data(), k.data(), 2);
  EXPECT_EQ(m, (std::vector<int64_t>{-5, -9}));
}

TEST(SmallFloat, HalfKnownValuesAndRoundTrip) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.f), 0x7C00);  // the halfway point overflows to infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.f, -11)), 0x3C02);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) { EXPECT_TRUE((h & 0x7C00) == 0x7C00 && (h & 0x3FF)); continue; }
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(SmallFloat, HalfRoundsEveryFloatToTheNearestEvenHalf) {
  // Property test over 200k floats spread over the whole half range: the result is a
  // nearest half, and on a tie the one with an even mantissa.
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const int e = static_cast<int>(x % 44) - 28;  // 2^-28 .. 2^15
    const float f = std::ldexp(static_cast<float>((x >> 20) % (1u << 24)) / float(1u << 24) + 1.f, e) *
                    ((x >> 60) & 1 ? -1.f : 1.f);
    if (std::fabs(f) >= 65504.f) continue;
    const uint16_t h = FloatToHalf(f);
    const double got = HalfToFloat(h), err = std::fabs(got - f);
    for (int d : {-1, 1}) {
      const uint16_t nb = static_cast<uint16_t>((h & 0x7FFF) + d) | (h & 0x8000);
      if ((h & 0x7FFF) == 0 && d < 0) continue;
      const double other = std::fabs(double(HalfToFloat(nb)) - f);
      ASSERT_LE(err, other) << f;
      if (err == other) {
        ASSERT_EQ(h & 1, 0) << "tie not to even at " << f;
      }
    }
  }
}

TEST(SmallFloat, Bf16RoundTripAndRounding) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.f, -8)), 0x3F80);      // tie to even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.f, -8)), 0x3F82);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), b) << std::hex << b;
  }
}

TEST(SmallFloat, Fp8KnownValuesSaturationAndRoundTrip) {
  EXPECT_EQ(FloatToE4m3(1.0f), 0x38);
  EXPECT_EQ(FloatToE4m3(448.f), 0x7E);
  EXPECT_EQ(FloatToE4m3(1e6f), 0x7E);       // saturates
  EXPECT_EQ(FloatToE4m3(-1e6f), 0xFE);
  EXPECT_EQ(FloatToE4m3(std::ldexp(1.f, -9)), 0x01);
  EXPECT_EQ(E4m3ToFloat(0x7E), 448.f);
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0x7F)));
  EXPECT_EQ(FloatToE5m2(57344.f), 0x7B);
  EXPECT_EQ(FloatToE5m2(1e9f), 0x7B);
  EXPECT_EQ(E5m2ToFloat(0x3C), 1.0f);
  EXPECT_TRUE(std::isinf(E5m2ToFloat(0x7C)));
  for (uint32_t v = 0; v < 256; ++v) {
    const float a = E4m3ToFloat(static_cast<uint8_t>(v));
    if (!std::isnan(a)) {
      ASSERT_EQ(FloatToE4m3(a), v) << v;
    }
    const float b = E5m2ToFloat(static_cast<uint8_t>(v));
    if (!std::isnan(b) && !std::isinf(b)) {
      ASSERT_EQ(FloatToE5m2(b), v) << v;
    }
  }
}

TEST(Reduce, VectorHalfConversionsMatchTheScalarOnesBitForBit) {
  // ToAccum / FromAccum (Highway, F16C where the CPU has it) against HalfToFloat /
  // FloatToHalf: every half widened, and 1M floats across the half range (ties,
  // subnormals, overflow) narrowed, with and without an avg divisor. NaNs only need
  // to stay NaN (payloads may differ).
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(65536);
  ToAccum(DataType::kFloat16, wide.data(), all.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) { ASSERT_TRUE(std::isnan(wide[h])) << h; continue; }
    ASSERT_EQ(std::memcmp(&wide[h], &want, 4), 0) << std::hex << h;
  }
  std::vector<float> f(1 << 20);
  uint64_t x = 12345;
  for (size_t i = 0; i < f.size(); ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const uint32_t bits = static_cast<uint32_t>(x);
    // mostly the half range (exponents 2^-26 .. 2^17), some arbitrary bit patterns
    const uint32_t e = (i % 8 == 0) ? (bits >> 23) & 0xFF : 100 + (bits >> 23) % 45;
    const uint32_t u = (bits & 0x807FFFFFu) | (e << 23);
    std::memcpy(&f[i], &u, 4);
  }
  for (int divisor : {1, 3}) {
    std::vector<uint16_t> narrow(f.size());
    FromAccum(DataType::kFloat16, narrow.data(), f.data(), f.size(), divisor);
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t want = FloatToHalf(divisor > 1 ? f[i] / float(divisor) : f[i]);
      if (std::isnan(HalfToFloat(want))) { ASSERT_TRUE(std::isnan(HalfToFloat(narrow[i]))) << i; continue; }
      ASSERT_EQ(narrow[i], want) << "float " << f[i] << " divisor " << divisor;
    }
  }
}

TEST(Reduce, DispatchesToAVectorTarget) {
  const std::string name = ReduceTargetName();
  EXPECT_FALSE(name.empty());
  RecordProperty("target", name);
  std::printf("reduce target: %s\n", name.c_str());
}

}  // namespace
}  // namespace railyard::collectives
