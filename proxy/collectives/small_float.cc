#include "proxy/collectives/small_float.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace railyard::collectives {
namespace {

uint32_t Bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float FromBits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

/// Decodes a sign/exponent/mantissa value with `e` exponent bits, `m` mantissa
/// bits and bias 2^(e-1)-1. `ieeeSpecials`: the top exponent is inf/NaN (half,
/// E5M2); otherwise only all-ones is NaN (E4M3FN).
float Decode(uint32_t v, int e, int m, bool ieeeSpecials) {
  const int bias = (1 << (e - 1)) - 1;
  const uint32_t sign = (v >> (e + m)) & 1u;
  const uint32_t exp = (v >> m) & ((1u << e) - 1);
  const uint32_t man = v & ((1u << m) - 1);
  float mag;
  if (ieeeSpecials && exp == (1u << e) - 1) {
    mag = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (!ieeeSpecials && exp == (1u << e) - 1 && man == (1u << m) - 1) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), 1 - bias - m);
  } else {
    mag = std::ldexp(static_cast<float>(man | (1u << m)), static_cast<int>(exp) - bias - m);
  }
  return sign ? -mag : mag;
}

/// Encodes `f` (rounded to nearest even) with `e`/`m` bits. `maxCode` is the
/// magnitude code of the largest finite value; `overflowCode` what a larger
/// magnitude becomes (infinity or the largest finite); `nanCode` the NaN pattern.
uint32_t Encode(float f, int e, int m, uint32_t maxCode, uint32_t overflowCode, uint32_t nanCode) {
  const uint32_t sign = (Bits(f) >> 31) << (e + m);
  if (std::isnan(f)) return sign | nanCode;
  const double a = std::fabs(static_cast<double>(f));
  const int bias = (1 << (e - 1)) - 1;
  uint32_t code;
  if (a == 0) {
    code = 0;
  } else {
    int exp2 = 0;
    std::frexp(a, &exp2);                 // a = frac * 2^exp2, frac in [0.5, 1)
    int unbiased = exp2 - 1;              // a in [2^unbiased, 2^(unbiased+1))
    if (unbiased < 1 - bias) unbiased = 1 - bias;  // subnormal range: fixed scale
    // Steps of 2^(unbiased - m); the scaled value is exact in double, nearbyint rounds
    // to nearest even (the default rounding mode).
    const double q = std::nearbyint(std::ldexp(a, m - unbiased));
    // q in [2^m, 2^(m+1)] for normals (2^(m+1): rounded up into the next binade),
    // [0, 2^m] for subnormals (2^m: rounded up into the smallest normal).
    const uint64_t qi = static_cast<uint64_t>(q);
    if (qi < (1u << m) && unbiased == 1 - bias) {
      code = static_cast<uint32_t>(qi);  // subnormal (or zero)
    } else {
      uint64_t biased = static_cast<uint64_t>(unbiased + bias);
      uint64_t man = qi - (1u << m);
      if (qi >= (2u << m)) { biased += 1; man = 0; }
      const uint64_t c = (biased << m) | man;
      code = c > maxCode ? overflowCode : static_cast<uint32_t>(c);
    }
  }
  if (std::isinf(f)) code = overflowCode;
  return sign | code;
}

std::array<float, 256> MakeTable(bool e4m3) {
  std::array<float, 256> t{};
  for (uint32_t v = 0; v < 256; ++v) t[v] = e4m3 ? Decode(v, 4, 3, false) : Decode(v, 5, 2, true);
  return t;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  // Every half decoded once (exactly, by Decode) into a 256 KiB table.
  static const std::vector<float> kTable = [] {
    std::vector<float> t(65536);
    for (uint32_t v = 0; v < 65536; ++v) t[v] = Decode(v, 5, 10, true);
    return t;
  }();
  return kTable[h];
}

float Bf16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

float E4m3ToFloat(uint8_t v) {
  static const std::array<float, 256> kTable = MakeTable(true);
  return kTable[v];
}

float E5m2ToFloat(uint8_t v) {
  static const std::array<float, 256> kTable = MakeTable(false);
  return kTable[v];
}

uint16_t FloatToHalf(float f) {
  // Round to nearest even with integer steps (F. Giesen's float_to_half_fast3_rtne):
  // max finite 0x7BFF (65504), overflow to infinity 0x7C00, quiet NaN 0x7E00.
  uint32_t u = Bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= (127u + 16) << 23) {             // |f| >= 65536, inf or NaN
    o = u > 0x7F800000u ? 0x7E00 : 0x7C00;
  } else if (u < 113u << 23) {               // |f| < 2^-14: a subnormal half or zero
    const uint32_t magicBits = ((127u - 15) + (23 - 10) + 1) << 23;
    const float sum = FromBits(u) + FromBits(magicBits);  // the FPU rounds to nearest even here
    o = Bits(sum) - magicBits;
  } else {
    const uint32_t odd = (u >> 13) & 1;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFF + odd;  // rebias and round; carries into inf
    o = u >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

uint16_t FloatToBf16(float f) {
  const uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep sign, quiet
  // Round to nearest even on the 16 dropped bits; overflow carries into infinity.
  const uint32_t rounded = u + 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

uint8_t FloatToE4m3(float f) {
  // E4M3FN: max finite S.1111.110 = 448 (0x7E), NaN 0x7F; saturating.
  return static_cast<uint8_t>(Encode(f, 4, 3, 0x7E, 0x7E, 0x7F));
}

uint8_t FloatToE5m2(float f) {
  // E5M2: max finite S.11110.11 = 57344 (0x7B), NaN 0x7E; saturating (SATFINITE).
  return static_cast<uint8_t>(Encode(f, 5, 2, 0x7B, 0x7B, 0x7E));
}

}  // namespace railyard::collectives
