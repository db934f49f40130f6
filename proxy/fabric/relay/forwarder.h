// Forwarder: what a relay host runs to carry relayed Endpoints (relayed_endpoint.h)
// on to the next hop. Written against the fabric interface only (Domain, Worker,
// Endpoint), so it relays over whatever transport its Domains have: TCP today,
// verbs (RDMA Writes into registered rings, no TCP on any leg) when that transport
// is there.
//
// A Forwarder has ports: one Domain each (e.g. the rails of one cable), one Worker
// each. A source opens a route with a record at a port; the Forwarder decides, by
// itself, whether and how to carry it (the ResolveFn: the relay host's own routing,
// e.g. proxy/routing's next hop per destination), so nothing a peer sends steers
// it elsewhere:
//   - the source must resolve to a direct neighbour on the port it came in on;
//   - the target must resolve (a graph host over rails; the resolver refuses the
//     rest) to a port, directly or through the next relay's Forwarder;
//   - with a cluster key the open's MAC must verify, without one it must carry none;
//   - at most RelayOptions::maxRoutesPerPeer routes per source Worker.
// A refused open is answered with an Error record when the source is a neighbour,
// and counted. Where it runs: the process that holds the host's relay seat
// (proxy/relay/relay_seat.h: railyardd when it runs, else one rank).
//
// Threading: one thread calls Progress (explicit progress; starts no thread).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/relay/forward_route.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/relay_options.h"

namespace railyard::fabric::relay {

/// How the relay host reaches a Worker address.
struct NextHop {
  size_t port = 0;           ///< the Forwarder port to leave by
  std::vector<uint8_t> via;  ///< empty: straight to the address; else the next relay's port address
  /// The address is this relay host's own (a Worker of a process here): a route may
  /// be carried to it, never come from it (Open refuses such a source: a neighbour
  /// could otherwise point a route's way back into a local process).
  bool local = false;
  /// The next hop's host name (the target's host when `via` is empty) for errors, e.g.
  /// "h2"; empty when the resolver does not know it (the leg is then named by address).
  std::string name;
};
/// The relay host's routing: Ok with the next hop, or InvalidUsage saying why the
/// address is not one this relay carries to (not a graph host, not over a rail, ...).
using ResolveFn = std::function<Status(std::span<const uint8_t> address, NextHop* out)>;

/// Counters for logs and tests.
struct ForwarderStats {
  uint64_t routesOpened = 0;
  uint64_t routesRefused = 0;
  uint64_t routesClosed = 0;    ///< closed by their source, or dropped after their source went away
  uint64_t routesFailed = 0;    ///< ended with an error sent to their source
  uint64_t slotsForwarded = 0;
  uint64_t bytesForwarded = 0;  ///< payload bytes carried on (Writes on, Read data back)
  uint64_t strays = 0;          ///< immediates and records for no route of the sender (dropped)
  size_t routesOpen = 0;
};

/// See file comment.
class Forwarder {
 public:
  /// Creates one Worker on each of `ports` (Domains that outlive the Forwarder).
  /// `onward[p]`, when given (same size as `ports`), is the Domain over port p's rails
  /// whose Workers carry routes on through a further relay (each such route gets its
  /// own Worker: a port Domain listening at a fixed port cannot make a second one);
  /// empty: the port's own Domain. InvalidArgument for no ports, a size mismatch or
  /// bad options; errors of Domain::CreateWorker.
  static Status Create(std::vector<Domain*> ports, const RelayOptions& options, ResolveFn resolve,
                       std::unique_ptr<Forwarder>* out, std::vector<Domain*> onward = {});
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  /// The packed Worker address of `port`: what sources on that port's cable connect to.
  std::vector<uint8_t> Address(size_t port) const;
  /// Moves every route's slots (never blocks); returns how many events it handled.
  size_t Progress();
  ForwarderStats stats() const;
  /// Why the last open was refused or the last route failed ("" if none), for logs.
  const std::string& lastRefusal() const { return lastRefusal_; }
  /// The fds to sleep on (poll, POLLIN) until a peer sends something, when nothing
  /// but peer input can give the next Progress work (every port Worker Quiet(), every
  /// RelayClient of routes carried on through a further relay Quiet() with a WaitFd
  /// per route leg, no refusal still going out); empty when the caller must keep
  /// calling Progress.
  std::vector<int> WaitFds() const;
  /// From now on every route open is refused, answered to its source with `why`
  /// (kConnectFailed); the routes open now carry on until their sources close them
  /// or a leg fails (a draining relay: railyardd after SIGTERM). Not undone.
  void StopOpening(std::string why) { stopOpening_ = std::move(why); }

 private:
  struct Port {
    Domain* domain = nullptr;
    Domain* onward = nullptr;  ///< the client's Domain (routes on through another relay)
    std::unique_ptr<Worker> worker;
    std::unique_ptr<RelayClient> client;  ///< routes on through another relay (made on first use)
  };
  Forwarder(std::vector<Domain*> ports, RelayOptions options, ResolveFn resolve);
  void Dispatch(size_t port, const Event& e);
  void Open(size_t port, const Control& c, uint64_t peer);
  void Refuse(const std::string& why);

  RelayOptions options_;
  ResolveFn resolve_;
  std::vector<Port> ports_;
  std::map<uint32_t, std::unique_ptr<ForwardRoute>> routes_;
  /// Legs back to refused sources, kept until the refusal is delivered.
  struct Answering {
    std::unique_ptr<Endpoint> ep;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<Answering> answering_;
  uint32_t lastRoute_ = 0;
  ForwarderStats stats_;
  std::string lastRefusal_;
  std::string stopOpening_;  ///< non-empty: refuse every open with this reason
  std::vector<Event> scratch_;
};

}  // namespace railyard::fabric::relay
