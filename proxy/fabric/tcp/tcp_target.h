// Target side of the TCP transport: one peer Endpoint's connection to this Worker.
// Every remote access is checked against the Region its key names (bounds, key,
// rights) when the op's first frame arrives, before a byte lands or leaves; each
// chunk's byte range is claimed when its header is accepted (overlaps refused); an
// op completes only when every claimed byte has landed; and immediates, records,
// FetchAdds and Reads take effect in sequence order, after every earlier op of the
// connection is complete (the Endpoint ordering rule, even across rails).
//
// Acks (wire version 2): every ack carries the cumulative bound frontier_ (every op
// below it has passed). A Write flagged kFlagLazyAck gets no ack of its own: its
// passing is counted, and the next ack's bound covers it; when no other ack goes out,
// a bound-only ack does, after kMaxDeferredAcks such Writes or kDeferredAckMicros
// after the first of them, whichever comes first (so a ping-pong of small Writes
// costs no ack syscall per op, and nothing waits longer than that for its kDone).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/byte_claims.h"
#include "proxy/fabric/tcp/frame_socket.h"
#include "proxy/fabric/tcp/tcp_worker.h"

namespace railyard::fabric::tcp {

/// Lazily acked Writes (kFlagLazyAck) a target passes before it sends their bound, at
/// most (a ping-pong of them costs one ack per this many).
constexpr int kMaxDeferredAcks = 16;
/// How long a target holds back the bound of a passed lazy Write, at most (checked at
/// each Progress), microseconds: far below any RAILYARD_TIMEOUT_MS, so an initiator
/// with only lazy Writes outstanding never times out, and long against a small-message
/// round trip, so a ping-pong's bounds go by count. A Fence behind lazy Writes waits
/// up to this long.
constexpr int kDeferredAckMicros = 1000;

/// Chunk claims one connection may hold at once (all its ops together): a peer cannot
/// make a target keep millions of tiny claims (256 MiB in 4 KiB chunks fits).
constexpr size_t kMaxClaimsPerConnection = 65536;

/// See file comment. Owned by the TcpWorker.
class TcpTarget : private FrameHandler {
 public:
  /// `source`: the IPv4 address (network order, 0 unknown) its first socket came from;
  /// `namedAs`: the worker id errors name the peer by (its hello's key), 0 = `peerWorker`.
  TcpTarget(TcpWorker* worker, uint64_t peerWorker, uint64_t connection, int sockets, uint32_t source = 0,
            uint64_t namedAs = 0);

  /// Adds the socket whose hello said `index` (of the count given at construction);
  /// `relayed`: its hello carried kFlagRelayed (the socket comes from the route's last
  /// relay, which the connection's name then says). MALFORMED when the index repeats or
  /// the count differs.
  FabricError AddSocket(proxy::Fd fd, int index, int rail, int count, bool relayed);
  /// Moves bytes on every socket, serves ops, checks the timeout.
  void Progress();
  /// Failed or closed: the Worker drops it.
  bool Dead() const { return dead_; }
  /// Nothing left to send (no ack, nack or read data queued on a socket) and no
  /// deferred ack waiting for its timer: only the initiator's input brings work.
  bool Quiet() const;
  /// No op under way and Quiet(): closing it now loses nothing of an op (its peer's
  /// next op fails PEER_CLOSED).
  bool Idle() const { return !Busy() && Quiet(); }
  /// The constructor's `source`.
  uint32_t source() const { return source_; }
  /// When the connection's first socket arrived.
  Clock::time_point created() const { return created_; }
  /// Fails the connection: an error event at this Worker (when work was under way or
  /// `always`), every socket closed. The failure is logged at WARN when work was under
  /// way or `warnIdle`; otherwise at INFO (a peer that reset an idle connection after
  /// its last op, as a rank ending first does: whoever still expects something of that
  /// peer gets the event and reports it).
  void Fail(FabricError e, bool always = true, bool warnIdle = true);

 private:
  /// Queues `f` on socket `socket` unless the peer closed that socket (then dropped).
  void QueueOn(int socket, OutFrame f);
  struct PendingRead {
    int socket = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  struct Slot {
    bool used = false;
    uint64_t seq = 0;
    FrameType type = FrameType::kWrite;
    uint64_t addr = 0;
    uint64_t bytes = 0;
    uint64_t key = 0;
    uint16_t flags = 0;
    uint32_t imm = 0;
    uint64_t add = 0;
    ByteClaims claims;
    std::shared_ptr<RegionRecord> pin;
    bool complete = false;
    std::vector<uint8_t> record;
    std::vector<PendingRead> reads;
    int lastSocket = 0;
  };

  FabricError OnHeader(int socket, const FrameHeader& h, Sink* sink) override;
  FabricError OnPayload(int socket, const FrameHeader& h, bool intact) override;
  FabricError OnWritten(int socket, const OutFrame& f, bool intact) override;
  /// Refuses op `seq`: a NACK to the peer, nothing of this connection lands any more.
  FabricError Refuse(int socket, uint64_t seq, FabricErrc errc, const std::string& why);
  /// Passes every op at the frontier that is complete, in sequence order.
  FabricError Advance();
  /// Queues the ack of op `seq` (FetchAdd: `value`) on `socket`, with the bound frontier_.
  void QueueAck(int socket, uint64_t seq, uint64_t value);
  /// Queues a bound-only ack for the lazy Writes passed since the last ack.
  void QueueBound();
  FabricError Error(FabricErrc errc, int socket, int64_t seq, std::string what) const;
  bool Busy() const;

  TcpWorker* worker_;
  uint64_t peer_;
  uint64_t connection_;
  std::string peerName_;
  bool arrivalNamed_ = false;  ///< peerName_ says whom the sockets arrive from (first socket's peer)
  int count_;
  std::vector<std::unique_ptr<FrameSocket>> sockets_;  ///< by hello index (null until it arrives)
  std::vector<int> rails_;
  /// Per socket: added since the last readiness poll (not yet in its snapshot), so the
  /// next pass reads it regardless.
  std::vector<bool> unpolled_;
  /// Per socket: the peer closed it in order (EOF between frames); no longer pumped.
  std::vector<bool> eof_;
  std::vector<Slot> slots_;
  uint64_t frontier_ = 0;  ///< lowest sequence not yet passed
  size_t claims_ = 0;      ///< chunk claims held by all slots (bounded: kMaxClaimsPerConnection)
  size_t used_ = 0;        ///< slots in use (Busy() without a scan)
  int deferred_ = 0;       ///< lazy Writes passed and not yet under a sent bound
  int deferredSocket_ = 0; ///< the socket the last of them came on (its bound goes there)
  Clock::time_point deferredSince_{};  ///< when the first of them passed
  bool refusing_ = false;
  bool dead_ = false;
  Clock::time_point lastActivity_;
  Clock::time_point created_;
  uint32_t source_ = 0;
};

}  // namespace railyard::fabric::tcp
