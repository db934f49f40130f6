// One non-blocking socket of the fabric's TCP transport, carrying frames both ways:
// a queue of outgoing frames written as far as the socket takes them, and an
// incoming frame parser that asks its handler where each payload goes before a byte
// of it is received. Used by both ends (TcpEndpoint, TcpTarget).
//
// Landing rule: a payload whose Sink names a Region (pin) is received only while
// that Region is registered, one recv() at a time under its liveness lock; once it
// is deregistered the rest of the payload is drained into scratch memory and the
// handler is told (intact = false). Outgoing payloads that are Region memory (Read
// data) are sent the same way; after a deregistration the rest goes out as zeros
// and the handler is told, so the peer learns the op failed.
//
// Receive syscalls: a header is read with up to kReadAhead bytes after it, so a
// small frame (header and payload) and the frames queued behind it come in one
// recv(); read-ahead bytes of a payload are copied to its Sink under the same
// liveness rule (a pinned destination is written only while registered). A recv()
// that returns less than it asked for means the socket is drained: the pump stops
// there instead of asking again for EAGAIN (the Worker's level-triggered epoll
// reports anything that arrives later).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proxy/fabric/fabric_error.h"
#include "proxy/fabric/region_table.h"
#include "proxy/fabric/tcp/tcp_dial.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/socket.h"

namespace railyard::fabric::tcp {

/// A frame to send.
struct OutFrame {
  FrameHeader header;                  ///< payloadBytes says how much follows
  const char* payload = nullptr;       ///< borrowed payload (e.g. a Write's source memory)
  std::vector<uint8_t> owned;          ///< or owned payload (records, NACK text) when payload is null
  std::shared_ptr<RegionRecord> pin;   ///< payload is this Region's memory: sent only while registered
  int rail = -1;                       ///< rail whose scheduler slot this frame holds (-1: none)
};

/// Where an incoming payload goes. Neither dst nor buffer: it is drained and dropped.
struct Sink {
  char* dst = nullptr;                 ///< memory to receive into (payloadBytes bytes)
  std::shared_ptr<RegionRecord> pin;   ///< dst is inside this Region: land only while registered
  std::vector<uint8_t>* buffer = nullptr;  ///< or an owned buffer, resized to the payload
};

/// Callbacks of a FrameSocket. They may queue frames on any socket but must not
/// destroy sockets; a returned error stops the pump and fails the connection.
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  /// A header arrived and passed DecodeFrameHeader; fill `sink` for its payload.
  virtual FabricError OnHeader(int socket, const FrameHeader& h, Sink* sink) = 0;
  /// The whole payload of `h` was received (at once for 0 bytes). `intact` is false
  /// when the Sink's Region was deregistered part way (the rest was dropped).
  virtual FabricError OnPayload(int socket, const FrameHeader& h, bool intact) = 0;
  /// `f` was written out completely; `intact` is false when its pinned Region was
  /// deregistered part way (zeros went out instead).
  virtual FabricError OnWritten(int socket, const OutFrame& f, bool intact) = 0;
};

/// Framed I/O on one connected (or connecting) TCP socket. Not thread-safe.
class FrameSocket {
 public:
  /// Bytes a header read asks for beyond the header (payloads up to this size come
  /// with their header in one recv()); larger payloads are received in place.
  static constexpr size_t kReadAhead = 16 * 1024;
  /// Frames a target's send queue may hold before it stops reading the socket: a peer
  /// that asks (Read requests, Writes to ack) and never reads the answers then fills
  /// its own socket buffers (hostile-peer probe: 4M Read requests never read grew a
  /// target by 1 GB). A soft bound: the pass that crosses it reads up to its byte
  /// budget (TcpOptions::pumpBytes) first, so a socket holds at most this plus one
  /// pass's frames. A live peer reads them and the receive side goes on; one that
  /// does not is ended by its owner's timeout.
  static constexpr size_t kMaxQueuedFrames = 1024;

  /// `incoming` is the direction of frames this socket receives; `connecting` when a
  /// non-blocking connect() is still under way (writes wait for it).
  FrameSocket(proxy::Fd fd, int index, Direction incoming, bool connecting);
  /// A socket that dials `plan` itself (an Endpoint's): connect() starts here, and a
  /// refusal is dialed again by Pump until plan.redialUntil (tcp_dial.h). SYSTEM when
  /// the socket cannot be made or bound, or connect() fails otherwise at once.
  static FabricError Open(const DialPlan& plan, int index, Direction incoming, std::unique_ptr<FrameSocket>* out);

  int index() const { return index_; }
  int fd() const { return fd_.get(); }
  bool connecting() const { return connecting_; }
  /// True while a refused connect waits to be dialed again (no socket is open).
  bool Redialing() const { return dialer_ && dialer_->Waiting(); }
  /// Appends a frame to the send queue.
  void Queue(OutFrame f) { out_.push_back(std::move(f)); }
  size_t QueuedFrames() const { return out_.size(); }
  /// kMaxQueuedFrames or more frames wait to be sent (a target then reads no more).
  bool OutputFull() const { return out_.size() >= kMaxQueuedFrames; }
  /// Bytes handed to the kernel that the peer has not acknowledged yet (SIOCOUTQ: sent
  /// and unacked, or not yet sent); 0 when closed or unknown. A socket whose cable is cut
  /// keeps them while the others of the connection drain.
  uint64_t UnackedBytes() const;
  /// True when a frame is partly received.
  bool MidFrame() const { return inGot_ > 0 || inPayload_ || inBufPos_ < inBufLen_; }

  struct PumpResult {
    uint64_t bytesIn = 0;
    uint64_t bytesOut = 0;
    bool closed = false;  ///< the peer closed the connection in an orderly way
    bool dialed = false;  ///< a redial opened a new socket: fd() changed (-1 if refused again), its owner watches it
  };
  /// Moves up to `budget` bytes each way without blocking. An error (socket broken,
  /// connect refused, malformed frame, handler error) names its cause. With
  /// `readable` false (the Worker's epoll saw no input, EOF or error on it) the
  /// receive side is not tried: an idle socket costs no syscall (a target also passes
  /// false while OutputFull()).
  FabricError Pump(FrameHandler& handler, uint64_t budget, PumpResult* result, bool readable = true);
  /// Closes the socket (the peer sees EOF); the queue is dropped.
  void Close() {
    fd_.Reset();
    out_.clear();  // the frames (and the Region pins they hold) go with the socket
    outSent_ = 0;
    outDead_ = false;
  }

 private:
  FabricError PumpOut(FrameHandler& handler, uint64_t budget, PumpResult* result);
  FabricError PumpIn(FrameHandler& handler, uint64_t budget, PumpResult* result);
  /// A complete header is in inHeader_: decode it and ask the handler for its Sink.
  FabricError HeaderArrived(FrameHandler& handler);
  /// `n` bytes of the current payload at `from` (read-ahead) go to the Sink.
  void DeliverBuffered(const uint8_t* from, uint64_t n);
  /// The current payload is whole: tell the handler.
  FabricError PayloadDone(FrameHandler& handler);
  /// `sendFailed` came from the send side of a socket dialed through a relay before
  /// any frame arrived: the relay may have refused it and closed, so its RejectRecord
  /// can be waiting unread. Returns that refusal (CONNECT_FAILED) when it is there,
  /// else `sendFailed`.
  FabricError RefusalBehind(FrameHandler& handler, FabricError sendFailed, PumpResult* result);

  proxy::Fd fd_;
  int index_;
  Direction incoming_;
  bool connecting_;
  std::optional<Dialer> dialer_;  ///< set for a socket that dials (Open)
  bool framed_ = false;           ///< a frame header has been received on this socket
  // send side
  std::deque<OutFrame> out_;
  uint64_t outSent_ = 0;        ///< bytes of the front frame sent (header + payload)
  bool outDead_ = false;        ///< the front frame's pinned Region went away
  // receive side
  uint8_t inHeader_[sizeof(FrameHeader)];
  size_t inGot_ = 0;
  bool inPayload_ = false;
  FrameHeader inFrame_{};
  Sink inSink_{};
  uint64_t inDone_ = 0;
  bool inIntact_ = true;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> inBuf_;  ///< read-ahead (kReadAhead + header), allocated at first use
  size_t inBufPos_ = 0;         ///< next unconsumed byte of inBuf_
  size_t inBufLen_ = 0;         ///< bytes of inBuf_ filled by the last recv
};

}  // namespace railyard::fabric::tcp
