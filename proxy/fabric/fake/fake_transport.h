// A fake in-process fabric transport (cf. eRPC's FakeTransport): Domains, Workers
// and Endpoints of one process, no sockets. An op is executed whole by the target
// Worker's Progress, in post order, with the same checks as the TCP target
// (RegionTable::Resolve: key, right, bounds; landing under the liveness lock), so
// the layers above the fabric can be tested without sockets, and the suite checks
// that the interface is not TCP-shaped. No striping, no timeouts, not multi-process.
// Thread-safe between Workers (each Worker still has one polling thread).
#pragma once

#include <memory>

#include "proxy/fabric/domain.h"

namespace railyard::fabric::fake {

/// Options of a fake Domain.
struct FakeOptions {
  int rails = 1;             ///< reported rails (device "fake<i>"); no effect on data
  uint32_t speedMbps = 100000;
  /// As an HCA acks: the target answers an op (the initiator's kDone can follow) in the
  /// Progress call that lands it, but returns the op's kImmediate or kRecord event only
  /// at its NEXT Progress call, as a verbs target returns a WRITE WITH IMM only when it
  /// polls its CQ. So a test that stops when the initiator has every kDone, expecting
  /// the target's events already there, fails here as it does over verbs.
  bool targetEventsTrail = false;
};

/// Creates a fake Domain.
Status CreateFakeDomain(const FakeOptions& options, std::unique_ptr<Domain>* out);

}  // namespace railyard::fabric::fake
