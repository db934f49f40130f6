#include "proxy/fabric/relay/multi_route_endpoint.h"

namespace railyard::fabric::relay {

MultiRouteEndpoint::MultiRouteEndpoint(std::vector<std::unique_ptr<Endpoint>> routes) : routes_(std::move(routes)) {}

Endpoint& MultiRouteEndpoint::Pick() {
  if (posted_ && Outstanding() == 0) {
    current_ = (current_ + 1) % routes_.size();
    posted_ = false;
  }
  posted_ = true;
  return *routes_[current_];
}

Status MultiRouteEndpoint::Send(std::span<const uint8_t> record, uint64_t cookie) {
  RY_RETURN_IF_ERROR(status());
  return Pick().Send(record, cookie);
}

Status MultiRouteEndpoint::Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                                 std::optional<uint32_t> immediate) {
  RY_RETURN_IF_ERROR(status());
  return Pick().Write(src, key, remoteAddr, cookie, immediate);
}

Status MultiRouteEndpoint::WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr,
                                      uint64_t cookie, uint32_t immediate, uint64_t opBytes) {
  RY_RETURN_IF_ERROR(status());
  // The pieces before it went on the current route and are still outstanding or
  // done; Pick moves on only when all are done, so the whole Write stays ordered.
  return Pick().WriteFinal(src, key, remoteAddr, cookie, immediate, opBytes);
}

Status MultiRouteEndpoint::Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) {
  RY_RETURN_IF_ERROR(status());
  return Pick().Read(dst, key, remoteAddr, cookie);
}

Status MultiRouteEndpoint::FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) {
  RY_RETURN_IF_ERROR(status());
  return Pick().FetchAdd(key, remoteAddr, add, cookie);
}

Status MultiRouteEndpoint::Fence(uint64_t cookie) {
  RY_RETURN_IF_ERROR(status());
  return Pick().Fence(cookie);  // every op before it is on this route or already done
}

Status MultiRouteEndpoint::status() const {
  for (const auto& r : routes_) {
    if (Status s = r->status(); !s.ok()) return s;
  }
  return Status::Ok();
}

size_t MultiRouteEndpoint::Outstanding() const {
  size_t n = 0;
  for (const auto& r : routes_) n += r->Outstanding();
  return n;
}

void MultiRouteEndpoint::QuietPeerClose() {
  for (auto& r : routes_) r->QuietPeerClose();
}

std::string MultiRouteEndpoint::PeerName() const {
  std::string s;
  for (size_t i = 0; i < routes_.size(); ++i) s += (i ? " | " : "") + routes_[i]->PeerName();
  return s;
}

}  // namespace railyard::fabric::relay
