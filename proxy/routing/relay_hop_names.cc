#include "proxy/routing/relay_hop_names.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <memory>
#include <mutex>

namespace railyard::proxy {

namespace {

std::mutex g_mu;
std::shared_ptr<const AddressNamer> g_namer;

}  // namespace

void SetAddressNamer(AddressNamer namer) {
  std::lock_guard lock(g_mu);
  g_namer = namer ? std::make_shared<const AddressNamer>(std::move(namer)) : nullptr;
}

std::string ViaRelay(int fd, const std::string& originHost) {
  std::shared_ptr<const AddressNamer> namer;
  {
    std::lock_guard lock(g_mu);
    namer = g_namer;
  }
  if (!namer) return "";
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_INET) return "";
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  const std::string name = (*namer)(a->sin_addr);
  if (name.empty() || name == originHost) return "";
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
  return " via " + name + " (" + text + ":" + std::to_string(ntohs(a->sin_port)) + ")";
}

}  // namespace railyard::proxy
