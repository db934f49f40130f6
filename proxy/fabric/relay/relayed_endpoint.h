// RelayedEndpoint: an Endpoint to a host with no cable, through a relay's Forwarder
// (forwarder.h), for every operation, with endpoint.h's ordering rule kept end to end.
//
// Every op becomes one or more slots of the route's ring at the relay, in post
// order: a Write is cut into chunks of RelayOptions::PayloadBytes(); each chunk's
// payload is written straight from the caller's Region into the slot, then the slot
// header (target key, address, op sequence) with an immediate naming the slot (a
// chunk of at most kMaxInlineChunkBytes from host memory, e.g. a clear-to-send, is
// copied behind the header instead and goes in the header's one Write: InlineChunk). Send records, Reads and FetchAdds
// are one slot each. The relay forwards the slots in
// order as soon as each lands, so the next hop's own ordering rule carries the
// order to the target. Credits (cumulative: slots done at the target) free slots and
// complete ops; Read data comes back into this route's return ring and is copied
// into the caller's Region; a FetchAdd's old value comes back as a record.
//
// A Write travels as one downstream Write per chunk, so before its first chunk
// leaves, its whole range is checked against the range its RemoteKey names (as
// the TCP target checks a whole op on its first chunk): a Write that cannot fit
// fails OUT_OF_BOUNDS with no chunk landed. The target stays the authority on
// everything else (key, rights, liveness): a region deregistered while a relayed
// Write is under way refuses the later chunks as BAD_KEY, not DEREGISTERED.
//
// Fences are kept here: ops after a fence wait until every op before it is done.
// Errors: the relay's named error for the op it names (remote-access causes pass
// through), a leg that breaks, or nothing heard from the relay for 2 x timeoutMs
// while work is outstanding (TIMEOUT); then the Endpoint stays failed.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/relay_wire.h"
#include "proxy/fabric/relay/slot_ring.h"

namespace railyard::fabric::relay {

/// Most bytes of a Write chunk copied behind its slot header: the one Write (header
/// area + chunk) stays within 64 KiB, the TCP transport's default stripe threshold, so
/// it is one frame on one rail (measured: a 64 KiB chunk inline, 65,792 bytes, went
/// striped over two rails and was slower than payload and header as two Writes).
inline constexpr uint64_t kMaxInlineChunkBytes = 64 * 1024 - kSlotPayloadOffset;

/// Whether a Write chunk of `chunk` bytes from `local` travels inside its slot's header
/// Write (copied behind the header: one Write, one ack on the leg to the relay) rather
/// than as a Write of its own before the header: host memory only, at most `maxInline`
/// bytes (the header slot's room: the largest record a route carries).
bool InlineChunk(const Region& local, uint64_t chunk, uint64_t maxInline);

/// See file comment. Made by RelayClient::Connect.
class RelayedEndpoint : public Endpoint {
 public:
  RelayedEndpoint(RelayClient* client, uint32_t routeId, std::vector<uint8_t> target);
  /// Creates the route's Worker, registers the header and return rings and connects
  /// the leg to `relay`; errors of Domain::CreateWorker/Register and Worker::Connect.
  Status Init(std::span<const uint8_t> relay);
  ~RelayedEndpoint() override;

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override;
  Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate) override;
  /// Endpoint::WriteFinal (a relay carrying a Write on through a further relay): the
  /// slots name the whole Write (opBytes) and their offsets in it, so the next relay
  /// checks them against the Writes before and passes the total on.
  Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override;
  Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) override;
  Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override;
  Status Fence(uint64_t cookie) override;
  Status status() const override { return status_; }
  size_t Outstanding() const override { return ops_.size(); }
  /// The leg to the relay's QuietPeerClose() (the route's own ops end as the leg's do).
  void QuietPeerClose() override {
    if (leg_) leg_->QuietPeerClose();
  }
  std::string PeerName() const override { return peerName_; }

  /// For RelayClient: polls the route's Worker, posts what credits allow, completes
  /// ops, checks the timeout; appends the events for the caller.
  void Progress(std::vector<Event>* out);
  /// For RelayClient: true when only input from the relay can give Progress work: the
  /// route is open (or failed), no event waits, every return slot copied out is
  /// credited, and its leg Worker is Quiet(). Ops may be outstanding: each waits for
  /// input then (a leg completion, a credit or result record); a sleeper must wake
  /// within the timeout all the same, for the timeout check.
  bool Quiet() const;
  /// The leg Worker's WaitFd() (-1 before Init).
  int WaitFd() const { return worker_ ? worker_->WaitFd() : -1; }

 private:
  void Dispatch(const Event& e);
  void OnLegEvent(const Event& e);
  void OnControl(const Control& c, uint64_t peer);
  void OnReturnSlot(uint32_t slot, uint64_t peer);
  void OnRelayLost(uint64_t relayWorker, const FabricError& err);
  void Pump(std::vector<Event>* out);

  struct Op {
    OpType type = OpType::kNone;
    uint64_t cookie = 0;
    uint64_t opSeq = 0;
    LocalSlice local;             ///< Write source / Read destination
    std::vector<uint8_t> record;  ///< Send
    std::vector<uint8_t> key;     ///< packed target key
    uint64_t keyBase = 0, keyLength = 0;  ///< the range the key names (pre-check of whole ops)
    uint64_t addr = 0;
    uint64_t bytes = 0;
    uint64_t prior = 0;           ///< WriteFinal: bytes of the whole Write Written before this op
    bool hasImm = false;
    uint32_t imm = 0;
    uint64_t add = 0;
    uint64_t emitted = 0;         ///< Write bytes handed to slots
    bool allEmitted = false;
    uint64_t lastSlot = 0;        ///< slot sequence of its last slot
    uint64_t copied = 0;          ///< Read bytes landed in `local`
    bool haveValue = false;       ///< FetchAdd: old value arrived
    uint64_t value = 0;
  };

  Status Post(Op op);
  Status CheckLocal(const LocalSlice& s, const char* what) const;
  bool EmitChunk(Op& op);
  bool Complete(const Op& op) const;
  Op* FindEmitted(uint64_t opSeq, OpType type);
  void SendControl(const Control& c);
  void Fail(FabricErrc errc, int64_t seq, const std::string& what, const ErrorSite* legSite = nullptr);
  void Heard() { lastHeard_ = std::chrono::steady_clock::now(); }

  enum class State { kOpening, kOpen, kFailed };

  RelayClient* client_;
  uint32_t routeId_;
  std::vector<uint8_t> target_;
  std::unique_ptr<Worker> worker_;     ///< this route's leg Worker
  std::unique_ptr<Endpoint> leg_;
  std::shared_ptr<SlotRing> headers_;  ///< local: slot headers and records, one per up slot
  std::shared_ptr<SlotRing> returns_;  ///< remote write: Read data from the relay
  State state_ = State::kOpening;
  Status status_;
  std::string peerName_;
  std::string relayLabel_;  ///< "relay <leg address>", or the RelayClient namer's "h1 (ADDR:PORT) -> h2"
  uint64_t nonce_ = 0;
  uint64_t relayWorker_ = 0;
  uint32_t relayRoute_ = 0;
  RemoteKey upKey_;
  uint32_t upSlots_ = 0;
  uint64_t nextSlotSeq_ = 0;
  uint64_t released_ = 0;        ///< slots [0, released_) done at the target (credits)
  uint64_t returnConsumed_ = 0;  ///< return slots [0, returnConsumed_) copied out
  uint64_t returnCredited_ = 0;
  std::vector<uint8_t> returnDone_;  ///< per return slot: copied, not yet counted
  std::deque<Op> ops_;           ///< posted, not completed (fences included)
  size_t emitIdx_ = 0;           ///< ops_[0, emitIdx_) are wholly in slots
  uint64_t nextOpSeq_ = 0;
  std::vector<Event> events_;
  std::vector<Event> scratch_;
  std::chrono::steady_clock::time_point lastHeard_;
};

}  // namespace railyard::fabric::relay
