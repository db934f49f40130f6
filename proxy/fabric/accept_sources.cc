#include "proxy/fabric/accept_sources.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <utility>

namespace railyard::fabric {

Status AcceptSources::Parse(const std::vector<std::string>& list, const std::string& what, AcceptSources* out) {
  AcceptSources parsed;
  for (const std::string& a : list) {
    in_addr x{};
    if (inet_pton(AF_INET, a.c_str(), &x) != 1) {
      return InvalidArgument(what + ": accepted source '" + a + "' is not an IPv4 address");
    }
    parsed.allowed_.push_back(x);
  }
  *out = std::move(parsed);
  return Status::Ok();
}

bool AcceptSources::Allows(int fd) const {
  if (allowed_.empty()) return true;
  sockaddr_in from{};
  socklen_t len = sizeof from;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &len) != 0 || from.sin_family != AF_INET) return false;
  for (const in_addr& a : allowed_) {
    if (a.s_addr == from.sin_addr.s_addr) return true;
  }
  return false;
}

}  // namespace railyard::fabric
