#include "proxy/collectives/datatype.h"

namespace railyard::collectives {
namespace {
constexpr const char* kTypeNames[kNumDataTypes] = {"int8",  "uint8",  "int32",    "uint32",
                                                   "int64", "uint64", "half",     "float",
                                                   "double", "bfloat16", "f8e4m3", "f8e5m2"};
constexpr const char* kOpNames[kNumRedOps] = {"sum", "prod", "max", "min", "avg"};
}  // namespace

size_t TypeBytes(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUint8: case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kUint32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kUint64: case DataType::kFloat64: return 8;
  }
  return 0;
}

bool ReducesInFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBfloat16 || t == DataType::kFloat8e4m3 ||
         t == DataType::kFloat8e5m2;
}

DataType AccumType(DataType t) { return ReducesInFloat(t) ? DataType::kFloat32 : t; }

bool IsInteger(DataType t) { return static_cast<int>(t) <= static_cast<int>(DataType::kUint64); }

const char* TypeName(DataType t) {
  int i = static_cast<int>(t);
  return ValidDataType(i) ? kTypeNames[i] : "unknown";
}

const char* OpName(RedOp op) {
  int i = static_cast<int>(op);
  return ValidRedOp(i) ? kOpNames[i] : "unknown";
}

bool ParseDataType(std::string_view name, DataType* out) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (name == kTypeNames[i]) { *out = static_cast<DataType>(i); return true; }
  }
  struct Alias { const char* name; DataType t; };
  static constexpr Alias kAliases[] = {
      {"char", DataType::kInt8},        {"int", DataType::kInt32},
      {"float16", DataType::kFloat16},  {"float32", DataType::kFloat32},
      {"float64", DataType::kFloat64},  {"bf16", DataType::kBfloat16},
      {"e4m3", DataType::kFloat8e4m3},  {"e5m2", DataType::kFloat8e5m2},
      {"fp8_e4m3", DataType::kFloat8e4m3}, {"fp8_e5m2", DataType::kFloat8e5m2}};
  for (const Alias& a : kAliases) {
    if (name == a.name) { *out = a.t; return true; }
  }
  return false;
}

bool ParseRedOp(std::string_view name, RedOp* out) {
  for (int i = 0; i < kNumRedOps; ++i) {
    if (name == kOpNames[i]) { *out = static_cast<RedOp>(i); return true; }
  }
  return false;
}

}  // namespace railyard::collectives
