// A reader of safetensors checkpoints (https://huggingface.co/docs/safetensors:
// 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {...}}, then the data, offsets
// relative to its start). Every header is treated as hostile: lengths, offsets,
// dtypes and shapes are checked against each other and the file size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::expert {

/// Largest header accepted (the format's reference reader caps it at 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

/// One tensor of a checkpoint file.
struct CheckpointTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string file;         ///< the .safetensors file holding it
  uint64_t fileOffset = 0;  ///< absolute byte offset of its data in `file`
  uint64_t bytes = 0;
};

/// Reads the header of one .safetensors file and appends its tensors to `out`.
/// PACK_INPUT naming the file and the fault: shorter than 8 bytes, a header length
/// over kMaxSafetensorsHeader or past the end (truncated), malformed JSON, an entry
/// without dtype/shape/data_offsets, an unknown dtype, offsets out of order or past
/// the end of the data, a byte count that is not shape x dtype size.
Status ReadSafetensorsHeader(const std::string& path, std::vector<CheckpointTensor>* out);

/// Reads a checkpoint: a .safetensors file, or a directory with
/// model.safetensors.index.json (its "weight_map" names the shard of every tensor;
/// each shard is read once and must hold the tensors the index gives it) or with a
/// single model.safetensors; or such an index file itself (any *.json file: its
/// directory holds the shards). PACK_INPUT for a missing/malformed index or shard, a
/// tensor the index names but its shard lacks, or a name in two shards.
Status ReadCheckpoint(const std::string& path, std::vector<CheckpointTensor>* out);

}  // namespace railyard::expert
