// The expert store's manifest: a versioned JSON document naming the model, its MoE
// layers, the experts per layer, the record stride, one file per layer, the layout
// of one record (tensors, dtypes, shapes, byte offsets, alignment) and an xxHash
// (XXH3-64) of every record. The same parser reads a store's manifest.json and the
// manifest a peer sends on connect, so every check here treats its input as hostile.
//
// JSON shape (version 1):
//   {"format": "railyard-expert-store", "version": 1, "model_id": "...",
//    "scheme": "qwen-moe" | "mixtral" | "", "experts_per_layer": E,
//    "record_stride": S, "record_bytes": B, "alignment": A, "checksum": "xxh3-64",
//    "tensors": [{"name": "gate_proj.weight", "dtype": "BF16", "shape": [r, c],
//                 "offset": O, "bytes": N}, ...],
//    "layers": [{"layer": L, "file": "layer-0003.bin", "checksums": ["<16 hex>", ...E]}, ...]}
// Layer file i holds expert e's record at byte e * S; B bytes are the tensors, the
// rest of each stride is zero. A record's checksum covers all S bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "env/status.h"

namespace railyard::expert {

/// Largest manifest accepted, bytes (from a file or from a peer).
constexpr uint64_t kMaxManifestBytes = 64ull << 20;
/// The only manifest version this build reads and writes.
constexpr int kManifestFormatVersion = 1;
/// Limits that keep a hostile manifest from asking for absurd work.
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxExperts = 65536;
constexpr uint64_t kMaxStride = 16ull << 30;   ///< 16 GiB per record
constexpr size_t kMaxTensorsPerRecord = 64;

/// One tensor inside a record.
struct TensorLayout {
  std::string name;              ///< "gate_proj.weight", "w1.weight_scale", ...
  std::string dtype;             ///< safetensors dtype name ("BF16", "F8_E4M3", ...)
  std::vector<uint64_t> shape;   ///< dimensions, outermost first
  uint64_t offset = 0;           ///< bytes from the record's start (a multiple of alignment)
  uint64_t bytes = 0;            ///< product(shape) * dtype size
};

/// One MoE layer: its file and its records' checksums (one per expert).
struct LayerEntry {
  uint64_t layer = 0;                ///< the model's layer number (L in model.layers.L)
  std::string file;                  ///< file name inside the store directory (no '/')
  std::vector<uint64_t> checksums;   ///< XXH3-64 of each record's stride bytes
};

/// A parsed, self-consistent manifest.
struct Manifest {
  std::string modelId;
  std::string scheme;
  uint64_t expertsPerLayer = 0;
  uint64_t recordStride = 0;     ///< bytes between records in a layer file
  uint64_t recordBytes = 0;      ///< bytes of a record the tensors use (<= stride)
  uint64_t alignment = 0;        ///< power of two; offsets and stride are multiples
  std::vector<TensorLayout> tensors;
  std::vector<LayerEntry> layers;

  /// Bytes of one layer file (experts * stride).
  uint64_t LayerFileBytes() const { return expertsPerLayer * recordStride; }
  /// Serialises to the JSON shape above (pretty-printed).
  std::string ToJson() const;
  /// Parses and validates. Errors (ExpertError): MANIFEST_TOO_LARGE over
  /// kMaxManifestBytes, MANIFEST_TRUNCATED when the JSON ends early,
  /// MANIFEST_VERSION for another format/version, MANIFEST_INVALID naming the field
  /// (type, range, overlapping or misaligned tensors, stride too small, a file name
  /// with '/', duplicate layers or files, a checksum count other than E). `out` is
  /// unchanged on error.
  static Status Parse(std::string_view json, Manifest* out);
};

/// Size in bytes of one element of a safetensors dtype; 0 for an unknown name.
uint64_t DtypeBytes(std::string_view dtype);
/// XXH3-64 (seed 0, checksum::Xxh3) of [data, data + bytes): the record checksum.
uint64_t RecordChecksum(const void* data, uint64_t bytes);
/// "%016x".
std::string ChecksumHex(uint64_t v);

}  // namespace railyard::expert
