// Initiator side of the verbs transport: one RC QP per rail shared with the peer
// (QP i on local rail i to the peer's rail i), the op table and post queue with
// fences, striping of large Writes/Reads over the rails (StripeScheduler, bounded
// chunks in flight per rail), and the cross-rail ordering rule of endpoint.h:
// an immediate, a FetchAdd, a Send or a Read goes out (on rail 0) only once every
// earlier Write chunk on the OTHER rails has completed; RC order covers rail 0's own.
// A Write with immediate of one work request is one WRITE WITH IMM (the target's
// byte_len is its size); one of more work requests (striped, cut into chunks, or a
// WriteFinal) writes its chunks with plain WRITEs and ends in a SEND WITH IMM of a
// WriteSizeRecord (verbs_wire.h) naming the whole Write, so the target always
// reports the Write's total as Event::bytes.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"
#include "proxy/fabric/stripe_scheduler.h"
#include "proxy/fabric/verbs/verbs_bootstrap.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/verbs/qp_bundle.h"

namespace railyard::fabric::verbs {

class VerbsWorker;
using Clock = std::chrono::steady_clock;

/// Kinds of work requests, in the low 8 bits of wr_id (the op's sequence above).
/// kWriteImm: a Write's SEND WITH IMM of its WriteSizeRecord; kProbe: an Endpoint's
/// liveness probe (VerbsEndpoint::Probe), no op's.
enum class WrKind : uint8_t { kWriteChunk = 1, kWriteImm = 2, kReadChunk = 3, kAtomic = 4, kSend = 5, kCredit = 6, kProbe = 7 };
inline uint64_t MakeWrId(uint64_t seq, WrKind k) { return (seq << 8) | static_cast<uint8_t>(k); }

/// FabricErrc for a failed work completion: IBV_WC_REM_ACCESS_ERR and the other
/// remote-request errors -> kRemoteAccess; retry exceeded -> kTimeout (the peer's
/// HCA stopped answering); flushed -> kEndpointFailed; local errors -> kSystem.
FabricErrc ErrcOfCompletion(ibv_wc_status status);

/// See file comment and Endpoint. Created by VerbsWorker::Connect.
class VerbsEndpoint : public Endpoint {
 public:
  /// Registers the endpoint's scratch memory (credit word, FetchAdd results, record
  /// staging) and starts the bootstrap connect. SystemError when that fails.
  static Status Create(VerbsWorker* worker, const VerbsAddress& peer, uint64_t connection,
                       std::unique_ptr<VerbsEndpoint>* out);
  ~VerbsEndpoint() override;

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override;
  Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate) override;
  /// Endpoint::WriteFinal: the Write's size record names `opBytes` (a SEND WITH IMM
  /// even when `src` is one work request). InvalidArgument when opBytes < src.bytes
  /// or opBytes > kVerbsMaxOpBytes.
  Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override;
  Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) override;
  Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override;
  Status Fence(uint64_t cookie) override;
  Status status() const override { return status_; }
  size_t Outstanding() const override { return ops_.size() + fences_; }
  std::string PeerName() const override { return peer_.Name(); }

  /// Called by the Worker's Progress: handshake, completions, dispatch, liveness and
  /// the timeout. Never blocks.
  void Progress();
  /// True when only a completion (or the peer) can give Progress work: failed, or
  /// set up with nothing queued, or with queued ops behind send WRs outstanding.
  /// (VerbsWorker::Quiet.)
  bool Idle() const;
  /// QpBundle::ArmCqs; true before the QPs exist only when failed.
  bool ArmCqs() const { return qps_ != nullptr ? qps_->ArmCqs() : failed_; }
  /// Test hook: stop watching the bootstrap connection, as a keepalive verdict
  /// outvoted by completions does (the soft-RoCE lane cannot starve it on demand), so
  /// the liveness probe (Probe) is the only watch left.
  void ForgetBootstrapForTesting() { bootLost_ = true; }

 private:
  struct Op {
    OpType type = OpType::kNone;
    uint64_t seq = 0;
    uint64_t cookie = 0;
    uint64_t local = 0;                ///< local address
    std::vector<uint32_t> lkeys;       ///< per rail
    uint64_t bytes = 0;
    uint64_t remoteAddr = 0;
    std::vector<uint32_t> rkeys;       ///< per rail (the peer's key)
    uint64_t keyBase = 0, keyLength = 0;
    uint32_t keyAccess = 0;
    bool hasImm = false;
    uint32_t imm = 0;
    /// With hasImm: the bytes the target's immediate reports (the op's, or WriteFinal's).
    uint64_t reportBytes = 0;
    /// With hasImm: the immediate goes as a SEND WITH IMM of a WriteSizeRecord after
    /// the chunks (more than one WR, or reportBytes != bytes), not on the last chunk.
    bool sizeRecord = false;
    uint64_t add = 0;
    std::vector<uint8_t> record;
    std::vector<Chunk> chunks;
    size_t nextChunk = 0;
    bool striped = false;
    bool immPosted = false;
    int pendingWrs = 0;                ///< posted and not completed
    int slot = -1;                     ///< FetchAdd result word / record staging slot; Write: its rail
    int recordSlot = -1;               ///< Write with sizeRecord: the record's staging slot
  };
  struct QueueItem {
    bool fence = false;
    uint64_t seq = 0;     ///< op seq; for a fence: ops below this must complete first
    uint64_t cookie = 0;  ///< fence cookie
  };

  VerbsEndpoint(VerbsWorker* worker, const VerbsAddress& peer, uint64_t connection);
  Status CheckLocal(const LocalSlice& s, const char* what) const;
  Status CheckKey(const RemoteKey& key) const;
  Status Post(Op op);
  /// The Write op of Write and WriteFinal (`reportBytes`: what the immediate reports).
  Status PostWrite(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                   std::optional<uint32_t> immediate, uint64_t reportBytes);
  void StepHandshake();
  void Poll();
  /// The first rail with send WRs outstanding (0 when none): the rail a timeout names.
  int BusyRail() const;
  /// The oldest outstanding op's sequence, -1 when none: the seq an error names.
  int64_t OldestSeq() const;
  void OnCompletion(int rail, const ibv_wc& wc);
  /// Posts the queue's ops in order: each op once the one before it is wholly posted
  /// (Advance with head), then Lookahead.
  void Dispatch();
  /// While the head is a Write whose data chunks are all posted and whose immediate or
  /// size record waits (for its chunks on the other rails to complete), the Writes
  /// queued behind it (up to kLookaheadOps, stopping at any other op or a fence) post
  /// their data chunks, never an immediate or a size record: the rails stay busy
  /// instead of draining once per striped Write with immediate. Later data may so land
  /// before an earlier immediate; an immediate still comes after every byte of its own
  /// and every earlier Write (OtherRailsQuiet by seq), and immediates, records and
  /// FetchAdds keep their order.
  void Lookahead();
  /// Every data chunk of Write `op` is posted: what is left is its immediate (the last
  /// chunk of an unstriped one) or its size record.
  static bool DataPosted(const Op& op);
  /// Posts what it can of `op`; true once every WR of it is posted. With `head` false
  /// (Lookahead), only a Write's data chunks: false at its immediate or size record.
  bool Advance(Op& op, bool head);
  /// True when no Write chunk of an op up to `seq` is outstanding on a rail other than
  /// `rail` (writeSeqs_: a send queue completes in posting order).
  bool OtherRailsQuiet(int rail, uint64_t seq) const;
  bool PostWr(int rail, ibv_send_wr* wr, const Op& op);
  void Complete(std::map<uint64_t, Op>::iterator it, uint64_t value);
  /// Once the bootstrap connection no longer watches the peer (bootLost_): with no op
  /// under way and no completion for half of RAILYARD_TIMEOUT_MS, posts a zero-byte
  /// RDMA Write on rail 0 (no address or rkey is checked for it: IBA C9-88; the
  /// peer's CPU sees nothing), so a peer whose host or process went away fails this
  /// Endpoint (retry exceeded, or no answer within the timeout) while it is idle, as
  /// the keepalive did. Ops under way are watched by their own timeout.
  void Probe(Clock::time_point now);
  void Fail(FabricError e);
  FabricError Error(FabricErrc errc, int rail, int64_t seq, std::string what) const;
  uint64_t CreditsFree() const;

  VerbsWorker* worker_;
  VerbsAddress peer_;
  uint64_t connection_;
  int state_ = 0;  ///< 0 connecting, 1 sending, 2 reading, 3 ready
  BootstrapChannel boot_;
  Clock::time_point started_;
  std::unique_ptr<proxy::verbs::QpBundle> qps_;
  int rails_ = 0;
  std::vector<uint32_t> railSpeeds_;
  const Region* scratch_ = nullptr;  ///< credit word, atomic results, record staging
  std::vector<char> scratchMem_;
  std::vector<int> freeSlots_;       ///< record staging / atomic result slots
  uint64_t creditsGranted_ = 0;
  uint64_t creditsUsed_ = 0;
  uint32_t peerRecordBytes_ = 0;
  StripeScheduler scheduler_;       ///< room per rail: max(chunks per rail, kMinWritesInFlightPerRail)
  StripeOptions writeStripe_;        ///< the Domain's striping, chunk raised to kMinWriteWrBytes (port-capped)
  std::vector<std::deque<uint64_t>> writeSeqs_;  ///< per rail: the op seq of each outstanding Write chunk, in posting order (its size: the rail's Write chunks in flight)
  std::vector<int> readOut_;         ///< Read chunks outstanding per rail (at most chunksInFlightPerRail)
  std::vector<int> sqPosted_;        ///< send WRs outstanding per rail
  std::map<uint64_t, Op> ops_;
  std::deque<QueueItem> queue_;
  uint64_t nextSeq_ = 0;
  size_t fences_ = 0;
  Status status_;
  bool failed_ = false;
  Clock::time_point lastActivity_;
  Clock::time_point lastCompletion_{};  ///< last work completion (BootstrapChannel::LostMeansDead)
  Clock::time_point lastWatch_;  ///< last look at the bootstrap socket
  bool bootLost_ = false;        ///< its keepalive timed out while completions came: no longer watched
  bool probing_ = false;         ///< a liveness probe is posted (Probe)
  Clock::time_point probeSent_{};  ///< when it was posted
};

/// How often Progress looks at the bootstrap socket (one recv syscall) for a peer
/// that went away: often enough for a prompt PEER_CLOSED, rarely enough that the
/// polling loop stays syscall-free (a syscall per call costs latency, most of all
/// under emulation).
inline constexpr std::chrono::milliseconds kWatchInterval{10};
/// Largest RDMA READ work request, bytes (Reads are cut into chunks of at most this).
inline constexpr uint64_t kMaxReadWrBytes = 256 * 1024;
/// Smallest chunk a Write is cut into, bytes: RAILYARD_STRIPE_CHUNK_BYTES when larger,
/// capped by the rails' ibv_port_attr::max_msg_sz (IbPort::maxMsgBytes, 4 MiB at most), as
/// the older proxy/verbs comms cut their payload WRs. Soft-RoCE lane, one boot
/// (docs/benchmarks.md, "vverbs2"): 1 MiB Write WRs with 4 in flight, each completion
/// posting the next while the QP sends, drew 7-12 rxe retries (rcvd_seq_err,
/// completer_retry_err) per sendrecv run of 1-16 MiB; 4 MiB WRs, or the older comms' WRs
/// posted a message at a time, drew none.
inline constexpr uint64_t kMinWriteWrBytes = 4u << 20;
/// Fewest Write chunks in flight per rail (RAILYARD_STRIPE_CHUNKS_PER_RAIL when larger):
/// 64 x 4 MiB, so a message of up to 256 MiB goes into the send queue at once. Reads keep
/// RAILYARD_STRIPE_CHUNKS_PER_RAIL (a READ's response is a burst from the peer's HCA).
inline constexpr int kMinWritesInFlightPerRail = 64;
/// Most queued Writes behind the head that post their data chunks early (Lookahead).
inline constexpr size_t kLookaheadOps = 16;

}  // namespace railyard::fabric::verbs
