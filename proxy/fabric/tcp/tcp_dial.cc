#include "proxy/fabric/tcp/tcp_dial.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace railyard::fabric::tcp {

FabricError Dialer::Start(proxy::Fd* fd) {
  waiting_ = false;
  proxy::Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return {FabricErrc::kSystem, {}, "socket: " + proxy::ErrnoText(errno)};
  (void)proxy::TuneTcpSocket(s.get(), 0);
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&plan_.local), sizeof plan_.local) != 0) {
    return {FabricErrc::kSystem, {}, "bind: " + proxy::ErrnoText(errno)};
  }
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&plan_.remote), sizeof plan_.remote) != 0 &&
      errno != EINPROGRESS) {
    const int err = errno;
    if (err == ECONNREFUSED) return Refused();
    return {FabricErrc::kSystem, {}, "connect: " + proxy::ErrnoText(err)};
  }
  *fd = std::move(s);
  return {};
}

FabricError Dialer::Failed(int err) {
  if (err == ECONNREFUSED) return Refused();
  FabricError e{FabricErrc::kConnectFailed, {}, "connect: " + proxy::ErrnoText(err)};
  if (refusals_ > 0) e.what += " (after " + std::to_string(refusals_) + " refused dials)";
  return e;
}

FabricError Dialer::Refused() {
  const auto now = Clock::now();
  if (refusals_++ == 0) firstRefusal_ = now;
  if (now + std::chrono::milliseconds(backoffMs_) > plan_.redialUntil) {
    FabricError e{FabricErrc::kConnectFailed, {}, "connect: " + proxy::ErrnoText(ECONNREFUSED)};
    if (refusals_ > 1) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - firstRefusal_).count();
      e.what += " (refused " + std::to_string(refusals_) + " times over " + std::to_string(ms) +
                " ms: nothing listens there; is the peer's process, or the relay host's railyardd, running, and with "
                "the same RAILYARD_RELAY_PORT as this process?)";
    }
    return e;
  }
  waiting_ = true;
  redialAt_ = now + std::chrono::milliseconds(backoffMs_);
  backoffMs_ = std::min(backoffMs_ * 2, kMaxBackoffMs);
  return {};
}

}  // namespace railyard::fabric::tcp
