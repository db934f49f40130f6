// proxy/fabric/hello_admission.h: which socket gives way when a table of them is full:
// the sockets waiting for a hello (AdmitPending), a server's connected clients
// (AdmitIdle). A fair share by source address, applied only when the table is full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace railyard::fabric {

/// What to do with a socket just accepted (see AdmitPending).
struct Admission {
  /// False: close the new socket, keep every waiting one.
  bool admit = true;
  /// When admit and the table is full: the index (into the `waiting` argument) of the
  /// waiting socket to close first to make room; kNone when there is room already.
  size_t evict = kNone;
  static constexpr size_t kNone = static_cast<size_t>(-1);
};

/// Decides whether a socket just accepted from `source` may wait for its hello, given
/// the sources of the sockets already waiting (`waiting`, oldest first; IPv4 addresses,
/// network order, 0 when unknown) and the most that may wait (`max`, >= 1).
///
/// Below `max` every socket is admitted: one source may open as many at once as it
/// likes (a host with several ranks, rails and NCCL_NSOCKS_PERTHREAD sockets per rail
/// opens dozens in one burst, and a refused one fails a connection). At `max`, the
/// source holding the most waiting sockets gives way: a socket from another source is
/// admitted and that source's oldest waiting socket is evicted; one from that source
/// (or from a source tied with it) is refused. So a flood of idle sockets from one
/// peer can neither keep another peer out nor be kept longer than the hello timeout
/// (hostile-peer probe: 256 idle sockets from one peer shut every new connection out).
/// O(waiting.size()) when full, O(1) otherwise. (The TCP Worker applies a share of the
/// same kind to its table of peer connections: TcpOptions::maxPeerConnections.)
Admission AdmitPending(const std::vector<uint32_t>& waiting, uint32_t source, size_t max);

/// One connection a server holds, for AdmitIdle.
struct HeldConnection {
  uint32_t source = 0;  ///< the client's IPv4 address, network order (0: unknown)
  bool idle = false;    ///< between requests and holding nothing: may be closed now
};

/// Decides whether a server holding the connections `held` (oldest first; at most
/// `max` >= 1 may be held) takes a new one from `source`. Below `max`: admitted. At
/// `max`, the source holding the most connections, busy or idle (a source cannot hide
/// its share behind busy ones), gives way: its oldest idle connection is evicted
/// (Admission::evict, an index into `held`) for the new one; the new one is refused when
/// its own source holds as many as that (or is tied with it), or when that source has
/// no idle connection. So clients that connect and then sit idle, from however many
/// addresses, cannot keep others out for longer than it takes them to be closed
/// (hostile-peer probe: 4 addresses x 64 idle clients filled both storage tiers' 256
/// seats for as long as they liked). Ties between sources: the first to reach that
/// count, counting oldest first. O(held.size()) when full, O(1) otherwise.
Admission AdmitIdle(const std::vector<HeldConnection>& held, uint32_t source, size_t max);

}  // namespace railyard::fabric
