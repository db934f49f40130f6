// railyard-pack's engine: recognises the MoE expert tensors of a checkpoint by their
// naming scheme, checks every expert of every layer has the same tensors with the same
// dtypes and shapes, lays one expert's tensors out as a record, and writes the store
// (through WriteStore: a temporary directory renamed at the end).
//
// Schemes (names as Hugging Face transformers writes them):
//   qwen-moe  model.layers.L.mlp.experts.E.{gate,up,down}_proj.{weight,weight_scale,weight_scale_inv}
//             (Qwen-MoE, Qwen3-MoE, DeepSeek-V2/V3)
//   mixtral   model.layers.L.block_sparse_moe.experts.E.{w1,w2,w3}.{weight,weight_scale,weight_scale_inv}
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"
#include "storage/expert/manifest.h"
#include "storage/expert/safetensors.h"
#include "storage/expert/store_writer.h"

namespace railyard::expert {

/// Options of a pack.
struct PackOptions {
  std::string scheme = "auto";  ///< "auto", "qwen-moe" or "mixtral"
  uint64_t alignment = 4096;    ///< tensor offsets and the stride are multiples (power of two)
  std::string modelId;          ///< manifest model_id (default: the checkpoint's directory name)
};

/// What a pack will write: the manifest (files named, checksums not yet computed)
/// and, per (layer index, expert, tensor index), where the bytes come from.
struct PackPlan {
  Manifest manifest;
  /// sources[layer index][expert][tensor index]
  std::vector<std::vector<std::vector<CheckpointTensor>>> sources;
  /// Checkpoint tensors that are not experts (attention, router, shared experts, ...).
  uint64_t otherTensors = 0;

  /// Human-readable layout (what --dry-run prints).
  std::string Describe() const;
  /// Empty, or a warning when the record stride is more than kMaxPaddingRatio times the
  /// tensors' own bytes (a large --align pads every record: 1 GiB for 1.5 KB of tensors
  /// plans a 3 GiB stride) and the alignment is above the default 4096; names the stride,
  /// the tensors' bytes, the ratio and --align.
  std::string PaddingWarning() const;
  /// The stride/used ratio above which PaddingWarning warns.
  static constexpr uint64_t kMaxPaddingRatio = 16;
};

/// Plans a pack of `tensors`. PACK_INPUT naming the fault: no expert tensors found,
/// both schemes present with --scheme auto, a layer missing an expert, an expert
/// missing a tensor or with one more, a dtype or shape differing from layer 0
/// expert 0's; INVALID_ARGUMENT for a bad scheme or alignment.
Status PlanPack(const std::vector<CheckpointTensor>& tensors, const PackOptions& options, PackPlan* out);

/// Writes the planned store into `dir` (which must not exist), copying each tensor's
/// bytes from its checkpoint file. `progress` as WriteStore's. When `*cancel` (may be
/// null; set from a signal handler, say) becomes true, stops before the next record:
/// SYSTEM "interrupted", the temporary directory removed, `dir` never created.
Status ExecutePack(const PackPlan& plan, const std::string& dir, const ProgressFn& progress = {},
                   const std::atomic<bool>* cancel = nullptr);

}  // namespace railyard::expert
