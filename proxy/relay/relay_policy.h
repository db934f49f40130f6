// What a relay agrees to connect to. Every byte of a relay record is hostile: a
// relay only opens legs to Railyard listeners and relays of other hosts in the
// cabling graph, over its rails, and only for a socket that goes on with a Railyard
// hello (so the relay is no general-purpose TCP forwarder: no HTTP request, no
// loopback service, no host outside the graph).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <vector>

#include "env/status.h"
#include "proxy/tcp/tcp_connector.h"
#include "proxy/wire.h"
#include "topology/cluster_key.h"

namespace railyard::proxy {

/// What the relay knows about itself and the graph when it judges a record.
struct RelayScope {
  uint64_t selfHost = 0;                ///< this host's cabling id
  std::vector<uint64_t> graphHosts;     ///< hosts in the cabling graph now
  std::vector<in_addr> railAddresses;   ///< this host's rail addresses (IPv4)
  /// Each rail address's prefix length (the cable's subnet), in railAddresses' order; a
  /// next leg must go to an address in the subnet of the rail it leaves from. Empty, or
  /// a length of 0 or 32: not checked (as ArrivedFromTheCable).
  std::vector<int> railPrefixLens;
  std::vector<in_addr> localAddresses;  ///< every address of this host (any interface)
  uint16_t relayPort = 0;               ///< TCP port of relays (the same on every host)
  /// The ports a Railyard listener a relay connects to may have, inclusive: the
  /// kernel's ephemeral range (EphemeralPortRange), where the ranks' listeners bind
  /// port 0, and fixedListenerPorts. The default, every port, checks nothing.
  uint16_t listenerPortLow = 1;
  uint16_t listenerPortHigh = 65535;
  /// Fixed ports of Railyard listeners outside that range (railyardd's tier tunnels).
  std::vector<uint16_t> fixedListenerPorts;
};

/// This host's ephemeral port range (net.ipv4.ip_local_port_range, read from /proc:
/// where bind(2) to port 0 takes a port), or Linux's default 32768..60999 when it
/// cannot be read. Relays assume the destination host's range is the same.
void EphemeralPortRange(uint16_t* low, uint16_t* high);

/// Checks a relay record before any leg is planned, every byte of it (a connector's
/// bytes are hostile): no undefined flag bit (only kRelayFlagMac), zero reserved bytes,
/// an origin name NUL-terminated within its 24 bytes, NUL-padded and free of control
/// bytes (it reaches logs); the destination another host of the graph, the port a
/// plausible listener port (not 0, not the relay port, and in the scope's listener
/// range: a relay is no TCP proxy to a host's services, hostile-peer probe), the hop
/// count in range.
/// InvalidUsage saying why otherwise.
Status CheckRelayRecord(const RelayRecord& rec, const RelayScope& scope);

/// Checks a relay record's authentication (issue 9 item 2). With `key` (the cluster
/// key is configured) the record must carry kRelayFlagMac and `mac` (kRelayMacBytes)
/// must be the MAC of its 56 bytes; without, it must carry no MAC (the two ends are
/// configured differently otherwise). InvalidUsage saying which.
Status CheckRelayMac(const RelayRecord& rec, const unsigned char* mac, const topology::ClusterKey* key);

/// Checks the first record header that follows a relay record on the socket: it
/// must open a Railyard hello (the older comms' connector), or be the first 8 bytes
/// of a fabric TCP hello frame of this build's wire version (a fabric Endpoint spliced
/// through the relay: proxy/fabric/tcp/tcp_frame.h). InvalidUsage otherwise, naming
/// the kind, type or version (the bytes came from something that is not a Railyard
/// connector).
Status CheckFollowingHello(const RecordHeader& h);

/// Checks the planned onward leg before connect(2): IPv4, to a unicast address that
/// is not loopback, unspecified, multicast, broadcast or an address of this host;
/// from one of this host's rail addresses; to `destPort` when it goes straight to
/// the listener, to the relay port when another relay follows (`relayed`).
/// InvalidUsage naming the address otherwise.
Status CheckOnwardLeg(const SocketTarget& t, uint16_t destPort, bool relayed, const RelayScope& scope);

/// Whether a socket from `source` that reached this host at its rail address `rail`
/// (a /`prefixLen` subnet: the cable's) came over that rail's cable: the source lies
/// in the subnet and is none of `ownRails` (this host's rail addresses). A /32 (or
/// unknown, 0) prefix has no subnet to check: only the second rule holds. A host off
/// the cable that routes the cable's subnet through this host's management address,
/// or a local process, reaches the same rail address: false. A source of 0.0.0.0: false.
bool ArrivedFromTheCable(in_addr source, in_addr rail, int prefixLen, const std::vector<in_addr>& ownRails);

/// This host's IPv4 addresses on every interface (getifaddrs), loopback included.
std::vector<in_addr> LocalIpv4Addresses();

}  // namespace railyard::proxy
