#include "topology/cluster_key.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace railyard::topology {

namespace {

constexpr const char* kVariable = "RAILYARD_CLUSTER_KEY_FILE";

Status Bad(const std::string& path, const std::string& why) {
  return InvalidUsage("cluster key " + path + " (" + kVariable + "): " + why);
}

}  // namespace

Status ClusterKey::FromSecret(std::string_view secret, std::shared_ptr<const ClusterKey>* out) {
  if (secret.size() < kMinBytes) {
    return InvalidUsage("cluster key: " + std::to_string(secret.size()) + " bytes is too short (at least " +
                        std::to_string(kMinBytes) + "; e.g. openssl rand -hex 32)");
  }
  if (secret.size() > kMaxBytes) {
    return InvalidUsage("cluster key: " + std::to_string(secret.size()) + " bytes is too long (at most " +
                        std::to_string(kMaxBytes) + ")");
  }
  std::shared_ptr<ClusterKey> k(new ClusterKey());
  k->secret_.assign(secret.data(), secret.size());
  *out = std::move(k);
  return Status::Ok();
}

Status ClusterKey::Load(const std::string& path, std::shared_ptr<const ClusterKey>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Bad(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Bad(path, std::string("fstat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Bad(path, "not a regular file");
  }
  if ((st.st_mode & 0007) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    // Name exactly what the "other" bits allow: 644 lets them read, not change, the key.
    std::vector<std::string> verbs;
    for (const auto& [bit, verb] : {std::pair<unsigned, const char*>{04, "read"}, {02, "change"}, {01, "execute"}}) {
      if ((st.st_mode & bit) != 0) verbs.emplace_back(verb);
    }
    std::string what = verbs[0];
    for (size_t i = 1; i < verbs.size(); ++i) what += (i + 1 == verbs.size() ? " and " : ", ") + verbs[i];
    return Bad(path, std::string("mode ") + mode + " lets every user " + what +
                         " it; chmod 600 (or 640 for a group) first");
  }
  if (st.st_size > static_cast<off_t>(kMaxBytes)) {
    ::close(fd);
    return Bad(path, std::to_string(st.st_size) + " bytes is too long for a key (at most " +
                         std::to_string(kMaxBytes) + ")");
  }
  std::string secret(kMaxBytes + 1, '\0');
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd, secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      OPENSSL_cleanse(secret.data(), secret.size());
      return Bad(path, std::string("read: ") + std::strerror(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  const size_t read = got;
  while (got > 0 && (secret[got - 1] == '\n' || secret[got - 1] == '\r' || secret[got - 1] == ' ' ||
                     secret[got - 1] == '\t')) {
    --got;
  }
  Status s;
  if (got < kMinBytes) {
    const std::string stripped =
        read != got ? " (" + std::to_string(read) + " read, trailing whitespace dropped)" : std::string();
    s = Bad(path, std::to_string(got) + " bytes" + stripped + " is too short (at least " + std::to_string(kMinBytes) +
                      "; e.g. openssl rand -hex 32 > " + path + ")");
  } else if (got > kMaxBytes) {
    s = Bad(path, "too long for a key (at most " + std::to_string(kMaxBytes) + " bytes)");
  } else {
    s = FromSecret(std::string_view(secret.data(), got), out);
  }
  OPENSSL_cleanse(secret.data(), secret.size());
  return s;
}

ClusterKey::~ClusterKey() {
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
}

bool ClusterKey::Mac(std::string_view purpose, const void* data, std::size_t bytes, ClusterMac* out) const {
  out->fill(0);
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return false;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  bool ok = ctx != nullptr;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  const unsigned char zero = 0;
  size_t len = 0;
  ok = ok &&
       EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(secret_.data()), secret_.size(), params) == 1 &&
       EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size()) == 1 &&
       EVP_MAC_update(ctx, &zero, 1) == 1 &&
       (bytes == 0 || EVP_MAC_update(ctx, static_cast<const unsigned char*>(data), bytes) == 1) &&
       EVP_MAC_final(ctx, out->data(), &len, out->size()) == 1 && len == out->size();
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  if (!ok) out->fill(0);
  return ok;
}

bool ClusterKey::Verify(std::string_view purpose, const void* data, std::size_t bytes,
                        const unsigned char* mac) const {
  ClusterMac want;
  if (!Mac(purpose, data, bytes, &want)) return false;
  return CRYPTO_memcmp(want.data(), mac, want.size()) == 0;
}

std::string ClusterKey::Fingerprint() const {
  ClusterMac m;
  if (!Mac("railyard.key.id", nullptr, 0, &m)) return "????????";
  char buf[9];
  std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x", m[0], m[1], m[2], m[3]);
  return buf;
}

Status LoadClusterKey(const std::string& path, std::shared_ptr<const ClusterKey>* out) {
  out->reset();
  if (path.empty()) return Status::Ok();
  return ClusterKey::Load(path, out);
}

}  // namespace railyard::topology
