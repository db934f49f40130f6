// CableSetDomain: the fabric Domain of fabric mode (RAILYARD_FABRIC), one per
// process: every rail of the host, grouped by cable, with an Endpoint to any peer
// host: straight over the rails of the cable to it, or relayed through the
// Forwarders of the hosts between (proxy/fabric/relay: RoutedWorker, the graph's
// RouteFn). The NCCL comms (proxy/nccl/) and their CommWorker use it like any
// Domain.
//
//   - Registrations: one RegionTable shared by the per-cable TCP Domains
//     (TcpOptions::sharedRegions), so a Region registered once is valid on every
//     cable and its RemoteKey is the same whichever cable a peer arrives on.
//   - Workers: CreateWorker makes a CableSetWorker with, per cable the graph knows
//     then, a TCP Worker on the cable's rails (ClusterGraph::LinksBetween order) and
//     a RelayClient of that cable's Domain, wrapped in a RoutedWorker. A cable that
//     comes up later gets one too (looked for in Progress every 100 ms and in Connect),
//     and the Worker's Address() grows by its rails (appended).
//   - With CableSetOptions::multiRoute (fabric mode's NCCL comms), a peer with no cable to this
//     host, several shortest paths away through different first hops (the opposite
//     host of a ring), gets a route through each, used in turn (MultiRouteEndpoint:
//     ordering kept, every relay carries traffic); else the lowest first hop only.
//   - RDMA (issue 10): with CableSetOptions::ib, every fabric rail that is an active
//     RDMA port is also a rail of one verbs Domain over all of them, so Register makes
//     one MR per RDMA rail and the Region carries their keys in fabric-rail order
//     (RemoteKey::railRkeys[i] is fabric rail i's rkey, 0 for a TCP-only rail). A
//     cable whose rails are all RDMA ports runs the verbs transport: a verbs Domain
//     over exactly its ports (VerbsDomainOf), whose Endpoints take views of those
//     Regions (their rails' keys) and the peer's RemoteKey cut to the peer cable's
//     rails (CableEndpoint); its relayed routes go through the Forwarders' verbs ports
//     (RAILYARD_FABRIC_RELAY_VERBS_PORT), RDMA on every leg. A cable is taken to run
//     the same transport at both ends (RDMA ports on both, as on a cabled ConnectX
//     pair); a peer whose cable runs the other one is refused at Connect by name. A rail
//     whose RDMA port is down when the Domain is made stays TCP for its life.
//   - Relays are named in errors by their host in the graph ("via h1 (10.0.1.2:29519)").
//   - Address (HostAddress below): every rail's IPv4 and listening port, so a
//     connector picks the cable itself: the one whose entry host is this host (a
//     neighbour, or another process of the host), else the one whose entry host is
//     nearest, reached through relays.
//
// Threading: as the Workers it wraps (one thread drives a Worker and its Endpoints).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/region_table.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/relay/relay_options.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"

namespace railyard::runtime {

/// A CableSetWorker's packed address: magic "RYHA", version u16, rails u16, worker
/// id u64, then per rail 8 bytes: IPv4 (network order) u32, port u16, transport u8
/// (0 TCP, 1 verbs, 2 host-local: TCP over loopback), fabric rail index u8 (the rail's slot in the host's RemoteKeys:
/// CableSetDomain::rails() order): 16 + 8 x rails bytes (64 for 6 rails: an NCCL
/// handle's address area). A Worker that started with no cable lists its host-local
/// rail first (HostLocalIpv4, TCP, index 0). A verbs cable's rails all carry its Worker's bootstrap
/// port; its first rail's IPv4 is where that listens.
struct HostAddress {
  /// 2: the transport and rail index of every rail (issue 10: fabric mode over RDMA);
  /// 3: transport 2, the host-local rail.
  static constexpr uint16_t kVersion = 3;
  static constexpr size_t kMaxRails = 16;
  uint64_t workerId = 0;
  struct Rail {
    uint32_t ipv4 = 0;  ///< network order
    uint16_t port = 0;
    bool verbs = false;       ///< the rail's cable runs the verbs transport
    uint8_t railIndex = 0;    ///< the owner's fabric rail index (< 16): its RemoteKeys' rkey slot
    bool hostLocal = false;   ///< the host-local rail (transport 2; HostLocalIpv4, TCP over loopback)
    bool operator==(const Rail&) const = default;
  };
  std::vector<Rail> rails;

  std::vector<uint8_t> Pack() const;
  /// Validates exact size, magic, version, 1..kMaxRails rails, non-zero id, ports and
  /// addresses, a transport of 0, 1 or 2 (2 only on 127/8) and a rail index < 16.
  /// InvalidArgument naming what is wrong.
  static Status Unpack(std::span<const uint8_t> bytes, HostAddress* out);
  bool operator==(const HostAddress&) const = default;
};

/// The IPv4 address (network order) of host `host`'s host-local rail: 127.a.b.c, the
/// 24 bits a.b.c taken from the host id (c kept in 1..254). A CableSetWorker that
/// starts with no cable listens there, so this host's processes reach it over
/// loopback; a connector takes a peer's host-local rail only when it carries its own
/// host's address (a peer on another host has other bits and is reached by cable).
uint32_t HostLocalIpv4(uint64_t host);

/// Settings of a CableSetDomain.
struct CableSetOptions {
  uint64_t self = 0;                        ///< this host's id in the graph
  fabric::relay::GraphFn graph;             ///< the cabling graph now
  /// Template of each cable's Domain (its rails are set per cable). Its listenPort, when
  /// not 0, is bound on every rail of every cable (railyardd's tier tunnels).
  fabric::tcp::TcpOptions tcp;
  fabric::relay::RelayOptions relay;        ///< of the relayed routes (RelayClient per cable)
  uint16_t forwarderPort = 29519;           ///< RAILYARD_FABRIC_RELAY_PORT
  /// A relayed peer over TCP cables is reached through the socket relay of the hosts
  /// between (RAILYARD_FABRIC_TCP_RELAY=splice): a TCP Endpoint of this host's cable
  /// Worker whose sockets dial the first relay's socket port (`socketRelayPort`,
  /// RAILYARD_RELAY_PORT) with a relay record each (tcp_endpoint.h SpliceRoute; the
  /// record's socket index chosen so the last relay lands each socket on the rail its
  /// hello names: proxy/routing/socket_hops.h), MACed with relay.clusterKey. Such a
  /// route needs no Forwarder; one the relays would not land on the target's cable
  /// goes through the Forwarders as before. false (default): the Forwarders always.
  bool spliceTcpRelays = false;
  uint16_t socketRelayPort = 29518;         ///< RAILYARD_RELAY_PORT
  std::vector<fabric::RailInfo> rails;      ///< every fabric rail of the host (rails())
  /// A relayed peer with several shortest paths through different first hops gets a
  /// route through each (MultiRouteEndpoint); false (default): the lowest first hop
  /// only. At the target each route arrives from a different relay Worker: the NCCL
  /// comms take a comm's ops from one Worker per route of their own Endpoint back
  /// (proxy/nccl/peer_workers.h), so the NetRuntime's fabric mode turns it on; the
  /// tiers' clients over a cable set (storage/tunnel) bind to one peer Worker and
  /// keep it off (tiers.relay.*-relayed failed with it on).
  bool multiRoute = false;
  /// The host's RDMA ports (see the file comment); null (default): every cable TCP.
  /// The plugin's fabric mode passes the ports it opened (the fabric comms).
  std::shared_ptr<proxy::verbs::IbPorts> ib;
  /// Template of the verbs Domains (timeouts, link and GID settings); the bootstrap
  /// address and rails are set per cable.
  fabric::verbs::VerbsOptions verbs;
  uint16_t verbsForwarderPort = 29522;  ///< RAILYARD_FABRIC_RELAY_VERBS_PORT

  /// Fabric mode's settings from `config`: RAILYARD_TIMEOUT_MS, striping
  /// (RAILYARD_STRIPE_*), sockets per rail (RAILYARD_NSOCKS, 1..16) and the relay
  /// limits; the Forwarder port RAILYARD_FABRIC_RELAY_PORT; RAILYARD_FABRIC_TCP_RELAY
  /// and RAILYARD_RELAY_PORT (spliceTcpRelays, socketRelayPort); `clusterKey` (may be
  /// nullptr) MACs the relay opens; `rank` is named in relayed routes' errors; the
  /// verbs template and RAILYARD_FABRIC_RELAY_VERBS_PORT (ib stays null).
  static CableSetOptions FromConfig(const env::Config& config, uint64_t self, fabric::relay::GraphFn graph,
                                    std::vector<fabric::RailInfo> rails,
                                    std::shared_ptr<const topology::ClusterKey> clusterKey);
};

/// See file comment.
class CableSetDomain : public fabric::Domain {
 public:
  /// InvalidArgument without a graph, a host id or rails; errors of the verbs Domain
  /// over the RDMA rails (when options.ib has any of them).
  static Status Create(CableSetOptions options, std::unique_ptr<CableSetDomain>* out);
  ~CableSetDomain() override;

  /// "tcp", or "tcp+verbs" when some rails are RDMA ports.
  const char* TransportName() const override { return verbsAll_ ? "tcp+verbs" : "tcp"; }
  const fabric::Capabilities& capabilities() const override { return caps_; }
  const std::vector<fabric::RailInfo>& rails() const override { return options_.rails; }
  /// Host memory only; errors of RegionTable::Register and, with RDMA rails, of the
  /// verbs registration (nothing stays registered on an error).
  Status Register(void* addr, uint64_t bytes, uint32_t access, fabric::MemoryKind kind,
                  const fabric::Region** out) override;
  Status Deregister(const fabric::Region* region) override;
  /// A CableSetWorker over the cables the graph knows now, taking each later one as it
  /// comes up (in its Progress, every 100 ms, or a Connect). With no cable yet its
  /// Address() holds its host-local rail only (HostLocalIpv4). SystemError when a
  /// cable's rails, or the host-local rail, cannot be listened on.
  /// The Domain must outlive its Workers (they take cables from it as they come up,
  /// and its verbs cable Domains are theirs).
  Status CreateWorker(std::unique_ptr<fabric::Worker>* out) override;

  const CableSetOptions& options() const { return options_; }

  // --- for CableSetWorker and CableEndpoint -------------------------------------------
  /// The fabric rail index of each of `cableRails` (matched by address), and whether
  /// every one is an RDMA port of options().ib. InvalidUsage for a rail not among rails().
  Status CableRailIndices(const std::vector<fabric::RailInfo>& cableRails, std::vector<uint8_t>* indices,
                          bool* rdma) const;
  /// The verbs Domain over exactly the RDMA ports of the cable to `neighbour` (rails
  /// `cableRails`, fabric indices `indices`), made on first use and kept for the
  /// Domain's life; its bootstrap listeners bind the cable's first rail.
  Status VerbsDomainOf(uint64_t neighbour, const std::vector<fabric::RailInfo>& cableRails,
                       const std::vector<uint8_t>& indices, fabric::Domain** out);
  /// A view of `region` (one of this Domain's) for the verbs Domain `cable` of fabric
  /// rails `indices`: the same bytes, their rails' keys. Cached until `region` is
  /// deregistered (a caller's reference keeps it alive through its post). nullptr for
  /// a region not registered here (or without RDMA keys), or an index beyond its rails.
  std::shared_ptr<const fabric::Region> ViewFor(const fabric::Region* region, const fabric::Domain* cable,
                                                const std::vector<uint8_t>& indices);

 private:
  explicit CableSetDomain(CableSetOptions options);
  CableSetOptions options_;
  fabric::Capabilities caps_;
  std::shared_ptr<fabric::RegionTable> regions_;
  /// The verbs Domain over every RDMA fabric rail (null without any), and for each
  /// fabric rail its rail there (-1: not an RDMA port) and its RDMA port's name
  /// (IbPort::Name(), empty: none), found once at Create.
  std::unique_ptr<fabric::Domain> verbsAll_;
  std::vector<int> verbsRailOf_;
  std::vector<std::string> verbsPortOf_;
  std::mutex mu_;  ///< guards the maps below (Register may run beside the Workers)
  std::map<const fabric::Region*, const fabric::Region*> verbsRegions_;  ///< table region -> verbsAll_ region
  struct CableVerbs {
    std::unique_ptr<fabric::Domain> domain;
    std::vector<uint8_t> indices;  ///< the fabric rails it is over
  };
  std::map<uint64_t, CableVerbs> cableVerbs_;  ///< neighbour -> its verbs Domain
  std::vector<std::unique_ptr<fabric::Domain>> retiredVerbs_;            ///< replaced ones, kept for their Workers
  std::map<std::pair<const fabric::Region*, const fabric::Domain*>, std::shared_ptr<const fabric::Region>> views_;
};

/// One cable of a peer's HostAddress, as a connector sees it.
struct CableGroup {
  std::vector<uint8_t> address;      ///< the per-cable Worker address (TCP WorkerAddress or verbs)
  bool verbs = false;                ///< its transport
  std::vector<uint8_t> railIndices;  ///< the peer's fabric rail index of each of its rails (key slots)
};

/// Which of a HostAddress's rails an Endpoint from `self` uses, and how: the cable
/// (its entry host) and the per-cable TCP Worker address to connect to. InvalidUsage
/// when no rail of the address is on a cable of the graph or no entry host is reachable.
Status PickCable(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                 std::vector<uint8_t>* cableAddress);
/// As PickCable, every cable of the peer whose entry host is nearest (ties: entry
/// ascending, the first is PickCable's): a relayed peer gets one route per first hop
/// (fabric::relay::MultiRouteEndpoint).
Status PickCables(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                  std::vector<std::vector<uint8_t>>* cableAddresses);
/// As PickCables, with each cable's transport and key slots.
Status PickCableGroups(const topology::ClusterGraph& graph, uint64_t self, const HostAddress& to,
                       std::vector<CableGroup>* groups);

/// The name of the host whose rail in `graph` has the IPv4 address `ipv4` (dotted
/// text); "" when no rail has it.
std::string HostOfRailAddress(const topology::ClusterGraph& graph, const std::string& ipv4);

/// With `splice` (CableSetOptions::spliceTcpRelays), a relayed TCP peer tied between
/// several nearest cables gets one route: of `groups` (PickCableGroups' order) the lower
/// host of a pair keeps the first, the higher takes the last, so a pair's two
/// directions go through different relays; `groups` is cut to that one. Else unchanged.
void PreferSplicedGroup(const topology::ClusterGraph& graph, uint64_t self, bool splice, std::vector<CableGroup>* groups);

/// The first hop a CableSetDomain's Endpoint (`options`: spliceTcpRelays and the
/// Forwarder ports) from `options.self` takes toward the packed HostAddress `peer` in
/// `graph`, as CableSetWorker::Connect chooses it for its first route: "direct to NAME"
/// or "via relay NAME" (the graph's host names). Errors of HostAddress::Unpack,
/// PickCableGroups and fabric::relay::PlanSource.
Status FirstHopOf(const topology::ClusterGraph& graph, const CableSetOptions& options, std::span<const uint8_t> peer,
                  std::string* how);

}  // namespace railyard::runtime
