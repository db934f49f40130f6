// Initiator side of the TCP transport: an Endpoint's sockets (socketsPerRail on each
// rail shared with the peer), its op table, the post queue with fences, and the
// striping of chunks over the rails.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/byte_claims.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"
#include "proxy/fabric/stripe_scheduler.h"
#include "proxy/fabric/tcp/frame_socket.h"
#include "proxy/fabric/tcp/tcp_worker.h"

namespace railyard::fabric::tcp {

/// How an Endpoint's sockets reach a peer with no cable to this host through a relay
/// that splices TCP sockets on (proxy/relay/relay_service.h: it reads a RelayRecord,
/// connects onward and copies bytes both ways). The frames are the same as on a
/// cable; the target sees the relay's address and checks each socket as it would a
/// direct one (its hello's rail is the rail it arrived on).
struct SpliceRoute {
  /// The local rail (index into TcpOptions::rails) each of the peer's rails is reached
  /// from, one entry per peer rail used (peer rail j = entry j).
  std::vector<int> localRail;
  /// The dial of socket `socket` (0..socketsPerRail-1) toward peer rail `peerRail`:
  /// fills plan->local, remote (the relay's socket port), preamble (its relay record)
  /// and via. An error refuses the Connect.
  std::function<Status(int peerRail, int socket, DialPlan* plan)> dial;
  /// Appended to the Endpoint's peer name: "via h1 (10.0.1.2:29518)".
  std::string via;
};

/// See file comment and Endpoint. Created by TcpWorker::Connect.
class TcpEndpoint : public Endpoint, private FrameHandler {
 public:
  /// Opens and starts connecting every socket (non-blocking) and queues their
  /// hellos. SystemError naming the rail when a socket cannot be made or bound.
  /// With `splice` (not null), the sockets dial through a relay (SpliceRoute); each
  /// peer rail in splice->localRail is one Endpoint rail.
  static Status Create(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection,
                       std::unique_ptr<TcpEndpoint>* out, const SpliceRoute* splice = nullptr);
  ~TcpEndpoint() override;

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override;
  Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate) override;
  /// Endpoint::WriteFinal: the frames carry kFlagReportBytes with value = opBytes.
  Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override;
  /// Endpoint::WriteLazy: the frames carry kFlagLazyAck; the op completes when an ack's
  /// cumulative bound passes it (the target sends it no ack of its own).
  Status WriteLazy(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                   std::optional<uint32_t> immediate) override;
  Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) override;
  Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override;
  Status Fence(uint64_t cookie) override;
  Status status() const override { return status_; }
  size_t Outstanding() const override { return ops_.size() + fences_; }
  void QuietPeerClose() override { quietClose_ = true; }
  /// Nothing left to send: no post waits to go on a socket, no socket holds a frame
  /// (a connecting socket holds its hello). What is outstanding waits for acks.
  bool Quiet() const;
  std::string PeerName() const override { return peerName_; }

  /// Called by the Worker's Progress: moves bytes, dispatches queued ops, checks the timeout.
  void Progress();

 private:
  struct Op {
    OpType type = OpType::kNone;
    uint64_t seq = 0;
    uint64_t cookie = 0;
    char* local = nullptr;
    uint64_t bytes = 0;
    uint64_t remoteAddr = 0;
    uint64_t key = 0;
    bool hasImm = false;
    uint32_t imm = 0;
    uint64_t reportBytes = 0;  ///< WriteFinal: the whole Write's bytes (0: a plain Write)
    uint64_t add = 0;
    std::vector<uint8_t> record;
    std::vector<Chunk> chunks;
    size_t nextChunk = 0;
    bool striped = false;
    int rail = -1;  ///< the one rail of an op that is not striped
    ByteClaims claims;  ///< Read: data received
    bool acked = false;
    bool lazy = false;  ///< WriteLazy: completed by an ack's bound, never by its own ack
  };
  struct QueueItem {
    bool fence = false;
    uint64_t seq = 0;     ///< op seq; for a fence: ops below this must complete first
    uint64_t cookie = 0;  ///< fence cookie
  };

  TcpEndpoint(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection, const SpliceRoute* splice);
  Status CheckLocal(const LocalSlice& s, const char* what) const;
  Status Post(Op op);
  /// Write and WriteLazy: checks `src`, then posts one Write op (`lazy`: completed by
  /// an ack's cumulative bound). The Endpoint's error once it failed.
  Status PostWrite(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                   std::optional<uint32_t> immediate, bool lazy);
  void Dispatch();
  bool QueueChunks(Op& op);
  void Complete(std::map<uint64_t, Op>::iterator it, uint64_t value);
  /// An ack's cumulative bound: completes every lazy Write below `bound`. MALFORMED
  /// when it passes ops never posted or a Write not yet sent whole.
  FabricError ApplyBound(int socket, uint64_t bound);
  void Fail(FabricError e);
  /// A socket's refused connect waits to be dialed again (tcp_dial.h): the idle
  /// timeout waits for that socket's deadline (connectRetryMs), which names the refusals.
  bool Redialing() const;
  FabricError Error(FabricErrc errc, int socket, int64_t seq, std::string what) const;

  FabricError OnHeader(int socket, const FrameHeader& h, Sink* sink) override;
  FabricError OnPayload(int socket, const FrameHeader& h, bool intact) override;
  FabricError OnWritten(int socket, const OutFrame& f, bool intact) override;

  TcpWorker* worker_;
  WorkerAddress peer_;
  uint64_t connection_;
  std::string peerName_;
  bool spliced_ = false;  ///< the sockets go through socket relays (SpliceRoute)
  std::vector<std::unique_ptr<FrameSocket>> sockets_;
  std::vector<int> socketRail_;              ///< socket -> rail
  std::vector<std::vector<int>> railSockets_;  ///< rail -> sockets
  /// Endpoint rail r joins local rail pairs_[r].first with the peer's rail
  /// pairs_[r].second (PairRails in tcp_endpoint.cc). Declared before scheduler_,
  /// which is built from it.
  std::vector<std::pair<int, int>> pairs_;
  StripeScheduler scheduler_;
  std::map<uint64_t, Op> ops_;  ///< posted and not complete, by seq
  std::deque<QueueItem> queue_; ///< posted and not yet (fully) queued on sockets, in post order
  std::deque<uint64_t> lazy_;   ///< seqs of the lazy Writes in ops_, ascending
  uint64_t nextSeq_ = 0;
  size_t fences_ = 0;
  Status status_;
  bool failed_ = false;
  bool quietClose_ = false;  ///< QuietPeerClose(): a peer close is logged at INFO
  std::vector<uint8_t> nackText_;
  Clock::time_point lastActivity_;
};

}  // namespace railyard::fabric::tcp
