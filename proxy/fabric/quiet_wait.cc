// proxy/fabric/quiet_wait.cc: see quiet_wait.h.
#include "proxy/fabric/quiet_wait.h"

#include <poll.h>

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

}  // namespace railyard::fabric
