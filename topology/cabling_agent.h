// Cabling discovery: every host says hello on each of its rails, learns which host
// answers on which rail, and floods what it knows, so every host holds the whole
// graph of rail-links. Runs in railyardd or in any process using the plugin; every
// such process on one host speaks for the same host id, each as its own speaker
// (a random 64-bit id drawn at start), and a host's links are the union of what
// its live speakers report: a process that has just started, and knows no
// neighbour yet, adds nothing and takes nothing away (issue 8.4).
//
// Wire (version 2): UDP datagrams to the limited broadcast address
// 255.255.255.255 on port RAILYARD_DISCOVERY_PORT, sent out of each rail
// (SO_BINDTODEVICE). A rail is point to point: one that hears more than one other
// host is a shared segment (a management bridge or a switch), not a cable, and is
// left out of the graph. Each datagram is an 80-byte header (magic "RYCB", version,
// kind, origin host, speaker, sequence, flags, body length, age, host name), a body (a
// hello: the rail; a link-state record: the speaker's links) and, with a cluster
// key (RAILYARD_CLUSTER_KEY_FILE, topology/cluster_key.h), a 32-byte HMAC-SHA256 of
// header and body. With a key, a datagram without a valid MAC is refused; without
// one, every host on a rail is trusted to tell the truth about itself.
//
// Checks in both modes: a hello's address must be the source address it came from
// and lie in the subnet of the rail it arrived on; a record's sequence (the
// speaker's counter, +1 per record) must be above the last one accepted from that
// speaker and at most kSeqSlack + (ms since then) / kMinIntervalMs above it; a
// record carries its age (ms since its speaker made it; every holder adds its
// holding time) and is dropped once as old as the dead interval, and a speaker's
// record that expired is remembered (a tombstone, kTombstoneMs), so a copy still
// circulating is old news, not new; names are made valid UTF-8 on
// decode (topology/utf8_name.h); each source address gets kSourceBudget datagrams
// per hello period; at most kMaxSpeakers speakers are held, kMaxUnlinkedSpeakers
// of them for hosts no rail-link reaches (when full, a tombstone goes, or for a
// host already linked an unlinked host's speaker; else the newcomer is refused);
// only linked hosts' records are re-flooded every period; the graph is rebuilt
// at most every 10 ms, however many records arrive.
// Every refusal is counted (Counters) and logged at WARN at most once per 10 s per kind.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <thread>
#include <vector>

#include "env/status.h"
#include "topology/cluster_graph.h"
#include "topology/cluster_key.h"

namespace railyard::topology {

/// A local rail the agent speaks on (IPv4 only).
struct AgentRail {
  std::string ifname;    ///< netdev name
  in_addr addr{};        ///< the rail's IPv4 address
  int speedMbps = 0;     ///< link speed, Mbps
  std::string mac;       ///< link-layer address text (identifies the host, see HostIdFromMacs)
  bool namedUplink = false;  ///< carries a default route and the user named it exactly (else refused)
};

/// Agent timing and port.
struct AgentOptions {
  uint16_t port = 29517;     ///< UDP port of hellos and link-state records
  int intervalMs = 100;      ///< period of hellos and of re-flooding (ms)
  int deadIntervalMs = 1000; ///< a neighbour or a host's record unheard this long is gone (ms)
  /// The cluster key (nullptr = no authentication; see the file comment).
  std::shared_ptr<const ClusterKey> key;
};

/// What an agent refused or dropped since it started (each a count of datagrams).
struct AgentCounters {
  uint64_t badMac = 0;          ///< keyed: no MAC or a wrong one; unkeyed: a MAC it cannot check
  uint64_t badVersion = 0;      ///< another protocol version (the log names both)
  uint64_t malformed = 0;       ///< too short, sizes that disagree, zero ids
  uint64_t badHelloAddress = 0; ///< a hello whose address is not its source or not on the rail's subnet
  uint64_t futureSeq = 0;       ///< a record's sequence beyond the window
  uint64_t rateLimited = 0;     ///< over its source's budget for the period
  uint64_t evicted = 0;         ///< speakers dropped to make room (tombstones, then unlinked hosts)
  uint64_t tableFull = 0;       ///< records of new speakers refused: kMaxSpeakers held, none could go
  uint64_t railFull = 0;        ///< hellos of new hosts refused: the rail already hears kMaxHeardPerRail
  uint64_t rebuilds = 0;        ///< graph rebuilds (Start, and hellos, records or expiries that changed what it is built from)
  uint64_t ticks = 0;           ///< intervals begun (hellos sent, expiries checked)
  /// Neighbours heard again, from the same process, after they expired (unheard for the
  /// dead interval): a flapping link, or a host whose hellos come further apart than this
  /// host's dead interval. (A host whose process restarted is none.)
  uint64_t returns = 0;
  /// Cables WARNed as one-sided: a neighbour heard for 3 dead intervals whose records do
  /// not list the cable back to this host (counted once each until it resolves).
  uint64_t oneSided = 0;
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

/// One cabling datagram (wire version 2) as it came off a rail, decoded but not yet
/// believed: what CablingAgent::Handle checks further (MAC, hello address, sequence
/// window, age, room). Names are made valid, printable UTF-8 (topology/utf8_name.h
/// SanitizeName), cut to at most 31 bytes of a host name and 15 of an interface name.
struct CablingMessage {
  /// A cable's end as a link-state record reports it.
  struct Link {
    std::string ifname, peerIfname;  ///< the reporting host's rail, the peer's rail
    uint32_t addr = 0, peerAddr = 0; ///< IPv4 addresses of the two ends (network order)
    uint64_t peerHost = 0;           ///< host id of the peer (may be 0 or the origin: the agent drops those)
    int speedMbps = 0;               ///< reported link speed, Mbps
  };
  bool hello = false;     ///< true: a hello (ifname/addr/speedMbps); false: a link-state record (links)
  uint64_t origin = 0;    ///< host id of the sender (hello) or of the record's owner; never 0
  uint64_t speaker = 0;   ///< the process speaking for origin; never 0
  uint64_t seq = 0;       ///< the speaker's counter (records; unchecked here)
  uint32_t ageMs = 0;     ///< records: ms since the speaker made it
  bool hasMac = false;    ///< a 32-byte MAC follows the body (the datagram's last bytes; not verified here)
  std::string hostName;   ///< the sender's / owner's host name
  std::string ifname;     ///< hello: the sending rail's netdev name
  uint32_t addr = 0;      ///< hello: the sending rail's IPv4 address (network order; unchecked here)
  int speedMbps = 0;      ///< hello: the sending rail's speed, Mbps
  std::vector<Link> links;  ///< record: at most 64 links
};

/// Which AgentCounters field a refused decode counts in.
enum class CablingRefusal {
  kNone,        ///< decoded
  kMalformed,   ///< too short, no magic, sizes that disagree, zero ids, unknown kind
  kBadVersion,  ///< the RYCB magic with another protocol version
};

/// Decodes one datagram of `size` bytes (layout in cabling_agent.cc: an 80-byte
/// header, a body of bodyBytes, a 32-byte MAC when the header's flag says so). The
/// pure, stateless part of CablingAgent's receive path (the fuzz suite's `cabling`
/// target calls it). InvalidArgument, saying why, when it is shorter than 8 bytes,
/// lacks the magic, has another version (`*why` = kBadVersion, else kMalformed), is
/// shorter than the header, when 80 + bodyBytes (+ 32) is not `size`, origin or
/// speaker is 0, an unknown kind, a hello body that is not 24 bytes, or a record
/// body that is not 8 + 56 x links with at most 64 links. `why` may be null.
Status DecodeCablingMessage(const void* data, size_t size, CablingMessage* out, CablingRefusal* why = nullptr);

/// The discovery agent: one thread, one UDP socket per rail.
class CablingAgent {
 public:
  /// Cabling protocol version on the wire (1: no speaker, no MAC; 2: this layout).
  static constexpr uint16_t kWireVersion = 2;
  /// Sequence slack: a speaker's record may run this far ahead of the last accepted.
  static constexpr uint64_t kSeqSlack = 64;
  /// Shortest hello period the window allows for (RAILYARD_DISCOVERY_INTERVAL_MS's minimum), ms.
  static constexpr int64_t kMinIntervalMs = 10;
  /// Highest sequence accepted from a speaker first heard (2^40: 348 years of 10 ms periods).
  static constexpr uint64_t kMaxSeq = uint64_t{1} << 40;
  /// How long an expired speaker's last sequence is remembered, ms (at least; also 60 dead intervals).
  static constexpr int64_t kTombstoneMs = 60000;
  /// Speakers (processes of all hosts) held at once; live records plus tombstones.
  static constexpr size_t kMaxSpeakers = 1024;
  /// Hosts one rail hears at once (a cable: one; a shared segment of a small cluster: at
  /// most 16). Hellos of more new hosts are refused (AgentCounters::railFull).
  static constexpr size_t kMaxHeardPerRail = 64;
  /// Live speakers of hosts no rail-link of the graph reaches yet (starting hosts,
  /// or hosts a flood made up) held at once.
  static constexpr size_t kMaxUnlinkedSpeakers = 128;
  /// Datagrams one source address may send per hello period before the rest are
  /// dropped: above the most a real neighbour sends (its own record, a re-flood of
  /// up to kMaxSpeakers records, as many forwarded, its host's hellos).
  static constexpr int kSourceBudget = 4096;

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
  /// What was refused so far (see AgentCounters).
  AgentCounters Counters() const;
  /// The cluster key in use (nullptr = none), for other authenticated records (relay).
  const std::shared_ptr<const ClusterKey>& Key() const { return options_.key; }
  /// This process's speaker id (random, never 0).
  uint64_t SpeakerId() const { return speaker_; }
  /// Test hook: handles `datagram` as if it had arrived on rail `railIndex` (an index
  /// into the rails given to Start) from IPv4 `source`, then rebuilds the graph.
  /// Nothing is forwarded. Thread-safe.
  void InjectForTesting(size_t railIndex, const std::vector<char>& datagram, in_addr source);
  /// The same at an injected time `nowMs` (the agent's steady milliseconds) instead of the
  /// clock's, so a test of the per-period source budget does not depend on how fast it runs.
  void InjectForTesting(size_t railIndex, const std::vector<char>& datagram, in_addr source, int64_t nowMs);

 private:
  struct Neighbour {
    uint64_t host = 0;
    std::string hostName, ifname;
    uint32_t addr = 0;  ///< network byte order
    int speedMbps = 0;
    int64_t lastSeenMs = 0;
    uint64_t speaker = 0;  ///< the process whose hello was heard last
    int64_t firstSeenMs = 0;  ///< when this neighbour was first heard (since it last expired)
  };
  struct RailState {
    AgentRail rail;
    uint32_t netmask = 0;  ///< network byte order; 0 = unknown (rail down at start)
    int fd = -1;
    std::map<uint64_t, Neighbour> heard;  ///< by host id
    /// Neighbours expired within the last kReturnWindowDeads dead intervals, as they were
    /// last heard (at most kMaxHeardPerRail): a hello from one again is a return.
    std::map<uint64_t, Neighbour> lost;
  };
  struct LinkRecord {
    std::string ifname, peerIfname;
    uint32_t addr = 0, peerAddr = 0;
    uint64_t peerHost = 0;
    int speedMbps = 0;
  };
  /// One speaker's (origin host, speaker id) latest record, or its tombstone.
  struct SpeakerRecord {
    std::string name;
    uint64_t seq = 0;
    int64_t receivedMs = 0;  ///< when its speaker made it (arrival less the age it carried)
    int64_t firstSeenMs = 0; ///< when this host first accepted a record of this speaker
    bool expired = false;    ///< a tombstone: links cleared, seq kept
    std::vector<LinkRecord> links;
  };
  using SpeakerKey = std::pair<uint64_t, uint64_t>;  ///< (origin host, speaker)
  struct SourceBudget {
    int64_t periodStartMs = 0;
    int used = 0;
  };
  /// One refusal kind's log throttle.
  struct Throttle {
    int64_t lastMs = -1;     ///< when the last WARN of this kind went out (-1: never)
    uint64_t since = 0;      ///< refusals counted since then, not logged yet
    std::string firstDetail;  ///< the first of those
  };

  CablingAgent() = default;
  void Run();
  /// One interval: expires neighbours and records, rebuilds the graph when `dirty` or
  /// when that changed it, sends this host's hellos and record (and, every few
  /// intervals, the re-flood of the others').
  void Tick(int64_t nowMs, bool dirty);
  /// Reads up to a batch of datagrams from rail `r`; records accepted are appended
  /// to *forward (with the rail they came from). Requires mu_ not held. Sets *dirty.
  void Receive(RailState& r, int64_t nowMs, std::vector<std::pair<std::vector<char>, const RailState*>>* forward,
               bool* dirty);
  /// True for a link-state record this agent need not decode, from its header alone:
  /// its own record flooded back, a copy as old as the dead interval (the age travels
  /// with every copy, so a record lives a dead interval after it was made however
  /// often it is flooded around), or a sequence of a speaker it already holds (every
  /// speaker's record reaches each host over every path of the flood, so most copies
  /// are this). Such a copy changes nothing, authentic or not: it is dropped before the
  /// body is decoded and before a MAC is checked (decoding every copy was three
  /// quarters of the agent thread's instructions, callgrind in a netns ring of 4).
  /// Anything else (hellos, new sequences, short or foreign datagrams) goes on to the
  /// full checks. Requires mu_.
  bool IsOldNews(const char* buf, size_t n) const;
  /// True when `held` is a tombstone (its speaker unheard for the dead interval) and a
  /// fresh record (age under half the dead interval, so no copy of what it last held)
  /// of a lower `seq` restarts it, which only an agent without a cluster key allows:
  /// there anyone on a rail can raise a speaker's sequence with forged records, and the
  /// real speaker's would be old news until the tombstone went (60 dead intervals).
  /// With a key sequences cannot be forged, and a lower one is a replay.
  bool RestartsTombstone(const SpeakerRecord& held, uint64_t seq, uint32_t ageMs) const;
  /// Handles one datagram of `n` bytes from `src` (network order) on `r`. Requires mu_.
  void Handle(RailState& r, const char* buf, size_t n, uint32_t src, int64_t nowMs,
              std::vector<std::pair<std::vector<char>, const RailState*>>* forward, bool* dirty);
  /// Broadcasts `datagram` on every rail but `except`.
  void SendAll(const std::vector<char>& datagram, const RailState* except);
  std::vector<char> EncodeHello(const RailState& r, uint64_t seq) const;
  /// A record as held at `nowMs` (its age is nowMs - rec.receivedMs).
  std::vector<char> EncodeRecord(uint64_t origin, uint64_t speaker, const SpeakerRecord& rec, int64_t nowMs) const;
  /// Appends the MAC (when keyed) and returns the datagram.
  std::vector<char> Seal(std::vector<char> datagram) const;
  std::vector<LinkRecord> OwnLinks() const;  ///< requires mu_
  void Rebuild();                            ///< requires mu_
  /// WARNs when neighbour `nb` (just heard on `r`) announces this host's name or the name
  /// of another heard host, naming both addresses: once per name (a clash heard on every
  /// rail, among many hosts, or a name changed and back, is not warned again), for at
  /// most kMaxNameClashes names. Bounded against a peer that spoofs hellos from many
  /// made-up hosts under one name (hostile-peer probe: once per pair of hosts, 25,000
  /// hellos made 5.6M WARN lines and 537 MB of remembered pairs). Requires mu_.
  void WarnDuplicateName(const RailState& r, const Neighbour& nb);
  /// Counts a refusal and logs it: the first of its kind at once, then at most one
  /// WARN per kind per 10 s with the count since the last one and the detail of the
  /// first held back. `detail` (a callable returning the text, std::string) is called
  /// only for a refusal whose text is kept, the first of each interval: a flood of
  /// refused datagrams words none of the rest. Requires mu_.
  static constexpr int64_t kLogEveryMs = 10000;  ///< one WARN per refusal kind per this long
  static constexpr int64_t kReturnWindowDeads = 10;  ///< RailState::lost keeps a neighbour this many dead intervals
  int64_t lastReturnWarnMs_ = -1;  ///< the last WARN about a returning neighbour (one per kLogEveryMs x 6)
  int64_t lastRestartWarnMs_ = -1;  ///< the last WARN about a speaker restarting its sequence (one per kLogEveryMs)
  uint64_t restartsSinceWarn_ = 0;  ///< such restarts since (the first of them included)
  /// (rail, host) pairs WARNed as heard by this host but not hearing it (WarnOneSided),
  /// each once until it resolves.
  std::set<std::pair<std::string, uint64_t>> oneSidedWarned_;
  /// WARNs of every cable whose neighbour has been heard for 3 dead intervals while no
  /// record of that host lists the cable back to this one (a firewall dropping the
  /// cabling port one way, or another RAILYARD_DISCOVERY_PORT at the far end's process
  /// that floods records): such a cable never enters the graph. Under mu_.
  void WarnOneSided(int64_t nowMs);
  template <typename Detail>
  void Refuse(uint64_t AgentCounters::*counter, const char* kind, Detail&& detail, int64_t nowMs) {
    ++(counters_.*counter);
    Throttle& t = throttles_[kind];
    if (t.since++ == 0) t.firstDetail = detail();
    if (t.lastMs >= 0 && nowMs - t.lastMs < kLogEveryMs) return;
    FlushRefusals(nowMs);
  }
  /// Logs the counts Refuse held back once their 10 s are up, so a burst that ends is
  /// still reported (a new-user trial: 309 of 310 refusals went unreported until the
  /// next one of the kind, minutes later). Called by Tick. Requires mu_.
  void FlushRefusals(int64_t nowMs);

  uint64_t hostId_ = 0;
  /// Names whose clash was warned (at most kMaxNameClashes). Guarded by mu_.
  std::set<std::string> nameClashesWarned_;
  static constexpr size_t kMaxNameClashes = 64;
  uint64_t speaker_ = 0;
  uint64_t ownSeq_ = 0;  ///< last sequence this speaker sent
  uint64_t ticks_ = 0;   ///< Ticks so far (the others' records are re-flooded every few)
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
  std::map<SpeakerKey, SpeakerRecord> records_;  ///< other speakers' link-state records and tombstones
  std::map<std::pair<const RailState*, uint32_t>, SourceBudget> budgets_;  ///< by (rail, source address)
  std::map<std::string, Throttle> throttles_;  ///< by refusal kind
  AgentCounters counters_;
  ClusterGraph graph_;
  std::set<uint64_t> linked_;  ///< this host and every host with a rail-link in graph_
  int64_t lastRebuildMs_ = 0;  ///< written by Rebuild, read by the agent thread (which alone rebuilds after Start)
  uint64_t version_ = 0;
  std::vector<std::string> shared_;
};

}  // namespace railyard::topology
