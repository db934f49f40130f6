// railyard-pack's engine on small checkpoints in the real safetensors format: every
// record byte-identical to the checkpoint's tensors (single file and sharded, both
// naming schemes, with quantization scales), and every bad checkpoint refused with a
// clear error and nothing left looking like a store.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "storage/expert/expert_error.h"
#include "storage/expert/pack.h"
#include "storage/expert/safetensors.h"
#include "storage/expert/store.h"
#include "tests/expert/expert_test_util.h"
#include "tests/expert/safetensors_writer.h"

namespace railyard::expert {
namespace {

using testing::MakeTensor;
using testing::StTensor;
using testing::TempDir;

/// A Qwen/DeepSeek-style checkpoint: layers 1 and 3 are MoE (4 experts), FP8 weights
/// with weight_scale_inv, plus non-expert tensors.
std::map<std::string, StTensor> QwenTensors(int experts = 4) {
  std::map<std::string, StTensor> t;
  t["model.embed_tokens.weight"] = MakeTensor("emb", "BF16", {32, 16});
  for (int l : {1, 3}) {
    t["model.layers." + std::to_string(l) + ".mlp.gate.weight"] = MakeTensor("router" + std::to_string(l), "BF16", {experts + 0ull, 16});
    for (int e = 0; e < experts; ++e) {
      const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + ".";
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        const bool down = std::string(proj) == "down_proj";
        t[p + proj + ".weight"] = MakeTensor(p + proj + ".weight", "F8_E4M3", down ? std::vector<uint64_t>{16, 24} : std::vector<uint64_t>{24, 16});
        t[p + proj + ".weight_scale_inv"] = MakeTensor(p + proj + ".s", "F32", {1, 1});
      }
    }
  }
  return t;
}

std::map<std::string, StTensor> MixtralTensors() {
  std::map<std::string, StTensor> t;
  for (int l = 0; l < 2; ++l) {
    for (int e = 0; e < 3; ++e) {
      const std::string p = "model.layers." + std::to_string(l) + ".block_sparse_moe.experts." + std::to_string(e) + ".";
      t[p + "w1.weight"] = MakeTensor(p + "w1", "BF16", {10, 6});
      t[p + "w2.weight"] = MakeTensor(p + "w2", "BF16", {6, 10});
      t[p + "w3.weight"] = MakeTensor(p + "w3", "BF16", {10, 6});
    }
  }
  return t;
}

/// Packs `ckpt` into dir/store and checks every record's tensors against `tensors`.
void PackAndCheck(const std::string& ckpt, const std::string& out, const std::map<std::string, StTensor>& tensors,
                  const std::string& prefixFmt, const std::vector<std::string>& names, uint64_t alignment = 64) {
  std::vector<CheckpointTensor> ts;
  ASSERT_TRUE(ReadCheckpoint(ckpt, &ts).ok());
  PackPlan plan;
  PackOptions o;
  o.alignment = alignment;
  Status s = PlanPack(ts, o, &plan);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(plan.manifest.tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(plan.manifest.tensors[i].name, names[i]);
  ASSERT_TRUE(ExecutePack(plan, out).ok());
  std::unique_ptr<Store> store;
  s = Store::Open(out, true, &store);
  ASSERT_TRUE(s.ok()) << s.message();
  const Manifest& m = store->manifest();
  std::string rec(m.recordStride, '\0');
  uint64_t checked = 0;
  for (size_t li = 0; li < m.layers.size(); ++li) {
    for (uint64_t e = 0; e < m.expertsPerLayer; ++e) {
      ASSERT_TRUE(store->ReadRecord(li, e, rec.data()).ok());
      uint64_t end = 0;
      for (const TensorLayout& t : m.tensors) {
        char full[256];
        std::snprintf(full, sizeof full, prefixFmt.c_str(), static_cast<int>(m.layers[li].layer), static_cast<int>(e));
        const StTensor& src = tensors.at(std::string(full) + t.name);
        ASSERT_EQ(rec.substr(t.offset, t.bytes), src.bytes) << full << t.name;
        EXPECT_EQ(std::string(t.offset - end, '\0'), rec.substr(end, t.offset - end));  // padding stays zero
        end = t.offset + t.bytes;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, m.layers.size() * m.expertsPerLayer * m.tensors.size());
}

TEST(ExpertPack, QwenSingleFileRecordsAreByteIdentical) {
  TempDir tmp;
  const auto t = QwenTensors();
  testing::WriteSafetensors(tmp.path + "/model.safetensors", t);
  PackAndCheck(tmp.path + "/model.safetensors", tmp.path + "/store", t, "model.layers.%d.mlp.experts.%d.",
               {"gate_proj.weight", "gate_proj.weight_scale_inv", "up_proj.weight", "up_proj.weight_scale_inv",
                "down_proj.weight", "down_proj.weight_scale_inv"});
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(tmp.path + "/store", false, &store).ok());
  EXPECT_EQ(store->manifest().scheme, "qwen-moe");
  EXPECT_EQ(store->manifest().layers.size(), 2u);
  EXPECT_EQ(store->manifest().layers[1].layer, 3u);
  EXPECT_EQ(store->manifest().expertsPerLayer, 4u);
}

TEST(ExpertPack, MixtralShardedWithIndexRecordsAreByteIdentical) {
  TempDir tmp;
  const auto t = MixtralTensors();
  // Two shards split by layer, and an index mapping every tensor.
  std::map<std::string, StTensor> a, b;
  nlohmann::json index;
  for (const auto& [name, ten] : t) {
    const bool first = name.find("layers.0.") != std::string::npos;
    (first ? a : b)[name] = ten;
    index["weight_map"][name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  testing::WriteSafetensors(tmp.path + "/model-00001-of-00002.safetensors", a);
  testing::WriteSafetensors(tmp.path + "/model-00002-of-00002.safetensors", b);
  std::ofstream(tmp.path + "/model.safetensors.index.json") << index.dump();
  PackAndCheck(tmp.path, tmp.path + "/store", t, "model.layers.%d.block_sparse_moe.experts.%d.",
               {"w1.weight", "w2.weight", "w3.weight"});
  // Named by its index file (as Hugging Face lists it), the same checkpoint.
  PackAndCheck(tmp.path + "/model.safetensors.index.json", tmp.path + "/store2", t,
               "model.layers.%d.block_sparse_moe.experts.%d.", {"w1.weight", "w2.weight", "w3.weight"});
}

Status PlanOf(const std::map<std::string, StTensor>& t, const std::string& dir, const std::string& scheme = "auto") {
  testing::WriteSafetensors(dir + "/x.safetensors", t);
  std::vector<CheckpointTensor> ts;
  RY_RETURN_IF_ERROR(ReadCheckpoint(dir + "/x.safetensors", &ts));
  PackPlan plan;
  PackOptions o;
  o.scheme = scheme;
  return PlanPack(ts, o, &plan);
}

TEST(ExpertPack, InconsistentCheckpointsAreRefused) {
  TempDir tmp;
  {
    auto t = QwenTensors();
    t.erase("model.layers.3.mlp.experts.2.up_proj.weight");
    Status s = PlanOf(t, tmp.path);
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
    EXPECT_NE(s.message().find("layer 3 expert 2 is missing tensor up_proj.weight"), std::string::npos) << s.message();
  }
  {
    auto t = QwenTensors();
    for (const char* suffix : {"gate_proj.weight", "gate_proj.weight_scale_inv", "up_proj.weight", "up_proj.weight_scale_inv",
                               "down_proj.weight", "down_proj.weight_scale_inv"}) {
      t.erase(std::string("model.layers.1.mlp.experts.1.") + suffix);
    }
    Status s = PlanOf(t, tmp.path);
    EXPECT_NE(s.message().find("layer 1 is missing expert 1"), std::string::npos) << s.message();
  }
  {
    auto t = QwenTensors();
    t["model.layers.3.mlp.experts.1.down_proj.weight"] = MakeTensor("x", "F8_E4M3", {24, 16});
    Status s = PlanOf(t, tmp.path);
    EXPECT_NE(s.message().find("inconsistent"), std::string::npos) << s.message();
    t["model.layers.3.mlp.experts.1.down_proj.weight"] = MakeTensor("x", "BF16", {16, 24});
    s = PlanOf(t, tmp.path);
    EXPECT_NE(s.message().find("is BF16"), std::string::npos) << s.message();
  }
  {
    auto t = QwenTensors();
    for (const auto& [n, ten] : MixtralTensors()) t[n] = ten;
    Status s = PlanOf(t, tmp.path);
    EXPECT_NE(s.message().find("--scheme"), std::string::npos) << s.message();
    EXPECT_TRUE(PlanOf(t, tmp.path, "mixtral").ok());
    EXPECT_TRUE(PlanOf(t, tmp.path, "qwen-moe").ok());
  }
  {
    // A layer number past 2^64 is the ordinary refusal, not an uncaught std::out_of_range.
    for (const char* name : {"model.layers.99999999999999999999.block_sparse_moe.experts.0.w1.weight",
                             "model.layers.0.block_sparse_moe.experts.99999999999999999999.w1.weight"}) {
      std::map<std::string, StTensor> t{{name, MakeTensor("w", "BF16", {10, 6})}};
      Status s = PlanOf(t, tmp.path);
      EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
      EXPECT_NE(s.message().find(std::string("tensor '") + name + "' has a layer or expert number out of range"), std::string::npos)
          << s.message();
    }
  }
  {
    std::map<std::string, StTensor> t{{"model.embed_tokens.weight", MakeTensor("e", "F32", {4})}};
    EXPECT_NE(PlanOf(t, tmp.path).message().find("no MoE expert tensors"), std::string::npos);
  }
  {
    // One tensor under two names (expert 0 written "0" and "00"): refused naming both
    // (new-user trial: the one read last was packed, silently).
    auto t = MixtralTensors();
    t["model.layers.1.block_sparse_moe.experts.00.w2.weight"] = MakeTensor("dup", "BF16", {6, 10});
    Status s = PlanOf(t, tmp.path);
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput) << s.message();
    EXPECT_NE(s.message().find("'model.layers.1.block_sparse_moe.experts.0.w2.weight' and "
                               "'model.layers.1.block_sparse_moe.experts.00.w2.weight' are both layer 1 expert 0's w2.weight"),
              std::string::npos)
        << s.message();
  }
}

// An alignment below a tensor's element size would place it off its dtype's alignment
// (new-user trial: --align 1 put an F32 tensor at +3): refused naming the tensor.
TEST(ExpertPack, AnAlignmentBelowAnElementSizeIsRefused) {
  TempDir tmp;
  testing::WriteSafetensors(tmp.path + "/x.safetensors", MixtralTensors());  // BF16: 2-byte elements
  std::vector<CheckpointTensor> ts;
  ASSERT_TRUE(ReadCheckpoint(tmp.path + "/x.safetensors", &ts).ok());
  PackOptions o;
  PackPlan plan;
  o.alignment = 1;
  Status s = PlanPack(ts, o, &plan);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("alignment 1 is smaller than tensor w1.weight's BF16 elements (2 bytes): use --align 2"),
            std::string::npos)
      << s.message();
  o.alignment = 2;
  EXPECT_TRUE(PlanPack(ts, o, &plan).ok());
}

// New-user trial: --align 64M on 96-byte records wrote 768 MiB of real zeros. The
// padding is now left as holes: the records read back the same (padding zero), and
// the layer files take a small part of their size on disk.
TEST(ExpertPack, PaddingIsWrittenAsHoles) {
  TempDir tmp;
  const auto tensors = MixtralTensors();
  testing::WriteSafetensors(tmp.path + "/x.safetensors", tensors);
  const std::string out = tmp.path + "/store";
  ASSERT_NO_FATAL_FAILURE(PackAndCheck(tmp.path + "/x.safetensors", out, tensors,
                                       "model.layers.%d.block_sparse_moe.experts.%d.",
                                       {"w1.weight", "w2.weight", "w3.weight"}, 1u << 20));
  uint64_t size = 0, allocated = 0;
  for (const auto& f : std::filesystem::directory_iterator(out)) {
    if (f.path().extension() != ".bin") continue;
    struct stat st {};
    ASSERT_EQ(::stat(f.path().c_str(), &st), 0);
    size += static_cast<uint64_t>(st.st_size);
    allocated += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  ASSERT_GT(size, 0u);
  EXPECT_LT(allocated, size / 16) << "the layer files hold " << allocated << " of their " << size
                                  << " bytes on disk: the padding was written";
}

TEST(ExpertPack, AnAlignmentThatPadsRecordsMoreThan16xWarns) {
  TempDir tmp;
  testing::WriteSafetensors(tmp.path + "/x.safetensors", MixtralTensors());  // 3 tensors of 120 bytes a record
  std::vector<CheckpointTensor> ts;
  ASSERT_TRUE(ReadCheckpoint(tmp.path + "/x.safetensors", &ts).ok());
  PackOptions o;
  PackPlan plan;
  o.alignment = 1u << 30;
  ASSERT_TRUE(PlanPack(ts, o, &plan).ok());
  EXPECT_EQ(plan.manifest.recordStride, 3ull << 30);
  EXPECT_EQ(plan.PaddingWarning(),
            "record stride 3221225472 bytes is 8947848x the 360 bytes of its tensors (more than 16x): --align 1073741824 "
            "pads every record and tensor; a smaller --align (the default is 4096) wastes less");
  o.alignment = 8192;  // stride 3 x 8192 = 24576 bytes, 68x 360
  ASSERT_TRUE(PlanPack(ts, o, &plan).ok());
  EXPECT_NE(plan.PaddingWarning().find("is 68x the 360 bytes"), std::string::npos) << plan.PaddingWarning();
  o.alignment = 4096;  // 34x, but the default alignment: no warning
  ASSERT_TRUE(PlanPack(ts, o, &plan).ok());
  EXPECT_EQ(plan.PaddingWarning(), "");
  o.alignment = 64;  // stride 384 bytes: no warning
  ASSERT_TRUE(PlanPack(ts, o, &plan).ok());
  EXPECT_EQ(plan.PaddingWarning(), "");
}

TEST(ExpertPack, MalformedAndTruncatedSafetensorsAreRefused) {
  TempDir tmp;
  const std::string f = tmp.path + "/m.safetensors";
  testing::WriteSafetensors(f, MixtralTensors());
  std::vector<CheckpointTensor> ts;
  ASSERT_TRUE(ReadSafetensorsHeader(f, &ts).ok());
  const auto size = std::filesystem::file_size(f);
  auto errOf = [&](const std::string& path) {
    std::vector<CheckpointTensor> v;
    return ReadSafetensorsHeader(path, &v);
  };
  // Truncated data: the last tensor's offsets run past the end.
  std::filesystem::copy_file(f, tmp.path + "/short.safetensors");
  std::filesystem::resize_file(tmp.path + "/short.safetensors", size - 1);
  Status s = errOf(tmp.path + "/short.safetensors");
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  // Truncated header.
  std::filesystem::copy_file(f, tmp.path + "/hdr.safetensors");
  std::filesystem::resize_file(tmp.path + "/hdr.safetensors", 20);
  EXPECT_NE(errOf(tmp.path + "/hdr.safetensors").message().find("truncated"), std::string::npos);
  std::filesystem::resize_file(tmp.path + "/hdr.safetensors", 5);
  EXPECT_NE(errOf(tmp.path + "/hdr.safetensors").message().find("truncated"), std::string::npos);
  // A huge header length; malformed JSON; a bad entry.
  auto writeRaw = [&](const std::string& name, uint64_t n, const std::string& body) {
    std::ofstream o(tmp.path + "/" + name, std::ios::binary);
    for (int i = 0; i < 8; ++i) o.put(static_cast<char>(n >> (8 * i)));
    o << body;
    return tmp.path + "/" + name;
  };
  EXPECT_NE(errOf(writeRaw("big", 1ull << 40, "{}")).message().find("malformed"), std::string::npos);
  EXPECT_NE(errOf(writeRaw("json", 5, "{\"a\":")).message().find("malformed header JSON"), std::string::npos);
  const std::string entry = R"({"a": {"x": 1}})";
  EXPECT_NE(errOf(writeRaw("entry", entry.size(), entry)).message().find("lacks dtype"), std::string::npos);
  const std::string wrong = R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})";
  EXPECT_NE(errOf(writeRaw("bytes", wrong.size(), wrong + std::string(8, '\0'))).message().find("shape [3] x F32 (4 bytes each) needs 12"),
            std::string::npos);
  // Offsets: reversed, negative, and two tensors over the same bytes, each named.
  const std::string reversed = R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [8, 0]}})";
  EXPECT_NE(errOf(writeRaw("rev", reversed.size(), reversed + std::string(8, '\0'))).message().find("data_offsets [8, 0]: begin after end"),
            std::string::npos);
  // New-user trial: a negative dimension was "a non-integer".
  const std::string negShape = R"({"a": {"dtype": "U8", "shape": [-4, -4], "data_offsets": [0, 8]}})";
  EXPECT_NE(errOf(writeRaw("negshape", negShape.size(), negShape + std::string(8, '\0')))
                .message()
                .find("tensor 'a' shape has -4, not a size (an integer >= 0)"),
            std::string::npos);
  const std::string negative = R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [-8, 0]}})";
  EXPECT_NE(errOf(writeRaw("neg", negative.size(), negative + std::string(8, '\0')))
                .message()
                .find("data_offsets[0] is -8 (negative), not an unsigned integer"),
            std::string::npos);
  const std::string overlap =
      R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})";
  s = errOf(writeRaw("ovl", overlap.size(), overlap + std::string(8, '\0')));
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("the data of tensors 'a' [0, 8) and 'b' [4, 8) overlap"), std::string::npos) << s.message();
  // The tensors must cover the data exactly, as the format requires (new-user trial:
  // trailing junk and a tensor named twice were packed without a word).
  const std::string one = R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})";
  s = errOf(writeRaw("trail", one.size(), one + std::string(8 + 700, '\0')));
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("700 bytes follow the last tensor's data"), std::string::npos) << s.message();
  const std::string hole =
      R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}})";
  s = errOf(writeRaw("hole", hole.size(), hole + std::string(8, '\0')));
  EXPECT_NE(s.message().find("bytes [4, 6) of the data, between tensors 'a' [0, 4) and 'b' [6, 8), belong to no tensor"),
            std::string::npos)
      << s.message();
  const std::string late = R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})";
  s = errOf(writeRaw("late", late.size(), late + std::string(8, '\0')));
  EXPECT_NE(s.message().find("the data's first 4 bytes, before tensor 'a' [4, 8), belong to no tensor"), std::string::npos)
      << s.message();
  const std::string twice =
      R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})";
  s = errOf(writeRaw("twice", twice.size(), twice + std::string(8, '\0')));
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("the header names tensor 'a' twice"), std::string::npos) << s.message();
  // Zero-byte tensors and a header padded with spaces (as the format allows) still read.
  const std::string ok =
      R"({"e": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, "a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}   )";
  std::vector<CheckpointTensor> read;
  s = ReadSafetensorsHeader(writeRaw("ok", ok.size(), ok + std::string(8, '\0')), &read);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(read.size(), 2u);
  // A sharded checkpoint whose index names a tensor its shard lacks.
  std::filesystem::create_directory(tmp.path + "/sh");
  testing::WriteSafetensors(tmp.path + "/sh/a.safetensors", MixtralTensors());
  nlohmann::json index;
  index["weight_map"]["model.layers.9.block_sparse_moe.experts.0.w1.weight"] = "a.safetensors";
  std::ofstream(tmp.path + "/sh/model.safetensors.index.json") << index.dump();
  ts.clear();
  s = ReadCheckpoint(tmp.path + "/sh", &ts);
  EXPECT_NE(s.message().find("lacks tensor"), std::string::npos) << s.message();
  // One that leaves out a tensor its shard holds (new-user trial: reported as an expert
  // lacking a tensor another has).
  index = nlohmann::json::object();
  const std::vector<std::string> all = [] {
    std::vector<std::string> names;
    for (const auto& [name, tensor] : MixtralTensors()) names.push_back(name);
    return names;
  }();
  for (size_t i = 1; i < all.size(); ++i) index["weight_map"][all[i]] = "a.safetensors";
  std::ofstream(tmp.path + "/sh/model.safetensors.index.json") << index.dump();
  ts.clear();
  s = ReadCheckpoint(tmp.path + "/sh", &ts);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("leaves out tensor '" + all[0] + "', which shard a.safetensors holds"), std::string::npos)
      << s.message();
  // An index naming one tensor twice (one shard each) is refused, not resolved silently.
  std::ofstream(tmp.path + "/sh/model.safetensors.index.json")
      << R"({"weight_map": {"x.weight": "a.safetensors", "x.weight": "b.safetensors"}})";
  ts.clear();
  s = ReadCheckpoint(tmp.path + "/sh", &ts);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput);
  EXPECT_NE(s.message().find("weight_map names tensor 'x.weight' twice"), std::string::npos) << s.message();
}

TEST(ExpertPack, AFailedPackLeavesNothingThatLooksLikeAStore) {
  TempDir tmp;
  const std::string f = tmp.path + "/m.safetensors";
  testing::WriteSafetensors(f, MixtralTensors());
  std::vector<CheckpointTensor> ts;
  ASSERT_TRUE(ReadCheckpoint(f, &ts).ok());
  PackPlan plan;
  ASSERT_TRUE(PlanPack(ts, PackOptions{}, &plan).ok());
  // The file shrinks between planning and packing: the copy fails half-way.
  std::filesystem::resize_file(f, std::filesystem::file_size(f) - 100);
  Status s = ExecutePack(plan, tmp.path + "/store");
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput) << s.message();
  EXPECT_FALSE(std::filesystem::exists(tmp.path + "/store"));
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path)) entries += e.path().filename() != "m.safetensors";
  EXPECT_EQ(entries, 0u);  // no .partial directory left behind
  // Cancelled (railyard-pack's SIGINT): "interrupted" before the next record, nothing left.
  std::filesystem::resize_file(f, std::filesystem::file_size(f) + 100);
  const std::atomic<bool> cancel{true};
  s = ExecutePack(plan, tmp.path + "/store", {}, &cancel);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kSystem) << s.message();
  EXPECT_NE(s.message().find("interrupted"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(tmp.path + "/store"));
  entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path)) entries += e.path().filename() != "m.safetensors";
  EXPECT_EQ(entries, 0u);
}

// A header whose JSON holds a number too large for a double ("1E999") made
// nlohmann throw out_of_range.406, which only parse_error was caught for:
// railyard-pack ended in std::terminate (exit 134). Now a named PACK_INPUT error.
TEST(ExpertPack, HeaderWithAnOverflowingNumberIsRefusedNotFatal) {
  TempDir tmp;
  const std::string path = tmp.path + "/overflow.safetensors";
  std::string header = "{\"x\":1E999}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  const uint64_t n = header.size();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(&n), 8).write(header.data(),
                                                                                       static_cast<long>(n));
  std::vector<CheckpointTensor> ts;
  const Status s = ReadSafetensorsHeader(path, &ts);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPackInput) << s.message();
  EXPECT_NE(s.message().find("malformed header JSON"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::expert
