// proxy/fabric/quiet_wait.cc: see quiet_wait.h.
#include "proxy/fabric/quiet_wait.h"

#include <poll.h>

namespace railyard::fabric {

QuietWait SleepUntilInput(const Worker& worker, std::chrono::milliseconds max) {
  if (!worker.Quiet()) return QuietWait::kCannotSleep;
  const int fd = worker.WaitFd();
  if (fd < 0) return QuietWait::kCannotSleep;
  pollfd p{fd, POLLIN, 0};
  // EINTR (-1) counts as woken: the caller looks at its stop flag at once.
  return ::poll(&p, 1, static_cast<int>(max.count())) == 0 ? QuietWait::kTimedOut : QuietWait::kWoken;
}

}  // namespace railyard::fabric
