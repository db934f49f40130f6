// Transport-independent comm interfaces the plugin layer drives. A transport
// (TCP now, verbs next) implements them; plugin/net.cc only sees these.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "env/status.h"
#include "proxy/mr_cache.h"

namespace railyard::proxy {

using Clock = std::chrono::steady_clock;

/// Who is at the other end of a comm, for error messages.
struct PeerInfo {
  std::string host;     ///< peer host name
  uint32_t pid = 0;     ///< peer process id (0 if unknown)
  std::string address;  ///< "ip:port" of the peer's control socket
  std::string device;   ///< our device (rail) name the comm runs on
  /// "peer host (pid N, ip:port) on rail dev".
  std::string ToString() const;
};

class Comm;

/// This process's rank in ONE communicator, learned from the tags of the sends on
/// that communicator's comms (NCCL tags every isend with the sender's rank in the
/// communicator, nccl-net-abi.md §2.5 "isend"). One per init context (v11 init runs
/// once per communicator), shared by the comms made with it, so two communicators in
/// one process each name their own rank. Thread-safe.
class RankSource {
 public:
  void Note(int tag) { rank_.store(tag, std::memory_order_relaxed); }
  /// -1 until the first send.
  int Get() const { return rank_.load(std::memory_order_relaxed); }
  /// "rank 3", or "rank ?" before the first send.
  std::string Text() const {
    const int r = Get();
    return "rank " + (r >= 0 ? std::to_string(r) : std::string("?"));
  }

 private:
  std::atomic<int> rank_{-1};
};

/// Process-wide guess, kept for older comms made without a RankSource (tests, tools):
/// the tag of the last send of any communicator. Wrong with two communicators; the
/// comms the NetRuntime makes carry their communicator's RankSource (RankFor).
/// This process's rank as NCCL numbers it, learned from the tags of its sends
/// (NCCL tags every isend with the sender's rank, nccl-net-abi.md §2.5 "isend");
/// -1 until the first send. Receive-side errors use it to name "this rank".
int LocalRank();
/// Records the tag of a send (called by every transport's isend).
void NoteLocalRank(int tag);
/// The rank an older comm's errors name: its communicator's, when the runtime gave
/// the comm one (TcpOptions::rank, VerbsOptions::rank), else the process-wide guess.
inline int RankFor(const RankSource* rank) { return rank != nullptr ? rank->Get() : LocalRank(); }

/// The opaque request handed to NCCL. Owned by the comm that made it.
struct Request {
  Comm* owner = nullptr;
};

/// A comm's sticky error: the first failure wins and every later call reports it.
/// Thread-safe; helper threads set it, the caller's thread reads it.
class Poison {
 public:
  /// Records `s` unless an error is already recorded, and logs it at WARN the first
  /// time (so every fault reaches NCCL's log once). Returns true if it was the first.
  bool Set(const Status& s) { return Set(s, true); }
  /// As Set(s), logging at WARN only when `warn` (else INFO): a peer that closes a
  /// comm with nothing in flight is the normal end of a job, not a fault.
  bool Set(const Status& s, bool warn);
  bool IsSet() const { return set_.load(std::memory_order_acquire); }
  /// The recorded error (Ok when none).
  Status Get() const;

 private:
  std::atomic<bool> set_{false};
  mutable std::mutex mu_;
  Status status_;
};

/// Base of send and receive comms.
class Comm {
 public:
  virtual ~Comm() = default;
  /// Non-blocking completion check. On done a send writes sizes[0] (bytes sent) and
  /// a receive writes sizes[0..n) (bytes received per buffer); sizes may be NULL.
  /// After done the request is recycled; it must not be tested again.
  virtual Status Test(Request* request, int* done, int* sizes) = 0;
  /// Stops helper threads and closes sockets. Requests in flight are abandoned;
  /// the peer sees a broken connection. Idempotent.
  virtual void Close() = 0;
};

/// Sending side of a connection.
class SendComm : public Comm {
 public:
  /// Starts sending [data, data+size) with `tag` into the receiver's next posted
  /// buffer carrying that tag. *request = NULL with Ok means "not yet" (no matching
  /// clear-to-send has arrived): call again. Errors: InvalidUsage when the message is
  /// larger than the posted buffer; the comm's poison after a fault; RemoteError
  /// when no matching buffer is posted within RAILYARD_TIMEOUT_MS.
  virtual Status Isend(const void* data, size_t size, int tag, MemoryRegion* mr,
                       Request** request) = 0;
};

/// Receiving side of a connection.
class RecvComm : public Comm {
 public:
  /// Posts n (1..kMaxRecvs) buffers as one grouped receive: buffer i takes the next
  /// send tagged tags[i]. Each buffer must lie inside its registered region.
  /// InternalError when NCCL_NET_MAX_REQUESTS receives are already in flight.
  virtual Status Irecv(int n, void** data, const size_t* sizes, const int* tags,
                       MemoryRegion** mrs, Request** request) = 0;
  /// Makes the data of a completed receive visible to the GPU (nccl-net-abi.md §2.5
  /// "iflush": GDR receives only). *request = NULL when nothing needs flushing (host
  /// memory, or a transport that writes with the CPU); otherwise test() it until done.
  virtual Status Iflush(int /*n*/, void** /*data*/, const int* /*sizes*/, MemoryRegion** /*mrs*/,
                        Request** request) {
    *request = nullptr;
    return Status::Ok();
  }
};

/// Accepting side of a listen.
class ListenComm {
 public:
  virtual ~ListenComm() = default;
  /// Non-blocking: *recvComm = NULL with Ok means "not yet".
  virtual Status Accept(RecvComm** recvComm) = 0;
};

}  // namespace railyard::proxy
