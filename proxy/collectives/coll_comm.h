// CollComm: one collective communicator (NCCL's collComm: one rank per node) that
// runs allreduce, allgather and reducescatter over fabric Endpoints to its cable
// neighbours, with the algorithm the topology calls for (plan.h: ring both ways,
// chain both ways, direct on a mesh, one-shot for small allreduces). Data moves as
// one-sided Writes with immediates into the peer's staging slots (one set of slots
// per stream), chunk by chunk, with credits returned by the receiver, and each chunk
// is reduced as soon as it lands while later chunks are in flight.
//
// The comm itself is single-threaded (Post/Test/Progress on one thread, as the
// fabric's Endpoints are); CollProxy (coll_proxy.h) gives it its proxy thread, which
// the TCP emulation needs: a rank whose own op is done must still land and
// acknowledge its neighbours' last Writes. A Worker given to a CollComm is its alone:
// every event the Worker returns is this comm's.
//
// Errors are sticky: a fabric error, a peer's abort, malformed peer data or no
// progress for `timeoutMs` fails the comm; every outstanding and later request
// reports the error, which names this rank, the op, the step and the peer; the comm
// tells every peer of its streams (an abort immediate), which fail and pass it on, so
// every rank fails with a named error instead of waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/collectives/coll_op.h"
#include "proxy/collectives/plan.h"
#include "proxy/collectives/shape.h"
#include "proxy/collectives/work_pool.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"

namespace railyard::collectives {

/// Tunables of a CollComm (the same on every rank: connect checks chunk and slots).
struct CollOptions {
  uint64_t chunkBytes = 512 * 1024;  ///< one staging slot (bytes of one chunk on the wire)
  uint32_t slots = 8;                ///< staging slots per direction (chunks in flight)
  int timeoutMs = 30000;             ///< no progress for this long fails the comm (RAILYARD_TIMEOUT_MS)
  /// The cabling shape and cable order (the same on every rank; connect checks the shape).
  Topology topology;
  /// Allreduces of at most this many bytes run one-shot (RAILYARD_COLLNET_SMALL_BYTES).
  uint64_t smallBytes = 64 * 1024;
  /// InvalidArgument unless chunkBytes in [4 KiB, 64 MiB] (a multiple of 8), slots in
  /// [2, 1024], and the topology's order is empty or a permutation (checked at connect).
  Status Validate() const;
};

/// One posted collective; owned by its CollComm until Test reports it finished.
struct CollRequest {
  uint64_t serial = 0;
  bool done = false;
  uint64_t bytes = 0;  ///< bytes of this rank's result (test()'s size)
};

class CollComm {
 public:
  /// Blocking and collective (NCCL's CollNet connect): every rank of `nranks` calls it
  /// with the packed Worker::Address() of every rank (index = rank; this rank's own
  /// included). Registers the staging once, connects to the topology's neighbours and
  /// exchanges staging keys with them (ConnectRecord), within options.timeoutMs.
  /// InvalidArgument for bad ranks, addresses or options; SystemError naming the
  /// neighbour when it cannot be reached in time; RemoteError for a neighbour whose
  /// record is malformed or disagrees on nranks, chunk, slots or shape.
  static Status Connect(fabric::Worker& worker, fabric::RegistrationCache& cache, int rank,
                        int nranks, const std::vector<std::vector<uint8_t>>& addresses,
                        const CollOptions& options, std::unique_ptr<CollComm>* out);
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  /// Queues a collective. Ops run in post order, which must be the same on every rank,
  /// as NCCL guarantees; up to kMaxOpsInFlight of them run at once, each stream
  /// carrying one op's chunks after the previous op's, so the next op starts sending
  /// while the last chunks of the one before drain (NCCL's CollNet proxy keeps several
  /// collectives posted; so do back-to-back benchmark iterations). InvalidArgument for a malformed op
  /// (block count != nranks, NULL buffers with bytes, AllGather not kUint8); the
  /// comm's error once it has failed. `*out` stays valid until Test finishes it.
  Status Post(CollOp op, CollRequest** out, bool progress = true);
  /// Progresses, then reports whether `req` finished (*done, *bytes). A finished or
  /// failed request is freed by this call. The comm's error once it has failed.
  /// `progress` false: only look (CollProxy's thread does the moving).
  Status Test(CollRequest* req, bool* done, uint64_t* bytes, bool progress = true);
  /// True while a posted collective has not finished.
  bool Busy() const;
  /// True when the last Progress call moved anything (an event, a chunk posted or
  /// reduced, bytes landed in this process's staging).
  bool LastProgressMoved() const { return lastMoved_; }
  /// Moves data: polls the Worker, reduces what landed, posts what may go. Never blocks.
  Status Progress();

  /// Ops running at once, at most; a later op also waits while the work buffers
  /// held by those running would pass kOverlapWorkBytes with the one it would take
  /// (one op alone always runs), and the pool keeps idle buffers only up to that
  /// amount (its largest always: WorkPool::TrimIdle).
  static constexpr int kMaxOpsInFlight = 4;
  static constexpr uint64_t kOverlapWorkBytes = 512ull << 20;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Topology& topology() const { return options_.topology; }
  /// The algorithm the last begun collective ran (tests, logs).
  Algorithm lastAlgorithm() const { return lastAlgorithm_; }
  /// Ok or the error that failed the comm.
  const Status& status() const { return failed_; }

 private:
  struct Stream;  // one stream's peers, sequence numbers and credits
  struct Active;  // the op being run
  CollComm(fabric::Worker& worker, fabric::RegistrationCache& cache, int rank, int nranks,
           CollOptions options);

  Status ConnectNeighbours(const std::vector<std::vector<uint8_t>>& addresses);
  void PlanOp(Active* a) const;
  Status Begin(Active* a);
  bool Advance(Active* a, int stream, bool mayReceive, bool maySend);
  uint8_t* Ptr(Active* a, Buf buf, uint64_t first) const;
  fabric::LocalSlice Slice(Active* a, Buf buf, uint64_t first, uint64_t elems) const;
  void FinishOneShot(Active* a);
  void OnEvent(fabric::Event& ev);
  void SendCredits();
  /// Fails the comm with `s` (the first failure wins) and sends every peer an abort
  /// naming `origin` (this rank unless the failure is a peer's abort) and `lost`, the
  /// rank whose connection failed (-1: none, or not known).
  void Fail(Status s, int lost = -1, int origin = -1);
  fabric::Endpoint* EndpointTo(int peerRank);
  /// The rank whose endpoint `e` happened on: the one whose PeerName has e.site.peer's
  /// worker id ("w=<id>", the first word), else the only endpoint that has failed; -1
  /// when neither tells.
  int RankOf(const fabric::FabricError& e) const;
  std::string Where() const;

  fabric::Worker& worker_;
  fabric::RegistrationCache& cache_;
  const int rank_;
  const int nranks_;
  const CollOptions options_;
  std::map<int, std::unique_ptr<fabric::Endpoint>> endpoints_;  ///< the streams' peers
  std::map<int, fabric::RemoteKey> stagingKeys_;                ///< peers' staging
  uint8_t* stagingMem_ = nullptr;
  const fabric::Region* staging_ = nullptr;  ///< [stream][slot] x chunkBytes
  WorkPool workPool_;  ///< the running ops' work buffers (~CollComm ends the endpoints first)
  std::vector<std::unique_ptr<Stream>> streams_;  ///< indexed like PeersOf
  Algorithm lastAlgorithm_ = Algorithm::kRing;
  std::deque<std::unique_ptr<Active>> queue_;     ///< front = running
  std::vector<fabric::Event> events_, pending_;
  uint64_t nextSerial_ = 1;
  Status failed_;
  bool lastMoved_ = false;
  uint64_t lastLanded_ = 0;  ///< WorkerStats::bytesLanded at the last Progress
  std::chrono::steady_clock::time_point lastProgress_;
  /// When a stalled comm last looked at its endpoints' status (Progress).
  std::chrono::steady_clock::time_point lastEndpointCheck_{};
  /// How long a comm stalls before it looks at its endpoints, and how often after.
  static constexpr std::chrono::milliseconds kStalledCheck{10};
};

}  // namespace railyard::collectives
