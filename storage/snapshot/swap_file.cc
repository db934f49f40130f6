#include "storage/snapshot/swap_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "env/log.h"
#include "storage/checksum/xxh3.h"
#include "proxy/socket.h"

namespace railyard::storage::snapshot {
namespace {

constexpr uint32_t kFileMagic = 0x46535952;    // "RYSF"
constexpr uint32_t kRecordMagic = 0x52535952;  // "RYSR"
/// 3: a record's payload checksum is the blob checksum of blob_checksum.h (XXH3-64 of
/// its 256 KiB leaves' XXH3-64s), 2 had the XXH3-64 of the whole payload; 2: checksums
/// are XXH3-64 (1 had XXH64). A file of another version is refused, naming both.
constexpr uint16_t kSwapVersion = 3;
constexpr uint64_t kPage = 4096;
/// A fault reads a record in pieces, hashing and announcing each as it lands, so the
/// caller moves one piece on while the next comes off the disk: a quarter of the blob,
/// at least kMinReadPieceBytes and at most kMaxReadPieceBytes, in whole pages. With
/// four pieces only the last one's transfer is left after the disk read. On this VM's
/// disk O_DIRECT reads of 256 KiB ran at 1.50-1.63 GB/s against 1.64-1.91 with 1 MiB
/// (cold, medians of 60; 2026-12-07), so smaller pieces would cost the disk more.
constexpr uint64_t kMinReadPieceBytes = 256ull << 10;
constexpr uint64_t kMaxReadPieceBytes = 4ull << 20;
/// Records of up to this many payload bytes are faulted with O_DIRECT, straight into
/// the slot: on this VM's disk a 1 MiB record took 0.5-1.1 ms so against 1.0-2.5 ms
/// through the page cache (whose 128 KiB readahead window takes it in steps), and
/// 16 MiB about the same either way. Larger ones go through the page cache, whose
/// readahead keeps several requests in flight where O_DIRECT pieces go one at a time
/// (64 MiB: 37-44 ms against 42-56 ms). Medians of 24 cold reads, in three sittings,
/// 2026-12-06 (docs/architecture.md, swap file).
constexpr uint64_t kDirectReadMaxBytes = 16ull << 20;

struct FileHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;  ///< kFileDurable
  uint64_t blobBytes;
  char kind[32];
};
/// FileHeader::flags: an arena with RAILYARD_SWAP_SYNC=1 has owned the file, so it may
/// hold committed blobs that were promised to survive a restart.
constexpr uint16_t kFileDurable = 1;

struct RecordHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint64_t key;
  uint64_t generation;
  uint64_t bytes;
  uint64_t checksum;        ///< payload
  uint64_t headerChecksum;  ///< of the fields above
};

uint64_t HeaderSum(const RecordHeader& h) { return ::railyard::checksum::Xxh3(&h, offsetof(RecordHeader, headerChecksum)); }

Status PreadAll(int fd, void* p, uint64_t n, uint64_t off, const std::string& path) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return SystemError("swap " + path + ": read failed: " + proxy::ErrnoText(errno));
    if (r == 0) return SystemError("swap " + path + ": short read at offset " + std::to_string(off));
    c += r;
    n -= static_cast<uint64_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

/// Moves `*iov` / `*n` past `bytes` already transferred.
void AdvanceIov(iovec** iov, int* n, size_t bytes) {
  while (*n > 0 && bytes >= (*iov)->iov_len) {
    bytes -= (*iov)->iov_len;
    ++*iov;
    --*n;
  }
  if (*n > 0) {
    (*iov)->iov_base = static_cast<char*>((*iov)->iov_base) + bytes;
    (*iov)->iov_len -= bytes;
  }
}

/// Whether any page of [off, off + len) of `fd`'s file is in the page cache, asked of
/// mincore(2) on a read-only mapping of the range, which reads nothing from the disk
/// (preadv2's RWF_NOWAIT, used before, starts a readahead of what is not cached before
/// it answers EAGAIN, so the O_DIRECT read after it read the record a second time: 1.9
/// ms for a cold 1 MiB record against 0.8 ms). The mapping starts at the system page
/// size's boundary (16 or 64 KiB on some aarch64 kernels: mmap refuses an offset that is
/// not one), so it may take in a neighbour record's pages, which can only make a piece
/// read through the cache. True when it cannot tell (a failed mmap or mincore, warned
/// once): the page cache is then always the safe way to read. (For a file the caller
/// may not write, mincore says every page is cached: the same safe answer.)
bool AnyPageCached(int fd, uint64_t off, uint64_t len, const std::string& path) {
  static const uint64_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<uint64_t>(p) : uint64_t{4096};
  }();
  const uint64_t begin = off / page * page;
  const uint64_t bytes = off + len - begin;
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(begin));
  int err = map == MAP_FAILED ? errno : 0;
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  if (map != MAP_FAILED) {
    if (::mincore(map, bytes, resident.data()) != 0) err = errno;
    ::munmap(map, bytes);
  }
  if (err != 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      RY_WARN("swap %s: cannot tell which pages the page cache holds (%s): faults read through the page cache, "
              "not O_DIRECT (warned once)",
              path.c_str(), proxy::ErrnoText(err).c_str());
    }
    return true;
  }
  return std::any_of(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) != 0; });
}

/// The bytes of one piece of a fault of a `blobBytes` record (see kMinReadPieceBytes).
uint64_t ReadPieceBytes(uint64_t blobBytes) {
  const uint64_t quarter = (blobBytes / 4 + 4095) / 4096 * 4096;
  return std::clamp(quarter, kMinReadPieceBytes, kMaxReadPieceBytes);
}

/// preadv until every iovec is full. SystemError on I/O errors or end of file; the
/// failing errno in *err (EINVAL: an O_DIRECT descriptor the file system refuses).
Status PreadvAll(int fd, iovec* iov, int n, uint64_t off, const std::string& path, int* err) {
  *err = 0;
  while (n > 0) {
    const ssize_t r = ::preadv(fd, iov, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *err = errno;
      return SystemError("swap " + path + ": read failed: " + proxy::ErrnoText(errno));
    }
    if (r == 0) return SystemError("swap " + path + ": short read at offset " + std::to_string(off));
    off += static_cast<uint64_t>(r);
    AdvanceIov(&iov, &n, static_cast<size_t>(r));
  }
  return Status::Ok();
}

Status WriteError(const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return SystemError("swap disk full: " + path + ": " + proxy::ErrnoText(err));
  }
  return SystemError("swap " + path + ": write failed: " + proxy::ErrnoText(err));
}

Status PwriteAll(int fd, const void* p, uint64_t n, uint64_t off, const std::string& path) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::pwrite(fd, c, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return WriteError(path, errno);
    c += r;
    n -= static_cast<uint64_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

}  // namespace


SwapFile::SwapFile(std::string path, int fd, uint64_t blobBytes, bool sync)
    : path_(std::move(path)), fd_(fd), blobBytes_(blobBytes), stride_(kPage + (blobBytes + kPage - 1) / kPage * kPage),
      sync_(sync) {}

SwapFile::~SwapFile() {
  if (fd_ >= 0) ::close(fd_);
  if (directFd_ >= 0) ::close(directFd_);
}

Status SwapFile::Open(const std::string& dir, const std::string& kind, uint64_t blobBytes, bool sync,
                      std::unique_ptr<SwapFile>* out, SwapRebuild* rebuild) {
  if (dir.empty()) return InvalidUsage("RAILYARD_SWAP_DIR is not set: a paging arena needs a swap directory");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return InvalidUsage("RAILYARD_SWAP_DIR '" + dir + "': " + proxy::ErrnoText(errno) +
                        (errno == ENOENT ? " (create it first: railyardd does not)" : ""));
  }
  if (!S_ISDIR(st.st_mode)) return InvalidUsage("RAILYARD_SWAP_DIR '" + dir + "' is not a directory");
  const std::string path = dir + "/railyard-snapshot-" + kind + ".swap";
  // O_NOFOLLOW: a symlink there is not followed to a file that Open might truncate
  // (new-user trial).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == ELOOP) {
    return InvalidUsage("swap " + path + " is a symbolic link: the swap file must be a plain file in RAILYARD_SWAP_DIR "
                        "(nothing was touched)");
  }
  if (fd < 0) return SystemError("swap " + path + ": open failed: " + proxy::ErrnoText(errno));
  // One owner per swap file: a second arena of the same kind (another railyardd on the
  // same RAILYARD_SWAP_DIR, or a second arena in this process) is refused here, before
  // anything is read, truncated or rebuilt, so it can never wipe the owner's blobs.
  // flock: held by this open file description until the SwapFile closes it.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      return InvalidUsage("swap " + path + " is in use by another arena (another railyardd on this RAILYARD_SWAP_DIR, "
                          "or a second '" + kind + "' arena; `fuser " + path + "` names the process): nothing was touched");
    }
    return SystemError("swap " + path + ": lock failed: " + proxy::ErrnoText(e));
  }
  std::unique_ptr<SwapFile> f(new SwapFile(path, fd, blobBytes, sync));
  // Faults read a record with O_DIRECT where the blob allows it (a whole number of pages,
  // into page-aligned slots, at most kDirectReadMaxBytes): header and payload straight
  // into the arena, no page-cache copy, no readahead window between the disk and the
  // slot. A file system without O_DIRECT (tmpfs) keeps the buffered descriptor.
  if (blobBytes % kPage == 0 && blobBytes <= kDirectReadMaxBytes) {
    f->directFd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  }
  *rebuild = SwapRebuild{};
  FileHeader fh{};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  // One decision over the existing file's header, for either kind of start: a file of
  // another version is never emptied (version 1 had no durable flag, so who kept it
  // cannot be told); a cache-only start empties only a file no sync arena kept; a sync
  // start rebuilds a sync arena's file and empties a cache-only one, whose freed records
  // were never tombstoned (a rebuild would bring removed and replaced keys back).
  bool fresh = size < static_cast<off_t>(kPage);
  if (!fresh) {
    RY_RETURN_IF_ERROR(PreadAll(fd, &fh, sizeof fh, 0, path));
    const bool durable = (fh.flags & kFileDurable) != 0;
    if (fh.magic != kFileMagic) {
      // A whole header page that is not a swap file's: another file, or a swap file
      // whose header was damaged (which may hold committed blobs). Never emptied
      // (new-user trial: a sync file with 4 bytes overwritten lost every blob silently).
      // A fresh start that crashed before its header leaves less than a page.
      return InvalidUsage("swap " + path + " is " + std::to_string(size) + " bytes whose first page is not a " +
                          "Railyard swap file header (another file, or a damaged one that may hold committed " +
                          "blobs): move it away to start empty (nothing was touched)");
    } else if (fh.version == 2 && !durable) {
      // Version 2 (the whole payload's XXH3-64) says whether a sync arena kept it: a
      // cache-only one holds nothing durable and is emptied by either start, as one of
      // this version would be (review: every default arena refused to start after the
      // format change until its file was moved away).
      fresh = true;
      rebuild->cacheOnlyDiscarded = true;
    } else if (fh.version != kSwapVersion) {
      return InvalidUsage("swap " + path + " holds version " + std::to_string(fh.version) + " records (this arena " +
                          "writes version " + std::to_string(kSwapVersion) + ") and may hold committed blobs: move " +
                          "the file away to start empty (nothing was touched)");
    } else if (!sync) {
      if (durable) {
        const std::string thenSize = fh.blobBytes == blobBytes ? std::string()
                                                           : " (with blobs of " + std::to_string(fh.blobBytes) + " bytes, as then)";
        return InvalidUsage("swap " + path + " was kept by an arena with RAILYARD_SWAP_SYNC=1 and may hold committed "
                            "blobs; this one runs with RAILYARD_SWAP_SYNC=0, which starts its swap empty: set "
                            "RAILYARD_SWAP_SYNC=1" + thenSize + " to keep them, or move the file away to start empty (nothing was "
                            "touched)");
      }
      fresh = true;
    } else if (!durable) {
      // A cache-only file holds nothing durable, whatever its blob size (new-user trial:
      // a sync start with another blob size was refused over a file it empties anyway).
      fresh = true;
      rebuild->cacheOnlyDiscarded = true;
    } else if (fh.blobBytes != blobBytes) {
      // The header's blob size against its first record's, whose header is checksummed:
      // a file header damaged there would send the user to an arena size nobody had
      // (new-user trial: 2 bytes overwritten read "blobs of 4294939616 bytes").
      RecordHeader first{};
      if (size >= static_cast<off_t>(kPage + sizeof first) && PreadAll(fd, &first, sizeof first, kPage, path).ok() &&
          first.magic == kRecordMagic && first.headerChecksum == HeaderSum(first) && first.bytes != fh.blobBytes) {
        return InvalidUsage("swap " + path + " has a damaged header: it says blobs of " + std::to_string(fh.blobBytes) +
                            " bytes, its first record holds one of " + std::to_string(first.bytes) +
                            "; it was kept by an arena with RAILYARD_SWAP_SYNC=1 and may hold committed blobs: move "
                            "it away to start empty (nothing was touched)");
      }
      return InvalidUsage("swap " + path + " was kept by an arena with RAILYARD_SWAP_SYNC=1 and holds blobs of " +
                          std::to_string(fh.blobBytes) + " bytes, which may be committed; this arena wants blobs of " +
                          std::to_string(blobBytes) + " bytes: give it the same blob size to keep them, or move the " +
                          "file away to start empty (nothing was touched)");
    }
  }
  if (fresh) {
    if (::ftruncate(fd, 0) != 0) return SystemError("swap " + path + ": truncate failed: " + proxy::ErrnoText(errno));
    // With sync, the truncation is durable before a durable header is: a crash between
    // them must not leave that header over the old records.
    if (sync && ::fsync(fd) != 0) return WriteError(path, errno);
    std::vector<uint8_t> page(kPage, 0);
    fh = FileHeader{kFileMagic, kSwapVersion, static_cast<uint16_t>(sync ? kFileDurable : 0), blobBytes, {}};
    std::memcpy(fh.kind, kind.data(), std::min(kind.size(), sizeof fh.kind - 1));
    std::memcpy(page.data(), &fh, sizeof fh);
    RY_RETURN_IF_ERROR(PwriteAll(fd, page.data(), kPage, 0, path));
    if (sync && ::fdatasync(fd) != 0) return WriteError(path, errno);
    if (sync) {
      // The file's directory entry is durable too: a file just created, its records
      // acknowledged as durable, must not vanish with a power loss (review).
      const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd < 0) return SystemError("swap directory " + dir + ": open failed: " + proxy::ErrnoText(errno));
      const int rc = ::fsync(dfd);
      const int e = errno;
      ::close(dfd);
      if (rc != 0) return SystemError("swap directory " + dir + ": fsync failed: " + proxy::ErrnoText(e));
    }
    *out = std::move(f);
    return Status::Ok();
  }
  // Rebuild: every whole record; the newest valid generation of each key wins.
  const int64_t slots = (size - static_cast<off_t>(kPage)) / static_cast<off_t>(f->stride_);
  // A record cut short at the end of the file (a truncated file) is a torn one, counted
  // and logged as such (new-user trial: its blobs went missing without a word); its
  // slot is rewritten whole by the next record past the end.
  if ((size - static_cast<off_t>(kPage)) % static_cast<off_t>(f->stride_) != 0) ++rebuild->torn;
  std::map<uint64_t, SwapRecord> best;
  std::vector<uint8_t> payload(blobBytes);
  std::vector<int64_t> freeSlots, superseded;
  for (int64_t s = 0; s < slots; ++s) {
    RecordHeader h{};
    RY_RETURN_IF_ERROR(PreadAll(fd, &h, sizeof h, f->OffsetOf(s), path));
    if (h.magic != kRecordMagic) {  // never written or tombstoned
      freeSlots.push_back(s);
      continue;
    }
    const bool headerOk = h.version == kSwapVersion && h.bytes == blobBytes && h.headerChecksum == HeaderSum(h);
    bool ok = headerOk;
    if (ok) {
      RY_RETURN_IF_ERROR(PreadAll(fd, payload.data(), blobBytes, f->OffsetOf(s) + kPage, path));
      ok = BlobChecksum(payload.data(), blobBytes) == h.checksum;
    }
    if (!ok) {
      ++rebuild->torn;
      if (headerOk && rebuild->tornKeys.size() < SwapRebuild::kMaxTornKeys) rebuild->tornKeys.push_back(h.key);
      freeSlots.push_back(s);
      continue;
    }
    auto [it, inserted] = best.try_emplace(h.key, SwapRecord{h.key, h.generation, h.checksum, s});
    if (!inserted) {
      ++rebuild->superseded;
      if (h.generation > it->second.generation) {
        superseded.push_back(it->second.slot);
        it->second = SwapRecord{h.key, h.generation, h.checksum, s};
      } else {
        superseded.push_back(s);
      }
    }
  }
  // An older generation of a key left whole by a crash (between a replacing commit's
  // write and its erasing of the old record) is erased before its space is reused:
  // freed as it was, it would outlive a later remove of the key and bring the old
  // bytes back at the next restart (review). One fdatasync for all of them.
  for (int64_t s : superseded) {
    RecordHeader zero{};
    RY_RETURN_IF_ERROR(PwriteAll(fd, &zero, sizeof zero, f->OffsetOf(s), path));
    freeSlots.push_back(s);
  }
  if (!superseded.empty() && ::fdatasync(fd) != 0) return WriteError(path, errno);
  f->end_ = slots;
  f->free_ = std::move(freeSlots);
  for (auto& [k, r] : best) rebuild->records.push_back(r);
  *out = std::move(f);
  return Status::Ok();
}

int64_t SwapFile::Allocate() {
  if (!free_.empty()) {
    const int64_t s = free_.back();
    free_.pop_back();
    return s;
  }
  return end_++;
}

void SwapFile::Free(int64_t slot) { free_.push_back(slot); }

Status SwapFile::Write(int64_t slot, uint64_t key, uint64_t generation, const void* data, uint64_t checksum,
                       bool* touched) {
  const uint64_t off = OffsetOf(slot);
  // Reserve the record's blocks first: a full disk fails here, before a byte is written.
  if (int err = ::posix_fallocate(fd_, static_cast<off_t>(off), static_cast<off_t>(stride_)); err != 0) {
    if (err != EOPNOTSUPP && err != EINVAL) return WriteError(path_, err);
  }
  RecordHeader h{kRecordMagic, kSwapVersion, 0, key, generation, blobBytes_, checksum, 0};
  h.headerChecksum = HeaderSum(h);
  if (touched != nullptr) *touched = true;
  // Payload first, header after: a crash in between leaves the old header (or none),
  // and a rebuild checks the payload against the header's checksum anyway.
  RY_RETURN_IF_ERROR(PwriteAll(fd_, data, blobBytes_, off + kPage, path_));
  RY_RETURN_IF_ERROR(PwriteAll(fd_, &h, sizeof h, off, path_));
  if (sync_ && ::fdatasync(fd_) != 0) return WriteError(path_, errno);
  return Status::Ok();
}

Status SwapFile::Read(int64_t slot, uint64_t key, uint64_t checksum, void* data,
                      const std::function<void(uint64_t)>& landed) {
  auto* out = static_cast<uint8_t*>(data);
  // A piece goes O_DIRECT straight into `data` when none of its pages is in the page
  // cache. What is there (evicted moments ago, its write maybe not yet on disk) is read
  // from there: an O_DIRECT read of dirty pages would first write them back, seconds on
  // a busy disk (CI: a relayed get timed out so at 2 s). Asked piece by piece, just
  // before each is read: a buffered piece's readahead may have brought the next in, and
  // one cached page sends only its own piece through the cache.
  bool direct = directFd_ >= 0 && !directRefused_.load(std::memory_order_relaxed) &&
                reinterpret_cast<uintptr_t>(data) % kPage == 0 && blobBytes_ <= kDirectReadMaxBytes;
  bool anyBuffered = !direct;
  const uint64_t piece = ReadPieceBytes(blobBytes_);
  // This read's own header page (page-aligned for O_DIRECT): reads may run at once.
  void* page = nullptr;
  if (::posix_memalign(&page, kPage, kPage) != 0) return SystemError("swap " + path_ + ": out of memory");
  std::unique_ptr<void, decltype(&std::free)> ownPage(page, &std::free);
  LeafChecksum hash(out, blobBytes_);
  // The record in pieces, the header page with the first, each hashed while it is
  // still in cache and announced to `landed`.
  for (uint64_t done = 0; done < blobBytes_;) {
    const uint64_t take = std::min(piece, blobBytes_ - done);
    iovec iov[2] = {{page, kPage}, {out + done, take}};
    const bool first = done == 0;
    const uint64_t off = OffsetOf(slot) + (first ? 0 : kPage + done);
    iovec* v = first ? &iov[0] : &iov[1];
    int nv = first ? 2 : 1;
    int err = 0;
    const bool pieceDirect = direct && !AnyPageCached(fd_, off, (first ? kPage : 0) + take, path_);
    anyBuffered |= !pieceDirect;
    Status st = PreadvAll(pieceDirect ? directFd_ : fd_, v, nv, off, path_, &err);
    if (!st.ok() && pieceDirect && err == EINVAL) {
      // The file system refused O_DIRECT after all (or a short direct read left an
      // unaligned rest): this piece again, buffered, and every later one. The pieces
      // before it stay hashed and announced.
      directRefused_.store(true, std::memory_order_relaxed);
      direct = false;
      continue;
    }
    RY_RETURN_IF_ERROR(st);
    if (first) {
      RecordHeader h{};
      std::memcpy(&h, page, sizeof h);
      if (h.magic != kRecordMagic || h.key != key || h.checksum != checksum || h.headerChecksum != HeaderSum(h)) {
        return InternalError("swap " + path_ + ": record " + std::to_string(slot) + " of key " + std::to_string(key) +
                             " is torn or overwritten (header does not match)");
      }
    }
    hash.Landed(done, take);
    done += take;
    if (landed && done < blobBytes_) landed(done);
  }
  (anyBuffered ? bufferedReads_ : directReads_).fetch_add(1, std::memory_order_relaxed);
  // A buffered read leaves the record in the page cache, where the arena slot already
  // holds it: give those pages back.
  if (anyBuffered) ::posix_fadvise(fd_, static_cast<off_t>(OffsetOf(slot)), static_cast<off_t>(stride_), POSIX_FADV_DONTNEED);
  if (hash.Digest() != checksum) {
    return InternalError("swap " + path_ + ": record " + std::to_string(slot) + " of key " + std::to_string(key) +
                         " is torn (payload checksum does not match)");
  }
  return Status::Ok();
}

Status SwapFile::Tombstone(int64_t slot) {
  if (slot >= end_) return Status::Ok();
  RecordHeader zero{};
  RY_RETURN_IF_ERROR(PwriteAll(fd_, &zero, sizeof zero, OffsetOf(slot), path_));
  if (sync_ && ::fdatasync(fd_) != 0) return WriteError(path_, errno);
  return Status::Ok();
}

}  // namespace railyard::storage::snapshot
