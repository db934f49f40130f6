// RoutedWorker: a Worker whose Connect goes straight to a neighbour, or through a
// relay when the host has no cable to the peer (the next hop comes from the
// caller's routing, e.g. proxy/routing). Direct Endpoints come from the wrapped
// Worker; relayed ones from a RelayClient of the same Domain. Address, stats and
// the events of direct Endpoints and of peers are the wrapped Worker's.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/wait_set.h"
#include "proxy/fabric/worker.h"

namespace railyard::fabric::relay {

/// Where an Endpoint to `target` goes: *relay empty = straight there, else the
/// Forwarder port address of the relay to go through. An error refuses the Connect.
using RouteFn = std::function<Status(std::span<const uint8_t> target, std::vector<uint8_t>* relay)>;

/// See file comment. Endpoints must be destroyed before it.
class RoutedWorker : public Worker {
 public:
  RoutedWorker(std::unique_ptr<Worker> direct, std::unique_ptr<RelayClient> client, RouteFn route)
      : direct_(std::move(direct)), client_(std::move(client)), route_(std::move(route)) {}
  ~RoutedWorker() override;

  std::vector<uint8_t> Address() const override { return direct_->Address(); }
  /// Errors of the RouteFn, then of the wrapped Worker's or the client's Connect.
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override;
  size_t Progress(std::vector<Event>* events) override;
  WorkerStats stats() const override { return direct_->stats(); }
  /// An epoll set of the direct Worker's WaitFd() and every relayed route's leg
  /// Worker's (WaitSet, kept up to date by Quiet); -1 when none can be made.
  int WaitFd() const override { return waitSet_.fd(); }
  /// The direct Worker and the client (every route) Quiet(), and each of them offers a
  /// descriptor (the WaitSet then holds them all).
  bool Quiet() const override;

  RelayClient& client() { return *client_; }

 private:
  std::unique_ptr<Worker> direct_;
  std::unique_ptr<RelayClient> client_;
  RouteFn route_;
  mutable WaitSet waitSet_;       ///< synced by Quiet()
  mutable std::vector<int> fds_;  ///< Quiet()'s scratch
};

}  // namespace railyard::fabric::relay
