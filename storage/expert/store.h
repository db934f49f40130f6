// A store directory opened for serving: manifest.json validated, every layer file
// opened and checked against it (size), with the identity (size, mtime, inode) of
// each file remembered so that a store changed under the peer is noticed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "storage/expert/manifest.h"

namespace railyard::expert {

/// Name of the manifest inside a store directory.
inline constexpr const char* kManifestFile = "manifest.json";

/// An open store. Thread-safe for reads (pread, Check).
class Store {
 public:
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Opens `dir`: reads manifest.json (MANIFEST_TOO_LARGE before reading a file over
  /// kMaxManifestBytes; the Manifest::Parse errors), opens every layer file (read only)
  /// and checks its size is experts x stride (STORE_INCONSISTENT naming the file).
  /// With `verifyChecksums`, also reads every record and compares its XXH3-64
  /// (STORE_INCONSISTENT naming layer and expert).
  static Status Open(const std::string& dir, bool verifyChecksums, std::unique_ptr<Store>* out);

  const Manifest& manifest() const { return manifest_; }
  /// The manifest bytes exactly as read (what the peer sends on connect).
  const std::string& manifestText() const { return manifestText_; }
  const std::string& dir() const { return dir_; }
  /// Total bytes of all layer files.
  uint64_t TotalBytes() const { return manifest_.LayerFileBytes() * manifest_.layers.size(); }
  /// Read-only file descriptor of layer index `i` (0-based index into manifest().layers).
  int LayerFd(size_t i) const { return fds_[i]; }

  /// STORE_CHANGED when layer file `i` no longer has the size, mtime or inode it had
  /// at Open (or cannot be stat'ed).
  Status CheckLayer(size_t i) const;
  /// pread of record (layer index `i`, `expert`) into `dst` (stride bytes).
  /// OUT_OF_RANGE for an index outside the store; STORE_CHANGED (CheckLayer, or a
  /// short read); SYSTEM for a failed pread.
  Status ReadRecord(size_t i, uint64_t expert, void* dst) const;

 private:
  Store() = default;
  struct Identity {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtimeNs = 0;
  };
  std::string dir_;
  std::string manifestText_;
  Manifest manifest_;
  std::vector<int> fds_;
  std::vector<Identity> ids_;
};

/// Reads a whole small file (manifest, index) with a size cap: `tooLarge` as the
/// error cause when the file is over `maxBytes`; SYSTEM when it cannot be read.
Status ReadSmallFile(const std::string& path, uint64_t maxBytes, int tooLargeErrc, std::string* out);

}  // namespace railyard::expert
