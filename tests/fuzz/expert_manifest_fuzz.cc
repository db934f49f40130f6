// Fuzz target `expert_manifest`: the expert store's manifest loader
// (storage/expert/manifest.h, Manifest::Parse), which reads a store's
// manifest.json and the manifest a peer sends on connect, on the whole input.
// Invariants: a refusal has a message, one of the manifest error names
// (MANIFEST_TRUNCATED, MANIFEST_VERSION, MANIFEST_INVALID) and leaves the output
// untouched; an accepted manifest is self-consistent (tensors in order inside
// record_bytes <= record_stride, a power-of-two alignment, E checksums per layer,
// plain file names) and survives ToJson -> Parse -> ToJson unchanged (ToJson does
// not throw on anything Parse accepted).
#include <string>
#include <string_view>

#include "storage/expert/expert_error.h"
#include "storage/expert/manifest.h"
#include "tests/fuzz/fuzz_target.h"

namespace e = railyard::expert;

namespace {

e::Manifest Sentinel() {
  e::Manifest m;
  m.modelId = "sentinel";
  m.expertsPerLayer = 1;
  m.recordStride = 64;
  m.recordBytes = 2;
  m.alignment = 64;
  m.tensors.push_back({"w", "BF16", {1}, 0, 2});
  m.layers.push_back({0, "layer-0000.bin", {0x1234}});
  return m;
}

}  // namespace

RAILYARD_FUZZ_TARGET(ExpertManifest) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  e::Manifest out = Sentinel();
  const std::string before = out.ToJson();
  const railyard::Status s = e::Manifest::Parse(text, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    const e::ExpertErrc errc = e::ExpertErrcOf(s);
    FUZZ_CHECK(errc == e::ExpertErrc::kManifestTruncated || errc == e::ExpertErrc::kManifestVersion ||
               errc == e::ExpertErrc::kManifestInvalid);
    FUZZ_CHECK(out.ToJson() == before);
    return false;
  }
  FUZZ_CHECK(out.alignment > 0 && (out.alignment & (out.alignment - 1)) == 0);
  FUZZ_CHECK(out.recordBytes >= 1 && out.recordBytes <= out.recordStride && out.recordStride % out.alignment == 0);
  FUZZ_CHECK(!out.tensors.empty() && out.tensors.size() <= e::kMaxTensorsPerRecord);
  uint64_t end = 0;
  for (const e::TensorLayout& t : out.tensors) {
    FUZZ_CHECK(t.offset >= end && t.offset % out.alignment == 0 && t.bytes <= out.recordBytes - t.offset);
    FUZZ_CHECK(e::DtypeBytes(t.dtype) > 0);
    end = t.offset + t.bytes;
  }
  FUZZ_CHECK(end == out.recordBytes);
  FUZZ_CHECK(!out.layers.empty() && out.layers.size() <= e::kMaxLayers);
  for (const e::LayerEntry& l : out.layers) {
    FUZZ_CHECK(l.checksums.size() == out.expertsPerLayer);
    FUZZ_CHECK(!l.file.empty() && l.file.find('/') == std::string::npos && l.file.find('\0') == std::string::npos);
    FUZZ_CHECK(l.file != "." && l.file != "..");
  }
  const std::string json = out.ToJson();
  e::Manifest back;
  FUZZ_CHECK(e::Manifest::Parse(json, &back).ok());
  FUZZ_CHECK(back.ToJson() == json);
  return true;
}
