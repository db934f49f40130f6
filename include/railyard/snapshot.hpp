// A C++ wrapper over the snapshot tier's C API (railyard_snapshot_* in
// railyard/railyard.h): one owning, move-only object per arena connection; every
// failure throws railyard::SnapshotError carrying the code and the message.
// Header-only, C++14 or later (std::exchange); link libnccl-net-railyard.so as for the C API.
//
//   railyard::Snapshot kv("10.0.0.2", 7070, "kv", RAILYARD_SNAPSHOT_PAGING, 64 << 20, 1 << 20);
//   kv.Put(42, blob.data(), blob.size());
//   bool found = kv.Get(42, out.data(), out.size());
//   for (const railyard_snapshot_arena_t& a : railyard::ListSnapshotArenas("10.0.0.2", 7070)) ...
#ifndef RAILYARD_SNAPSHOT_HPP_
#define RAILYARD_SNAPSHOT_HPP_

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "railyard/railyard.h"

namespace railyard {

/// A failed railyard_snapshot_* call: code() is its return value (an ncclResult_t).
class SnapshotError : public std::runtime_error {
 public:
  SnapshotError(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

/// One connection to an arena (see railyard_snapshot_connect). Calls from several
/// threads are safe, one at a time, as the C API's (a lock serialises them); moving or
/// destroying the object while another thread calls it is not.
class Snapshot {
 public:
  /// Connects; throws SnapshotError (e.g. code 5 when the peer's arena differs).
  Snapshot(const std::string& host, unsigned short port, const std::string& kind, int mode,
           unsigned long long arenaBytes, unsigned long long blobBytes) {
    Check(railyard_snapshot_connect(host.c_str(), port, kind.c_str(), mode, arenaBytes, blobBytes, &h_));
  }
  Snapshot(Snapshot&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Snapshot& operator=(Snapshot&& o) noexcept {
    if (this != &o) {
      railyard_snapshot_close(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  ~Snapshot() { railyard_snapshot_close(h_); }

  /// Paging mode: stores one blob under `key`.
  void Put(unsigned long long key, const void* data, unsigned long long bytes) {
    Check(railyard_snapshot_put(h_, key, data, bytes));
  }
  /// Paging mode: fetches `key`; false when the peer does not hold it.
  bool Get(unsigned long long key, void* buf, unsigned long long bytes) {
    int found = 0;
    Check(railyard_snapshot_get(h_, key, buf, bytes, &found));
    return found != 0;
  }
  /// Paging mode: stores every blob of `blobs`, two in flight (railyard_snapshot_put_batch:
  /// blobs of different keys may be stored out of order); each blob's `result` says what
  /// became of it. Throws
  /// SnapshotError with the first failing blob's code and message.
  void PutBatch(std::vector<railyard_snapshot_blob_t>& blobs) {
    Check(railyard_snapshot_put_batch(h_, blobs.data(), blobs.size()));
  }
  /// Paging mode: fetches every blob of `blobs` (railyard_snapshot_get_batch);
  /// each blob's `found` says whether the peer held it. Throws as PutBatch.
  void GetBatch(std::vector<railyard_snapshot_blob_t>& blobs) {
    Check(railyard_snapshot_get_batch(h_, blobs.data(), blobs.size()));
  }
  /// Paging mode: forgets `key`; false when it was not there.
  bool Remove(unsigned long long key) {
    int found = 0;
    Check(railyard_snapshot_remove(h_, key, &found));
    return found != 0;
  }
  /// Raw mode: one whole blob at `offset`.
  void WriteAt(unsigned long long offset, const void* data, unsigned long long bytes) {
    Check(railyard_snapshot_write_at(h_, offset, data, bytes));
  }
  void ReadAt(unsigned long long offset, void* buf, unsigned long long bytes) {
    Check(railyard_snapshot_read_at(h_, offset, buf, bytes));
  }
  /// Registers host memory for copy-free puts and gets (railyard_snapshot_register).
  void Register(void* buf, unsigned long long bytes) { Check(railyard_snapshot_register(h_, buf, bytes)); }
  /// Releases a Register (railyard_snapshot_deregister).
  void Deregister(void* buf) { Check(railyard_snapshot_deregister(h_, buf)); }

 private:
  static void Check(int rc) {
    if (rc != 0) throw SnapshotError(rc, railyard_snapshot_last_error());
  }
  railyard_snapshot_t* h_ = nullptr;
};

/// The arenas (kinds of blob) the peer at `host` : `port` serves, in the peer's order
/// (railyard_snapshot_list, asked again with more room while the peer reports more
/// than fitted, at most twice). Throws SnapshotError with the C API's code: 2 on network errors, 5
/// when the peer refuses (older than discovery), 6 for a bad list.
inline std::vector<railyard_snapshot_arena_t> ListSnapshotArenas(const std::string& host, unsigned short port) {
  std::vector<railyard_snapshot_arena_t> out(8);
  for (int tries = 0;; ++tries) {
    int count = 0;
    const int rc = railyard_snapshot_list(host.c_str(), port, out.data(), static_cast<int>(out.size()), &count);
    if (rc != 0) throw SnapshotError(rc, railyard_snapshot_last_error());
    if (count < 0) throw SnapshotError(6, "railyard_snapshot_list: negative count");
    if (static_cast<size_t>(count) <= out.size()) {
      out.resize(static_cast<size_t>(count));
      return out;
    }
    if (tries == 2) throw SnapshotError(6, "railyard_snapshot_list: the peer's arena count kept growing");
    out.resize(static_cast<size_t>(count));  // the peer holds more: ask again with room for all
  }
}

}  // namespace railyard

#endif  // RAILYARD_SNAPSHOT_HPP_
