#include "storage/expert/pack.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "storage/expert/expert_error.h"

namespace railyard::expert {
namespace {

struct Scheme {
  const char* name;
  std::regex pattern;  // groups: layer, expert, projection, kind
  std::vector<std::string> projections;
};

const std::vector<Scheme>& Schemes() {
  static const std::vector<Scheme> schemes = {
      {"qwen-moe",
       std::regex(R"(^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.(weight|weight_scale|weight_scale_inv)$)"),
       {"gate_proj", "up_proj", "down_proj"}},
      {"mixtral",
       std::regex(R"(^model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)\.(weight|weight_scale|weight_scale_inv)$)"),
       {"w1", "w2", "w3"}},
  };
  return schemes;
}

int KindRank(const std::string& k) { return k == "weight" ? 0 : k == "weight_scale" ? 1 : 2; }

Status PackBad(const std::string& what) { return ExpertError(ExpertErrc::kPackInput, what); }

std::string ShapeText(const std::vector<uint64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

Status PlanPack(const std::vector<CheckpointTensor>& tensors, const PackOptions& options, PackPlan* out) {
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0 || options.alignment > (1u << 30)) {
    return ExpertError(ExpertErrc::kInvalidArgument, "alignment " + std::to_string(options.alignment) + " is not a power of two up to 1 GiB");
  }
  const Scheme* scheme = nullptr;
  if (options.scheme == "auto") {
    std::vector<const Scheme*> found;
    for (const Scheme& s : Schemes()) {
      for (const CheckpointTensor& t : tensors) {
        if (std::regex_match(t.name, s.pattern)) {
          found.push_back(&s);
          break;
        }
      }
    }
    if (found.empty()) {
      return PackBad("no MoE expert tensors recognised (looked for model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight "
                 "and model.layers.L.block_sparse_moe.experts.E.{w1,w2,w3}.weight)");
    }
    if (found.size() > 1) return PackBad("the checkpoint has expert tensors of both the qwen-moe and the mixtral scheme: choose one with --scheme");
    scheme = found[0];
  } else {
    for (const Scheme& s : Schemes()) {
      if (options.scheme == s.name) scheme = &s;
    }
    if (!scheme) return ExpertError(ExpertErrc::kInvalidArgument, "scheme '" + options.scheme + "' is not auto, qwen-moe or mixtral");
  }
  // layer -> expert -> record tensor name -> tensor
  std::map<uint64_t, std::map<uint64_t, std::map<std::string, const CheckpointTensor*>>> experts;
  std::map<std::string, std::pair<int, int>> order;  // record tensor name -> (projection, kind) rank
  uint64_t others = 0;
  std::smatch m;
  for (const CheckpointTensor& t : tensors) {
    if (!std::regex_match(t.name, m, scheme->pattern)) {
      ++others;
      continue;
    }
    // from_chars, not stoull: a number past 2^64 (a hostile or corrupt name) must be refused, not throw.
    uint64_t layer = 0, expert = 0;
    const std::string ls = m[1].str(), es = m[2].str();
    const bool layerOk = std::from_chars(ls.data(), ls.data() + ls.size(), layer).ec == std::errc();
    const bool expertOk = std::from_chars(es.data(), es.data() + es.size(), expert).ec == std::errc();
    if (!layerOk || !expertOk || layer > (1u << 20) || expert >= kMaxExperts) return PackBad("tensor '" + t.name + "' has a layer or expert number out of range");
    const std::string proj = m[3].str(), kind = m[4].str();
    const std::string rname = proj + "." + kind;
    int pr = 0;
    for (size_t i = 0; i < scheme->projections.size(); ++i) {
      if (scheme->projections[i] == proj) pr = static_cast<int>(i);
    }
    order[rname] = {pr, KindRank(kind)};
    // Two names for one tensor ("experts.0" and "experts.00"): refused, never one kept
    // silently (new-user trial: the last one read won).
    auto [it, inserted] = experts[layer][expert].emplace(rname, &t);
    if (!inserted) {
      return PackBad("tensors '" + it->second->name + "' and '" + t.name + "' are both layer " + std::to_string(layer) +
                     " expert " + std::to_string(expert) + "'s " + rname + " (a number written two ways?)");
    }
  }
  if (experts.empty()) return PackBad(std::string("no tensor matches the ") + scheme->name + " scheme");
  if (experts.size() > kMaxLayers) return PackBad("more than " + std::to_string(kMaxLayers) + " MoE layers");
  uint64_t nExperts = 0;
  for (const auto& [l, es] : experts) nExperts = std::max(nExperts, es.rbegin()->first + 1);
  // The reference record: layer first, expert 0.
  const auto& ref = experts.begin()->second;
  if (!ref.count(0)) return PackBad("layer " + std::to_string(experts.begin()->first) + " is missing expert 0");
  std::vector<std::string> names;
  for (const auto& [n, t] : ref.at(0)) names.push_back(n);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) { return order[a] < order[b]; });
  if (names.size() > kMaxTensorsPerRecord) return PackBad("an expert with more than " + std::to_string(kMaxTensorsPerRecord) + " tensors");

  PackPlan plan;
  Manifest& man = plan.manifest;
  man.modelId = options.modelId;
  man.scheme = scheme->name;
  man.expertsPerLayer = nExperts;
  man.alignment = options.alignment;
  uint64_t at = 0;
  for (const std::string& n : names) {
    const CheckpointTensor* t = ref.at(0).at(n);
    // Every tensor starts on a whole element: an alignment below its element size would
    // place it off its dtype's alignment (new-user trial: --align 1 put an F32 at +3).
    if (const uint64_t element = DtypeBytes(t->dtype); element > options.alignment) {
      return ExpertError(ExpertErrc::kInvalidArgument,
                         "alignment " + std::to_string(options.alignment) + " is smaller than tensor " + n + "'s " +
                             t->dtype + " elements (" + std::to_string(element) + " bytes): use --align " +
                             std::to_string(element) + " or more");
    }
    at = (at + options.alignment - 1) / options.alignment * options.alignment;
    man.tensors.push_back({n, t->dtype, t->shape, at, t->bytes});
    at += t->bytes;
  }
  man.recordBytes = at;
  man.recordStride = (at + options.alignment - 1) / options.alignment * options.alignment;
  if (man.recordBytes == 0) return PackBad("the expert tensors hold no bytes");
  const uint64_t refLayer = experts.begin()->first;
  for (const auto& [l, es] : experts) {
    man.layers.push_back({l, "", {}});
    auto& layerSources = plan.sources.emplace_back();
    for (uint64_t e = 0; e < nExperts; ++e) {
      auto it = es.find(e);
      if (it == es.end()) {
        // (New-user trial: "other layers have 3 experts" for a checkpoint of one layer.)
        return PackBad("layer " + std::to_string(l) + " is missing expert " + std::to_string(e) +
                       " (the checkpoint numbers its experts up to " + std::to_string(nExperts - 1) +
                       ", and every layer needs each of 0.." + std::to_string(nExperts - 1) + ")");
      }
      auto& rec = layerSources.emplace_back();
      for (size_t k = 0; k < names.size(); ++k) {
        auto t = it->second.find(names[k]);
        const std::string where = "layer " + std::to_string(l) + " expert " + std::to_string(e);
        if (t == it->second.end()) return PackBad(where + " is missing tensor " + names[k]);
        const TensorLayout& want = man.tensors[k];
        if (t->second->dtype != want.dtype || t->second->shape != want.shape) {
          return PackBad(where + " tensor " + names[k] + " is " + t->second->dtype + " " + ShapeText(t->second->shape) +
                     "; layer " + std::to_string(refLayer) + " expert 0 has " + want.dtype + " " + ShapeText(want.shape) +
                     " (inconsistent experts)");
        }
        rec.push_back(*t->second);
      }
      if (it->second.size() != names.size()) {
        for (const auto& [n, t] : it->second) {
          if (std::find(names.begin(), names.end(), n) == names.end()) {
            return PackBad("layer " + std::to_string(l) + " expert " + std::to_string(e) + " has tensor " + n +
                       " that layer " + std::to_string(refLayer) + " expert 0 lacks");
          }
        }
      }
    }
  }
  plan.otherTensors = others;
  *out = std::move(plan);
  return Status::Ok();
}

namespace {
/// Bytes the tensors of one record hold (without the alignment gaps between them).
uint64_t TensorBytes(const Manifest& m) {
  uint64_t n = 0;
  for (const TensorLayout& t : m.tensors) n += t.bytes;
  return n;
}
}  // namespace

std::string PackPlan::Describe() const {
  const Manifest& m = manifest;
  std::ostringstream o;
  o << "model " << (m.modelId.empty() ? "(unnamed)" : m.modelId) << ", scheme " << m.scheme << "\n"
    << m.layers.size() << " MoE layers x " << m.expertsPerLayer << " experts; record stride " << m.recordStride
    << " bytes (its tensors hold " << TensorBytes(m) << " bytes and end at byte " << m.recordBytes
    << ", each aligned to " << m.alignment << ")\n"
    << "record layout:\n";
  for (const TensorLayout& t : m.tensors) {
    o << "  +" << t.offset << "  " << t.name << "  " << t.dtype << " " << ShapeText(t.shape) << "  " << t.bytes << " bytes\n";
  }
  o << "layers:";
  for (const LayerEntry& l : m.layers) o << " " << l.layer;
  o << "\nstore size " << m.LayerFileBytes() * m.layers.size() << " bytes in " << m.layers.size()
    << " layer files; " << otherTensors << " other tensors left out\n";
  return o.str();
}

std::string PackPlan::PaddingWarning() const {
  const Manifest& m = manifest;
  uint64_t payload = 0;  // the tensors' own bytes, without the padding between them
  for (const TensorLayout& t : m.tensors) payload += t.bytes;
  // At the default alignment or below, a small checkpoint's padding is the price of page-aligned reads.
  if (payload == 0 || m.alignment <= PackOptions().alignment || m.recordStride / payload <= kMaxPaddingRatio) return "";
  return "record stride " + std::to_string(m.recordStride) + " bytes is " + std::to_string(m.recordStride / payload) +
         "x the " + std::to_string(payload) + " bytes of its tensors (more than " +
         std::to_string(kMaxPaddingRatio) + "x): --align " + std::to_string(m.alignment) +
         " pads every record and tensor; a smaller --align (the default is 4096) wastes less";
}

Status ExecutePack(const PackPlan& plan, const std::string& dir, const ProgressFn& progress,
                   const std::atomic<bool>* cancel) {
  std::map<std::string, int> fds;
  auto closeAll = [&] {
    for (auto& [p, fd] : fds) ::close(fd);
  };
  const Manifest& m = plan.manifest;
  Status s = WriteStore(
      dir, m,
      [&](size_t l, uint64_t e, char* dst) -> Status {
        if (cancel != nullptr && cancel->load()) return ExpertError(ExpertErrc::kSystem, "interrupted");
        const auto& rec = plan.sources[l][e];
        for (size_t k = 0; k < rec.size(); ++k) {
          const CheckpointTensor& t = rec[k];
          auto it = fds.find(t.file);
          if (it == fds.end()) {
            const int fd = ::open(t.file.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) return ExpertError(ExpertErrc::kPackInput, t.file + ": " + std::strerror(errno));
            it = fds.emplace(t.file, fd).first;
          }
          uint64_t got = 0;
          while (got < t.bytes) {
            const ssize_t n = ::pread(it->second, dst + m.tensors[k].offset + got, t.bytes - got,
                                      static_cast<off_t>(t.fileOffset + got));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return ExpertError(ExpertErrc::kPackInput, t.file + ": tensor " + t.name + " ends early (truncated file)");
            got += static_cast<uint64_t>(n);
          }
        }
        return Status::Ok();
      },
      progress);
  closeAll();
  return s;
}

}  // namespace railyard::expert
