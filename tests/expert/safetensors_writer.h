// A minimal safetensors writer for the tests: the real format (8-byte little-endian
// header length, JSON header with dtype/shape/data_offsets, then the data), so the
// packer is tested on files a Hugging Face checkpoint would have.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "storage/expert/manifest.h"

namespace railyard::expert::testing {

struct StTensor {
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string bytes;  ///< product(shape) x dtype size bytes
};

/// Deterministic bytes for a tensor named `name`.
inline std::string TensorBytes(const std::string& name, uint64_t n) {
  std::string b(n, '\0');
  uint64_t x = std::hash<std::string>{}(name) | 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = static_cast<char>(x);
  }
  return b;
}

inline StTensor MakeTensor(const std::string& name, const std::string& dtype, std::vector<uint64_t> shape) {
  uint64_t n = DtypeBytes(dtype);
  for (uint64_t d : shape) n *= d;
  return {dtype, shape, TensorBytes(name, n)};
}

/// Writes `tensors` as one .safetensors file (data in name order, with __metadata__).
inline void WriteSafetensors(const std::string& path, const std::map<std::string, StTensor>& tensors) {
  nlohmann::json h;
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes.size()}}};
    at += t.bytes.size();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the format pads the header with spaces
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header;
  for (const auto& [name, t] : tensors) f << t.bytes;
}

}  // namespace railyard::expert::testing
