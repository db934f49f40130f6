// ForwarderHost: runs the host's fabric relay (a Forwarder, forwarder.h) in the
// process that holds the host's relay seat (proxy/relay/relay_seat.h: railyardd when
// it runs, else one rank process), over one TCP Domain per cable of this host, each
// listening on its cable's rails at the fixed RAILYARD_FABRIC_RELAY_PORT
// (graph_routes.h: how sources find it, and why a peer cannot stand in for it).
//
// One thread, started by Start and stopped by the destructor (nowhere else), owns
// the Forwarder: while `holding()` says this process holds the seat it builds the
// Forwarder from the cabling graph's cables (rebuilt, when no route is open, as the
// cables change) and progresses it; when the seat goes to another process it drops
// the Forwarder (its routes fail at their sources with named errors) and waits.
// A port that cannot be bound yet (the seat's previous holder still closing) is
// retried every RetryMs; one that still fails after warnAfterMs is a WARN.
//
// Over RDMA: a cable whose every rail of this host is an active RDMA port
// (proxy/verbs IbPorts, matched by netdev) also gets a verbs Forwarder port: a verbs
// Domain on those ports whose bootstrap listener binds the cable's first rail at
// RAILYARD_FABRIC_RELAY_VERBS_PORT (graph_routes.h), with its onward verbs Domain.
// Verbs routes then cross this host in registered rings written with RDMA WRITE WITH
// IMM; TCP routes keep the TCP port. A cable whose verbs Domain cannot be made is
// warned once and left TCP only; when the verbs ports' Workers cannot be made (their
// port still bound by the seat's previous holder), the TCP ports serve alone, warned
// once, and the verbs ports are retried every 5 s while no route is open. The host's
// RDMA ports are opened by this thread for railyardd, which does not watch their
// async events (a port gone shows as its QPs' errors).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/relay/relay_options.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"

namespace railyard::fabric::relay {

/// Settings of a ForwarderHost.
struct ForwarderHostOptions {
  uint16_t port = 29519;  ///< RAILYARD_FABRIC_RELAY_PORT: every Forwarder rail listens here
  RelayOptions relay;     ///< slots, limits, timeout, cluster key
  /// Template of each cable's TCP Domain (striping, timeout, sockets per rail); its
  /// rails and listenPort are set per cable.
  tcp::TcpOptions tcp;
  int retryMs = 200;      ///< between attempts to bind the ports, and to re-read the graph
  /// A build failure other than "no cable yet" (a port held by another process, a rail
  /// address gone) that lasts this long (ms) is logged once at WARN, naming the port and
  /// the cause; a shorter one (the seat's previous holder still closing) stays at INFO.
  int warnAfterMs = 2000;
  /// RAILYARD_FABRIC_RELAY_VERBS_PORT: the verbs ports' bootstrap port on RDMA cables
  /// (0: TCP ports only).
  uint16_t verbsPort = 0;
  /// Template of each RDMA cable's verbs Domains (bootstrap address, port and rank
  /// are set per cable).
  verbs::VerbsOptions verbs;
  /// The host's RDMA ports: the process's own (the plugin opens them once) or, when
  /// null, verbsPort != 0 and openIb, opened by the thread before its first build with
  /// `verbs.config` (railyardd), once.
  std::shared_ptr<proxy::verbs::IbPorts> ib;
  /// Whether the thread may open the RDMA ports itself (railyardd); a rank process
  /// passes its own or none (it opened them at init and found none).
  bool openIb = false;

  /// Everything from `config` (RAILYARD_FABRIC_RELAY_PORT, RAILYARD_FABRIC_RELAY_VERBS_PORT,
  /// RAILYARD_TIMEOUT_MS, relay limits, the verbs port and link variables); `clusterKey`
  /// may be nullptr.
  static ForwarderHostOptions FromConfig(const env::Config& config,
                                         std::shared_ptr<const topology::ClusterKey> clusterKey);
};

/// See file comment.
class ForwarderHost {
 public:
  /// Starts the thread. `graph` reads the cabling graph; `self` is this host's id;
  /// `holding` says whether this process holds the relay seat now (called from the
  /// thread; must be thread-safe). InvalidArgument for bad options.
  static Status Start(GraphFn graph, uint64_t self, std::function<bool()> holding, ForwarderHostOptions options,
                      std::unique_ptr<ForwarderHost>* out);
  /// Stops the thread and drops the Forwarder.
  ~ForwarderHost();
  ForwarderHost(const ForwarderHost&) = delete;
  ForwarderHost& operator=(const ForwarderHost&) = delete;

  /// Whether a Forwarder is listening now.
  bool Serving() const { return serving_.load(); }
  /// The neighbours its TCP ports face (one per cable, neighbours ascending), empty
  /// while not serving.
  std::vector<uint64_t> PortNeighbours() const;
  /// The neighbours its verbs (RDMA) ports face, empty while not serving or without any.
  std::vector<uint64_t> VerbsNeighbours() const;
  /// The Forwarder's counters (zeros while not serving); routes of earlier
  /// Forwarders of this host are not included.
  ForwarderStats stats() const;
  /// Why the last build failed or the last route was refused ("" if none), for logs and tests.
  std::string lastProblem() const;
  /// Starts draining (railyardd's SIGTERM): the Forwarder refuses every new route
  /// (its source hears "the relay is draining") and is no longer dropped when the
  /// seat goes (RelayService::Stop gives it up) nor rebuilt; the routes open now
  /// carry on. Call before giving the seat up. Idempotent.
  void BeginDrain();
  /// BeginDrain, then waits until no route is open or `drainMs` (ms) has passed
  /// (polled every 10 ms). Returns how many routes were still open then; the
  /// destructor drops them (their sources see the break).
  size_t Drain(int drainMs);

 private:
  ForwarderHost(GraphFn graph, uint64_t self, std::function<bool()> holding, ForwarderHostOptions options);
  void Run();
  /// Builds the Forwarder over the graph's cables now; false (lastProblem set) when it cannot.
  bool Build(const topology::ClusterGraph& g);
  /// Opens the host's RDMA ports (options_.ib) the first time it is called when
  /// verbsPort is set and none were given; a failure is warned and not retried.
  /// Called by the thread only, without mu_.
  void OpenRdmaPortsOnce();
  /// Adds a verbs port Domain and its onward Domain for every cable whose rails are
  /// all active RDMA ports (appending to the vectors); a cable that cannot have one is
  /// warned once. `ends[c]`: the sources cable c's port accepts (the neighbour's ends of
  /// the cable, as its TCP port). Requires mu_.
  void AddVerbsPorts(const std::vector<uint64_t>& neighbours, const std::vector<std::vector<RailInfo>>& cables,
                     const std::vector<std::vector<std::string>>& ends,
                     std::vector<std::unique_ptr<Domain>>* domains, std::vector<Domain*>* ports,
                     std::vector<Domain*>* onward, std::vector<uint64_t>* portNeighbours,
                     std::vector<AddressKind>* kinds);
  void Drop();

  GraphFn graph_;
  uint64_t self_;
  std::function<bool()> holding_;
  ForwarderHostOptions options_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> serving_{false};
  std::atomic<bool> draining_{false};
  mutable std::mutex mu_;  ///< guards the fields below against stats()/PortNeighbours()
  /// Per cable its TCP port Domain and onward Domain, then per RDMA cable its verbs pair.
  std::vector<std::unique_ptr<Domain>> domains_;
  std::unique_ptr<Forwarder> forwarder_;
  std::vector<uint64_t> neighbours_;
  std::vector<uint64_t> verbsNeighbours_;
  bool verbsShort_ = false;     ///< the last build served without its verbs ports (retried)
  bool ibTried_ = false;        ///< the thread opened (or failed to open) the RDMA ports (thread only)
  std::string verbsWarned_;     ///< the last verbs-port problem warned about
  std::vector<std::vector<RailInfo>> cables_;  ///< the rails the Forwarder was built on
  std::string problem_;
  bool problemIsWait_ = false;  ///< problem_ is only "no cable yet": nothing to warn about
};

}  // namespace railyard::fabric::relay
