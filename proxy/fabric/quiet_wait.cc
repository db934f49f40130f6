// proxy/fabric/quiet_wait.cc: see quiet_wait.h.
#include "proxy/fabric/quiet_wait.h"

#include <poll.h>

#include <algorithm>
#include <thread>

namespace railyard::fabric {

QuietWait SleepUntilInput(const Worker& worker, std::chrono::milliseconds max) {
  if (!worker.Quiet()) return QuietWait::kCannotSleep;
  const int fd = worker.WaitFd();
  if (fd < 0) return QuietWait::kCannotSleep;
  pollfd p{fd, POLLIN, 0};
  // EINTR (-1) counts as woken: the caller looks at its stop flag at once.
  return ::poll(&p, 1, static_cast<int>(max.count())) == 0 ? QuietWait::kTimedOut : QuietWait::kWoken;
}

bool ProgressUntilQuiet(Worker& worker, std::chrono::steady_clock::time_point deadline, std::vector<Event>* events) {
  if (worker.WaitFd() < 0) return false;
  for (int pass = 0;; ++pass) {
    worker.Progress(events);
    if (worker.Quiet()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (pass >= 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

BringUpResult BringUpWait(Worker& worker, Endpoint& ep, uint64_t cookie, std::chrono::steady_clock::time_point deadline,
                          std::chrono::milliseconds quietBound, std::vector<Event>* events) {
  BringUpResult r;
  while (std::chrono::steady_clock::now() < deadline) {
    events->clear();
    worker.Progress(events);
    for (const Event& e : *events) {
      if (e.cookie != cookie || (e.kind != EventKind::kDone && e.kind != EventKind::kError)) continue;
      if (e.kind == EventKind::kError) {
        r.outcome = BringUpResult::kOpFailed;
        r.error = e.error;
        return r;
      }
      events->clear();
      (void)ProgressUntilQuiet(worker, std::min(deadline, std::chrono::steady_clock::now() + quietBound), events);
      r.outcome = BringUpResult::kDone;
      return r;
    }
    if (Status s = ep.status(); !s.ok()) {
      r.outcome = BringUpResult::kEndpointFailed;
      r.endpointStatus = s;
      return r;
    }
  }
  return r;
}

}  // namespace railyard::fabric
