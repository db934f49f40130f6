#include "proxy/fabric/relay/forwarder.h"

#include <algorithm>

#include "proxy/fabric/relay/relay_cookie.h"

namespace railyard::fabric::relay {

Forwarder::Forwarder(std::vector<Domain*> ports, RelayOptions options, ResolveFn resolve)
    : options_(std::move(options)), resolve_(std::move(resolve)) {
  for (Domain* d : ports) ports_.push_back(Port{d, d, nullptr, nullptr});
}

Status Forwarder::Create(std::vector<Domain*> ports, const RelayOptions& options, ResolveFn resolve,
                         std::unique_ptr<Forwarder>* out, std::vector<Domain*> onward) {
  if (ports.empty() || std::find(ports.begin(), ports.end(), nullptr) != ports.end()) {
    return InvalidArgument("relay forwarder: no ports, or a port without a Domain");
  }
  if (!onward.empty() &&
      (onward.size() != ports.size() || std::find(onward.begin(), onward.end(), nullptr) != onward.end())) {
    return InvalidArgument("relay forwarder: " + std::to_string(onward.size()) + " onward Domains for " +
                           std::to_string(ports.size()) + " ports");
  }
  if (!resolve) return InvalidArgument("relay forwarder: no resolver (the relay host's routing)");
  RY_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Forwarder> f(new Forwarder(std::move(ports), options, std::move(resolve)));
  for (size_t i = 0; i < onward.size(); ++i) f->ports_[i].onward = onward[i];
  for (Port& p : f->ports_) RY_RETURN_IF_ERROR(p.domain->CreateWorker(&p.worker));
  *out = std::move(f);
  return Status::Ok();
}

Forwarder::~Forwarder() {
  answering_.clear();
  routes_.clear();  // their legs before the Workers and clients they came from
  for (Port& p : ports_) {
    p.client.reset();
    p.worker.reset();
  }
}

std::vector<uint8_t> Forwarder::Address(size_t port) const {
  return port < ports_.size() ? ports_[port].worker->Address() : std::vector<uint8_t>{};
}

ForwarderStats Forwarder::stats() const {
  ForwarderStats s = stats_;
  s.routesOpen = routes_.size();
  for (const auto& [id, r] : routes_) {
    s.slotsForwarded += r->slotsForwarded();
    s.bytesForwarded += r->bytesForwarded();
  }
  return s;
}

void Forwarder::Refuse(const std::string& why) {
  ++stats_.routesRefused;
  lastRefusal_ = why;
}

void Forwarder::Open(size_t port, const Control& c, uint64_t peer) {
  RouteOpen o;
  Status s = DecodeRouteOpen(c.body, &o);
  if (!s.ok()) return Refuse(s.message());
  const std::vector<uint8_t> encoded = EncodeRouteOpen(o);
  const bool macSet = std::any_of(o.mac, o.mac + kOpenMacBytes, [](uint8_t b) { return b != 0; });
  if (options_.clusterKey) {
    if (!macSet || !options_.clusterKey->Verify("railyard.fabric.relay.open", encoded.data(),
                                                encoded.size() - kOpenMacBytes, o.mac)) {
      return Refuse("relay open without a valid cluster-key MAC (RAILYARD_CLUSTER_KEY_FILE)");
    }
  } else if (macSet) {
    return Refuse("relay open carries a MAC but this relay has no cluster key (the hosts are configured differently)");
  }
  // The source must be a neighbour on this very port: the way back is never steered.
  NextHop back;
  s = resolve_(o.source, &back);
  if (!s.ok() || back.port != port || !back.via.empty() || back.local) {
    return Refuse("relay open from a source that is not a neighbour on port " + std::to_string(port) +
                  (s.ok() ? std::string() : ": " + s.message()));
  }
  std::unique_ptr<Endpoint> backEp;
  s = ports_[port].worker->Connect(o.source, &backEp);
  if (!s.ok()) return Refuse("relay open: cannot reach the source: " + s.message());
  auto refuseAnswered = [&](const std::string& why) {
    FabricError err;
    err.errc = FabricErrc::kConnectFailed;
    err.what = "the relay refused the route: " + why;
    if (backEp->Send(EncodeControl(MakeErrorControl(c.route, 0, err)), MakeLegCookie(0, LegTag::kControl, 0)).ok()) {
      // Kept until the answer is out (bounded by the timeout), then dropped.
      answering_.push_back({std::move(backEp), std::chrono::steady_clock::now() +
                                                   std::chrono::milliseconds(options_.timeoutMs)});
    }
    Refuse(why);
  };
  if (!stopOpening_.empty()) return refuseAnswered(stopOpening_);
  const int fromPeer = static_cast<int>(
      std::count_if(routes_.begin(), routes_.end(), [&](const auto& r) { return r.second->sourcePeer() == peer; }));
  if (fromPeer >= options_.maxRoutesPerPeer) {
    return refuseAnswered("the source already holds " + std::to_string(fromPeer) +
                          " routes here (RAILYARD_RELAY_MAX_PER_PEER)");
  }
  if (o.slotBytes != options_.slotBytes || o.returnSlots > options_.returnSlots) {
    return refuseAnswered("slot size " + std::to_string(o.slotBytes) + " / return slots " + std::to_string(o.returnSlots) +
                          " differ from this relay's " + std::to_string(options_.slotBytes) + " / " +
                          std::to_string(options_.returnSlots));
  }
  NextHop hop;
  s = resolve_(o.target, &hop);
  if (!s.ok() || hop.port >= ports_.size()) {
    return refuseAnswered("this relay does not carry to that target: " + (s.ok() ? std::string("no such port") : s.message()));
  }
  std::unique_ptr<Endpoint> down;
  if (hop.via.empty()) {
    s = ports_[hop.port].worker->Connect(o.target, &down);
  } else {
    Port& p = ports_[hop.port];
    if (!p.client) s = RelayClient::Create(*p.onward, options_, &p.client);
    if (s.ok()) s = p.client->Connect(hop.via, o.target, &down);
  }
  if (!s.ok()) return refuseAnswered("cannot reach the next hop: " + s.message());
  uint32_t id = 0;
  for (uint32_t tries = 0; tries <= kMaxRouteId && id == 0; ++tries) {
    lastRoute_ = lastRoute_ % kMaxRouteId + 1;
    if (routes_.count(lastRoute_) == 0) id = lastRoute_;
  }
  if (id == 0) return refuseAnswered("every route id of this relay is in use");
  ForwardRoute::Setup setup;
  setup.id = id;
  setup.clientRoute = c.route;
  setup.sourcePeer = peer;
  setup.upPort = port;
  setup.up = ports_[port].domain;
  setup.down = ports_[hop.port].domain;
  setup.slots = std::min(o.slots, options_.slots);
  setup.returnSlots = o.returnSlots;
  (void)RemoteKey::Unpack(o.returnKey, &setup.returnKey);  // checked by DecodeRouteOpen
  setup.options = &options_;
  setup.nextHop = hop.name;
  auto route = std::make_unique<ForwardRoute>(setup);
  s = route->Init(std::move(backEp), std::move(down));
  if (!s.ok()) {
    Refuse("relay route rings: " + s.message());
    return;
  }
  ForwardRoute* r = route.get();
  routes_[id] = std::move(route);
  ++stats_.routesOpened;
  // The answer goes on the route's own back leg, so the route owns every op of it.
  r->SendOpenOk(o.nonce);
}

void Forwarder::Dispatch(size_t port, const Event& e) {
  switch (e.kind) {
    case EventKind::kDone:
    case EventKind::kError: {
      if (e.op == OpType::kNone) {
        // A connection into this port failed: a source's leg Worker is gone (killed,
        // or its route closed mid-operation). Its routes cannot be answered any more.
        for (auto& [id, r] : routes_) {
          if (r->upPort() == port && r->sourcePeer() == e.peer) r->Abandon("the source's leg went away: " + e.error.ToString());
        }
        return;
      }
      auto it = routes_.find(CookieRoute(e.cookie));
      if (it != routes_.end()) it->second->OnLegEvent(e);
      return;
    }
    case EventKind::kRecord: {
      Control c;
      if (!DecodeControl(e.record, &c).ok()) {
        ++stats_.strays;
        return;
      }
      if (c.kind == ControlKind::kOpen) return Open(port, c, e.peer);
      auto it = routes_.find(c.route);
      if (it == routes_.end() || it->second->sourcePeer() != e.peer || it->second->upPort() != port) {
        ++stats_.strays;
        return;
      }
      it->second->OnControl(c);
      return;
    }
    case EventKind::kImmediate: {
      auto it = routes_.find(ImmediateRoute(static_cast<uint32_t>(e.value)));
      if (it == routes_.end() || it->second->sourcePeer() != e.peer || it->second->upPort() != port) {
        ++stats_.strays;
        return;
      }
      it->second->OnSlot(ImmediateSlot(static_cast<uint32_t>(e.value)));
      return;
    }
  }
}

std::vector<int> Forwarder::WaitFds() const {
  std::vector<int> fds;
  if (!answering_.empty()) return fds;
  for (const Port& p : ports_) {
    const int fd = p.worker->WaitFd();
    if (fd < 0 || !p.worker->Quiet()) return {};
    fds.push_back(fd);
    // Routes carried on through a further relay: their onward legs' Workers too. It
    // spun instead, and on a host with fewer cores than spinners took the CPU the
    // ranks needed (docs/benchmarks.md, TCP Forwarders, two relays in a row).
    if (p.client) {
      if (!p.client->Quiet()) return {};
      const size_t before = fds.size();
      p.client->WaitFds(&fds);
      if (std::find(fds.begin() + static_cast<std::ptrdiff_t>(before), fds.end(), -1) != fds.end()) return {};
    }
  }
  return fds;
}

size_t Forwarder::Progress() {
  size_t n = 0;
  for (size_t p = 0; p < ports_.size(); ++p) {
    scratch_.clear();
    ports_[p].worker->Progress(&scratch_);
    n += scratch_.size();
    for (const Event& e : scratch_) Dispatch(p, e);
    if (ports_[p].client) {
      scratch_.clear();
      ports_[p].client->Progress(&scratch_);
      n += scratch_.size();
      for (const Event& e : scratch_) {
        auto it = routes_.find(CookieRoute(e.cookie));
        if (it != routes_.end()) it->second->OnLegEvent(e);
      }
    }
  }
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(answering_, [&](const Answering& a) { return a.ep->Outstanding() == 0 || now > a.deadline; });
  for (auto it = routes_.begin(); it != routes_.end();) {
    it->second->Pump();
    if (it->second->Finished()) {
      stats_.slotsForwarded += it->second->slotsForwarded();
      stats_.bytesForwarded += it->second->bytesForwarded();
      // Failed: an error went back to its source. A route whose source went away
      // (its leg closed or reset: a source killed, or one that closed its comm with
      // a close notice still in flight at the end of a job) is closed: it ends
      // with nothing to tell anyone. A reset leg of an orderly teardown is no failure.
      if (it->second->reportedError()) {
        ++stats_.routesFailed;
        lastRefusal_ = it->second->why();
      } else {
        ++stats_.routesClosed;
      }
      it = routes_.erase(it);
    } else {
      ++it;
    }
  }
  return n;
}

}  // namespace railyard::fabric::relay
