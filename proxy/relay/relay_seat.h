// The relay seat: which one process of a host serves a host-wide resource (the TCP
// relay port today, the RDMA relays of fabric mode later). Exactly one process holds
// a seat; everyone else either stands by or is refused, and the resources move
// between processes whole (SCM_RIGHTS) instead of being shared (no SO_REUSEPORT):
//
//   - railyardd (Role::kDaemon) always ends up holding it: when a rank process holds
//     the seat, the daemon asks for it and the rank hands over its listening
//     sockets, accept queue included, so no connection is refused on the way; the
//     rank keeps carrying the sockets it already relays until they end.
//   - A rank process (Role::kRank) holds the seat only when nobody does; else it
//     stands by (a connection to the holder). When the holder leaves cleanly it hands
//     the seat to one standby; when it dies (kill -9), the standbys see the
//     connection close and one of them claims the seat afresh.
//   - A second railyardd is refused, naming the pid of the one that holds the seat.
//
// A seat is an abstract Unix socket named "railyard-seat:<key>" (key e.g.
// "relay:29518"). Abstract names belong to the network namespace, as ports do, so a
// seat is per host exactly where the port it guards is (unix(7), "Abstract sockets").
// Only processes of the same user, or root, are handed a seat (SO_PEERCRED).
//
// Not thread-safe: one thread (the relay's) calls everything after Claim.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/socket.h"

namespace railyard::proxy {

/// One process's place at a host-wide seat: holding it, or standing by.
class RelaySeat {
 public:
  /// Who is asking. A daemon outranks ranks; two daemons never share a host.
  enum class Role : uint8_t { kDaemon = 1, kRank = 2 };
  /// Where this process stands.
  enum class State { kHolding, kStandby };
  /// What OnReadable changed.
  enum class Change {
    kNone,
    kTaken,      ///< this process now holds the seat: Resources() are live
    kGivenAway,  ///< a daemon took the seat: Resources() are gone, this process stands by
  };
  /// Opens the seat's resources (e.g. binds the relay port, without SO_REUSEPORT)
  /// when the seat is free. Their order is kept through every handover.
  using OpenFn = std::function<Status(std::vector<Fd>*)>;

  /// Claims seat `key` for `role`. Holding when the seat was free (then `open` ran)
  /// or when a rank held it and `role` is kDaemon (the rank's resources came over);
  /// standby otherwise. InvalidUsage, naming the holder's pid, when `role` is kDaemon
  /// and a daemon already holds it. SystemError when a socket call fails or `open`
  /// fails (the seat is then left free).
  static Status Claim(const std::string& key, Role role, OpenFn open, std::unique_ptr<RelaySeat>* out);
  ~RelaySeat();
  RelaySeat(const RelaySeat&) = delete;
  RelaySeat& operator=(const RelaySeat&) = delete;

  State state() const { return state_; }
  /// The resources, in `open`'s order, while holding; empty while standing by.
  const std::vector<Fd>& Resources() const { return resources_; }
  /// "railyardd (pid 123)" / "a rank process (pid 123)": who holds the seat (this
  /// process included), for logs.
  std::string HolderText() const;
  /// Descriptors to watch for readability (EPOLLIN); the set changes after
  /// OnReadable, HandOff and Claim.
  std::vector<int> WatchFds() const;
  /// Serves readability of one of WatchFds: a newcomer at the seat, a standby
  /// leaving, a handover arriving or the holder gone. Never blocks for longer than a
  /// local peer takes to send 16 bytes (bounded at 1 s).
  Status OnReadable(int fd, Change* change);
  /// Leaves the seat: while holding, hands it (resources included) to one standby,
  /// if any, and returns true; the resources are closed here either way.
  bool HandOff();

 private:
  struct Peer;
  RelaySeat() = default;
  Status ClaimAgain(Change* change);
  Status Adopt(std::vector<Fd> fds);

  std::string key_;
  Role role_ = Role::kRank;
  OpenFn open_;
  State state_ = State::kStandby;
  Fd seat_;                        ///< listening abstract socket, while holding
  std::vector<Fd> resources_;      ///< while holding
  std::vector<std::unique_ptr<Peer>> standbys_;  ///< while holding
  Fd holder_;                      ///< connection to the holder, while standing by
  Role holderRole_ = Role::kRank;
  pid_t holderPid_ = 0;
};

/// The printable name of seat `key` ("railyard-seat:relay:29518"); the abstract
/// socket's name without the leading NUL.
std::string SeatName(const std::string& key);

}  // namespace railyard::proxy
