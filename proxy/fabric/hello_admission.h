// proxy/fabric/hello_admission.h: which accepted socket gives way when too many wait
// for a hello. A fair share by source address, applied only when the table is full.
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

}  // namespace railyard::fabric
