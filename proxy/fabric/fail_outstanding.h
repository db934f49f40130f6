// The error events a failing Endpoint emits for the operations it still holds: one
// rule, written once, for every transport (tcp/, verbs/, relay/), so the same cause
// names the same things everywhere. Issue 10 "Faults": every outstanding op ends in an
// error event naming rank, peer, device, rail, QP (or socket) and its own sequence;
// the Endpoint stays failed and nothing waits forever.
//
// The rule. The cause (a FabricError with its ErrorSite) is kept whole for the op it
// names (site.seq). Every other op gets the cause's site with its own seq, and:
//   - a fence always fails ENDPOINT_FAILED "the endpoint failed earlier: <cause>";
//   - an op fails ENDPOINT_FAILED "the endpoint failed earlier: <cause>" when the
//     cause was the refusal of one op (a remote-access error or a malformed frame:
//     the others were not refused themselves), or always under
//     OthersRule::kEndpointFailed (verbs: a QP in error flushes every later work
//     request, whatever the cause);
//   - otherwise (a lost, closed or frozen peer, a timeout, a syscall) it keeps the
//     cause's errc and text: that is its cause too.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "proxy/fabric/event.h"
#include "proxy/fabric/fabric_error.h"

namespace railyard::fabric {

/// How ops other than the one the cause names fail (see file comment).
enum class OthersRule : uint8_t {
  kKeepCauseUnlessRefusal,  ///< tcp and relayed Endpoints
  kEndpointFailed,          ///< verbs Endpoints
};

/// One operation (or fence) an Endpoint still holds when it fails.
struct OutstandingOp {
  OpType type = OpType::kNone;  ///< kFence for a fence
  uint64_t cookie = 0;          ///< the caller's cookie
  /// The op's sequence on the Endpoint. A fence has none of its own: -1 keeps the
  /// cause's seq in its error (a transport that numbers fences passes their number).
  int64_t seq = -1;
};

/// The prefix of an ENDPOINT_FAILED op's text; the cause's ToString() follows it.
inline constexpr const char* kFailedEarlier = "the endpoint failed earlier: ";

/// The kError event of `op` when its Endpoint fails with `cause` (which must not be
/// ok()), by the rule in the file comment. Pure: emits nothing.
Event FailedOpEvent(const FabricError& cause, const OutstandingOp& op, OthersRule rule);

/// FailedOpEvent for every op of `ops`, in their order, each handed to `emit`.
void FailOutstanding(const FabricError& cause, std::span<const OutstandingOp> ops, OthersRule rule,
                     const std::function<void(Event)>& emit);

}  // namespace railyard::fabric
