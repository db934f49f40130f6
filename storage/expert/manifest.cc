#include "storage/expert/manifest.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "storage/checksum/xxh3.h"
#include "storage/expert/expert_error.h"

namespace railyard::expert {
namespace {

using nlohmann::json;

Status Bad(const std::string& what) { return ExpertError(ExpertErrc::kManifestInvalid, what); }

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

Status GetU64(const json& j, const char* key, uint64_t lo, uint64_t hi, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return Bad(std::string("field '") + key + "' missing");
  if (!it->is_number_unsigned()) return Bad(std::string("field '") + key + "' is not a non-negative integer");
  const uint64_t v = it->get<uint64_t>();
  if (v < lo || v > hi) {
    return Bad(std::string("field '") + key + "' = " + std::to_string(v) + " outside " + std::to_string(lo) + ".." +
               std::to_string(hi));
  }
  *out = v;
  return Status::Ok();
}

Status GetString(const json& j, const char* key, size_t maxBytes, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Bad(std::string("field '") + key + "' missing or not a string");
  std::string s = it->get<std::string>();
  if (s.size() > maxBytes) return Bad(std::string("field '") + key + "' longer than " + std::to_string(maxBytes));
  // Every string of the manifest ends up in logs and on terminals: no control byte
  // (an escape sequence, a NUL that cuts the text) is ever taken from a peer's store.
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return Bad(std::string("field '") + key + "' holds a control character (" + hex + " at byte " +
                 std::to_string(i) + ")");
    }
  }
  *out = std::move(s);
  return Status::Ok();
}

bool ValidFileName(const std::string& f) {
  if (f.empty() || f.size() > 255 || f == "." || f == "..") return false;
  for (char c : f) {
    if (c == '/' || c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

bool ParseHex64(const std::string& s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

}  // namespace

uint64_t DtypeBytes(std::string_view d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "F8_E4M3" || d == "F8_E5M2" || d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

uint64_t RecordChecksum(const void* data, uint64_t bytes) { return ::railyard::checksum::Xxh3(data, bytes); }

std::string ChecksumHex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Manifest::ToJson() const {
  json j;
  j["format"] = "railyard-expert-store";
  j["version"] = kManifestFormatVersion;
  j["model_id"] = modelId;
  j["scheme"] = scheme;
  j["experts_per_layer"] = expertsPerLayer;
  j["record_stride"] = recordStride;
  j["record_bytes"] = recordBytes;
  j["alignment"] = alignment;
  j["checksum"] = "xxh3-64";
  json ts = json::array();
  for (const TensorLayout& t : tensors) {
    ts.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"offset", t.offset}, {"bytes", t.bytes}});
  }
  j["tensors"] = ts;
  json ls = json::array();
  for (const LayerEntry& l : layers) {
    json cs = json::array();
    for (uint64_t c : l.checksums) cs.push_back(ChecksumHex(c));
    ls.push_back({{"layer", l.layer}, {"file", l.file}, {"checksums", cs}});
  }
  j["layers"] = ls;
  return j.dump(1) + "\n";
}

Status Manifest::Parse(std::string_view text, Manifest* out) {
  if (text.size() > kMaxManifestBytes) {
    return ExpertError(ExpertErrc::kManifestTooLarge, "manifest of " + std::to_string(text.size()) +
                                                          " bytes (at most " + std::to_string(kMaxManifestBytes) + ")");
  }
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // Ran out: nlohmann says "unexpected end of input", or (inside a string or
    // number) stopped at the byte past the end.
    if (std::string_view(e.what()).find("end of input") != std::string_view::npos || e.byte > text.size()) {
      return ExpertError(ExpertErrc::kManifestTruncated,
                         "manifest JSON ends early after " + std::to_string(text.size()) + " bytes");
    }
    return Bad(std::string("manifest is not JSON: ") + e.what());
  } catch (const json::exception& e) {
    // A number too large for a double ("8E711") throws out_of_range.406, not a
    // parse_error: uncaught, a peer's manifest ended the process in std::terminate
    // (found by the fuzz target expert_manifest).
    return Bad(std::string("manifest is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Bad("manifest is not a JSON object");
  if (!j.contains("format") || j["format"] != "railyard-expert-store") {
    return ExpertError(ExpertErrc::kManifestVersion, "not a railyard-expert-store manifest (field 'format')");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kManifestFormatVersion) {
    return ExpertError(ExpertErrc::kManifestVersion, "manifest version " + (j.contains("version") ? j["version"].dump() : std::string("missing")) +
                                                         " (this build reads version " + std::to_string(kManifestFormatVersion) + ")");
  }
  if (!j.contains("checksum") || j["checksum"] != "xxh3-64") return Bad("field 'checksum' is not \"xxh3-64\"");
  Manifest m;
  RY_RETURN_IF_ERROR(GetString(j, "model_id", 1024, &m.modelId));
  if (j.contains("scheme")) RY_RETURN_IF_ERROR(GetString(j, "scheme", 64, &m.scheme));
  RY_RETURN_IF_ERROR(GetU64(j, "experts_per_layer", 1, kMaxExperts, &m.expertsPerLayer));
  RY_RETURN_IF_ERROR(GetU64(j, "alignment", 1, 1ull << 30, &m.alignment));
  if ((m.alignment & (m.alignment - 1)) != 0) return Bad("alignment " + std::to_string(m.alignment) + " is not a power of two");
  RY_RETURN_IF_ERROR(GetU64(j, "record_stride", 1, kMaxStride, &m.recordStride));
  RY_RETURN_IF_ERROR(GetU64(j, "record_bytes", 1, m.recordStride, &m.recordBytes));
  if (m.recordStride % m.alignment != 0) return Bad("record_stride is not a multiple of alignment");
  uint64_t fileBytes = 0;
  if (MulOverflows(m.expertsPerLayer, m.recordStride, &fileBytes)) return Bad("experts_per_layer * record_stride overflows");

  auto ts = j.find("tensors");
  if (ts == j.end() || !ts->is_array() || ts->empty() || ts->size() > kMaxTensorsPerRecord) {
    return Bad("field 'tensors' missing, empty or over " + std::to_string(kMaxTensorsPerRecord) + " entries");
  }
  std::set<std::string> names;
  uint64_t end = 0;
  for (const json& t : *ts) {
    if (!t.is_object()) return Bad("a tensors entry is not an object");
    TensorLayout tl;
    RY_RETURN_IF_ERROR(GetString(t, "name", 256, &tl.name));
    RY_RETURN_IF_ERROR(GetString(t, "dtype", 16, &tl.dtype));
    const uint64_t es = DtypeBytes(tl.dtype);
    if (es == 0) return Bad("tensor '" + tl.name + "' has unknown dtype '" + tl.dtype + "'");
    if (!names.insert(tl.name).second) return Bad("tensor '" + tl.name + "' listed twice");
    auto sh = t.find("shape");
    if (sh == t.end() || !sh->is_array() || sh->size() > 8) return Bad("tensor '" + tl.name + "' shape missing or over 8 dims");
    uint64_t n = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) {
        const std::string v = d.dump(-1, ' ', true);
        return Bad("tensor '" + tl.name + "' shape has " + (v.size() > 32 ? v.substr(0, 32) + "..." : v) +
                   ", not a size (an integer >= 0)");
      }
      tl.shape.push_back(d.get<uint64_t>());
      if (MulOverflows(n, tl.shape.back(), &n)) return Bad("tensor '" + tl.name + "' shape overflows");
    }
    RY_RETURN_IF_ERROR(GetU64(t, "offset", 0, m.recordBytes, &tl.offset));
    RY_RETURN_IF_ERROR(GetU64(t, "bytes", 0, m.recordBytes, &tl.bytes));
    uint64_t want = 0;
    if (MulOverflows(n, es, &want) || want != tl.bytes) {
      return Bad("tensor '" + tl.name + "' bytes " + std::to_string(tl.bytes) + " != shape x dtype size");
    }
    if (tl.offset % m.alignment != 0) return Bad("tensor '" + tl.name + "' offset is not a multiple of alignment");
    if (tl.offset < end) return Bad("tensor '" + tl.name + "' overlaps the one before it (offsets must increase)");
    if (tl.bytes > m.recordBytes - tl.offset) return Bad("tensor '" + tl.name + "' ends past record_bytes");
    end = tl.offset + tl.bytes;
    m.tensors.push_back(std::move(tl));
  }
  if (end != m.recordBytes) return Bad("record_bytes " + std::to_string(m.recordBytes) + " != end of the last tensor " + std::to_string(end));

  auto ls = j.find("layers");
  if (ls == j.end() || !ls->is_array() || ls->empty() || ls->size() > kMaxLayers) {
    return Bad("field 'layers' missing, empty or over " + std::to_string(kMaxLayers) + " entries");
  }
  std::set<uint64_t> layerNumbers;
  std::set<std::string> files;
  for (const json& l : *ls) {
    if (!l.is_object()) return Bad("a layers entry is not an object");
    LayerEntry le;
    RY_RETURN_IF_ERROR(GetU64(l, "layer", 0, 1u << 20, &le.layer));
    RY_RETURN_IF_ERROR(GetString(l, "file", 255, &le.file));
    if (!ValidFileName(le.file)) return Bad("layer " + std::to_string(le.layer) + " file name '" + le.file + "' is not a plain file name");
    if (!layerNumbers.insert(le.layer).second) return Bad("layer " + std::to_string(le.layer) + " listed twice");
    if (!files.insert(le.file).second) return Bad("file '" + le.file + "' used by two layers");
    auto cs = l.find("checksums");
    if (cs == l.end() || !cs->is_array() || cs->size() != m.expertsPerLayer) {
      return Bad("layer " + std::to_string(le.layer) + " has no checksums array of experts_per_layer entries");
    }
    for (const json& c : *cs) {
      uint64_t v = 0;
      if (!c.is_string() || !ParseHex64(c.get<std::string>(), &v)) return Bad("layer " + std::to_string(le.layer) + " has a checksum that is not 16 lower-case hex digits");
      le.checksums.push_back(v);
    }
    m.layers.push_back(std::move(le));
  }
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace railyard::expert
