// The source side of relayed routes: a RelayClient makes Endpoints to hosts with no
// cable, through a relay host's Forwarder. Every route has a private leg Worker of
// the caller's Domain (so the caller's Regions are the Writes' sources with no
// copy, and the relay can tell one route's source from another's by its Worker),
// and its own leg Endpoint to the relay. A route closed with nothing outstanding
// says so to the relay (a Close record) before its Worker and rings go away.
//
// Threading: as a Worker: one thread calls Connect, Progress and the Endpoints' posts.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/relay/relay_options.h"

namespace railyard::fabric::relay {

class RelayedEndpoint;

/// See file comment. RelayedEndpoints must be destroyed before their RelayClient.
class RelayClient {
 public:
  /// A client of `domain` (which must outlive it). InvalidArgument for bad options.
  static Status Create(Domain& domain, const RelayOptions& options, std::unique_ptr<RelayClient>* out);
  /// Gives routes closed just before up to min(timeoutMs, 200) ms to deliver their
  /// Close records (bounded: a dead relay costs at most that), sleeping on the legs'
  /// WaitFd()s between passes.
  ~RelayClient();
  RelayClient(const RelayClient&) = delete;
  RelayClient& operator=(const RelayClient&) = delete;

  /// An Endpoint to the Worker whose packed address is `target`, through the relay
  /// whose Forwarder port address is `relay` (both peer data: the transport and the
  /// relay validate them). The route opens from Progress; ops may be posted at once.
  /// InvalidArgument for a malformed address; errors of Domain::CreateWorker and
  /// Domain::Register (the route's Worker and rings).
  Status Connect(std::span<const uint8_t> relay, std::span<const uint8_t> target, std::unique_ptr<Endpoint>* out);
  /// Moves every route's bytes (never blocks) and appends the relayed Endpoints'
  /// events (kDone/kError with the callers' cookies); returns how many.
  size_t Progress(std::vector<Event>* events);

  /// True when no route is closing and every route is Quiet() (RelayedEndpoint):
  /// only input from the relays can give Progress work.
  bool Quiet() const;
  /// Appends every route's leg Worker's WaitFd() (-1 where one has none) to `fds`.
  void WaitFds(std::vector<int>* fds) const;

  Domain& domain() { return domain_; }
  const RelayOptions& options() const { return options_; }

  /// Names a route's relays in its peer name and errors: given the first relay's
  /// packed Forwarder address and the route's target address, e.g.
  /// "h1 (10.0.1.2:29519) -> h2" (graph_routes.h ForwardRouteLabel; empty: unknown).
  /// Routes then read "... via h1 (10.0.1.2:29519) -> h2" instead of "... via relay
  /// <leg address>", so a fault at a later relay is not taken for the first's.
  using RelayNamer = std::function<std::string(std::span<const uint8_t> relay, std::span<const uint8_t> target)>;
  /// Sets the namer for routes connected from now on (call before Connect).
  void SetRelayNamer(RelayNamer namer) { namer_ = std::move(namer); }
  /// The namer's label for a route through `relay` to `target`, "" without a namer.
  std::string RelayLabel(std::span<const uint8_t> relay, std::span<const uint8_t> target) const {
    return namer_ ? namer_(relay, target) : std::string();
  }

  /// Routes open now (closing ones excluded).
  size_t Routes() const { return routes_.size(); }
  /// Routes closed whose Close records are still on their way (Progress drives them).
  size_t ClosingRoutes() const { return closing_.size(); }

  // --- for RelayedEndpoint ------------------------------------------------------------
  /// A route going away. `leftovers` (its Worker, leg Endpoint and rings) is kept,
  /// and `worker` progressed, until `leg` has nothing outstanding (its Close record
  /// delivered) or `deadlineMs` pass.
  void Detach(uint32_t routeId, std::shared_ptr<void> leftovers, Worker* worker, Endpoint* leg, int deadlineMs);

 private:
  RelayClient(Domain& domain, RelayOptions options) : domain_(domain), options_(std::move(options)) {}
  struct Closing {
    std::shared_ptr<void> leftovers;
    Worker* worker = nullptr;
    Endpoint* leg = nullptr;
    std::chrono::steady_clock::time_point deadline;
  };

  Domain& domain_;
  RelayOptions options_;
  std::map<uint32_t, RelayedEndpoint*> routes_;
  std::vector<Closing> closing_;
  uint32_t lastRoute_ = 0;
  std::vector<Event> scratch_;
  RelayNamer namer_;
};

}  // namespace railyard::fabric::relay
