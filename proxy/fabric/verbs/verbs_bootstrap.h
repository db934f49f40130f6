// The bootstrap TCP connection of one verbs Endpoint: non-blocking connect, one
// hello + QP record set each way (verbs_wire.h, proxy/verbs/qp_record.h), then it
// stays open and silent as the liveness watch of the peer (a killed peer's kernel
// closes it at once). Every byte read is peer data: sizes and fields are checked
// before anything is used.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/tcp/tcp_dial.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/socket.h"
#include "proxy/verbs/qp_record.h"
#include "proxy/verbs/verbs_setup.h"

namespace railyard::fabric::verbs {

/// One side's handshake message.
struct Handshake {
  VerbsHello hello;
  proxy::verbs::QpSet qps;
};

/// See file comment. Not thread-safe (its Worker's thread).
class BootstrapChannel {
 public:
  BootstrapChannel() = default;
  explicit BootstrapChannel(proxy::Fd fd) : fd_(std::move(fd)) {}

  /// Starts a non-blocking connect to ipv4:port (network-order address, host-order port).
  /// A refused connect is dialed again with backoff until `redialUntil` (tcp::Dialer:
  /// nothing listens there yet, e.g. a relay host's Forwarder still opening its RDMA
  /// ports); the default (epoch) fails at the first refusal. SystemError when no socket
  /// can be made.
  Status Connect(uint32_t ipv4, uint16_t port, std::chrono::steady_clock::time_point redialUntil = {});
  /// True once the connect finished; false while it is under way or a redial waits.
  /// SystemError when it failed: any error but a refusal, or a refusal past the
  /// redial deadline (the message counts the refusals and says what to check).
  Status Connected(bool* done);
  /// Queues `h` to be sent.
  void Queue(const Handshake& h);
  /// Sends what is queued; *done when all of it is out. SystemError when the socket broke.
  Status Flush(bool* done);
  /// Reads the peer's hello and QP record set; *done with `out` filled once whole and
  /// valid. `role` is the role the peer must have; `expectedQps` as DecodeQpSet (0 = any).
  /// InvalidArgument/InvalidUsage for a bad record (peer data), SystemError when the
  /// socket broke or closed.
  Status Read(uint16_t role, int expectedQps, Handshake* out, bool* done);
  /// After the handshake: the channel watches the peer's host (proxy::SetPeerLiveness
  /// with `timeoutMs`, RAILYARD_TIMEOUT_MS), so a cut cable or a dead host shows in
  /// Watch as *lost even when no op is under way. SystemError when it cannot be set.
  Status WatchLiveness(int timeoutMs);
  /// The error text for Watch's *lost (both ends of a verbs connection say the same).
  static std::string LostText(int timeoutMs);
  /// Whether Watch's *lost means the peer's host is gone: false when a work completion
  /// of the same connection came less than `timeoutMs` before `now` (the peer's HCA
  /// answers over RDMA; the probes were starved on a saturated link: soft-RoCE ring,
  /// a 16 MiB sendrecv stream with RAILYARD_TIMEOUT_MS=5000 lost them while its Writes
  /// completed). `lastCompletion` is the time of the last completion (epoch = none).
  static bool LostMeansDead(std::chrono::steady_clock::time_point lastCompletion,
                            std::chrono::steady_clock::time_point now, int timeoutMs);
  /// The WARN text when *lost is outvoted by completions (LostMeansDead false), `peer`
  /// naming the other end.
  static std::string StarvedText(const std::string& peer, int64_t sinceCompletionMs);
  /// The error text when a liveness probe sent after such a verdict (`probe`, e.g. "a
  /// zero-byte RDMA Write") ends in `outcome` (e.g. "had no answer for 5000 ms").
  static std::string ProbeFailedText(const std::string& probe, const std::string& outcome);
  /// After the handshake: Ok while the socket is open and silent; *closed once the
  /// peer closed it; *abandoned (with *closed) when its last byte was kAbandonByte (the
  /// peer's Endpoint went away with ops under way); *lost (with *closed) when the
  /// peer's host stopped answering (proxy::IsPeerUnreachable: keepalive probes
  /// unanswered, see WatchLiveness); *reset (with *closed) when the peer's kernel
  /// reset the connection (ECONNRESET/EPIPE): a peer whose own keepalive gave up sends
  /// that (Linux's keepalive timer resets before it reports), where a process that
  /// exits closes with EOF. SystemError when it broke otherwise; InvalidArgument when
  /// the peer sent any other bytes.
  Status Watch(bool* closed, bool* abandoned = nullptr, bool* lost = nullptr, bool* reset = nullptr);
  /// Initiator, before it closes the socket with ops outstanding: sends kAbandonByte
  /// (best effort, never blocks), so the target reports an error as TCP does for a
  /// connection closed with work half done; a verbs target cannot see in-flight Writes.
  void Abandon();
  /// The one byte an initiator may send after the handshake (Abandon).
  static constexpr char kAbandonByte = 'X';
  int fd() const { return fd_.get(); }

 private:
  proxy::Fd fd_;
  std::optional<tcp::Dialer> dialer_;  ///< set by Connect (the initiator's side)
  std::vector<char> out_;
  size_t sent_ = 0;
  uint8_t hello_[sizeof(VerbsHello)] = {};
  size_t helloGot_ = 0;
  proxy::verbs::RecordReader reader_;
};

}  // namespace railyard::fabric::verbs
