// The cluster's shared secret: one key file, the same on every host, that
// authenticates what hosts tell each other (cabling hellos and link-state records,
// relay records). Without a key nothing is authenticated and every host on a rail
// is trusted (README "Trust").
//
// MAC: HMAC-SHA256 (RFC 2104 with FIPS 180-4 SHA-256, computed by OpenSSL) over a
// purpose label, a 0 byte and the message, so a MAC made for one kind of message
// never verifies as another ("railyard.cabling.hello" vs "railyard.relay.record").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "env/status.h"

namespace railyard::topology {

/// An HMAC-SHA256 tag: 32 bytes.
using ClusterMac = std::array<unsigned char, 32>;

/// A loaded cluster key. Immutable and thread-safe once loaded; the secret is
/// wiped from memory when the object is destroyed.
class ClusterKey {
 public:
  /// Fewest secret bytes accepted (256 bits: `openssl rand -hex 32` writes 64).
  static constexpr std::size_t kMinBytes = 32;
  /// Most bytes a key file may hold (a larger file is not a key).
  static constexpr std::size_t kMaxBytes = 4096;

  /// Reads the key file at `path`. The secret is the file's bytes less trailing
  /// whitespace (so `openssl rand -hex 32 > key` works). Errors (InvalidUsage, the
  /// message names the path and the variable RAILYARD_CLUSTER_KEY_FILE):
  /// the file cannot be opened or is not a regular file; it is readable or
  /// writable by others (mode & 0007: "chmod 600 or 640"); the secret is shorter
  /// than kMinBytes or the file is longer than kMaxBytes.
  static Status Load(const std::string& path, std::shared_ptr<const ClusterKey>* out);

  /// A key from secret bytes (tests, or a key taken from a daemon configuration).
  /// InvalidUsage when shorter than kMinBytes or longer than kMaxBytes.
  static Status FromSecret(std::string_view secret, std::shared_ptr<const ClusterKey>* out);

  ~ClusterKey();
  ClusterKey(const ClusterKey&) = delete;
  ClusterKey& operator=(const ClusterKey&) = delete;

  /// HMAC-SHA256 of (purpose, 0x00, data[0..bytes)). False only when OpenSSL fails
  /// (out of memory); *out is then zero.
  bool Mac(std::string_view purpose, const void* data, std::size_t bytes, ClusterMac* out) const;

  /// True when `mac` (32 bytes) is the MAC of (purpose, data). Compares in constant
  /// time (CRYPTO_memcmp). False when OpenSSL fails.
  bool Verify(std::string_view purpose, const void* data, std::size_t bytes,
              const unsigned char* mac) const;

  /// A short, non-secret fingerprint for logs: the first 8 hex digits of
  /// HMAC(key, "railyard.key.id"), so operators can see two hosts hold the same key.
  std::string Fingerprint() const;

 private:
  ClusterKey() = default;
  std::string secret_;
};

/// The key named by RAILYARD_CLUSTER_KEY_FILE (`path`): nullptr (Ok) when `path`
/// is empty (no authentication), else ClusterKey::Load's result.
Status LoadClusterKey(const std::string& path, std::shared_ptr<const ClusterKey>* out);

}  // namespace railyard::topology
