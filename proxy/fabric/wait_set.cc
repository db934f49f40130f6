#include "proxy/fabric/wait_set.h"

#include <sys/epoll.h>

#include <cerrno>

namespace railyard::fabric {

WaitSet::WaitSet() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {}

bool WaitSet::Sync(std::span<const int> fds) {
  if (!epoll_.valid()) return false;
  for (int fd : fds) {
    if (fd < 0) return false;
  }
  const std::set<int> wanted(fds.begin(), fds.end());
  for (int fd : members_) {
    if (wanted.count(fd) == 0) (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);  // ENOENT/EBADF: gone
  }
  members_.clear();
  for (int fd : wanted) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    // Every Sync adds every member: EEXIST for one still registered; a closed and
    // reused number (dropped by the kernel) is registered afresh.
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST) return false;
    members_.insert(fd);
  }
  return true;
}

}  // namespace railyard::fabric
