// Worker: the completion and progress side of a Domain (cf. UCX's uct_worker with
// explicit uct_worker_progress). It listens for peers' Endpoints, serves their
// remote accesses (for the TCP emulation) and returns events.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"

namespace railyard::fabric {

/// Counters for diagnostics and tests.
struct WorkerStats {
  uint64_t bytesLanded = 0;     ///< bytes peers wrote into this process's regions
  uint64_t bytesServed = 0;     ///< bytes peers read from this process's regions
  uint64_t framesRefused = 0;   ///< remote accesses refused (bad key, bounds, rights, ...)
  uint64_t connectionsFailed = 0;
  size_t peerConnections = 0;   ///< peers' endpoints connected to this Worker now
};

/// One polling thread per Worker: Progress, Connect and the Endpoints' posts all run
/// on it. The TCP transport starts no thread (explicit progress only).
class Worker {
 public:
  virtual ~Worker() = default;

  /// This Worker's address, packed for exchange (out of band) with peers. Safe to call
  /// from any thread. Constant over the Worker's life, except a fabric-mode Worker's
  /// (runtime::CableSetDomain), which grows when a cable comes up after it started:
  /// hand out a fresh copy per peer rather than one taken at start.
  virtual std::vector<uint8_t> Address() const = 0;
  /// Creates an Endpoint to the Worker whose packed Address() is `peerAddress` (peer
  /// data: validated). The connection is set up by Progress; ops may be posted at
  /// once. The Endpoint must be destroyed before this Worker.
  /// InvalidArgument for a malformed address; SystemError when no socket can be made.
  virtual Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) = 0;
  /// Moves bytes on every connection and appends the events that happened to
  /// `events`; returns how many. Never blocks (non-blocking syscalls, bounded work
  /// per call); call it in a loop.
  virtual size_t Progress(std::vector<Event>* events) = 0;
  /// Counters so far.
  virtual WorkerStats stats() const = 0;
  /// A file descriptor that polls readable (poll(2), POLLIN) when a Progress call may
  /// have input to take in, or -1 when the transport has none (keep calling
  /// Progress). With it, a thread that owns only Workers can sleep instead of spin
  /// while nothing moves (a relay host's Forwarder): see Quiet(). Added (additively)
  /// for issue 10 (relayed sendrecv was slower than the socket relay, which sleeps in
  /// epoll_wait).
  virtual int WaitFd() const { return -1; }
  /// True when nothing but input from peers can give the next Progress work: no
  /// frame waits to be sent, no socket waits for its hello, no deferred ack waits for
  /// its timer, no event is queued. Only then may a thread sleep on WaitFd() (for
  /// a bounded time: op timeouts still need Progress). Default false (never sleep).
  virtual bool Quiet() const { return false; }
};

}  // namespace railyard::fabric
