// The reduction kernels of the collectives: element-wise dst = dst (op) src over
// `count` elements, vectorized with Google Highway (runtime dispatch to the best
// target of the CPU: SSE4, AVX2, AVX-512; scalar elsewhere). Element-wise only (no
// horizontal sums), so the result does not depend on the vector width: the same
// inputs give the same bits on every rank and CPU.
//
// Half, bfloat16 and fp8 are reduced in float (AccumType): ToAccum widens a block
// once, ReduceInPlace(kFloat32, ...) combines partials, FromAccum rounds once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proxy/collectives/datatype.h"

namespace railyard::collectives {

/// dst[i] = dst[i] (op) src[i] for i < count, both of type `type` (which must be its
/// own AccumType: not half/bf16/fp8). kAvg combines as kSum (FinishAvg divides).
/// Integer sums and products wrap (two's complement); float max/min of a NaN is
/// unspecified. dst and src may not overlap partially (equal is fine).
void ReduceInPlace(DataType type, RedOp op, void* dst, const void* src, size_t count);
/// dst[i] = (AccumType) src[i]: a copy for the wide types, a widening to float for
/// half/bf16/fp8. dst holds count * TypeBytes(AccumType(type)) bytes.
void ToAccum(DataType type, void* dst, const void* src, size_t count);
/// dst[i] = (type) src[i] (src in AccumType), rounding once to nearest even. With
/// `divisor` > 1 each value is divided by it first (avg): integers by integer
/// division (truncating), floats in float.
void FromAccum(DataType type, void* dst, const void* src, size_t count, int divisor);
/// In place on AccumType values: x /= divisor (kAvg's last step; no-op for divisor <= 1).
void FinishAvg(DataType accumType, void* data, size_t count, int divisor);
/// The name of the Highway target the kernels dispatch to on this CPU ("AVX2", ...).
const char* ReduceTargetName();

}  // namespace railyard::collectives
