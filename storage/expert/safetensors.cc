#include "storage/expert/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "storage/expert/expert_error.h"
#include "storage/expert/manifest.h"
#include "storage/expert/store.h"

namespace railyard::expert {
namespace {

using nlohmann::json;

Status SafetensorsBad(const std::string& file, const std::string& what) {
  return ExpertError(ExpertErrc::kPackInput, file + ": " + what);
}

}  // namespace

Status ReadSafetensorsHeader(const std::string& path, std::vector<CheckpointTensor>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SafetensorsBad(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return SafetensorsBad(path, "not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t n = 0;
  uint8_t len[8];
  if (size < 8 || ::pread(fd, len, 8, 0) != 8) {
    ::close(fd);
    return SafetensorsBad(path, "truncated: shorter than the 8-byte header length");
  }
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > kMaxSafetensorsHeader) {
    ::close(fd);
    return SafetensorsBad(path, "header length " + std::to_string(n) + " over " + std::to_string(kMaxSafetensorsHeader) + " bytes (malformed)");
  }
  if (n > size - 8) {
    ::close(fd);
    return SafetensorsBad(path, "truncated: the header says " + std::to_string(n) + " bytes, the file has " + std::to_string(size - 8) + " after the length");
  }
  std::string text(n, '\0');
  const ssize_t got = ::pread(fd, text.data(), n, 8);
  ::close(fd);
  if (got != static_cast<ssize_t>(n)) return SafetensorsBad(path, "short read of the header");
  json j;
  // A tensor named twice: JSON parsers keep one entry, so one of the two would be
  // dropped without a word (new-user trial). Top-level keys are the tensor names.
  std::set<std::string> names;
  std::string twice;
  const json::parser_callback_t noDuplicateNames = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string() && twice.empty() &&
        !names.insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  try {
    j = json::parse(text, noDuplicateNames);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for "1E999" (was std::terminate)
    return SafetensorsBad(path, std::string("malformed header JSON: ") + e.what());
  }
  if (!j.is_object()) return SafetensorsBad(path, "header is not a JSON object");
  if (!twice.empty()) return SafetensorsBad(path, "the header names tensor '" + twice + "' twice");
  const uint64_t dataBytes = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  std::vector<std::string> spanNames;  ///< parallel to spans
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const json& t = it.value();
    const std::string& name = it.key();
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2) {
      return SafetensorsBad(path, "tensor '" + name + "' lacks dtype, shape or data_offsets [begin, end]");
    }
    CheckpointTensor ct;
    ct.name = name;
    ct.dtype = t["dtype"].get<std::string>();
    ct.file = path;
    const uint64_t es = DtypeBytes(ct.dtype);
    if (es == 0) return SafetensorsBad(path, "tensor '" + name + "' has unknown dtype '" + ct.dtype + "'");
    uint64_t elems = 1;
    for (const json& d : t["shape"]) {
      // (New-user trial: [-4, -4] was called "a non-integer".)
      if (!d.is_number_unsigned()) {
        const std::string v = d.dump(-1, ' ', true);  // ASCII, escaped; cut: it is the file's text
        return SafetensorsBad(path, "tensor '" + name + "' shape has " + (v.size() > 32 ? v.substr(0, 32) + "..." : v) +
                                        ", not a size (an integer >= 0)");
      }
      ct.shape.push_back(d.get<uint64_t>());
      if (__builtin_mul_overflow(elems, ct.shape.back(), &elems)) return SafetensorsBad(path, "tensor '" + name + "' shape overflows");
    }
    const json& off = t["data_offsets"];
    for (int k = 0; k < 2; ++k) {
      if (off[k].is_number_unsigned()) continue;
      return SafetensorsBad(path, "tensor '" + name + "' data_offsets[" + std::to_string(k) + "] is " + off[k].dump() +
                           (off[k].is_number_integer() ? " (negative)" : "") + ", not an unsigned integer");
    }
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) {
      return SafetensorsBad(path, "tensor '" + name + "' data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "]: begin after end");
    }
    if (e > dataBytes) {
      return SafetensorsBad(path, "tensor '" + name + "' data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                           "] end past the " + std::to_string(dataBytes) + "-byte data (truncated?)");
    }
    uint64_t want = 0;
    const bool overflow = __builtin_mul_overflow(elems, es, &want);
    if (overflow || want != e - b) {
      return SafetensorsBad(path, "tensor '" + name + "' holds " + std::to_string(e - b) + " bytes; shape " + t["shape"].dump() +
                           " x " + ct.dtype + " (" + std::to_string(es) + " bytes each) needs " +
                           (overflow ? std::string("2^64 or more") : std::to_string(want)));
    }
    ct.fileOffset = 8 + n + b;
    ct.bytes = e - b;
    spans.push_back({b, e});
    spanNames.push_back(name);
    out->push_back(std::move(ct));
  }
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t c) { return spans[a] < spans[c]; });
  auto spanText = [&](size_t i) {
    return "'" + spanNames[i] + "' [" + std::to_string(spans[i].first) + ", " + std::to_string(spans[i].second) + ")";
  };
  for (size_t k = 1; k < order.size(); ++k) {
    const size_t lo = order[k - 1], hi = order[k];
    if (spans[hi].first < spans[lo].second) {
      return SafetensorsBad(path, "the data of tensors " + spanText(lo) + " and " + spanText(hi) + " overlap");
    }
    if (spans[hi].first > spans[lo].second) {
      return SafetensorsBad(path, "bytes [" + std::to_string(spans[lo].second) + ", " + std::to_string(spans[hi].first) +
                                      ") of the data, between tensors " + spanText(lo) + " and " + spanText(hi) +
                                      ", belong to no tensor (the format allows no holes)");
    }
  }
  // The tensors cover the data exactly, as the safetensors format requires (its reference
  // loader refuses holes and trailing bytes: "the byte buffer needs to be entirely
  // indexed"): bytes no tensor names were packed over silently (new-user trial).
  const uint64_t first = order.empty() ? 0 : spans[order.front()].first;
  const uint64_t end = order.empty() ? 0 : spans[order.back()].second;
  if (first != 0) {
    return SafetensorsBad(path, "the data's first " + std::to_string(first) + " bytes, before tensor " +
                                    spanText(order.front()) + ", belong to no tensor (the format allows no holes)");
  }
  if (order.empty() && dataBytes > 0) {
    return SafetensorsBad(path, "names no tensor, yet " + std::to_string(dataBytes) + " data bytes follow the header "
                                "(the format allows no bytes no tensor covers)");
  }
  if (end != dataBytes) {
    return SafetensorsBad(path, std::to_string(dataBytes - end) + " bytes follow the last tensor's data (the file has " +
                                    std::to_string(dataBytes) + " data bytes, the tensors cover " + std::to_string(end) +
                                    "; the format allows no trailing bytes)");
  }
  return Status::Ok();
}

Status ReadCheckpoint(const std::string& given, std::vector<CheckpointTensor>* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A sharded checkpoint may be named by its index file too (as Hugging Face lists it):
  // its directory holds the shards.
  const bool isIndex = given.size() >= 5 && given.compare(given.size() - 5, 5, ".json") == 0 &&
                       fs::is_regular_file(given, ec);
  if (!isIndex && !fs::is_directory(given, ec)) return ReadSafetensorsHeader(given, out);
  std::string path = given;
  if (isIndex) {
    path = fs::path(given).parent_path().string();
    if (path.empty()) path = ".";
  }
  const std::string index = isIndex ? given : path + "/model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    const std::string single = path + "/model.safetensors";
    if (fs::exists(single, ec)) return ReadSafetensorsHeader(single, out);
    return SafetensorsBad(path, "a directory with neither model.safetensors.index.json nor model.safetensors");
  }
  std::string text;
  if (Status s = ReadSmallFile(index, 64ull << 20, static_cast<int>(ExpertErrc::kPackInput), &text); !s.ok()) {
    return ExpertError(ExpertErrc::kPackInput, s.message());
  }
  json j;
  // A tensor the weight_map names twice would keep one shard silently (review): refused.
  std::string top, twice;
  std::set<std::string> mapped;
  const json::parser_callback_t noDuplicateNames = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev != json::parse_event_t::key || !parsed.is_string()) return true;
    if (depth == 1) top = parsed.get<std::string>();
    if (depth == 2 && top == "weight_map" && twice.empty() && !mapped.insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  try {
    j = json::parse(text, noDuplicateNames);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for "1E999" (was std::terminate)
    return SafetensorsBad(index, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) return SafetensorsBad(index, "no \"weight_map\" object");
  if (!twice.empty()) return SafetensorsBad(index, "weight_map names tensor '" + twice + "' twice");
  std::map<std::string, std::set<std::string>> byShard;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) return SafetensorsBad(index, "weight_map['" + it.key() + "'] is not a file name");
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") return SafetensorsBad(index, "shard name '" + shard + "' is not a plain file name");
    byShard[shard].insert(it.key());
  }
  std::set<std::string> seen;
  for (const auto& [shard, names] : byShard) {
    std::vector<CheckpointTensor> ts;
    RY_RETURN_IF_ERROR(ReadSafetensorsHeader(path + "/" + shard, &ts));
    std::set<std::string> have;
    std::string unindexed;  // the first tensor of this shard that the index names nowhere
    for (CheckpointTensor& t : ts) {
      have.insert(t.name);
      if (!mapped.count(t.name) && unindexed.empty()) unindexed = t.name;
      if (!names.count(t.name)) continue;  // a tensor the index places elsewhere: not this shard's
      if (!seen.insert(t.name).second) return SafetensorsBad(index, "tensor '" + t.name + "' is in two shards");
      out->push_back(std::move(t));
    }
    for (const std::string& n : names) {
      if (!have.count(n)) return SafetensorsBad(path + "/" + shard, "lacks tensor '" + n + "' that the index places there");
    }
    if (!unindexed.empty()) {
      // (New-user trial: a tensor left out of the index was reported as an expert
      // lacking a tensor its neighbour has.)
      return SafetensorsBad(index, "leaves out tensor '" + unindexed + "', which shard " + shard +
                                       " holds: the index's weight_map must name every tensor of its shards");
    }
  }
  return Status::Ok();
}

}  // namespace railyard::expert
