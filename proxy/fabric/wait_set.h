// WaitSet: one descriptor to sleep on for a Worker made of other Workers (a routed
// Worker: its direct Worker and its relayed routes' leg Workers; fabric mode's cable
// set: a Worker per cable and the host-local one). It is an epoll set whose members
// are the inner Workers' WaitFd()s (epoll sets nest: an inner set polls readable when
// one of its own members does), brought up to date by Sync from the composite's
// Quiet(), the one call a thread makes before it sleeps on WaitFd (worker.h).
//
// Threading: as the Worker that owns it (Sync from the Worker's thread; fd() from any).
#pragma once

#include <set>
#include <span>

#include "proxy/socket.h"

namespace railyard::fabric {

/// See file comment.
class WaitSet {
 public:
  /// Makes the epoll set; -1 from fd() (a composite that cannot sleep) when the
  /// kernel refuses one.
  WaitSet();
  /// The epoll set's descriptor (POLLIN when a member is readable), or -1.
  int fd() const { return epoll_.get(); }
  /// Makes `fds` the members: adds the new ones, drops the ones no longer named. An fd
  /// number closed and reused since the last Sync is added again (the kernel drops a
  /// closed descriptor from every epoll set by itself). False when fd() is -1, any of
  /// `fds` is -1 (an inner Worker offers nothing to wait on) or epoll_ctl refuses one:
  /// the caller must not sleep then (the next Sync mends the set).
  bool Sync(std::span<const int> fds);

 private:
  proxy::Fd epoll_;
  std::set<int> members_;
};

}  // namespace railyard::fabric
