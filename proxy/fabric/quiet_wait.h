// proxy/fabric/quiet_wait.h: a serving thread's sleep between Progress passes, on
// the Worker's own descriptor (Worker::WaitFd) when the Worker says only input from
// peers can give it work (Worker::Quiet), so a server wakes the moment a peer's bytes
// arrive instead of after a fixed back-off; and a client's wait for a new connection to
// get every frame out (ProgressUntilQuiet), and a tier client's wait for a new
// connection's first op (BringUpWait: the snapshot mover's probe, the expert
// client's bring-up).
#pragma once

#include <chrono>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/endpoint.h"
#include "proxy/fabric/fabric_error.h"
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

/// How BringUpWait ended.
struct BringUpResult {
  enum Outcome {
    kDone,            ///< the op completed (and the Worker then got quiet, or the quiet bound passed)
    kOpFailed,        ///< the op's kError event: `error`
    kEndpointFailed,  ///< the Endpoint failed without (yet) an event for the op: `endpointStatus`
    kTimedOut,        ///< `deadline` passed first: a transport that broke its promise to end every op
  } outcome = kTimedOut;
  FabricError error;
  Status endpointStatus;
};

/// A tier client's bring-up of a new connection after posting its first op (cookie
/// `cookie`, on `ep`, e.g. a zero-byte Read or Write): progresses `worker` until that
/// op ends, or `ep` fails, or `deadline` passes (a backstop: the Endpoint ends every
/// op within its own timeout); events of other ops are dropped (the caller has none in
/// flight). After kDone, ProgressUntilQuiet until `quietBound` more at most (and never
/// past `deadline`), so the connection's other sockets have said hello before the
/// handle may rest: best effort, a socket that never connects fails the call that
/// needs it. `events` is scratch space.
BringUpResult BringUpWait(Worker& worker, Endpoint& ep, uint64_t cookie, std::chrono::steady_clock::time_point deadline,
                          std::chrono::milliseconds quietBound, std::vector<Event>* events);

}  // namespace railyard::fabric
