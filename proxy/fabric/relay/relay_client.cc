#include "proxy/fabric/relay/relay_client.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "proxy/fabric/relay/relay_wire.h"
#include "proxy/fabric/relay/relayed_endpoint.h"

namespace railyard::fabric::relay {

Status RelayClient::Create(Domain& domain, const RelayOptions& options, std::unique_ptr<RelayClient>* out) {
  RY_RETURN_IF_ERROR(options.Validate());
  out->reset(new RelayClient(domain, options));
  return Status::Ok();
}

RelayClient::~RelayClient() {
  // Routes closed just before get their Close records out, for a bounded time, so
  // the relay ends them cleanly instead of finding their legs reset.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(options_.timeoutMs, 200));
  std::vector<pollfd> fds;
  while (!closing_.empty() && std::chrono::steady_clock::now() < until) {
    fds.clear();
    bool quiet = true, waitable = true;
    for (Closing& c : closing_) {
      scratch_.clear();
      c.worker->Progress(&scratch_);
      quiet = quiet && c.worker->Quiet();
      const int fd = c.worker->WaitFd();
      waitable = waitable && fd >= 0;
      fds.push_back({fd, POLLIN, 0});
    }
    std::erase_if(closing_, [](const Closing& c) { return c.leg->Outstanding() == 0; });
    if (closing_.empty()) break;
    // Until a relay answers there is nothing to do: sleep on the legs' descriptors
    // (1 ms at most between passes), or briefly where a transport has none (the
    // in-process fake), rather than spin for the whole bound.
    if (waitable && quiet) {
      (void)::poll(fds.data(), fds.size(), 1);
    } else if (!waitable) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  closing_.clear();
}

Status RelayClient::Connect(std::span<const uint8_t> relay, std::span<const uint8_t> target,
                            std::unique_ptr<Endpoint>* out) {
  if (target.empty() || target.size() > kMaxAddressBytes) {
    return InvalidArgument("relayed connect: a target address of " + std::to_string(target.size()) + " bytes");
  }
  uint32_t id = 0;
  for (uint32_t tries = 0; tries <= kMaxRouteId && id == 0; ++tries) {
    lastRoute_ = lastRoute_ % kMaxRouteId + 1;
    if (routes_.count(lastRoute_) == 0) id = lastRoute_;
  }
  if (id == 0) return InvalidUsage("relayed connect: every route id of this client is in use (65,535)");
  auto ep = std::make_unique<RelayedEndpoint>(this, id, std::vector<uint8_t>(target.begin(), target.end()));
  routes_[id] = ep.get();
  Status s = ep->Init(relay);
  if (!s.ok()) return s;  // its destructor detaches it
  *out = std::move(ep);
  return Status::Ok();
}

void RelayClient::Detach(uint32_t routeId, std::shared_ptr<void> leftovers, Worker* worker, Endpoint* leg,
                         int deadlineMs) {
  routes_.erase(routeId);
  if (leftovers) {
    closing_.push_back({std::move(leftovers), worker, leg,
                        std::chrono::steady_clock::now() + std::chrono::milliseconds(deadlineMs)});
  }
}

size_t RelayClient::Progress(std::vector<Event>* events) {
  const size_t before = events->size();
  for (auto& [id, r] : routes_) r->Progress(events);
  const auto now = std::chrono::steady_clock::now();
  for (Closing& c : closing_) {
    scratch_.clear();
    c.worker->Progress(&scratch_);
  }
  std::erase_if(closing_, [&](const Closing& c) { return c.leg->Outstanding() == 0 || now > c.deadline; });
  return events->size() - before;
}

bool RelayClient::Quiet() const {
  if (!closing_.empty()) return false;  // a Close record on its way: Progress drives it
  for (const auto& [id, r] : routes_) {
    if (!r->Quiet()) return false;
  }
  return true;
}

void RelayClient::WaitFds(std::vector<int>* fds) const {
  for (const auto& [id, r] : routes_) fds->push_back(r->WaitFd());
}

}  // namespace railyard::fabric::relay
