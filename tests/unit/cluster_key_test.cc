// The cluster key: loading a key file (refusing unsafe or short ones) and its
// HMAC-SHA256, checked against values computed independently (Python's hmac).
#include "topology/cluster_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace railyard::topology {
namespace {

constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";  // 32 bytes

std::string Hex(const ClusterMac& m) {
  std::string s;
  char b[3];
  for (unsigned char c : m) {
    std::snprintf(b, sizeof b, "%02x", c);
    s += b;
  }
  return s;
}

/// A key file in a fresh temporary directory, removed at the end of the test.
class KeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/railyard-key-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/cluster.key";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  void Write(const std::string& content, mode_t mode) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << content;
    ASSERT_EQ(chmod(path_.c_str(), mode), 0);
  }
  std::string dir_, path_;
};

TEST(ClusterKey, MacMatchesAnIndependentHmacSha256) {
  std::shared_ptr<const ClusterKey> k;
  ASSERT_TRUE(ClusterKey::FromSecret(kSecret, &k).ok());
  ClusterMac m;
  const std::string msg = "hello cable";
  ASSERT_TRUE(k->Mac("railyard.test", msg.data(), msg.size(), &m));
  // python3: hmac.new(key, b'railyard.test\x00hello cable', hashlib.sha256).hexdigest()
  EXPECT_EQ(Hex(m), "6863e0bce3e74e1e14c51d62989482a654924d90a93901e1428b093f080a6ed0");
  EXPECT_EQ(k->Fingerprint(), "bd3c027a");
}

TEST(ClusterKey, VerifyRefusesAnotherPurposeAFlippedBitAndAnotherKey) {
  std::shared_ptr<const ClusterKey> k, other;
  ASSERT_TRUE(ClusterKey::FromSecret(kSecret, &k).ok());
  ASSERT_TRUE(ClusterKey::FromSecret(std::string(kSecret) + "!", &other).ok());
  std::string msg = "link-state record";
  ClusterMac m;
  ASSERT_TRUE(k->Mac("railyard.a", msg.data(), msg.size(), &m));
  EXPECT_TRUE(k->Verify("railyard.a", msg.data(), msg.size(), m.data()));
  EXPECT_FALSE(k->Verify("railyard.b", msg.data(), msg.size(), m.data()));
  EXPECT_FALSE(other->Verify("railyard.a", msg.data(), msg.size(), m.data()));
  msg[3] ^= 1;
  EXPECT_FALSE(k->Verify("railyard.a", msg.data(), msg.size(), m.data()));
  msg[3] ^= 1;
  m[31] ^= 0x80;
  EXPECT_FALSE(k->Verify("railyard.a", msg.data(), msg.size(), m.data()));
}

TEST(ClusterKey, ShortSecretIsRefused) {
  std::shared_ptr<const ClusterKey> k;
  const Status s = ClusterKey::FromSecret(std::string(31, 'x'), &k);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("too short"), std::string::npos) << s.message();
  EXPECT_EQ(k, nullptr);
}

TEST_F(KeyFile, LoadsAPrivateFileAndDropsTheTrailingNewline) {
  Write(std::string(kSecret) + "\n", 0600);
  std::shared_ptr<const ClusterKey> k;
  ASSERT_TRUE(ClusterKey::Load(path_, &k).ok());
  EXPECT_EQ(k->Fingerprint(), "bd3c027a");  // the same secret as FromSecret(kSecret)
}

TEST_F(KeyFile, GroupReadableIsAccepted) {
  Write(kSecret, 0640);
  std::shared_ptr<const ClusterKey> k;
  EXPECT_TRUE(ClusterKey::Load(path_, &k).ok());
}

TEST_F(KeyFile, WorldReadableIsRefusedNamingTheModeAndTheVariable) {
  Write(kSecret, 0644);
  std::shared_ptr<const ClusterKey> k;
  const Status s = ClusterKey::Load(path_, &k);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("mode 644 lets every user read it; chmod 600"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("RAILYARD_CLUSTER_KEY_FILE"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  EXPECT_EQ(k, nullptr);
}

TEST_F(KeyFile, TheRefusalNamesExactlyWhatTheOtherBitsAllow) {
  for (const auto& [mode, text] : {std::pair<mode_t, const char*>{0602, "mode 602 lets every user change it;"},
                                   {0666, "mode 666 lets every user read and change it;"},
                                   {0601, "mode 601 lets every user execute it;"},
                                   {0607, "mode 607 lets every user read, change and execute it;"}}) {
    Write(kSecret, mode);
    std::shared_ptr<const ClusterKey> k;
    const Status s = ClusterKey::Load(path_, &k);
    EXPECT_EQ(s.code(), Code::kInvalidUsage);
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  }
}

TEST_F(KeyFile, ShortFileIsRefused) {
  Write("0123456789abcdef0123456789abcde\n", 0600);  // 31 bytes and a newline
  std::shared_ptr<const ClusterKey> k;
  const Status s = ClusterKey::Load(path_, &k);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("31 bytes (32 read, trailing whitespace dropped) is too short"),
            std::string::npos)
      << s.message();
  // Without trailing whitespace the count is the file's own.
  Write("0123456789abcdef", 0600);
  EXPECT_NE(ClusterKey::Load(path_, &k).message().find("16 bytes is too short (at least 32"), std::string::npos);
}

TEST_F(KeyFile, MissingFileAndDirectoryAreRefused) {
  std::shared_ptr<const ClusterKey> k;
  EXPECT_NE(ClusterKey::Load(path_, &k).message().find("cannot open"), std::string::npos);
  EXPECT_NE(ClusterKey::Load(dir_, &k).message().find("not a regular file"), std::string::npos);
}

TEST(ClusterKey, EmptyPathMeansNoKey) {
  std::shared_ptr<const ClusterKey> k;
  ASSERT_TRUE(ClusterKey::FromSecret(kSecret, &k).ok());
  EXPECT_TRUE(LoadClusterKey("", &k).ok());
  EXPECT_EQ(k, nullptr);
}

}  // namespace
}  // namespace railyard::topology
