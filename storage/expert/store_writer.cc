#include "storage/expert/store_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "storage/expert/expert_error.h"
#include "storage/expert/store.h"

namespace railyard::expert {
namespace {

Status WriteAll(int fd, const char* p, uint64_t bytes, const std::string& path) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ExpertError(ExpertErrc::kSystem, "write " + path + ": " + std::strerror(errno));
    p += n;
    bytes -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

/// Writes `bytes` of `p` at `*at` of `fd`, leaving every 4 KiB block of zeros at a
/// 4 KiB-aligned offset unwritten (a hole, read back as zeros once the file is
/// extended to its size), and advances `*at`. New-user trial: --align 64M padded 96-byte
/// records into 768 MiB of written zeros.
Status WriteSparse(int fd, const char* p, uint64_t bytes, uint64_t* at, const std::string& path) {
  constexpr uint64_t kBlock = 4096;
  static const char kZeros[kBlock] = {};
  uint64_t i = 0;
  while (i < bytes) {
    const uint64_t blockEnd = std::min(bytes, (*at + i) / kBlock * kBlock + kBlock - *at);
    const uint64_t n = blockEnd - i;
    const bool hole = n == kBlock && std::memcmp(p + i, kZeros, kBlock) == 0;
    if (!hole) {
      uint64_t done = 0;
      while (done < n) {
        const ssize_t w = ::pwrite(fd, p + i + done, n - done, static_cast<off_t>(*at + i + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ExpertError(ExpertErrc::kSystem, "write " + path + ": " + std::strerror(errno));
        done += static_cast<uint64_t>(w);
      }
    }
    i = blockEnd;
  }
  *at += bytes;
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::function<Status(int fd)>& body) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ExpertError(ExpertErrc::kSystem, "create " + path + ": " + std::strerror(errno));
  Status s = body(fd);
  if (s.ok() && ::fsync(fd) != 0) s = ExpertError(ExpertErrc::kSystem, "fsync " + path + ": " + std::strerror(errno));
  ::close(fd);
  return s;
}

}  // namespace

std::string PartialDirOf(const std::string& dir) {
  char host[256] = "host";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "host");
  for (char* c = host; *c != '\0'; ++c) {
    if (*c == '/' || *c == '-') *c = '_';  // one path component; the pid comes after the last '-'
  }
  return dir + ".partial-" + host + "-" + std::to_string(::getpid());
}

Status WriteStore(const std::string& dir, Manifest m, const RecordFiller& fill, const ProgressFn& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec)) return ExpertError(ExpertErrc::kInvalidArgument, "output " + dir + " already exists");
  const std::string tmp = PartialDirOf(dir);
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec)) return ExpertError(ExpertErrc::kSystem, "mkdir " + tmp + ": " + ec.message());
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  const uint64_t total = m.layers.size() * m.expertsPerLayer;
  uint64_t done = 0;
  std::vector<char> rec(m.recordStride);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerEntry& l = m.layers[i];
    if (l.file.empty()) {
      char name[32];
      std::snprintf(name, sizeof name, "layer-%04llu.bin", static_cast<unsigned long long>(l.layer));
      l.file = name;
    }
    l.checksums.assign(m.expertsPerLayer, 0);
    const std::string path = tmp + "/" + l.file;
    Status s = WriteFile(path, [&](int fd) -> Status {
      uint64_t at = 0;
      for (uint64_t e = 0; e < m.expertsPerLayer; ++e) {
        std::memset(rec.data(), 0, rec.size());
        RY_RETURN_IF_ERROR(fill(i, e, rec.data()));
        l.checksums[e] = RecordChecksum(rec.data(), rec.size());
        RY_RETURN_IF_ERROR(WriteSparse(fd, rec.data(), rec.size(), &at, path));
        ++done;
        if (progress) progress(done, total);
      }
      // A trailing hole is the file's size, not a write.
      if (::ftruncate(fd, static_cast<off_t>(at)) != 0) {
        return ExpertError(ExpertErrc::kSystem, "truncate " + path + ": " + std::strerror(errno));
      }
      return Status::Ok();
    });
    if (!s.ok()) return fail(s);
  }
  const std::string json = m.ToJson();
  // Round-trip check: what we write must be what the loader accepts.
  Manifest check;
  if (Status s = Manifest::Parse(json, &check); !s.ok()) return fail(s);
  if (Status s = WriteFile(tmp + "/" + kManifestFile, [&](int fd) { return WriteAll(fd, json.data(), json.size(), kManifestFile); }); !s.ok()) {
    return fail(s);
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) {
    return fail(ExpertError(ExpertErrc::kSystem, "rename " + tmp + " -> " + dir + ": " + std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace railyard::expert
