// proxy/fabric/quiet_wait.cc: see quiet_wait.h.
#include "proxy/fabric/quiet_wait.h"

#include <poll.h>

#include <cerrno>

namespace railyard::fabric {

bool SleepUntilInput(const Worker& worker, std::chrono::milliseconds max) {
  if (!worker.Quiet()) return false;
  const int fd = worker.WaitFd();
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, static_cast<int>(max.count()));
  } while (n < 0 && errno == EINTR);
  return true;
}

}  // namespace railyard::fabric
