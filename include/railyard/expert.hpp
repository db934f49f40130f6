// C++ wrapper of the expert tier's C API (railyard_expert_* in railyard/railyard.h):
// RAII over the handle, errors as railyard::ExpertException carrying the cause.
// Header-only; link libnccl-net-railyard.so (pkg-config railyard). C++17 or later.
//
//   std::vector<std::byte> arena(64 << 20);
//   railyard::ExpertConnection c("10.0.0.2:29431", arena.data(), arena.size());
//   c.Fetch(/*layer=*/0, /*expert=*/5, /*arena_offset=*/0);
//   c.FetchBatch({{0, 0, 1, 0}, {0, 0, 2, c.Layout().record_stride}});
#ifndef RAILYARD_EXPERT_HPP_
#define RAILYARD_EXPERT_HPP_

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "railyard/railyard.h"

namespace railyard {

/// A failed railyard_expert_* call: code() is the RAILYARD_EXPERT_E* cause, name()
/// its name ("PEER_LOST"), what() the library's sentence.
class ExpertException : public std::runtime_error {
 public:
  explicit ExpertException(int code)
      : std::runtime_error(railyard_expert_last_error()), code_(code), name_(railyard_expert_error_name(code)) {}
  int code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }

 private:
  int code_;
  std::string name_;
};

/// One open connection to an expert peer; closes politely on destruction (errors
/// from that close are dropped: call Close() to see them). Move-only, one thread at a time.
class ExpertConnection {
 public:
  /// Opens `peer` ("host:port") with records landing in [arena, arena + bytes).
  /// Throws ExpertException (e.g. ADMISSION_REFUSED, UNKNOWN_TRANSPORT, PEER_LOST).
  ExpertConnection(const std::string& peer, void* arena, uint64_t bytes,
                   int transport = RAILYARD_EXPERT_TRANSPORT_READ, bool verifyChecksums = true) {
    Check(railyard_expert_open(peer.c_str(), transport, verifyChecksums ? 1 : 0, arena, bytes, &h_));
  }
  ExpertConnection(ExpertConnection&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ExpertConnection& operator=(ExpertConnection&& o) noexcept {
    if (this != &o) {
      (void)railyard_expert_close(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ExpertConnection(const ExpertConnection&) = delete;
  ExpertConnection& operator=(const ExpertConnection&) = delete;
  ~ExpertConnection() { (void)railyard_expert_close(h_); }

  /// Layers, experts per layer, record stride and used bytes.
  railyard_expert_layout Layout() const {
    railyard_expert_layout l{};
    Check(railyard_expert_layout_get(h_, &l));
    return l;
  }
  /// The manifest JSON the peer sent.
  std::string ManifestJson() const {
    size_t needed = 0;
    (void)railyard_expert_manifest(h_, nullptr, 0, &needed);
    std::string s(needed, '\0');
    Check(railyard_expert_manifest(h_, s.data(), s.size(), &needed));
    s.resize(needed - 1);
    return s;
  }
  /// One record into the arena at arenaOffset.
  void Fetch(uint32_t layer, uint64_t expert, uint64_t arenaOffset) {
    Check(railyard_expert_fetch(h_, layer, expert, arenaOffset));
  }
  /// Every record of `records`, or an exception (nothing partial counts as done).
  void FetchBatch(const std::vector<railyard_expert_record>& records) {
    Check(railyard_expert_fetch_batch(h_, records.data(), records.size()));
  }
  void SetVerifyChecksums(bool on) { Check(railyard_expert_set_verify(h_, on ? 1 : 0)); }
  /// Polite shutdown now; throws what it returned. The connection is unusable after.
  void Close() {
    const int rc = railyard_expert_close(std::exchange(h_, nullptr));
    Check(rc);
  }

 private:
  static void Check(int rc) {
    if (rc != RAILYARD_EXPERT_OK) throw ExpertException(rc);
  }
  railyard_expert* h_ = nullptr;
};

}  // namespace railyard

#endif  // RAILYARD_EXPERT_HPP_
