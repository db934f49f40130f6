// Tier routes: how the storage tiers' clients (the railyard_expert_* and
// railyard_snapshot_* C APIs) and railyardd reach a tier peer named by its fabric host
// rather than by an IP address, straight on a cable or through the fabric's relays.
//
// Peer specs (the `peer` of railyard_expert_open, the `host` of railyard_snapshot_connect):
//   "IPv4:PORT" (expert) / "IPv4" + port (snapshot): as before, a TCP control connection
//       to that address; the peer must be reachable by IP (on a cable, or routed).
//   "host:NAME": the host whose cabling agent calls itself NAME (RAILYARD_HOST_NAME, or
//       its system host name) in this host's cabling graph. The control connection goes
//       through storage/tunnel's ControlTunnel to railyardd's tier tunnel on that host
//       (RAILYARD_TIER_TUNNEL_PORT on every rail: the expert store there, the snapshot
//       arenas at the port + 1), and the data (fabric Reads/Writes) over the same
//       fabric-mode route (runtime::CableSetDomain): straight on a cable, else relayed.
// Ranks are not peer names: a tier peer is a host running railyardd, not an NCCL rank
// (a job's rank-to-host map is NCCL's; name the host it gives).
//
// Both sides build fabric-mode Domains over the Router's cabling graph
// (CreateTierDomain). The tunnel acceptor's Worker binds the fixed port on every rail,
// so a client builds the acceptor's address from the graph alone (TunnelAddressOf):
// the peer's rail addresses the graph lists, at that port.
//
// Threads: TierClientFabric::Get starts the client process's cabling agent (the
// Router's thread) once, the first time a host:NAME peer is opened; each ControlTunnel
// starts its own (storage/tunnel). railyardd starts its tunnels in its main loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/verbs/ib_ports.h"
#include "storage/tunnel/control_tunnel.h"

namespace railyard::plugin {

/// The "host:" prefix of a host-named peer spec.
inline constexpr const char* kTierHostPrefix = "host:";

/// True when `spec` names its peer by fabric host ("host:NAME"); then *name is NAME.
/// InvalidArgument for "host:" with an empty name, or one over 64 bytes or with
/// control characters, ':' or whitespace.
Status ParseTierHost(const std::string& spec, bool* isHost, std::string* name);

/// The tunnel acceptor's address on the host called `name` in `graph`: a HostAddress
/// of every rail address the graph lists for it, each at `port`. InvalidUsage when no
/// host or several have that name, or the host is this one (`self`: use 127.0.0.1).
Status TunnelAddressOf(const topology::ClusterGraph& graph, uint64_t self, const std::string& name, uint16_t port,
                       std::vector<uint8_t>* out);

/// A fabric-mode Domain over `router`'s graph and rails (RAILYARD_* settings from
/// `config`); `listenPort` 0: ephemeral ports, else that port on every rail. `ib`: the
/// process's RDMA ports, for a data Domain whose cables of RDMA ports run verbs
/// (CableSetOptions::ib; both ends of a cable must: a client's data Domain and the tier
/// peer's are made alike); null or empty: every cable TCP (the tunnels' Domains, whose
/// acceptor address a client builds from the graph: TCP at the tier tunnel port).
/// Errors of CableSetDomain::Create and LoadClusterKey.
Status CreateTierDomain(const env::Config& config, const proxy::Router& router, const std::vector<proxy::FabricRail>& rails,
                        uint16_t listenPort, std::unique_ptr<runtime::CableSetDomain>* out,
                        std::shared_ptr<proxy::verbs::IbPorts> ib = nullptr);

/// The process's RDMA ports for the tiers' data Domains (IbPorts::Open: those
/// RAILYARD_HCA selects, ACTIVE with a usable GID), or null when the host has none or
/// they cannot be opened (then said at WARN, naming `who`, and the data runs over TCP).
std::shared_ptr<proxy::verbs::IbPorts> OpenTierRdmaPorts(const env::Config& config, const char* who);

/// A client's route to one tier peer: its Worker (data, of TierClientFabric's data
/// Domain: RDMA on cables of RDMA ports) and tunnel (control, of its TCP Domain).
/// Destroy the tier client before it.
struct TierRoute {
  std::unique_ptr<fabric::Worker> worker;                  ///< the data (fabric Reads/Writes) Worker
  std::unique_ptr<storage::tunnel::ControlTunnel> tunnel;  ///< the control connection's dialing side
  std::string how;  ///< "direct to h1" / "via relay h1": the route's first hop
  /// The tier client connects here (the tunnel's "127.0.0.1:PORT").
  std::string local() const { return tunnel->LocalAddress(); }
  /// What the tier client's errors call the peer the user named as `spec` ("host:h2"):
  /// the spec and the route's first hop, "host:h2 (via relay h1)" / "host:h2 (direct
  /// to h2)"; never the tunnel's local port, which means nothing to the user.
  std::string PeerName(const std::string& spec) const { return spec + " (" + how + ")"; }
  /// Why the tunnel failed, for a tier client error that only saw its control
  /// connection close: "" when the tunnel has no error; else "the tunnel to SPEC
  /// failed: <error>" and, when nothing listened at the tier tunnel port, which
  /// railyardd flag serves `tier` there ("--expert-store", "--snapshot-arena").
  std::string TunnelFailure(const std::string& spec, const std::string& flag) const;
  /// `s` with TunnelFailure before its message ("<TunnelFailure>; so <message>", same
  /// code; after a leading "expert NAME: ", which stays first: ExpertErrcOf reads it);
  /// `s` itself when ok or when the tunnel has no error.
  Status WithTunnelFailure(const Status& s, const std::string& spec, const std::string& flag) const;
  ~TierRoute() {
    tunnel.reset();  // its Worker before the data Worker; both before the Domain (process-lifetime)
    worker.reset();
  }
};

/// The client process's fabric for host:NAME peers: a Router (cabling agent) over
/// RAILYARD_SOCKET_IFNAME's rails; a TCP fabric-mode Domain for the control tunnels;
/// a data Domain over the same rails whose cables of RDMA ports run verbs (the host's
/// RDMA ports, OpenTierRdmaPorts; TCP where there are none), and its
/// RegistrationCache. Made once, never destroyed (handles may outlive static teardown).
class TierClientFabric {
 public:
  /// The process's instance, started on first use. Errors of SelectFabricRails (none:
  /// InvalidUsage naming RAILYARD_SOCKET_IFNAME), Router::Start, CreateTierDomain; the
  /// same error on every later call.
  static Status Get(TierClientFabric** out);
  /// Waits up to RAILYARD_TIMEOUT_MS (at least 5 x RAILYARD_DISCOVERY_DEAD_MS) for the
  /// settled graph to route to host `name`, then makes a
  /// Worker and a tunnel to its tier tunnel at `port`. InvalidUsage naming the host
  /// and the hosts known when the graph never routes to it; errors of Dial.
  Status Open(const std::string& name, uint16_t port, TierRoute* out);
  fabric::RegistrationCache& cache() { return *cache_; }

 private:
  TierClientFabric() = default;
  const env::Config* config_ = nullptr;
  std::unique_ptr<proxy::Router> router_;
  std::unique_ptr<runtime::CableSetDomain> domain_;      ///< TCP: the control tunnels
  std::shared_ptr<proxy::verbs::IbPorts> ib_;            ///< null: no RDMA port
  std::unique_ptr<runtime::CableSetDomain> dataDomain_;  ///< the data Workers (RDMA where cabled so)
  std::unique_ptr<fabric::RegistrationCache> cache_;     ///< of dataDomain_
};

}  // namespace railyard::plugin
