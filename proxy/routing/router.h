// The router of fabric mode, where the host's rails are one device that reaches every host of the
// cluster. Owns the cabling agent (who is cabled to whom) and plans each socket of
// a connection: straight over a rail of the cable when the peer is a neighbour,
// else to the relay on the next hop of a shortest path.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/tcp/tcp_connector.h"
#include "topology/cabling_agent.h"
#include "topology/cluster_key.h"

namespace railyard::proxy {

/// One local rail of the fabric (IPv4).
struct FabricRail {
  std::string ifname;  ///< netdev name
  in_addr addr{};      ///< the rail's IPv4 address
  int prefixLen = 32;  ///< its netmask bits: the cable's subnet (the neighbour's end lies in it)
  int speedMbps = 0;   ///< link speed, Mbps
  std::string mac;     ///< link-layer address (feeds the host id)
  /// The port carries a default route and the user named it exactly
  /// (RAILYARD_SOCKET_IFNAME==eth0): the only way an uplink becomes a rail.
  bool namedUplink = false;
};

/// Router settings.
struct RouterOptions {
  std::string hostName;               ///< name reported to peers
  topology::AgentOptions agent;       ///< cabling protocol port and timing
  uint16_t relayPort = 29518;         ///< TCP port of relays on every host
  /// The cluster key (RAILYARD_CLUSTER_KEY_FILE): relay records carry its MAC and
  /// relays accept only records with a valid one. nullptr = none (not authenticated).
  std::shared_ptr<const topology::ClusterKey> clusterKey;
};

/// The router of this host: cabling graph and socket planning. Thread-safe after Start.
class Router {
 public:
  /// Starts the cabling agent on `rails`. SystemError if a rail socket cannot be bound.
  static Status Start(std::vector<FabricRail> rails, const RouterOptions& options,
                      std::unique_ptr<Router>* out);

  uint64_t HostId() const { return agent_->HostId(); }
  const std::string& HostName() const { return options_.hostName; }
  const std::vector<FabricRail>& Rails() const { return rails_; }
  uint16_t RelayPort() const { return options_.relayPort; }
  /// The cluster key relay records are authenticated with (nullptr = none).
  const topology::ClusterKey* ClusterKey() const { return options_.clusterKey.get(); }
  const topology::CablingAgent& Agent() const { return *agent_; }
  /// Sum of the rail speeds (Mbps): what the fabric device reports.
  int SpeedMbps() const;
  /// Name of the host that owns rail address `a` in the cabling graph ("" = none):
  /// names the relay behind a relayed socket in errors (relay_hop_names.h).
  std::string HostNameOfAddress(const in_addr& a) const;

  /// Plans socket `sockIndex` of a connection to the listener on host `destHost`,
  /// TCP port `destPort`, having crossed `hops` relays already. *ready = false (Ok)
  /// while the cabling graph does not yet know a route to destHost. Sockets of one
  /// connection spread over the rails of the cable, weighted by speed, and over the
  /// next hops of every tied shortest path (both ring directions).
  /// InvalidUsage when hops would exceed kMaxRelayHops.
  Status PlanSocket(uint64_t destHost, uint16_t destPort, int sockIndex, int hops,
                    const std::string& originName, uint64_t originHost, SocketTarget* out,
                    bool* ready) const;

  /// Plans every socket (1 + nsocks) of a new connection to a listener. *ready as above.
  /// `salt` varies the rail and path choice between connections.
  Status PlanConnection(uint64_t destHost, uint16_t destPort, int nsocks, uint32_t salt,
                        std::vector<SocketTarget>* out, bool* ready) const;

 private:
  Router() = default;
  std::vector<FabricRail> rails_;
  RouterOptions options_;
  std::unique_ptr<topology::CablingAgent> agent_;
};

/// The bytes a socket sends a relay before its hello: the RelayRecord (kind kRelay,
/// proxy/wire.h) naming the listener (`destHost`, `destPort`), `sockIndex`, the relays
/// `hops` crossed before the one it reaches, and the origin (for the relay's logs),
/// followed by its HMAC-SHA256 under `key` (kRelayMacBytes; kRelayFlagMac set) when a
/// cluster key is given: 56 or 88 bytes. InternalError when OpenSSL fails the MAC.
Status MakeRelayPrefix(uint64_t destHost, uint16_t destPort, int sockIndex, int hops, const std::string& originName,
                       uint64_t originHost, const topology::ClusterKey* key, std::vector<uint8_t>* out);

/// Index of the rail that socket `k` of a connection uses among rails of the given
/// speeds (Mbps): sockets spread in proportion to speed (200G and 100G rails get
/// them 2:1; speeds within 1/16 of each other count as equal), interleaved, so
/// any number of sockets splits as evenly as the weights allow.
size_t WeightedPick(const std::vector<int>& speedsMbps, int k);

/// Rails for fabric mode from the host's interfaces: IPv4, not loopback (never, even when
/// the filter names it: topology/loopback_rail.h, whose reason it gives), not
/// link-local, matched by `ifnameFilter` (NCCL_SOCKET_IFNAME grammar; "" or one character =
/// automatic), and not carrying a default route (that is the management or uplink port)
/// unless `ifnameFilter` names it exactly ("=eth0": kept with a WARN, namedUplink set).
/// `ifnameFilter` is env::Config::railIfname (RAILYARD_SOCKET_IFNAME only: NCCL_SOCKET_IFNAME
/// chooses NCCL's bootstrap network, never the rails); `filterSource` names where it came
/// from in the skip reasons ("RAILYARD_SOCKET_IFNAME", "--ifname").
/// Down rails are kept: a cable may come up later. Empty = fabric mode has nothing
/// to run on; then `*whyNone` (when given) says which rule or variable removed which
/// port: "mgmt0: filtered out by RAILYARD_SOCKET_IFNAME='p'; eth0: carries a default
/// route ...". Each choice is logged at INFO. Errors: those of topology::DiscoverRails.
///
/// `bootstrapFilter` is NCCL_SOCKET_IFNAME when it is what chose NCCL's bootstrap network
/// (BootstrapIfname): a port it selects by name ("mgmt0", "=eth0", "eno": not an exclusion
/// list, not automatic) is the management network every rank reaches, so it is never a
/// rail, even when only two hosts speak on it and it would look like a cable (new-user
/// trial: the management bridge carried job data when the other hosts' railyardd ran
/// with RAILYARD_SOCKET_IFNAME=^mgmt0). Its skip reason names the variable.
Status SelectFabricRails(const std::string& ifnameFilter, int defaultSpeedMbps,
                         std::vector<FabricRail>* out, std::string* whyNone = nullptr,
                         const std::string& filterSource = "RAILYARD_SOCKET_IFNAME",
                         const std::string& bootstrapFilter = "");

/// Why SelectFabricRails keeps port `netdev` out of the rails as NCCL's bootstrap
/// (management) network: `bootstrapFilter` (BootstrapIfname's value) selects it by name.
/// "" when it does not (an empty, automatic or ^ exclusion filter selects no port by name).
/// The reason reads "mgmt0: NCCL_SOCKET_IFNAME='mgmt0' makes it ...". railyard-info's
/// rail table uses it too, so the tool and the plugin agree.
std::string BootstrapRailSkipReason(const std::string& netdev, const std::string& bootstrapFilter);

/// The NCCL_SOCKET_IFNAME value that SelectFabricRails keeps out of the rails: the
/// effective socket filter (env::Config::socketIfname) when no rail filter
/// (RAILYARD_SOCKET_IFNAME, or a tool's --ifname) was given, for then it came from
/// NCCL_SOCKET_IFNAME; "" otherwise (an explicit rail filter decides alone).
inline std::string BootstrapIfname(const std::string& railFilter, const std::string& socketIfname) {
  return railFilter.empty() ? socketIfname : std::string();
}

}  // namespace railyard::proxy
