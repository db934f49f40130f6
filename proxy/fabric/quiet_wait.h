// proxy/fabric/quiet_wait.h: a serving thread's sleep between Progress passes, on
// the Worker's own descriptor (Worker::WaitFd) when the Worker says only input from
// peers can give it work (Worker::Quiet), so a server wakes the moment a peer's bytes
// arrive instead of after a fixed back-off; and a client's wait for a new connection to
// get every frame out (ProgressUntilQuiet).
#pragma once

#include <chrono>
#include <vector>

#include "proxy/fabric/worker.h"

namespace railyard::fabric {

/// How SleepUntilInput ended.
enum class QuietWait {
  kCannotSleep,  ///< not Quiet, or no descriptor: returned at once, nothing slept
  kTimedOut,     ///< slept the whole `max`: nothing came
  kWoken,        ///< the descriptor polled readable (at once or later), or a signal came
};

/// Sleeps the calling thread until `worker`'s WaitFd() polls readable, or `max`
/// passed, when worker.Quiet() is true and WaitFd() is a descriptor. Call Progress
/// after any result. A caller that is kWoken again and again while Progress finds
/// nothing to do (a descriptor that stays readable: a listener failing accept() with
/// EMFILE) must back off its own way, or it spins. `max` bounds the sleep so that the
/// caller's own checks (a stop flag, op timeouts inside Progress) still run; 0 polls
/// once; a signal ends it early (kWoken). Call from the thread that progresses
/// `worker` (Quiet reads its state).
QuietWait SleepUntilInput(const Worker& worker, std::chrono::milliseconds max);

/// Progresses `worker` until it is Quiet() (every frame it queued is out: a new
/// connection's hello on each of its sockets included) or `deadline` passes, appending
/// the events that come to `events`; true when it got quiet. A Worker with no WaitFd()
/// (its Quiet() says nothing) returns false at once. After a connection's first op
/// completes, only the socket that carried it is known to have said hello: a peer
/// closes the others, connected later (a SYN retried), if their hellos wait for the
/// next op past its RAILYARD_ACCEPT_TIMEOUT_MS (review of the tiers' bring-up). Spins
/// at first, then sleeps 1 ms between passes (a retried SYN takes a second).
bool ProgressUntilQuiet(Worker& worker, std::chrono::steady_clock::time_point deadline, std::vector<Event>* events);

}  // namespace railyard::fabric
