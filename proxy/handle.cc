#include "proxy/handle.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace railyard::proxy {

std::string SockaddrToString(const sockaddr_storage& addr) {
  char ip[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    port = ntohs(a->sin_port);
    return std::string(ip) + ":" + std::to_string(port);
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
    port = ntohs(a->sin6_port);
    return "[" + std::string(ip) + "]:" + std::to_string(port);
  }
  return "?";
}

std::string ListenAddress::ToString() const { return host + "/" + SockaddrToString(addr); }

void EncodeHandle(const ListenAddress& la, void* out) {
  HandleWire w{};
  w.header = MakeHeader(RecordKind::kHello);
  w.listenId = la.listenId;
  w.pid = la.pid;
  w.family = la.addr.ss_family;
  if (la.addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&la.addr);
    w.port = ntohs(a->sin_port);
    std::memcpy(w.addr, &a->sin_addr, 4);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&la.addr);
    w.port = ntohs(a->sin6_port);
    std::memcpy(w.addr, &a->sin6_addr, 16);
  }
  CopyHostName(la.host, w.host);
  w.hostId = la.hostId;
  w.nrails = static_cast<uint8_t>(std::min<size_t>(la.rails.size(), kHandleMaxRails));
  for (int i = 0; i < w.nrails; ++i) w.railAddrs[i] = la.rails[static_cast<size_t>(i)].s_addr;
  w.verbsRails = static_cast<uint8_t>(la.verbsRails);
  std::memcpy(out, &w, sizeof w);
}

Status DecodeHandle(const void* in, ListenAddress* out) {
  HandleWire w;
  std::memcpy(&w, in, sizeof w);
  RY_RETURN_IF_ERROR(CheckHeader(w.header, "listen handle"));
  if (w.header.kind != static_cast<uint16_t>(RecordKind::kHello)) {
    return InvalidUsage("listen handle has record kind " + std::to_string(w.header.kind) +
                        ", expected a listen handle of the socket comms: the peer runs other comms (set "
                        "RAILYARD_COMMS, RAILYARD_TRANSPORT and RAILYARD_FABRIC the same on every host)");
  }
  *out = ListenAddress{};
  out->listenId = w.listenId;
  out->pid = w.pid;
  // At most 31 bytes, as EncodeHandle writes it (a field without a NUL is cut).
  out->host.assign(w.host, strnlen(w.host, sizeof w.host - 1));
  out->hostId = w.hostId;
  if (w.nrails > kHandleMaxRails) {
    return InvalidUsage("listen handle lists " + std::to_string(w.nrails) + " rails, at most " +
                        std::to_string(kHandleMaxRails));
  }
  for (int i = 0; i < w.nrails; ++i) out->rails.push_back(in_addr{w.railAddrs[i]});
  out->verbsRails = w.verbsRails;
  if (w.family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&out->addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(w.port);
    std::memcpy(&a->sin_addr, w.addr, 4);
    out->len = sizeof(sockaddr_in);
  } else if (w.family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out->addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(w.port);
    std::memcpy(&a->sin6_addr, w.addr, 16);
    out->len = sizeof(sockaddr_in6);
  } else {
    return InvalidArgument("listen handle has unknown address family " + std::to_string(w.family));
  }
  if (w.port == 0) return InvalidArgument("listen handle has port 0");
  return Status::Ok();
}

}  // namespace railyard::proxy
