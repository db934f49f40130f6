// The fabric's TCP transport: a Domain whose rails are IPv4 addresses, emulating
// one-sided operations over framed sockets with every remote access checked by the
// target's Worker before a byte lands or leaves.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/region_table.h"
#include "proxy/fabric/stripe_scheduler.h"

namespace railyard::fabric::tcp {

/// Options of a TCP Domain.
struct TcpOptions {
  /// The rails: an IPv4 address each (sockets bind it), a device name for errors and a
  /// speed that weights striping. 1..16 rails. Endpoints pair local rail i with the
  /// peer's rail i (as many rails as both have) unless such a pair does not share a
  /// subnet while other local rails do (a switchless host, each rail on its own
  /// cable's subnet): then each peer rail pairs with the local rail on its subnet
  /// (tcp_endpoint.cc, PairRails).
  std::vector<RailInfo> rails;
  /// Sockets per rail and Endpoint (1..16).
  int socketsPerRail = 1;
  /// Striping (RAILYARD_STRIPE_*).
  StripeOptions stripe;
  /// An Endpoint (or a peer's connection here) with work outstanding and no bytes
  /// moving for this long fails with TIMEOUT (RAILYARD_TIMEOUT_MS).
  int timeoutMs = 30000;
  /// A connect the peer refuses (nothing listens on its port yet: its process or the
  /// relay host's railyardd still starting, a Forwarder rebuilding its listeners) is
  /// dialed again with backoff for this long from the Endpoint's creation, then fails
  /// with CONNECT_FAILED naming the refusals (tcp_dial.h; NCCL retries refused connects
  /// for about 20 s, src/misc/socket.cc). 0 = fail at the first refusal. FromConfig: the
  /// timeout (RAILYARD_TIMEOUT_MS).
  int connectRetryMs = 0;
  /// An accepted socket must send its hello within this time, else it is closed
  /// (RAILYARD_ACCEPT_TIMEOUT_MS; 10 s by default, as the variable's).
  int helloTimeoutMs = 10000;
  /// Peer connections (of any number of sockets each) a Worker serves at once, 1..65536.
  /// When all are taken, a new one from a source holding fewer connections than another
  /// source closes the oldest idle one (no op under way, nothing queued) of the source
  /// holding the most; otherwise (or when none of that source's is idle) it is refused.
  size_t maxPeerConnections = 1024;
  /// The Worker id this Worker's connections are named by at their targets (their
  /// hellos carry it in `key`): a fabric-mode cable set's Worker id, which its peers
  /// know it by, so that a target's errors name the peer as the peers' own Endpoints
  /// do (CollComm::RankOf finds the rank by it; new-user trial: a target-side error
  /// named no rank). 0 (the default): this Worker's own id.
  uint64_t connectionName = 0;
  /// This process's rank, named in errors (-1: unknown).
  int rank = -1;
  /// Bytes one socket moves each way per Progress call, at most (4 KiB..64 MiB). Large
  /// values move more per call; small ones bound the time one call takes (and let tests
  /// observe landings socket by socket).
  uint64_t pumpBytes = 4ull << 20;
  /// TCP port every rail of the Domain's Workers listens on; 0 (the default) = an
  /// ephemeral port per rail. A fixed port (a relay's Forwarder, graph_routes.h) is bound
  /// without SO_REUSEPORT, so a second Worker on it fails with SystemError (EADDRINUSE).
  uint16_t listenPort = 0;
  /// The registrations this Domain's Workers resolve remote accesses against; nullptr
  /// (the default) = the Domain's own. Set, several Domains (the cables of fabric mode,
  /// proxy/runtime/cable_set_domain.h) share one table: a Region registered there is
  /// valid on each, with one RemoteKey.
  std::shared_ptr<RegionTable> sharedRegions;
  /// The host that owns a rail's IPv4 address (dotted text), for the errors of incoming
  /// connections: they say whom their sockets arrived from, the origin or, relayed, the
  /// last relay ("arriving from h1 (10.0.1.1)"). Empty function, or "" returned: the
  /// address alone. Fabric mode sets it from the cabling graph's host names.
  std::function<std::string(const std::string& ipv4)> nameAddress;
  /// The IPv4 addresses (dotted) incoming sockets may come from; empty (the default) =
  /// any. A socket from any other source is closed as it is accepted, before a byte is
  /// read. A relay's Forwarder ports set their neighbours' ends of the cable (the graph
  /// knows them): a host off the cable that routes the cable's subnet through this
  /// host's management address reaches the rail address too (hostile-peer probe).
  std::vector<std::string> acceptOnlyFrom;

  /// Striping and timeout from `config`; `rails` as given.
  static TcpOptions FromConfig(const env::Config& config, std::vector<RailInfo> rails);
  /// InvalidArgument naming the first bad field (rail address not IPv4, counts out of range).
  Status Validate() const;
};

/// Creates a TCP Domain (no socket is opened before CreateWorker).
Status CreateTcpDomain(const TcpOptions& options, std::unique_ptr<Domain>* out);

/// The TCP Domain (exposed for its Workers).
class TcpDomain : public Domain {
 public:
  explicit TcpDomain(TcpOptions options);

  const char* TransportName() const override { return "tcp"; }
  const Capabilities& capabilities() const override { return caps_; }
  const std::vector<RailInfo>& rails() const override { return options_.rails; }
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) override;
  Status Deregister(const Region* region) override;
  Status CreateWorker(std::unique_ptr<Worker>* out) override;

  const TcpOptions& options() const { return options_; }
  RegionTable& regions() { return *regions_; }

 private:
  TcpOptions options_;
  Capabilities caps_;
  std::shared_ptr<RegionTable> regions_;
};

}  // namespace railyard::fabric::tcp
