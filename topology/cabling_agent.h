// Cabling discovery: every host says hello on each of its rails, learns which host
// answers on which rail, and floods what it knows, so every host holds the whole
// graph of rail-links. Runs in railyardd or in any process using the plugin; every
// such process on one host speaks for the same host id.
//
// Wire: UDP datagrams to the limited broadcast address 255.255.255.255 on port
// RAILYARD_DISCOVERY_PORT, sent out of each rail (SO_BINDTODEVICE). A rail is
// point to point: one that hears more than one other host is a shared segment
// (a management bridge or a switch), not a cable, and is left out of the graph.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/status.h"
#include "topology/cluster_graph.h"

namespace railyard::topology {

/// A local rail the agent speaks on (IPv4 only).
struct AgentRail {
  std::string ifname;    ///< netdev name
  in_addr addr{};        ///< the rail's IPv4 address
  int speedMbps = 0;     ///< link speed, Mbps
  std::string mac;       ///< link-layer address text (identifies the host, see HostIdFromMacs)
};

/// Agent timing and port.
struct AgentOptions {
  uint16_t port = 29517;     ///< UDP port of hellos and link-state records
  int intervalMs = 100;      ///< period of hellos and of re-flooding (ms)
  int deadIntervalMs = 1000; ///< a neighbour or a host's record unheard this long is gone (ms)
};

/// A stable 64-bit host id: FNV-1a of the sorted MAC addresses of the host's rails,
/// so every process on one host (railyardd, each rank) derives the same id and two
/// network namespaces on one machine derive different ones. Never 0.
uint64_t HostIdFromMacs(std::vector<std::string> macs);

/// This host's id for the cabling graph: FNV-1a of /etc/machine-id, the kernel's
/// boot id (/proc/sys/kernel/random/boot_id: cloned images and VMs sharing a root
/// share the machine-id) and the inode of this process's network namespace, so
/// every process on one host (railyardd and
/// each rank, whatever rails each one was told to use) agrees, while network
/// namespaces on one machine (the testbed's hosts, containers with their own
/// network) count as different hosts. Falls back to the host name. Never 0.
uint64_t LocalHostId();

/// One cabling datagram as it came off a rail, decoded but not yet believed: what
/// CablingAgent::Receive acts on. Strings end at their first NUL or at the end of
/// their field (at most 32 bytes of a host name, 16 of an interface name) and are
/// otherwise the peer's bytes, unchecked (not necessarily UTF-8).
struct CablingMessage {
  /// A cable's end as a link-state record reports it.
  struct Link {
    std::string ifname, peerIfname;  ///< the reporting host's rail, the peer's rail
    uint32_t addr = 0, peerAddr = 0; ///< IPv4 addresses of the two ends (network order)
    uint64_t peerHost = 0;           ///< host id of the peer
    int speedMbps = 0;               ///< reported link speed, Mbps
  };
  bool hello = false;     ///< true: a hello (ifname/addr/speedMbps); false: a link-state record (links)
  uint64_t origin = 0;    ///< host id of the sender (hello) or of the record's owner
  uint64_t seq = 0;       ///< record sequence number chosen by its owner (0 in hellos)
  std::string hostName;   ///< the sender's / owner's host name
  std::string ifname;     ///< hello: the sending rail's netdev name
  uint32_t addr = 0;      ///< hello: the sending rail's IPv4 address (network order)
  int speedMbps = 0;      ///< hello: the sending rail's speed, Mbps
  std::vector<Link> links;  ///< record: at most 64 links
};

/// Decodes one datagram of `size` bytes (hello or link-state record, wire layout in
/// cabling_agent.cc). InvalidArgument, saying why, when it is shorter than the
/// 56-byte header, has another magic or version, an unknown kind, or a length that
/// does not match its kind (a hello is exactly 80 bytes; a record 64 + 56 × links
/// bytes, with at most 64 links). The caller decides whether to believe it.
Status DecodeCablingMessage(const void* data, size_t size, CablingMessage* out);

/// The discovery agent: one thread, one UDP socket per rail.
class CablingAgent {
 public:
  /// Opens the rail sockets and starts the thread. `hostId` 0 derives the id from
  /// the rails' MACs (HostIdFromMacs); processes of one host should all pass
  /// LocalHostId(). SystemError naming the rail when a socket cannot be bound
  /// (e.g. SO_BINDTODEVICE without privilege).
  static Status Start(const std::string& hostName, std::vector<AgentRail> rails,
                      const AgentOptions& options, std::unique_ptr<CablingAgent>* out,
                      uint64_t hostId = 0);
  ~CablingAgent();
  CablingAgent(const CablingAgent&) = delete;
  CablingAgent& operator=(const CablingAgent&) = delete;

  uint64_t HostId() const { return hostId_; }
  /// The current graph: this host, every host whose record is fresh, and the
  /// rail-links both ends report.
  ClusterGraph Graph() const;
  /// Bumped whenever the graph changes.
  uint64_t Version() const;
  /// Blocks until `pred(graph, version)` is true or `timeoutMs` passes; returns the
  /// last value of pred. Woken on every graph change (no polling sleeps). `pred`
  /// runs under the agent's lock: it must not call back into the agent.
  bool WaitFor(const std::function<bool(const ClusterGraph&, uint64_t version)>& pred,
               int timeoutMs) const;
  /// True once the agent has run for three hello periods (every live neighbour has
  /// been heard, so a shared segment is no longer mistaken for a cable) and the
  /// graph has not changed for two (records from the far side have arrived).
  bool Settled() const;
  /// Names of local rails left out because they hear several hosts (shared segments).
  std::vector<std::string> SharedSegments() const;

 private:
  struct Neighbour {
    uint64_t host = 0;
    std::string hostName, ifname;
    uint32_t addr = 0;  ///< network byte order
    int speedMbps = 0;
    int64_t lastSeenMs = 0;
  };
  struct RailState {
    AgentRail rail;
    int fd = -1;
    std::map<uint64_t, Neighbour> heard;  ///< by host id
  };
  struct LinkRecord {
    std::string ifname, peerIfname;
    uint32_t addr = 0, peerAddr = 0;
    uint64_t peerHost = 0;
    int speedMbps = 0;
  };
  struct HostRecord {
    std::string name;
    uint64_t seq = 0;
    int64_t receivedMs = 0;
    std::vector<LinkRecord> links;
  };

  CablingAgent() = default;
  void Run();
  void Tick(int64_t nowMs);
  void Receive(RailState& r, int64_t nowMs);
  void SendAll(const std::vector<char>& datagram, const RailState* except);
  std::vector<char> EncodeHello(const RailState& r) const;
  std::vector<char> EncodeRecord(uint64_t origin, const HostRecord& rec) const;
  std::vector<LinkRecord> OwnLinks() const;  ///< requires mu_
  void Rebuild();                            ///< requires mu_

  uint64_t hostId_ = 0;
  std::string hostName_;
  AgentOptions options_;
  std::vector<RailState> rails_;
  std::thread thread_;
  int wakeFd_ = -1;  ///< eventfd that stops the thread
  int64_t startedMs_ = 0;
  std::atomic<int64_t> changedMs_{0};
  std::atomic<bool> stop_{false};

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<uint64_t, HostRecord> records_;  ///< other hosts' link-state records
  ClusterGraph graph_;
  uint64_t version_ = 0;
  std::vector<std::string> shared_;
};

}  // namespace railyard::topology
