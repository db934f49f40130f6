// Shared helpers of the expert-tier tests: a deterministic store, loopback TCP
// fabric Domains, verbs Domains on the soft-RoCE lane's devices, and a temporary
// directory.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>

#include "env/config.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "tests/common/lane_verbs_domain.h"
#include "storage/expert/manifest.h"
#include "storage/expert/store_writer.h"

namespace railyard::expert::testing {

/// A fresh directory under /tmp, removed on destruction.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/railyard-expert-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Byte `i` of record (layer index, expert): a pattern no two records share.
inline uint8_t PatternByte(size_t layer, uint64_t expert, uint64_t i) {
  uint64_t x = (layer + 1) * 0x9e3779b97f4a7c15ull ^ (expert + 1) * 0xbf58476d1ce4e5b9ull ^ (i / 8) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x >> (8 * (i % 8)));
}

/// A manifest of `layers` layers x `experts` experts with two BF16 tensors of
/// `elems` elements each (alignment 256).
inline Manifest SmallManifest(size_t layers, uint64_t experts, uint64_t elems) {
  Manifest m;
  m.modelId = "test/tiny-moe";
  m.scheme = "qwen-moe";
  m.expertsPerLayer = experts;
  m.alignment = 256;
  const uint64_t bytes = elems * 2;
  const uint64_t second = (bytes + 255) / 256 * 256;
  m.tensors = {{"gate_proj.weight", "BF16", {elems}, 0, bytes}, {"down_proj.weight", "BF16", {elems}, second, bytes}};
  m.recordBytes = second + bytes;
  m.recordStride = (m.recordBytes + 255) / 256 * 256;
  for (size_t l = 0; l < layers; ++l) m.layers.push_back({2 * l + 1, "", {}});
  return m;
}

/// Writes SmallManifest's store with PatternByte records (tensor bytes only; padding 0).
inline Status WritePatternStore(const std::string& dir, const Manifest& m) {
  return WriteStore(dir, m, [&m](size_t l, uint64_t e, char* dst) {
    for (const TensorLayout& t : m.tensors) {
      for (uint64_t i = 0; i < t.bytes; ++i) dst[t.offset + i] = static_cast<char>(PatternByte(l, e, t.offset + i));
    }
    return Status::Ok();
  });
}

/// The record as WritePatternStore wrote it.
inline std::string ExpectedRecord(const Manifest& m, size_t l, uint64_t e) {
  std::string r(m.recordStride, '\0');
  for (const TensorLayout& t : m.tensors) {
    for (uint64_t i = 0; i < t.bytes; ++i) r[t.offset + i] = static_cast<char>(PatternByte(l, e, t.offset + i));
  }
  return r;
}

/// A TCP fabric Domain on 127.0.0.1 (and 127.0.0.2 with `twoRails`).
inline Status LoopbackDomain(bool twoRails, int timeoutMs, std::unique_ptr<fabric::Domain>* out) {
  fabric::tcp::TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  if (twoRails) o.rails.push_back({"lo", "127.0.0.2", 10000});
  o.timeoutMs = timeoutMs;
  return fabric::tcp::CreateTcpDomain(o, out);
}

/// A verbs fabric Domain for lane host `host` (0: the peer, 1: the client), RAILYARD_*
/// defaults otherwise: tests/common/lane_verbs_domain.h.
inline Status VerbsDomain(int host, int timeoutMs, std::unique_ptr<fabric::Domain>* out) {
  return railyard::test_support::LaneVerbsDomain(host, timeoutMs, railyard::test_support::LaneEnv::kDefaults, out);
}

}  // namespace railyard::expert::testing
