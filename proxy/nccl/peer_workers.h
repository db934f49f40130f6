// PeerWorkers: which Workers a comm takes its peer's ops from. A comm's peer reaches
// it from one Worker when the two hosts share a cable or one relay carries the route,
// and from one Worker per route when the peer's Endpoint spreads its ops over several
// relays (fabric::relay::MultiRouteEndpoint: both ways round a ring to the opposite
// host). The first Worker is the one the comm first heard from (the hello, or the
// first clear-to-send); further ones are admitted as they first deliver, up to the
// comm's route count: the routes of this end's own Endpoint to the peer, since the
// relays that carry the peer's routes here are this host's neighbours on shortest
// paths, which are the first hops of this end's routes back (a shortest path reversed
// is one). A Worker beyond that bound is refused (the comm fails, naming it); what an
// admitted Worker delivers is still checked op by op (RecvTable::ClaimLanded, the
// clear-to-send decoder).
//
// Threading: none of its own (the comm's CommWorker lock).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace railyard::proxy::nccl {

/// See file comment.
class PeerWorkers {
 public:
  /// At most `limit` Workers (clamped to 1..kMaxRoutes).
  void SetLimit(size_t limit) { limit_ = std::clamp<size_t>(limit, 1, kMaxRoutes); }
  /// True when `worker` (non-zero) is admitted already, or is admitted now because
  /// fewer than the limit are; false for 0 or when the limit is reached.
  bool Admit(uint64_t worker) {
    if (worker == 0) return false;
    if (Has(worker)) return true;
    if (ids_.size() >= limit_) return false;
    ids_.push_back(worker);
    return true;
  }
  /// Whether `worker` is admitted.
  bool Has(uint64_t worker) const {
    return worker != 0 && std::find(ids_.begin(), ids_.end(), worker) != ids_.end();
  }
  /// The first Worker admitted, 0 before any.
  uint64_t First() const { return ids_.empty() ? 0 : ids_.front(); }
  /// Workers admitted so far.
  size_t size() const { return ids_.size(); }
  /// The bound SetLimit set (1 until then).
  size_t limit() const { return limit_; }

  /// Upper bound on routes to one peer (shortest paths through distinct first hops).
  static constexpr size_t kMaxRoutes = 8;

 private:
  size_t limit_ = 1;
  std::vector<uint64_t> ids_;
};

}  // namespace railyard::proxy::nccl
