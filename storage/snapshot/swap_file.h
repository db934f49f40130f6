// The paging arena's swap file: fixed-size records of one blob each, in
// RAILYARD_SWAP_DIR/railyard-snapshot-<kind>.swap.
//
// Layout: a 4096-byte file header (magic "RYSF", version, blob bytes, kind), then
// records of stride() bytes: a 4096-byte record header (magic "RYSR", version, key,
// generation, blob bytes, XXH3-64 of the payload, XXH3-64 of the header fields)
// followed by the payload, padded to 4096. A record's space is reserved with
// fallocate before any byte is written, so a full disk fails the write cleanly
// (ENOSPC) and leaves every other record intact. With `sync`, each write and
// tombstone is followed by fdatasync, and Open rebuilds the index from the records
// (highest generation per key wins; a record whose header or payload checksum does
// not match -- a torn write -- is dropped and its space reused). Without `sync`,
// Open starts an empty file; so does a sync Open of a file only cache-only arenas kept
// (the file header's durable flag says whether a sync arena ever owned it).
//
// Threads: Read and Write of different records may run at once, with each other and
// with one of the calls below (the paging arena faults and commits outside its lock);
// Allocate, Free and Tombstone must be serialised (the arena calls them under its lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "storage/snapshot/blob_checksum.h"

namespace railyard::storage::snapshot {

/// One record found by Open's rebuild.
struct SwapRecord {
  uint64_t key = 0;
  uint64_t generation = 0;
  uint64_t checksum = 0;  ///< XXH3-64 of the payload
  int64_t slot = 0;       ///< record index
};

/// What Open's rebuild saw.
struct SwapRebuild {
  std::vector<SwapRecord> records;  ///< live records, one per key
  uint64_t torn = 0;                ///< records dropped for a bad checksum, or cut short at the file's end
  /// The keys of the torn records whose header was intact (a torn payload), in file
  /// order, at most kMaxTornKeys of them; a torn header names no key to trust.
  std::vector<uint64_t> tornKeys;
  static constexpr size_t kMaxTornKeys = 64;
  uint64_t superseded = 0;          ///< older generations of a key, dropped and erased on disk
  /// A sync Open found a file only cache-only arenas (RAILYARD_SWAP_SYNC=0) had kept and
  /// started it empty: such an arena frees records without tombstoning them, so its
  /// removed and replaced blobs would come back.
  bool cacheOnlyDiscarded = false;
};

/// See file comment.
class SwapFile {
 public:
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  /// Opens (creating `dir` entries as needed) the swap file of `kind`.
  /// InvalidUsage when `dir` is empty or not a directory, or when another open SwapFile
  /// (any process: an exclusive flock held until the owner closes) has this file: then
  /// nothing in it is read or changed. SystemError on I/O errors.
  /// With `sync` and an existing file of the same blob bytes that a sync arena kept,
  /// fills `*rebuild`; a file of another blob size or version is refused (InvalidUsage
  /// naming both); so is, by either kind of start, a file of at least a page whose header
  /// is not a swap file's, and a symbolic link; a version-2 file only cache-only arenas kept (no durable flag) starts
  /// empty (cacheOnlyDiscarded). Without `sync`, a file a sync arena kept, or one of
  /// another version (version 1 cannot say), is refused (InvalidUsage), never emptied.
  static Status Open(const std::string& dir, const std::string& kind, uint64_t blobBytes, bool sync,
                     std::unique_ptr<SwapFile>* out, SwapRebuild* rebuild);

  /// A free record slot (reused or past the end). Never fails; Write reports a full disk.
  int64_t Allocate();
  /// Returns a slot to the free list (its bytes stay until reused).
  void Free(int64_t slot);
  /// Writes `blobBytes` of `data` as record `slot`. SystemError naming the path and
  /// "swap disk full" for ENOSPC/EDQUOT; nothing else in the file changes then.
  /// `touched` (optional) is set once a byte may have reached the record (after the
  /// reservation): a failure before that (a full disk) left the record as it was.
  Status Write(int64_t slot, uint64_t key, uint64_t generation, const void* data, uint64_t checksum,
               bool* touched = nullptr);
  /// Reads record `slot`'s payload into `data` in pieces (a quarter of the blob, 256 KiB
  /// to 4 MiB, the header page with the first), each hashed as it lands: a piece with
  /// O_DIRECT when none of its pages is in the page cache (mincore(2): asking reads
  /// nothing), `data` is page-aligned and the blob a whole number of pages of at most
  /// 16 MiB, else through the page cache (whose pages of the record are then dropped).
  /// `landed` (optional) is called after each piece but
  /// the last with the bytes read so far, before they are checked: a caller may start
  /// moving them on, but they count only once Read returns Ok. Checks it against `checksum`
  /// (and the record header against `key`). RemoteError-free: SystemError on I/O,
  /// InternalError "torn or overwritten" on a mismatch.
  Status Read(int64_t slot, uint64_t key, uint64_t checksum, void* data,
              const std::function<void(uint64_t bytesLanded)>& landed = {});
  /// Zeroes record `slot`'s header (with sync: durably), so a rebuild never serves it.
  Status Tombstone(int64_t slot);

  /// Records read whole so far (their checksum then checked, torn ones included; a Read
  /// that failed on I/O or a header mismatch is not counted): with O_DIRECT only, or with
  /// at least one piece through the page cache (pages cached, O_DIRECT refused, an
  /// unaligned buffer, a blob that is not a whole number of pages or above 16 MiB, or
  /// the cache's contents unknown).
  uint64_t directReads() const { return directReads_.load(std::memory_order_relaxed); }
  uint64_t bufferedReads() const { return bufferedReads_.load(std::memory_order_relaxed); }

  uint64_t stride() const { return stride_; }
  const std::string& path() const { return path_; }
  bool sync() const { return sync_; }

 private:
  SwapFile(std::string path, int fd, uint64_t blobBytes, bool sync);
  uint64_t OffsetOf(int64_t slot) const { return 4096 + static_cast<uint64_t>(slot) * stride_; }

  std::string path_;
  int fd_ = -1;
  int directFd_ = -1;           ///< O_RDONLY | O_DIRECT for faults, or -1 (see Open)
  std::atomic<bool> directRefused_{false};  ///< the file system refused O_DIRECT: buffered reads
  std::atomic<uint64_t> directReads_{0};    ///< see directReads()
  std::atomic<uint64_t> bufferedReads_{0};  ///< see bufferedReads()
  uint64_t blobBytes_ = 0;
  uint64_t stride_ = 0;
  bool sync_ = false;
  int64_t end_ = 0;  ///< slots [0, end_) exist
  std::vector<int64_t> free_;
};

}  // namespace railyard::storage::snapshot
