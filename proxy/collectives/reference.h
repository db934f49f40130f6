// The double reference of a collective, for the tests (tests/collectives) and
// railyard-perf's -c 1: element access by DataType through double, deterministic
// inputs per rank (and salt: railyard-perf's iteration), the reference of every
// op, and the tolerance each datatype allows. Header-only; needs small_float.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "proxy/collectives/datatype.h"
#include "proxy/collectives/small_float.h"

namespace railyard::collectives::testing {  // "testing": reference code, not the data path

/// Element i of a buffer of `type`, as double.
inline double Get(DataType t, const void* p, size_t i) {
  const uint8_t* b = static_cast<const uint8_t*>(p) + i * TypeBytes(t);
  switch (t) {
    case DataType::kInt8: { int8_t v; std::memcpy(&v, b, 1); return v; }
    case DataType::kUint8: return *b;
    case DataType::kInt32: { int32_t v; std::memcpy(&v, b, 4); return v; }
    case DataType::kUint32: { uint32_t v; std::memcpy(&v, b, 4); return v; }
    case DataType::kInt64: { int64_t v; std::memcpy(&v, b, 8); return static_cast<double>(v); }
    case DataType::kUint64: { uint64_t v; std::memcpy(&v, b, 8); return static_cast<double>(v); }
    case DataType::kFloat16: { uint16_t v; std::memcpy(&v, b, 2); return HalfToFloat(v); }
    case DataType::kFloat32: { float v; std::memcpy(&v, b, 4); return v; }
    case DataType::kFloat64: { double v; std::memcpy(&v, b, 8); return v; }
    case DataType::kBfloat16: { uint16_t v; std::memcpy(&v, b, 2); return Bf16ToFloat(v); }
    case DataType::kFloat8e4m3: return E4m3ToFloat(*b);
    case DataType::kFloat8e5m2: return E5m2ToFloat(*b);
  }
  return 0;
}

/// Stores `v` (exactly representable, or rounded) as element i.
inline void Set(DataType t, void* p, size_t i, double v) {
  uint8_t* b = static_cast<uint8_t*>(p) + i * TypeBytes(t);
  switch (t) {
    case DataType::kInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(b, &x, 1); return; }
    case DataType::kUint8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(b, &x, 1); return; }
    case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(b, &x, 4); return; }
    case DataType::kUint32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(b, &x, 4); return; }
    case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(b, &x, 8); return; }
    case DataType::kUint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(b, &x, 8); return; }
    case DataType::kFloat16: { uint16_t x = FloatToHalf(static_cast<float>(v)); std::memcpy(b, &x, 2); return; }
    case DataType::kFloat32: { float x = static_cast<float>(v); std::memcpy(b, &x, 4); return; }
    case DataType::kFloat64: std::memcpy(b, &v, 8); return;
    case DataType::kBfloat16: { uint16_t x = FloatToBf16(static_cast<float>(v)); std::memcpy(b, &x, 2); return; }
    case DataType::kFloat8e4m3: *b = FloatToE4m3(static_cast<float>(v)); return;
    case DataType::kFloat8e5m2: *b = FloatToE5m2(static_cast<float>(v)); return;
  }
}

/// Input value of element i on `rank`: small numbers, so that the sum and product of
/// up to 8 ranks stay exact in every integer type and within range of fp8 (products
/// of values in {1, 2} times a sign; sums of values up to 8 in magnitude).
inline double InputValue(DataType t, RedOp op, int rank, size_t i, uint64_t salt = 0) {
  const uint64_t h = (i * 2654435761u + static_cast<uint64_t>(rank) * 40503u + salt * 7919u + 17) % 97;
  const bool isUnsigned = t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64;
  if (op == RedOp::kProd) {
    double v = (h % 3 == 0) ? 2.0 : 1.0;
    return (!isUnsigned && h % 5 == 0) ? -v : v;
  }
  double v = static_cast<double>(h % 9);        // 0..8
  if (!IsInteger(t)) v += (h % 4) * 0.25;        // quarters: exact in every float type
  if (!isUnsigned && h % 2) v = -v;
  return v;
}

/// InputValue as the type stores it (rounded once to the type).
inline double StoredInput(DataType t, RedOp op, int rank, size_t i, uint64_t salt = 0) {
  uint8_t b[8];
  Set(t, b, 0, InputValue(t, op, rank, i, salt));
  return Get(t, b, 0);
}

/// The double reference of `op` over ranks' (stored) inputs at element i.
inline double Reference(DataType t, RedOp op, int nranks, size_t i, uint64_t salt = 0) {
  double acc = StoredInput(t, op, 0, i, salt);
  for (int r = 1; r < nranks; ++r) {
    const double v = StoredInput(t, op, r, i, salt);
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMax: acc = std::fmax(acc, v); break;
      case RedOp::kMin: acc = std::fmin(acc, v); break;
    }
  }
  if (op == RedOp::kAvg) {
    acc /= nranks;
    if (IsInteger(t)) acc = std::trunc(acc);
  }
  return acc;
}

/// Allowed |result - reference|: 0 for integers; half an ulp of the type at the
/// reference's magnitude (one rounding) plus float's rounding of the partials.
inline double Tolerance(DataType t, double reference) {
  if (IsInteger(t)) return 0;
  int bits = 0;
  switch (t) {
    case DataType::kFloat16: bits = 10; break;
    case DataType::kBfloat16: bits = 7; break;
    case DataType::kFloat8e4m3: bits = 3; break;
    case DataType::kFloat8e5m2: bits = 2; break;
    case DataType::kFloat32: bits = 23; break;
    default: bits = 52; break;
  }
  const double mag = std::fmax(std::fabs(reference), 1.0);
  return std::ldexp(mag, -bits) * 1.01 + std::ldexp(mag, -22);
}

}  // namespace railyard::collectives::testing
