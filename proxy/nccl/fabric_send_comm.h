// The sending side of an NCCL connection over a fabric Endpoint. The receiver
// writes each irecv's clear-to-send record into this comm's FIFO (a Write with
// immediate into slot seq % 32); isend matches it (CtsMatcher) and writes the
// whole message straight into the posted buffer as ONE Write with immediate
// (striped over the rails by the fabric for large messages): the immediate names
// the receiving comm and the (seq, slot) cell, and arrives after every byte of the
// data, carrying the message size (fabric::Event::bytes). The request is done when
// the fabric reports the Write landed, except for small messages (eager path): a
// message of at most kEagerBytes is copied into one of the comm's registered
// bounce slots and its request is done at once (NCCL may reuse the buffer), so a
// small send's latency is the receiver's CTS plus one Write, with no wait for the
// fabric's acknowledgement; the slot is free again when that Write has landed. While
// at least half the slots are free the eager Write is a WriteLazy (its kDone may come
// late, batched: over TCP the target sends it no ack of its own); the Write that takes
// the slot below half asks for its ack at once, and that ack's bound frees the others.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "proxy/comm.h"
#include "proxy/nccl/comm_worker.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/nccl/peer_workers.h"
#include "proxy/protocol/cts_matcher.h"

namespace railyard::proxy::nccl {

/// Who this process is, as hellos and errors name it.
struct LocalIdentity {
  std::string host;
  uint32_t pid = 0;
};

/// SendComm over a fabric Endpoint. Isend/Test/Close come from one thread at a time
/// (NCCL's proxy thread); the CommWorker's helper may run OnEvent meanwhile, always
/// under the CommWorker's lock, which every method takes.
class FabricSendComm final : public SendComm, public CommClient {
 public:
  /// Sends allowed in flight: NCCL_NET_MAX_REQUESTS × maxRecvs.
  static constexpr int kMaxRequests = 32 * kMaxRecvs;
  /// Largest message sent through a bounce slot (eager completion), bytes.
  static constexpr uint64_t kEagerBytes = 64 * 1024;
  /// Bounce slots per comm (allocated and registered at the first small send).
  static constexpr int kEagerSlots = 8;

  /// Registers the FIFO, connects an Endpoint to the listener's Worker and sends the
  /// hello (both complete in the background: Established() says when, and errors
  /// surface there and in isend/test).
  /// `deviceIndex` selects the Regions of MemHandles. InvalidArgument for a bad
  /// worker address in the handle; errors of Domain::Register.
  /// `rank` is the communicator's RankSource (isend notes its tags; errors name it).
  static Status Create(CommWorker* cw, size_t deviceIndex, const FabricHandle& to, const LocalIdentity& self,
                       int timeoutMs, std::shared_ptr<RankSource> rank, std::unique_ptr<FabricSendComm>* out);
  ~FabricSendComm() override;

  /// Drives the comm's Worker once and says whether the listener's Worker has
  /// acknowledged the hello (*done), i.e. the Endpoint reaches the peer. The comm's
  /// error once it failed (the Endpoint's: CONNECT_FAILED naming the relay or listener
  /// that refused, TIMEOUT, ...), prefixed "connect: send comm ... to PEER".
  Status Established(bool* done);

  /// As SendComm::Isend with a MemHandle (NULL only for size 0).
  Status IsendFabric(const void* data, size_t size, int tag, const MemHandle* mh, Request** request);
  Status Isend(const void*, size_t, int, MemoryRegion*, Request**) override;
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;

  void OnEvent(const fabric::Event& e) override;
  bool FromPeer(uint64_t worker) const override { return peerWorkers_.Has(worker); }

 private:
  struct SendRequest : Request {
    bool inUse = false;
    bool done = false;
    uint64_t size = 0;
    Status error;
  };
  FabricSendComm(CommWorker* cw, size_t deviceIndex, int timeoutMs);
  /// Records the comm's error, naming the peer and the message seq the comm is at (WARN
  /// when sends are in flight, else INFO).
  void Poisoned(const Status& s);
  Status CheckEndpoint();
  void OnCts(const fabric::Event& e);
  /// A free bounce slot holding a copy of [data, + size), or -1 (none free, or the
  /// slots could not be registered: the send then goes from NCCL's buffer).
  int TakeBounce(const void* data, size_t size, fabric::LocalSlice* src);

  CommWorker* cw_;
  size_t dev_;
  int timeoutMs_;
  std::shared_ptr<RankSource> rank_;
  uint32_t id_ = 0;
  bool registered_ = false;
  PeerInfo peer_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::vector<FabricCts> fifo_;            ///< 32 slots the receiver writes
  const fabric::Region* fifoRegion_ = nullptr;
  CtsMatcher matcher_;
  std::array<std::array<fabric::RemoteKey, kMaxRecvs>, 32> keys_;  ///< by seq % 32, slot
  uint32_t peerCommId_ = 0;
  PeerWorkers peerWorkers_;  ///< the first clear-to-send's Worker, then one per further route of the receiver
  std::array<SendRequest, kMaxRequests> requests_;
  std::vector<int> free_;
  Poison poison_;
  bool waiting_ = false;
  Clock::time_point waitingSince_{};
  Clock::time_point created_ = Clock::now();
  bool closed_ = false;
  /// The peer's close notice arrived: it is tearing its end down, so Close sends no
  /// notice of its own (one it may never read: its close then resets the connection).
  bool peerClosed_ = false;
  bool helloAcked_ = false;  ///< the listener's Worker acknowledged the hello (Established)
  std::vector<char> bounce_;  ///< kEagerSlots × kEagerBytes, empty until the first small send
  const fabric::Region* bounceRegion_ = nullptr;
  std::vector<int> bounceFree_;
  bool bounceFailed_ = false;
};

}  // namespace railyard::proxy::nccl
