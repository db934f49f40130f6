// CommWorker: the fabric Worker one NCCL device's comms share, with the lock that
// serialises it, the dispatch of its events to the comms they belong to, and the
// helper thread that moves bytes while no caller does (NCCL's proxy thread polls
// test() in a loop; the helper takes over once it has been quiet for
// proxy::ProgressGate::kHandoff, as the TCP comms' helpers did; while the caller
// keeps driving, the helper's checks grow sparser, up to kHandoff + kMaxStandByStretch).
//
// The helper never makes a polling caller wait: it sleeps on its own condition
// variable (not the Worker's lock), so its wake-ups while the caller drives cost the
// caller nothing; it takes the Worker's lock only with try_lock, after the caller has
// been quiet for kHandoff, and hands it back after each pass a caller waits for.
// Once its passes find nothing for 2 ms and the Worker says Quiet() with a WaitFd()
// (fabric mode's cable set: one epoll set of every cable's and relayed route's
// Workers), it sleeps on that descriptor and an eventfd of its own, up to
// kMaxQuietWait, instead of polling every 2 ms.
//
// Routing of events: an op's cookie carries the comm id in its top 24 bits; an
// immediate's value carries the target comm id in its top 24 bits; a Send record
// is a hello (to a listen comm by listen id) or a close notice (to a comm by id);
// a peer connection that failed here (kError, op kNone) goes to every comm whose
// peer is that Worker.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/event.h"
#include "proxy/nccl/nccl_records.h"
#include "proxy/socket.h"
#include "proxy/socket.h"
#include "proxy/tcp/tcp_progress_gate.h"

namespace railyard::proxy::nccl {

/// A comm driven by a CommWorker. Its methods run with the CommWorker's lock held.
class CommClient {
 public:
  virtual ~CommClient() = default;
  /// An event for this comm: kDone/kError of its ops, a kImmediate naming it, a
  /// kRecord close notice naming it, or a kError (op kNone) of its peer's connection.
  virtual void OnEvent(const fabric::Event& e) = 0;
  /// Whether `worker` is one this comm takes its peer's ops from (PeerWorkers: one
  /// per route of the peer; none while unknown, then nothing is routed to it by peer).
  virtual bool FromPeer(uint64_t worker) const = 0;
};

/// A listen comm's side: hellos arriving for its listen id.
class HelloSink {
 public:
  virtual ~HelloSink() = default;
  /// A valid hello from Worker `peer` (with the lock held).
  virtual void OnHello(Hello hello, fabric::RemoteKey fifoKey, uint64_t peer) = 0;
};

/// Bits of a cookie below the comm id (the comm's own op number).
inline constexpr int kCookieCommShift = 40;
/// Bits of an immediate below the comm id (the cell: seq % 32 and slot).
inline constexpr int kImmCommShift = 8;
/// Largest comm id (24 bits).
inline constexpr uint32_t kMaxCommId = (1u << 24) - 1;

/// Longest a helper sleeps on a Quiet Worker's WaitFd: op timeouts, keepalives and a
/// cable set's adoption of a new cable (every 100 ms) still need a Progress pass.
inline constexpr std::chrono::milliseconds kMaxQuietWait{50};

/// Most a helper adds to its kHandoff stand-by nap while the caller keeps driving (see
/// CommWorker::HelperLoop): a caller that stops is taken over within kHandoff plus this.
inline constexpr std::chrono::microseconds kMaxStandByStretch{7000};

/// See file comment. Thread-safe through Lock().
class CommWorker {
 public:
  /// `domain` must outlive this; `device` names the NCCL device in messages.
  CommWorker(fabric::Domain* domain, std::string device);
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  /// Creates the Worker and starts the helper thread. Called once by the owner
  /// (the plugin's init); SystemError when the Worker cannot listen.
  Status Start();
  /// Stops the helper thread and destroys the Worker. Every comm and listen comm
  /// must be gone. Idempotent; Start may be called again after it.
  void Stop();
  /// True between Start and Stop.
  bool running() const { return worker_ != nullptr; }

  /// The lock every use of the Worker, its Endpoints and the comms takes.
  /// The helper yields it to a caller that waits (callers_ counts them).
  std::unique_lock<std::mutex> Lock() {
    callers_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> l(mu_);
    callers_.fetch_sub(1, std::memory_order_relaxed);
    return l;
  }
  /// With the lock held: one Progress pass, its events dispatched. Marks the caller
  /// as driving (the helper stands by). Returns the events seen.
  size_t DriveLocked();

  /// Progress passes the helper thread has made since Start (any thread may read it):
  /// an idle helper that sleeps on the Worker's descriptor makes about 20 a second,
  /// one that polls every 2 ms about 500.
  uint64_t helperPasses() const { return helperPasses_.load(std::memory_order_relaxed); }

  fabric::Worker& worker() { return *worker_; }
  fabric::Domain& domain() { return *domain_; }
  const std::string& device() const { return device_; }

  /// With the lock held: a fresh comm id (1..kMaxCommId, unused) for `c`.
  /// ResourceExhausted-like InternalError when 2^24 comms are open.
  Status AddClient(CommClient* c, uint32_t* id);
  void RemoveClient(uint32_t id);
  void AddListener(uint64_t listenId, HelloSink* sink);
  void RemoveListener(uint64_t listenId);

  /// With the lock held: this Worker's Endpoint to itself and a 64-byte host word
  /// registered for local use, for the GPU flush of receives into device memory
  /// (an RDMA READ of the received buffer by the local HCA makes the HCA's earlier
  /// writes into it visible to the GPU, as NCCL's own IB transport does with its
  /// loopback QP). Made on first use, freed by Stop. The flush READ goes over the
  /// Endpoint's first rail only. Errors of Worker::Connect and Domain::Register.
  Status LoopbackLocked(fabric::Endpoint** ep, fabric::LocalSlice* word);

 private:
  void Dispatch(const fabric::Event& e);
  void HelperLoop();
  /// The helper sleeps up to `d` (without the Worker's lock); true when Stop asks it to end.
  bool HelperSleep(std::chrono::microseconds d);
  /// The helper sleeps (without the Worker's lock) until `workerFd` (the Worker's
  /// WaitFd, taken while it was Quiet) polls readable, WakeHelper is called, or `d`
  /// passes; true when Stop asks it to end.
  bool HelperWait(int workerFd, std::chrono::milliseconds d);
  /// Wakes a sleeping helper (a comm or listen comm appeared, or Stop).
  void WakeHelper();

  fabric::Domain* domain_;
  std::string device_;
  std::mutex mu_;
  std::unique_ptr<fabric::Worker> worker_;
  std::thread helper_;
  std::mutex sleepMu_;                ///< stop_ and wake_ change under it (the helper's sleep)
  std::condition_variable sleepCv_;   ///< the helper sleeps here, never on mu_
  std::atomic<bool> stop_{false};
  bool wake_ = false;
  proxy::Fd wakeFd_;  ///< eventfd: WakeHelper and Stop also wake a helper in HelperWait
  std::atomic<int> callers_{0};  ///< threads waiting in Lock()
  std::atomic<uint64_t> helperPasses_{0};  ///< helperPasses()
  ProgressGate gate_;
  std::unordered_map<uint32_t, CommClient*> clients_;
  std::unordered_map<uint64_t, HelloSink*> listeners_;
  uint32_t nextId_ = 1;
  std::vector<fabric::Event> events_;
  std::unique_ptr<fabric::Endpoint> loopback_;  ///< see LoopbackLocked
  std::vector<uint8_t> flushWord_ = std::vector<uint8_t>(64);
  const fabric::Region* flushRegion_ = nullptr;
};

}  // namespace railyard::proxy::nccl
