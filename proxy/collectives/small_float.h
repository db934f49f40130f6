// Conversions between float and the narrow floating-point types NCCL reduces:
// IEEE binary16 (half), bfloat16, and the OCP fp8 formats E4M3 (the "FN" variant:
// no infinities, one NaN pattern, max 448) and E5M2 (IEEE-like, max 57344), as CUDA's
// cuda_fp16.h / cuda_bf16.h / cuda_fp8.h define them. float -> narrow rounds to
// nearest, ties to even; half and bfloat16 overflow to infinity (as __float2half_rn,
// __float2bfloat16_rn); fp8 saturates to the largest finite value (__NV_SATFINITE,
// what __nv_fp8_e4m3(float) uses). NaN stays NaN. Every function is exact and
// deterministic (the same bits on every CPU).
#pragma once

#include <cstdint>

namespace railyard::collectives {

/// narrow -> float (exact: every narrow value is a float).
float HalfToFloat(uint16_t h);
float Bf16ToFloat(uint16_t b);
float E4m3ToFloat(uint8_t v);
float E5m2ToFloat(uint8_t v);

/// float -> narrow, rounding to nearest even (see the file comment for overflow).
uint16_t FloatToHalf(float f);
uint16_t FloatToBf16(float f);
uint8_t FloatToE4m3(float f);
uint8_t FloatToE5m2(float f);

}  // namespace railyard::collectives
