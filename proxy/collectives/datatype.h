// The datatypes and reduction operators of a collective, with NCCL's numbering
// (nccl.h: ncclDataType_t, ncclRedOp_t; /work/shared/docs/nccl-net-abi.md §3.1), their
// sizes, the type partial reductions are carried in, and nccl-tests' spellings
// (-d / -o, nccl-tests src/common.cu test_typenames / test_opnames).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace railyard::collectives {

/// ncclDataType_t values (NCCL 2.28): the numbers cross the ABI unchanged.
enum class DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
/// ncclNumTypes.
inline constexpr int kNumDataTypes = 12;

/// ncclRedOp_t values 0..4 (ncclNumOps = 5; higher values are NCCL's dynamic
/// PreMulSum ops, which Railyard does not support).
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
inline constexpr int kNumRedOps = 5;

/// True for 0..11 / 0..4.
inline bool ValidDataType(int t) { return t >= 0 && t < kNumDataTypes; }
inline bool ValidRedOp(int op) { return op >= 0 && op < kNumRedOps; }

/// Bytes of one element (1, 2, 4 or 8).
size_t TypeBytes(DataType t);
/// True for half, bfloat16 and both fp8s: they are reduced in float and rounded
/// once (partial results travel as float, see AccumType).
bool ReducesInFloat(DataType t);
/// The type partial reductions are kept and carried in: float for half, bfloat16
/// and fp8; the type itself otherwise.
DataType AccumType(DataType t);
/// True for the integer types.
bool IsInteger(DataType t);

/// nccl-tests spellings: "int8", "uint8", "int32", "uint32", "int64", "uint64",
/// "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"; "sum", "prod", "max",
/// "min", "avg".
const char* TypeName(DataType t);
const char* OpName(RedOp op);
/// Parses the spellings above (also "char", "int", "float16", "float32", "float64",
/// "bf16", "e4m3", "e5m2"); false for anything else.
bool ParseDataType(std::string_view name, DataType* out);
bool ParseRedOp(std::string_view name, RedOp* out);

}  // namespace railyard::collectives
