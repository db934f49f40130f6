// The store format and its validating loader: manifests too large, truncated, of
// another version or inconsistent with their files each end in their named error.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <gtest/gtest.h>

#include "storage/expert/expert_error.h"
#include "storage/expert/store.h"
#include "tests/expert/expert_test_util.h"

namespace railyard::expert {
namespace {

using testing::SmallManifest;
using testing::TempDir;

ExpertErrc ParseErrc(const std::string& json) {
  Manifest m;
  return ExpertErrcOf(Manifest::Parse(json, &m));
}

TEST(ExpertManifest, RoundTripsThroughJson) {
  Manifest m = SmallManifest(3, 5, 100);
  for (auto& l : m.layers) {
    l.file = "f" + std::to_string(l.layer);
    l.checksums.assign(5, 0x0123456789abcdefull);
  }
  Manifest back;
  ASSERT_TRUE(Manifest::Parse(m.ToJson(), &back).ok());
  EXPECT_EQ(back.expertsPerLayer, 5u);
  EXPECT_EQ(back.recordStride, m.recordStride);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[1].offset, 256u);
  EXPECT_EQ(back.tensors[1].shape, std::vector<uint64_t>{100});
  ASSERT_EQ(back.layers.size(), 3u);
  EXPECT_EQ(back.layers[2].layer, 5u);
  EXPECT_EQ(back.layers[2].checksums[4], 0x0123456789abcdefull);
}

TEST(ExpertManifest, NamedErrorsForBadManifests) {
  Manifest m = SmallManifest(2, 4, 64);
  for (auto& l : m.layers) {
    l.file = "f" + std::to_string(l.layer);
    l.checksums.assign(4, 1);
  }
  const std::string good = m.ToJson();
  EXPECT_EQ(ParseErrc(good), ExpertErrc::kOk);
  EXPECT_EQ(ParseErrc(good.substr(0, good.size() / 2)), ExpertErrc::kManifestTruncated);
  EXPECT_EQ(ParseErrc(std::string(kMaxManifestBytes + 1, ' ')), ExpertErrc::kManifestTooLarge);
  std::string v2 = good;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  EXPECT_EQ(ParseErrc(v2), ExpertErrc::kManifestVersion);
  EXPECT_EQ(ParseErrc("{\"format\": \"something-else\", \"version\": 1}"), ExpertErrc::kManifestVersion);
  EXPECT_EQ(ParseErrc("[1, 2]"), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(ParseErrc("{\"format\": }"), ExpertErrc::kManifestInvalid);

  auto mutate = [&](auto fn) {
    Manifest x = m;
    fn(x);
    return ParseErrc(x.ToJson());
  };
  EXPECT_EQ(mutate([](Manifest& x) { x.layers[1].file = "../etc/passwd"; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.layers[1].file = x.layers[0].file; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.layers[1].layer = x.layers[0].layer; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.layers[0].checksums.pop_back(); }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.tensors[1].offset = 64; }), ExpertErrc::kManifestInvalid);   // overlaps + misaligned
  EXPECT_EQ(mutate([](Manifest& x) { x.tensors[1].bytes += 2; }), ExpertErrc::kManifestInvalid);    // != shape x dtype
  EXPECT_EQ(mutate([](Manifest& x) { x.tensors[0].dtype = "Q4"; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.recordStride = x.recordBytes - 2; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.expertsPerLayer = 0; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.alignment = 96; }), ExpertErrc::kManifestInvalid);
  // A terminal escape sequence, a bell or a NUL in any string never reaches a log.
  EXPECT_EQ(mutate([](Manifest& x) { x.modelId = "\x1b[2J\x1b[31mPWNED\x07"; }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.modelId = std::string("cut\0here", 8); }), ExpertErrc::kManifestInvalid);
  EXPECT_EQ(mutate([](Manifest& x) { x.tensors[0].name = "w\x7f"; }), ExpertErrc::kManifestInvalid);
  Manifest bad = m;
  bad.modelId = "a\x1b[31m";
  Manifest out;
  const Status s = Manifest::Parse(bad.ToJson(), &out);
  EXPECT_NE(s.message().find("field 'model_id' holds a control character (0x1b at byte 1)"), std::string::npos)
      << s.message();
}

TEST(ExpertManifest, MutatedManifestsNeverCrashAndAlwaysNameTheirError) {
  Manifest m = SmallManifest(3, 4, 64);
  for (auto& l : m.layers) {
    l.file = "f" + std::to_string(l.layer);
    l.checksums.assign(4, 7);
  }
  const std::string good = m.ToJson();
  uint64_t x = 12345, accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t = good;
    for (int k = 0; k < 1 + i % 4; ++k) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      t[(x >> 33) % t.size()] = static_cast<char>(x >> 17);
    }
    if (i % 7 == 0) t.resize((x >> 40) % t.size());
    Manifest out;
    Status s = Manifest::Parse(t, &out);
    if (s.ok()) {
      ++accepted;  // a mutation that kept it valid must still be self-consistent
      EXPECT_EQ(out.tensors.back().offset + out.tensors.back().bytes, out.recordBytes);
    } else {
      EXPECT_NE(ExpertErrcOf(s), ExpertErrc::kSystem) << s.message();
      EXPECT_EQ(s.message().rfind("expert ", 0), 0u) << s.message();
    }
  }
  EXPECT_LT(accepted, 3000u);
}

TEST(ExpertStore, WrittenStoreOpensAndReadsBack) {
  TempDir tmp;
  const std::string dir = tmp.path + "/store";
  const Manifest m = SmallManifest(2, 3, 300);
  ASSERT_TRUE(testing::WritePatternStore(dir, m).ok());
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir, /*verifyChecksums=*/true, &store);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(store->TotalBytes(), 2 * 3 * m.recordStride);
  std::string rec(m.recordStride, '\0');
  for (size_t l = 0; l < 2; ++l) {
    for (uint64_t e = 0; e < 3; ++e) {
      ASSERT_TRUE(store->ReadRecord(l, e, rec.data()).ok());
      EXPECT_EQ(rec, testing::ExpectedRecord(m, l, e));
    }
  }
  EXPECT_EQ(ExpertErrcOf(store->ReadRecord(2, 0, rec.data())), ExpertErrc::kOutOfRange);
  EXPECT_EQ(ExpertErrcOf(store->ReadRecord(0, 3, rec.data())), ExpertErrc::kOutOfRange);
  // Writing over an existing store is refused; nothing partial is left beside it.
  EXPECT_EQ(ExpertErrcOf(testing::WritePatternStore(dir, m)), ExpertErrc::kInvalidArgument);
}

// A directory with no manifest (a typo, or the checkpoint given instead of the store):
// the error says it is not an expert store and what builds one (new-user trial).
TEST(ExpertStore, ADirectoryWithoutAManifestIsNamedNotAStore) {
  TempDir tmp;
  std::unique_ptr<Store> store;
  const Status s = Store::Open(tmp.path, false, &store);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kSystem) << s.message();
  EXPECT_NE(s.message().find("cannot open " + tmp.path + "/manifest.json: No such file or directory"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(" + tmp.path + " is not an expert store: railyard-pack builds one)"), std::string::npos)
      << s.message();
  EXPECT_EQ(store, nullptr);  // A file given for the store (the checkpoint itself, say) is named a file.
  const std::string file = tmp.path + "/model.safetensors";
  std::ofstream(file) << "x";
  const Status f = Store::Open(file, false, &store);
  EXPECT_EQ(ExpertErrcOf(f), ExpertErrc::kSystem) << f.message();
  EXPECT_EQ(f.message().rfind("expert SYSTEM: " + file + " is a file, not an expert store directory", 0), 0u)
      << f.message();
  EXPECT_EQ(store, nullptr);
}

TEST(ExpertStore, FilesInconsistentWithTheManifestAreRefused) {
  TempDir tmp;
  const std::string dir = tmp.path + "/store";
  const Manifest m = SmallManifest(2, 3, 300);
  ASSERT_TRUE(testing::WritePatternStore(dir, m).ok());
  std::unique_ptr<Store> store;
  // A layer file one byte short.
  ASSERT_EQ(::truncate((dir + "/layer-0003.bin").c_str(), static_cast<off_t>(3 * m.recordStride - 1)), 0);
  Status s = Store::Open(dir, false, &store);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreInconsistent) << s.message();
  EXPECT_NE(s.message().find("layer-0003.bin"), std::string::npos) << s.message();
  // The right size, wrong bytes: caught by the checksum pass.
  ASSERT_EQ(::truncate((dir + "/layer-0003.bin").c_str(), static_cast<off_t>(3 * m.recordStride)), 0);
  {
    std::fstream f(dir + "/layer-0003.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.write("\xff\xfe", 2);
  }
  EXPECT_TRUE(Store::Open(dir, false, &store).ok());
  s = Store::Open(dir, true, &store);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreInconsistent) << s.message();
  // A missing layer file.
  ASSERT_EQ(::unlink((dir + "/layer-0001.bin").c_str()), 0);
  EXPECT_EQ(ExpertErrcOf(Store::Open(dir, false, &store)), ExpertErrc::kStoreInconsistent);
  // A manifest over the cap is refused before it is read.
  ASSERT_EQ(::truncate((dir + "/manifest.json").c_str(), static_cast<off_t>(kMaxManifestBytes + 1)), 0);
  EXPECT_EQ(ExpertErrcOf(Store::Open(dir, false, &store)), ExpertErrc::kManifestTooLarge);
}

// A manifest that is a number too large for a double ("8E711", what the fuzz target
// expert_manifest found) threw out_of_range.406 past the parse_error handler: a
// peer's manifest ended the client in std::terminate. Now MANIFEST_INVALID.
TEST(ExpertManifest, OverflowingNumberIsInvalidNotFatal) {
  Manifest m;
  const Status s = Manifest::Parse("8E711", &m);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kManifestInvalid) << s.message();
  const Status t = Manifest::Parse("{\"format\": \"railyard-expert-store\", \"version\": 1E999}", &m);
  EXPECT_EQ(ExpertErrcOf(t), ExpertErrc::kManifestInvalid) << t.message();
}

}  // namespace
}  // namespace railyard::expert
