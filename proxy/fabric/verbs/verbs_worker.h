// The verbs transport's Worker: a bootstrap TCP listener (QP records are exchanged
// over it, verbs_bootstrap.h), the targets of peers' connections (VerbsTarget), its
// own Endpoints (VerbsEndpoint), and Progress, which polls every CQ without
// blocking and collects the events. It starts no thread (explicit progress only).
//
// Sleeping (WaitFd, Quiet): every CQ of its connections reports to a completion
// channel of its device (one per ibv_context), and WaitFd() is an epoll set of those
// channels and the bootstrap listener. Quiet() arms every CQ (ibv_req_notify_cq)
// the first time it finds nothing to do and says false, so the caller polls once
// more after arming; the next Quiet() with nothing new says true, and a completion
// from then on makes WaitFd() readable. Each Progress asks that epoll set (timeout
// 0) what is ready, then accepts only when the listener is readable and takes the
// channels' events (ibv_get_cq_event, acked at once; then asks for a new arming)
// only when a channel holds one. A relay host's
// Forwarder sleeps on it instead of polling every millisecond (ring_comms.sh
// --threads: that thread took 14-18 % of a soft-RoCE guest's CPU while idle).
#pragma once

#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <vector>

#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/fabric/worker.h"
#include "proxy/socket.h"

namespace railyard::fabric::verbs {

class VerbsEndpoint;
class VerbsTarget;

/// See file comment. Its Endpoints must be destroyed before it.
class VerbsWorker : public Worker {
 public:
  /// Incoming connections still in their handshake at once; a socket accepted beyond
  /// this is closed at once (each holds an fd until the setup deadline: a flood of
  /// idle connections must not take every descriptor of the process).
  static constexpr size_t kMaxSettingUp = 256;

  /// Opens the bootstrap listener on VerbsOptions::bootstrapAddress (an ephemeral
  /// port). SystemError naming the address when bind or listen fails.
  static Status Create(VerbsDomain* domain, std::unique_ptr<Worker>* out);
  ~VerbsWorker() override;

  std::vector<uint8_t> Address() const override { return address_.Pack(); }
  /// InvalidArgument for an address that is not a valid verbs Worker address.
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override;
  size_t Progress(std::vector<Event>* events) override;
  WorkerStats stats() const override { return stats_; }
  /// The epoll set of the completion channels and the bootstrap listener (see the
  /// file comment); -1 when a channel could not be made (keep calling Progress).
  int WaitFd() const override { return channelled_ ? epoll_.get() : -1; }
  /// See the file comment: true only after a Quiet() that armed every CQ and a
  /// Progress since that took nothing (no event queued, every connection set up
  /// and waiting on its CQ or its peer).
  bool Quiet() const override;
  /// Test hook: every connection of this Worker, Endpoints and targets, stops watching
  /// its bootstrap connection, as an outvoted keepalive verdict does; their liveness
  /// probes are then the only watch left (VerbsEndpoint::Probe,
  /// VerbsTarget::ReturnCredits).
  void ForgetBootstrapsForTesting();
  /// Test hook: accept4 calls made so far (AcceptNew), successful or not.
  uint64_t AcceptCallsForTesting() const { return acceptCalls_; }

  // --- for VerbsEndpoint and VerbsTarget ------------------------------------------
  VerbsDomain& domain() { return *domain_; }
  uint64_t id() const { return address_.workerId; }
  void Emit(Event e) { events_.push_back(std::move(e)); }
  WorkerStats& counters() { return stats_; }
  void Detach(VerbsEndpoint* ep);
  /// The completion channel of each of `ports` (indices into the Domain's IbPorts),
  /// for QpBundle::Create; null when this Worker could not make channels.
  const std::vector<ibv_comp_channel*>* ChannelsFor(const std::vector<int>& ports);
  /// A new CQ was made: the next Quiet() arms again.
  void NewCq() { armed_ = false; }

 private:
  explicit VerbsWorker(VerbsDomain* domain);
  /// What Progress must look at this pass (PollReadiness).
  struct Readiness {
    bool listener = false;  ///< a bootstrap socket waits to be accepted
    bool channels = false;  ///< a completion channel holds an event
  };
  /// One epoll_wait (timeout 0) on the set of the listener and the channels, in place
  /// of an accept4 and a read per channel on every pass: a failed accept4 allocates
  /// and frees a socket, an inode and a file (docs/benchmarks.md, "Fabric mode over
  /// RDMA, direct"). It asks on every pass: asking one pass in 16 while the CQs
  /// are unarmed was tried and was no faster in the ring of 4 (same section). Without
  /// channels: the listener is tried every pass.
  Readiness PollReadiness() const;
  void AcceptNew();
  /// One completion channel per device context of the Domain's rails, and the epoll
  /// set (channels and listener). False (WaitFd -1) when one cannot be made.
  bool MakeChannels();
  /// Takes and acks every event the channels hold; true when there was one.
  bool DrainChannels();

  VerbsDomain* domain_;
  VerbsAddress address_;
  proxy::Fd listener_;
  std::vector<std::unique_ptr<VerbsTarget>> targets_;
  AcceptSources acceptOnlyFrom_;  ///< VerbsOptions::acceptOnlyFrom, parsed
  uint64_t offSource_ = 0;        ///< bootstrap sockets closed at accept for their source
  uint64_t overCap_ = 0;          ///< bootstrap sockets closed at accept: too many setting up
  uint64_t acceptCalls_ = 0;      ///< accept4 calls (AcceptCallsForTesting)
  std::vector<VerbsEndpoint*> endpoints_;
  std::vector<Event> events_;
  WorkerStats stats_;
  uint64_t nextConnection_ = 1;
  std::map<ibv_context*, ibv_comp_channel*> channels_;
  std::vector<ibv_comp_channel*> channelsFor_;  ///< ChannelsFor's answer (valid until the next call)
  proxy::Fd epoll_;
  bool channelled_ = false;
  mutable bool armed_ = false;  ///< every CQ armed, and no channel event taken since
};

}  // namespace railyard::fabric::verbs
