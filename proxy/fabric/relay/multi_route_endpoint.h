// MultiRouteEndpoint: one Endpoint to a peer Worker over several routes of equal
// length (e.g. both ways round a ring to the opposite host, each through its own
// relay), so relayed traffic to that peer uses every relay on a shortest path, not
// only the lowest-numbered one.
//
// Ordering (endpoint.h) is kept by where ops go, not by the routes: every op goes on
// the current route; the Endpoint moves to the next route (round robin) only when no
// route has an op outstanding, i.e. when every earlier op has completed (a Write is
// done once its data landed at the target), so nothing posted later can overtake
// anything posted earlier. NCCL's comms post one message, or a few, at a time, so
// consecutive messages alternate between the routes; a stream that never drains
// stays on one route.
//
// Errors: the first route to fail fails the Endpoint (status() is its error, every
// later post returns it); its outstanding ops end with error events from that route.
// Events come from the routes' own Workers with the caller's cookies.
//
// Threading: as any Endpoint (one thread with its Worker).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/endpoint.h"

namespace railyard::fabric::relay {

/// See file comment.
class MultiRouteEndpoint : public Endpoint {
 public:
  /// Over `routes` (at least one, each non-NULL: Endpoints to the same peer Worker).
  explicit MultiRouteEndpoint(std::vector<std::unique_ptr<Endpoint>> routes);

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override;
  Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate) override;
  Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override;
  Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) override;
  Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override;
  Status Fence(uint64_t cookie) override;
  /// Ok while every route is; else the first failed route's error.
  Status status() const override;
  size_t Outstanding() const override;
  /// Every route's QuietPeerClose().
  void QuietPeerClose() override;
  /// "<route 0's name> | <route 1's name> ...".
  std::string PeerName() const override;

  /// Routes (tests and logs).
  size_t routes() const { return routes_.size(); }
  /// As routes().
  size_t Routes() const override { return routes_.size(); }
  /// Which route the next op goes on when some op is still outstanding (tests).
  size_t current() const { return current_; }

 private:
  /// The route for the next op: the current one, or the next one round when nothing
  /// is outstanding on any route.
  Endpoint& Pick();

  std::vector<std::unique_ptr<Endpoint>> routes_;
  size_t current_ = 0;
  bool posted_ = false;  ///< an op went on the current route since it became current
};

}  // namespace railyard::fabric::relay
