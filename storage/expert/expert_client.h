// The expert tier's client: opens a connection to an expert peer, receives and
// validates its manifest, chooses a transport, and fetches records (layer, expert)
// into a caller's arena registered through the RegistrationCache (so memory NCCL
// already registered is not registered or pinned again).
//
// Over kTransportRead each record is one fabric Read of the peer's mapped layer file
// (RDMA READ on verbs; the fabric Endpoint stripes large Reads over the rails of the
// cable). Over kTransportTcp each record is a request answered on the control socket.
// Every record's XXH3-64 is checked against the manifest unless switched off.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/remote_key.h"
#include "proxy/fabric/worker.h"
#include "storage/expert/manifest.h"

namespace railyard::expert {

/// Options of ExpertClient::Open.
struct ClientOptions {
  uint8_t transport = 2;        ///< kTransportRead (2) or kTransportTcp (1); other values are sent as is (tests)
  bool verifyChecksums = true;  ///< compare every fetched record's XXH3-64 with the manifest
  int timeoutMs = 30000;        ///< a peer silent this long mid-request is lost (PEER_LOST)
  /// What errors call the peer: "" = the `peer` address Open connects to. A peer reached
  /// through a ControlTunnel (plugin/tier_route.h) is connected to at the tunnel's local
  /// "127.0.0.1:PORT", which is not what the user asked for: the caller names it here
  /// ("host:h2 (via relay h1)").
  std::string peerName;
};

/// One record of a batch: (layer index into manifest().layers, expert) lands at
/// arena + arenaOffset (stride bytes).
struct RecordRequest {
  uint32_t layer = 0;
  uint64_t expert = 0;
  uint64_t arenaOffset = 0;
};

/// Checks that the arena slots of `batch` are disjoint: each record fills `stride`
/// bytes from its arenaOffset, so two slots closer than that would land one record
/// over another (and the first one's checksum would then fail, blaming the peer).
/// INVALID_ARGUMENT naming both records (batch index, layer index, expert, slot) for the
/// first overlap in arena order; Ok otherwise (an empty batch too). O(n log n).
Status CheckDisjointSlots(std::span<const RecordRequest> batch, uint64_t stride);

/// Not thread-safe: one thread fetches (and, over READ, progresses `worker`).
class ExpertClient {
 public:
  /// Connects to `peer` ("host:port"), reads its Hello and manifest (PEER_LOST when it
  /// does not answer, PROTOCOL for a bad magic or wire version, MANIFEST_TOO_LARGE for a
  /// length over kMaxManifestBytes, then Manifest::Parse's errors; INVALID_ARGUMENT for
  /// an arena smaller than one record stride, before anything is chosen), chooses
  /// options.transport and takes the peer's answer (UNKNOWN_TRANSPORT, ADMISSION_REFUSED,
  /// STORE_CHANGED as the peer names them). Registers [arena, arena + arenaBytes)
  /// through `cache` (kAccessLocal; INVALID_ARGUMENT, before connecting, for a range
  /// that wraps the address space). `worker` (of cache.domain()) is needed for READ,
  /// whose fabric connection is brought up before Open returns (a zero-byte Read of
  /// the first layer: PEER_LOST when it fails), so the handle may wait as long as its
  /// owner likes before its first fetch.
  static Status Open(const std::string& peer, const ClientOptions& options, fabric::RegistrationCache& cache,
                     fabric::Worker* worker, void* arena, uint64_t arenaBytes, std::unique_ptr<ExpertClient>* out);
  ~ExpertClient();

  const Manifest& manifest() const { return manifest_; }
  uint8_t transport() const { return options_.transport; }
  /// Switches the checksum check of later fetches on or off.
  void SetVerifyChecksums(bool on) { options_.verifyChecksums = on; }
  /// The Region covering the arena (from the RegistrationCache: possibly a larger one
  /// registered before, e.g. by NCCL's regMr). Arena offsets stay relative to the arena.
  const fabric::Region* arenaRegion() const { return arena_; }

  /// Fetches one record; as FetchBatch with one entry.
  Status Fetch(uint32_t layer, uint64_t expert, uint64_t arenaOffset);
  /// Fetches every record of `batch` into the arena. Ok only when every record landed
  /// (and matched its checksum when verifying): OUT_OF_RANGE (checked before anything
  /// moves) for a layer/expert outside the store or a slot outside the arena;
  /// INVALID_ARGUMENT (also before anything moves) for two slots that overlap
  /// (CheckDisjointSlots);
  /// PEER_LOST when the peer dies or goes silent; CHECKSUM_MISMATCH naming the first
  /// bad record; STORE_CHANGED / others as the peer names them. After PEER_LOST or a
  /// protocol error the client is failed: every later call fails with that error's code,
  /// its message naming its own request and quoting the first failure.
  Status FetchBatch(std::span<const RecordRequest> batch);
  /// Sends a shutdown request and waits for its answer (a polite close). Idempotent.
  /// Ok without a word to the peer on a failed client (its failure was already returned).
  Status Close();

 private:
  ExpertClient() = default;
  Status FetchTcp(std::span<const RecordRequest> batch);
  Status FetchRead(std::span<const RecordRequest> batch);
  /// READ: a zero-byte Read of layer 0, waited for (Open's last step). A TCP Endpoint
  /// sends its hello only when first progressed, and a peer closes a connection whose
  /// hello has not come in RAILYARD_ACCEPT_TIMEOUT_MS: a handle whose first fetch came
  /// 12 s after its open failed PEER_LOST (C API trial).
  Status BringUpFabric();
  Status Verify(std::span<const RecordRequest> batch);
  /// After failed Reads: asks the peer over the control connection (kOpStatus) and
  /// returns STORE_CHANGED when it withdrew its registrations, PEER_LOST when the
  /// control connection is gone too, else `fabricCause`.
  Status AskWhyReadsFailed(const Status& fabricCause);
  char* ArenaPtr(uint64_t offset) const { return static_cast<char*>(arenaBase_) + offset; }

  ClientOptions options_;
  std::string peer_;
  int fd_ = -1;
  Manifest manifest_;
  fabric::RegistrationCache* cache_ = nullptr;
  fabric::Worker* worker_ = nullptr;
  const fabric::Region* arena_ = nullptr;
  void* arenaBase_ = nullptr;
  uint64_t arenaBytes_ = 0;
  std::unique_ptr<fabric::Endpoint> endpoint_;
  std::vector<fabric::RemoteKey> layerKeys_;
  Status failed_ = Status::Ok();
  bool closed_ = false;
  uint64_t nextCookie_ = 1;
};

/// Reads a Reply header and its text from `fd`; the peer's named error as a Status
/// when errc != 0 (PROTOCOL when errc or lengths are out of range). `payloadBytes`
/// gets the payload length that follows (unread).
Status ReadReply(int fd, const std::string& who, uint64_t* payloadBytes);

}  // namespace railyard::expert
