#include "storage/expert/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "storage/expert/expert_error.h"

namespace railyard::expert {
namespace {

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Status ReadSmallFile(const std::string& path, uint64_t maxBytes, int tooLargeErrc, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ExpertError(ExpertErrc::kSystem, Errno("cannot open " + path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return ExpertError(ExpertErrc::kSystem, path + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > maxBytes) {
    ::close(fd);
    return ExpertError(static_cast<ExpertErrc>(tooLargeErrc), path + " has " + std::to_string(st.st_size) +
                                                                  " bytes (at most " + std::to_string(maxBytes) + ")");
  }
  std::string s(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::pread(fd, s.data() + got, s.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  s.resize(got);
  *out = std::move(s);
  return Status::Ok();
}

Store::~Store() {
  for (int fd : fds_) ::close(fd);
}

Status Store::Open(const std::string& dir, bool verifyChecksums, std::unique_ptr<Store>* out) {
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  if (Status st = ReadSmallFile(dir + "/" + kManifestFile, kMaxManifestBytes,
                               static_cast<int>(ExpertErrc::kManifestTooLarge), &s->manifestText_);
      !st.ok()) {
    struct stat ms {};
    if (::stat(dir.c_str(), &ms) == 0 && !S_ISDIR(ms.st_mode)) {
      // A file given for the store (a checkpoint, say): "manifest.json: Not a directory"
      // said nothing of what is wanted (new-user trial).
      return ExpertError(ExpertErrc::kSystem, dir + " is a file, not an expert store directory (railyard-pack "
                                              "CHECKPOINT OUT builds one from a checkpoint)");
    }
    if (::stat((dir + "/" + kManifestFile).c_str(), &ms) == 0 || errno != ENOENT) return st;
    // A directory without a manifest: say what it is not, and what makes one.
    return Status(st.code(), st.message() + " (" + dir + " is not an expert store: railyard-pack builds one)");
  }
  RY_RETURN_IF_ERROR(Manifest::Parse(s->manifestText_, &s->manifest_));
  const Manifest& m = s->manifest_;
  for (const LayerEntry& l : m.layers) {
    const std::string path = dir + "/" + l.file;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ExpertError(ExpertErrc::kStoreInconsistent, Errno("layer " + std::to_string(l.layer) + " file " + path));
    s->fds_.push_back(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      return ExpertError(ExpertErrc::kStoreInconsistent, path + " is not a regular file");
    }
    if (static_cast<uint64_t>(st.st_size) != m.LayerFileBytes()) {
      return ExpertError(ExpertErrc::kStoreInconsistent,
                         path + " has " + std::to_string(st.st_size) + " bytes; the manifest says " +
                             std::to_string(m.expertsPerLayer) + " experts x " + std::to_string(m.recordStride) +
                             " = " + std::to_string(m.LayerFileBytes()));
    }
    s->ids_.push_back({st.st_dev, st.st_ino, st.st_size, MtimeNs(st)});
  }
  if (verifyChecksums) {
    std::vector<char> buf(m.recordStride);
    for (size_t i = 0; i < m.layers.size(); ++i) {
      for (uint64_t e = 0; e < m.expertsPerLayer; ++e) {
        RY_RETURN_IF_ERROR(s->ReadRecord(i, e, buf.data()));
        if (RecordChecksum(buf.data(), buf.size()) != m.layers[i].checksums[e]) {
          return ExpertError(ExpertErrc::kStoreInconsistent, "layer " + std::to_string(m.layers[i].layer) + " expert " +
                                                                 std::to_string(e) + " does not match its checksum");
        }
      }
    }
  }
  *out = std::move(s);
  return Status::Ok();
}

Status Store::CheckLayer(size_t i) const {
  if (i >= fds_.size()) return ExpertError(ExpertErrc::kOutOfRange, "layer index " + std::to_string(i));
  struct stat st {};
  const std::string path = dir_ + "/" + manifest_.layers[i].file;
  // stat the path (a file replaced by rename shows a new inode) and fstat the fd
  // (a file truncated or rewritten in place shows a new size or mtime).
  struct stat fst {};
  if (::stat(path.c_str(), &st) != 0 || ::fstat(fds_[i], &fst) != 0) {
    return ExpertError(ExpertErrc::kStoreChanged, Errno(path + " cannot be stat'ed"));
  }
  const Identity& id = ids_[i];
  // Name what changed (new-user trial: an in-place write of the same size was reported
  // as "size 49152 -> 49152").
  std::string what;
  auto add = [&what](const std::string& part) { what += (what.empty() ? "" : ", ") + part; };
  if (st.st_ino != id.ino || st.st_dev != id.dev) add("replaced by another file");
  if (fst.st_size != id.size) add("size " + std::to_string(id.size) + " -> " + std::to_string(fst.st_size));
  if (MtimeNs(fst) != id.mtimeNs) add("modified in place (mtime changed)");
  if (!what.empty()) {
    return ExpertError(ExpertErrc::kStoreChanged, path + " changed since the store was opened (" + what +
                                                      "): restart the peer to serve the store as it is now");
  }
  return Status::Ok();
}

Status Store::ReadRecord(size_t i, uint64_t expert, void* dst) const {
  if (i >= fds_.size() || expert >= manifest_.expertsPerLayer) {
    return ExpertError(ExpertErrc::kOutOfRange, "layer index " + std::to_string(i) + " expert " + std::to_string(expert) +
                                                    " (store has " + std::to_string(fds_.size()) + " layers x " +
                                                    std::to_string(manifest_.expertsPerLayer) + " experts)");
  }
  RY_RETURN_IF_ERROR(CheckLayer(i));
  const uint64_t stride = manifest_.recordStride;
  uint64_t got = 0;
  while (got < stride) {
    const ssize_t n = ::pread(fds_[i], static_cast<char*>(dst) + got, stride - got,
                              static_cast<off_t>(expert * stride + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ExpertError(ExpertErrc::kSystem, Errno("pread of " + manifest_.layers[i].file));
    if (n == 0) return ExpertError(ExpertErrc::kStoreChanged, manifest_.layers[i].file + " ended early (truncated)");
    got += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

}  // namespace railyard::expert
