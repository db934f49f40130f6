// railyardd's tier tunnels (fabric mode): the expert store and the snapshot arenas
// served to clients that name this host as "host:NAME" (plugin/tier_route.h), whose
// control connections arrive as storage/tunnel ControlTunnels at
// RAILYARD_TIER_TUNNEL_PORT (expert) and that port + 1 (snapshot) on every rail, and
// whose data (fabric Reads/Writes) runs on a fabric-mode Domain over the cabling graph,
// straight on a cable or through the relays of the hosts between.
//
// Beside the ip:port servers (whose Workers are of the process's plain Domain, which a
// fabric-mode Worker cannot reach), this serves a second ExpertServer over the same
// store directory (its own pin cap) and a second set of the --snapshot-arena arenas
// (own memory; paging swap files under RAILYARD_SWAP_DIR/fabric), each on 127.0.0.1,
// reached only through its tunnel.
//
// railyardd starts this once its cabling agent has settled with at least one
// neighbour (main.cc). The Workers take the cables the graph knows then, and a cable
// that comes up later as it appears (runtime::CableSetDomain; the expert and snapshot
// servers hand each client their data Worker's address as it is then).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/cable_set_domain.h"
#include "storage/expert/expert_server.h"
#include "storage/snapshot/snapshot_server.h"
#include "storage/tunnel/control_tunnel.h"

namespace railyard::tools {

/// What to serve through the tunnels.
struct TierTunnelFlags {
  std::string expertStore;                  ///< --expert-store ("" = none)
  bool expertVerify = false;                ///< --expert-verify
  std::vector<std::string> snapshotArenas;  ///< --snapshot-arena specs (empty = none)
};

/// Running tier tunnels; stopping = destroying.
class TierTunnels {
 public:
  /// Opens the store / parses the arenas, builds the Domains (data: ephemeral ports,
  /// its cables of RDMA ports over verbs on `ib` (null: TCP), as a host:NAME client's
  /// data Domain is; each acceptor: its fixed port, TCP), starts the servers and the
  /// acceptors. SystemError when a tunnel port is taken (another railyardd); errors of
  /// Store::Open, ParseArenaSpec, the servers' Start and ControlTunnel::Accept.
  static Status Start(const env::Config& cfg, const proxy::Router& router, const std::vector<proxy::FabricRail>& rails,
                      const TierTunnelFlags& flags, std::shared_ptr<proxy::verbs::IbPorts> ib,
                      std::unique_ptr<TierTunnels>* out);
  ~TierTunnels();
  /// One line for the log: what is served on which port.
  const std::string& summary() const { return summary_; }

 private:
  TierTunnels() = default;
  std::unique_ptr<runtime::CableSetDomain> data_;
  std::unique_ptr<fabric::RegistrationCache> cache_;
  std::unique_ptr<fabric::Worker> expertWorker_, snapshotWorker_;
  std::unique_ptr<expert::ExpertServer> expert_;
  std::unique_ptr<storage::snapshot::SnapshotServer> snapshot_;
  std::unique_ptr<runtime::CableSetDomain> expertAcceptDomain_, snapshotAcceptDomain_;
  std::unique_ptr<storage::tunnel::ControlTunnel> expertTunnel_, snapshotTunnel_;
  std::string summary_;
};

}  // namespace railyard::tools
