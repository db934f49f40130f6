// Highway's runtime dispatch: this file is compiled once per target by
// foreach_target.h; HWY_EXPORT/HWY_DYNAMIC_DISPATCH pick the best at run time.
// Targets compiled: SSE4, AVX2, AVX3 (AVX-512) and the scalar fallback (SSSE3 and
// AVX3_DL are left out to keep compile time down; AVX3 covers those CPUs).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "proxy/collectives/reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cstring>

#include "proxy/collectives/datatype.h"
#include "proxy/collectives/reduce.h"
#include "proxy/collectives/small_float.h"

HWY_BEFORE_NAMESPACE();
namespace railyard::collectives::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct OpSum { template <class V> static V Apply(V a, V b) { return hn::Add(a, b); } };
struct OpMax { template <class V> static V Apply(V a, V b) { return hn::Max(a, b); } };
struct OpMin { template <class V> static V Apply(V a, V b) { return hn::Min(a, b); } };
struct OpMul { template <class V> static V Apply(V a, V b) { return hn::Mul(a, b); } };

template <typename T, class Op>
void Vectorized(T* HWY_RESTRICT dst, const T* HWY_RESTRICT src, size_t count) {
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + 4 * lanes <= count; i += 4 * lanes) {
    auto a0 = hn::LoadU(d, dst + i), b0 = hn::LoadU(d, src + i);
    auto a1 = hn::LoadU(d, dst + i + lanes), b1 = hn::LoadU(d, src + i + lanes);
    auto a2 = hn::LoadU(d, dst + i + 2 * lanes), b2 = hn::LoadU(d, src + i + 2 * lanes);
    auto a3 = hn::LoadU(d, dst + i + 3 * lanes), b3 = hn::LoadU(d, src + i + 3 * lanes);
    hn::StoreU(Op::Apply(a0, b0), d, dst + i);
    hn::StoreU(Op::Apply(a1, b1), d, dst + i + lanes);
    hn::StoreU(Op::Apply(a2, b2), d, dst + i + 2 * lanes);
    hn::StoreU(Op::Apply(a3, b3), d, dst + i + 3 * lanes);
  }
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(Op::Apply(hn::LoadU(d, dst + i), hn::LoadU(d, src + i)), d, dst + i);
  }
  const hn::CappedTag<T, 1> d1;  // the tail, one lane at a time (same op, same bits)
  for (; i < count; ++i) {
    hn::StoreU(Op::Apply(hn::LoadU(d1, dst + i), hn::LoadU(d1, src + i)), d1, dst + i);
  }
}

/// Products of lanes Highway has no multiply for (8- and 64-bit integers): scalar,
/// in unsigned arithmetic so that overflow wraps without undefined behaviour.
template <typename T>
void ScalarMul(T* HWY_RESTRICT dst, const T* HWY_RESTRICT src, size_t count) {
  using U = std::make_unsigned_t<T>;
  for (size_t i = 0; i < count; ++i) {
    dst[i] = static_cast<T>(static_cast<U>(static_cast<U>(dst[i]) * static_cast<U>(src[i])));
  }
}

template <typename T>
void Typed(int op, void* dst, const void* src, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  switch (static_cast<RedOp>(op)) {
    case RedOp::kSum: case RedOp::kAvg: Vectorized<T, OpSum>(d, s, count); return;
    case RedOp::kMax: Vectorized<T, OpMax>(d, s, count); return;
    case RedOp::kMin: Vectorized<T, OpMin>(d, s, count); return;
    case RedOp::kProd:
      if constexpr (std::is_floating_point_v<T> || sizeof(T) == 4) {
        Vectorized<T, OpMul>(d, s, count);
      } else {
        ScalarMul<T>(d, s, count);
      }
      return;
  }
}

void ReduceImpl(int type, int op, void* dst, const void* src, size_t count) {
  switch (static_cast<DataType>(type)) {
    case DataType::kInt8: Typed<int8_t>(op, dst, src, count); return;
    case DataType::kUint8: Typed<uint8_t>(op, dst, src, count); return;
    case DataType::kInt32: Typed<int32_t>(op, dst, src, count); return;
    case DataType::kUint32: Typed<uint32_t>(op, dst, src, count); return;
    case DataType::kInt64: Typed<int64_t>(op, dst, src, count); return;
    case DataType::kUint64: Typed<uint64_t>(op, dst, src, count); return;
    case DataType::kFloat32: Typed<float>(op, dst, src, count); return;
    case DataType::kFloat64: Typed<double>(op, dst, src, count); return;
    default: return;  // narrow types are reduced as float (see reduce.h)
  }
}

/// half -> float. On AVX2 and AVX-512 (F16C: exact, as the table) vectorized; the
/// other targets (whose emulated conversions are not checked bit for bit here) and the
/// tail use the scalar table.
void HalfToFloatImpl(float* HWY_RESTRICT dst, const uint16_t* HWY_RESTRICT src, size_t count) {
  size_t i = 0;
#if HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t lanes = hn::Lanes(df);
  const hwy::float16_t* h = reinterpret_cast<const hwy::float16_t*>(src);
  for (; i + lanes <= count; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, h + i)), df, dst + i);
#endif
  for (; i < count; ++i) dst[i] = HalfToFloat(src[i]);
}

/// float -> half, rounding to nearest even (F16C's vcvtps2ph with the default MXCSR
/// rounding, identical to FloatToHalf except for NaN payloads), after dividing by
/// `divisor` when > 1. Scalar on the other targets and for the tail.
void FloatToHalfImpl(uint16_t* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t count, int divisor) {
  size_t i = 0;
  const float div = static_cast<float>(divisor);
#if HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t lanes = hn::Lanes(df);
  hwy::float16_t* h = reinterpret_cast<hwy::float16_t*>(dst);
  const auto vdiv = hn::Set(df, div);
  for (; i + lanes <= count; i += lanes) {
    auto v = hn::LoadU(df, src + i);
    if (divisor > 1) v = hn::Div(v, vdiv);
    hn::StoreU(hn::DemoteTo(dh, v), dh, h + i);
  }
#endif
  for (; i < count; ++i) dst[i] = FloatToHalf(divisor > 1 ? src[i] / div : src[i]);
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace railyard::collectives::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace railyard::collectives {

HWY_EXPORT(ReduceImpl);
HWY_EXPORT(HalfToFloatImpl);
HWY_EXPORT(FloatToHalfImpl);
HWY_EXPORT(TargetNameImpl);

void ReduceInPlace(DataType type, RedOp op, void* dst, const void* src, size_t count) {
  if (count == 0) return;
  HWY_DYNAMIC_DISPATCH(ReduceImpl)(static_cast<int>(type), static_cast<int>(op), dst, src, count);
}

const char* ReduceTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

namespace {
template <typename N, float (*Convert)(N)>
void Widen(float* dst, const void* src, size_t count) {
  const N* s = static_cast<const N*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = Convert(s[i]);
}
template <typename N, N (*Narrow)(float)>
void NarrowTo(void* dst, const float* src, size_t count, int divisor) {
  N* d = static_cast<N*>(dst);
  if (divisor > 1) {
    const float div = static_cast<float>(divisor);
    for (size_t i = 0; i < count; ++i) d[i] = Narrow(src[i] / div);
  } else {
    for (size_t i = 0; i < count; ++i) d[i] = Narrow(src[i]);
  }
}
template <typename T>
void DivideInPlace(void* data, size_t count, int divisor) {
  T* p = static_cast<T*>(data);
  const T div = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / div);
}
}  // namespace

void ToAccum(DataType type, void* dst, const void* src, size_t count) {
  float* f = static_cast<float*>(dst);
  switch (type) {
    case DataType::kFloat16:
      HWY_DYNAMIC_DISPATCH(HalfToFloatImpl)(f, static_cast<const uint16_t*>(src), count);
      return;
    case DataType::kBfloat16: Widen<uint16_t, Bf16ToFloat>(f, src, count); return;
    case DataType::kFloat8e4m3: Widen<uint8_t, E4m3ToFloat>(f, src, count); return;
    case DataType::kFloat8e5m2: Widen<uint8_t, E5m2ToFloat>(f, src, count); return;
    default:
      if (dst != src && count) std::memmove(dst, src, count * TypeBytes(type));
      return;
  }
}

void FinishAvg(DataType accumType, void* data, size_t count, int divisor) {
  if (divisor <= 1) return;
  switch (accumType) {
    case DataType::kInt8: DivideInPlace<int8_t>(data, count, divisor); return;
    case DataType::kUint8: DivideInPlace<uint8_t>(data, count, divisor); return;
    case DataType::kInt32: DivideInPlace<int32_t>(data, count, divisor); return;
    case DataType::kUint32: DivideInPlace<uint32_t>(data, count, divisor); return;
    case DataType::kInt64: DivideInPlace<int64_t>(data, count, divisor); return;
    case DataType::kUint64: DivideInPlace<uint64_t>(data, count, divisor); return;
    case DataType::kFloat32: DivideInPlace<float>(data, count, divisor); return;
    case DataType::kFloat64: DivideInPlace<double>(data, count, divisor); return;
    default: return;
  }
}

void FromAccum(DataType type, void* dst, const void* src, size_t count, int divisor) {
  const float* f = static_cast<const float*>(src);
  switch (type) {
    case DataType::kFloat16:
      HWY_DYNAMIC_DISPATCH(FloatToHalfImpl)(static_cast<uint16_t*>(dst), f, count, divisor);
      return;
    case DataType::kBfloat16: NarrowTo<uint16_t, FloatToBf16>(dst, f, count, divisor); return;
    case DataType::kFloat8e4m3: NarrowTo<uint8_t, FloatToE4m3>(dst, f, count, divisor); return;
    case DataType::kFloat8e5m2: NarrowTo<uint8_t, FloatToE5m2>(dst, f, count, divisor); return;
    default:
      if (dst != src && count) std::memmove(dst, src, count * TypeBytes(type));
      FinishAvg(type, dst, count, divisor);
      return;
  }
}

}  // namespace railyard::collectives
#endif  // HWY_ONCE
