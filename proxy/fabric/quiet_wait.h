// proxy/fabric/quiet_wait.h: a serving thread's sleep between Progress passes, on
// the Worker's own descriptor (Worker::WaitFd) when the Worker says only input from
// peers can give it work (Worker::Quiet), so a server wakes the moment a peer's bytes
// arrive instead of after a fixed back-off.
#pragma once

#include <chrono>

#include "proxy/fabric/worker.h"

namespace railyard::fabric {

/// Sleeps the calling thread until `worker`'s WaitFd() polls readable, or `max`
/// passed, when worker.Quiet() is true and WaitFd() is a descriptor; returns true
/// then (whether input came or the time ran out: call Progress either way). Returns
/// false at once, without sleeping, when the Worker cannot sleep (not Quiet, or no
/// descriptor): the caller keeps calling Progress, backing off its own way.
/// `max` bounds the sleep so that the caller's own checks (a stop flag, op timeouts
/// inside Progress) still run; 0 polls once. Call from the thread that progresses
/// `worker` (Quiet reads its state).
bool SleepUntilInput(const Worker& worker, std::chrono::milliseconds max);

}  // namespace railyard::fabric
