// railyard-reduce-bench: bandwidth of the reduction kernels (proxy/collectives/reduce.h)
// against memcpy on the same buffers, per datatype: bytes of dst streamed per second
// for dst = dst (op) src, the kernel a collective runs on every landed chunk. Not a test
// (prints numbers only); docs/benchmarks.md quotes it.
// Usage: railyard-reduce-bench [MiB per buffer, default 64] [repetitions, default 10]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "proxy/collectives/reduce.h"

namespace rc = railyard::collectives;

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  const size_t bytes = mib << 20;
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2), wide(bytes * 4 / 2 + 64);
  auto time = [&](auto&& fn) {
    fn();  // warm the pages and caches
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(bytes) * reps / s / 1e9;
  };
  std::printf("# reduce kernels, %zu MiB buffers, %d reps, Highway target %s\n", mib, reps, rc::ReduceTargetName());
  std::printf("%-22s %8s\n", "kernel", "GB/s");
  std::printf("%-22s %8.2f\n", "memcpy", time([&] { std::memcpy(a.data(), b.data(), bytes); }));
  const struct { rc::DataType t; rc::RedOp op; const char* name; } cases[] = {
      {rc::DataType::kFloat32, rc::RedOp::kSum, "float sum"},   {rc::DataType::kFloat32, rc::RedOp::kMax, "float max"},
      {rc::DataType::kFloat64, rc::RedOp::kSum, "double sum"},  {rc::DataType::kInt32, rc::RedOp::kProd, "int32 prod"},
      {rc::DataType::kInt8, rc::RedOp::kSum, "int8 sum"},       {rc::DataType::kInt64, rc::RedOp::kProd, "int64 prod (scalar)"},
  };
  for (const auto& c : cases) {
    const size_t n = bytes / rc::TypeBytes(c.t);
    std::memset(a.data(), 0, bytes);
    std::printf("%-22s %8.2f\n", c.name, time([&] { rc::ReduceInPlace(c.t, c.op, a.data(), b.data(), n); }));
  }
  // The narrow types: widen to float (ToAccum) and round back (FromAccum), GB/s of narrow bytes.
  const size_t halves = bytes / 2 / 2;  // wide holds halves floats
  std::printf("%-22s %8.2f\n", "half -> float", time([&] { rc::ToAccum(rc::DataType::kFloat16, wide.data(), b.data(), halves); }) / 2);
  std::printf("%-22s %8.2f\n", "float -> half", time([&] { rc::FromAccum(rc::DataType::kFloat16, a.data(), wide.data(), halves, 1); }) / 2);
  std::printf("%-22s %8.2f\n", "bf16 -> float", time([&] { rc::ToAccum(rc::DataType::kBfloat16, wide.data(), b.data(), halves); }) / 2);
  return 0;
}
