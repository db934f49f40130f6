#include "proxy/fabric/fail_outstanding.h"

namespace railyard::fabric {

Event FailedOpEvent(const FabricError& cause, const OutstandingOp& op, OthersRule rule) {
  Event ev;
  ev.kind = EventKind::kError;
  ev.op = op.type;
  ev.cookie = op.cookie;
  ev.error = cause;
  const bool fence = op.type == OpType::kFence;
  if (!fence && op.seq == cause.site.seq) return ev;  // the op the cause names: the cause itself
  if (op.seq >= 0) ev.error.site.seq = op.seq;
  const bool refusal = IsRemoteAccess(cause.errc) || cause.errc == FabricErrc::kMalformed;
  if (fence || refusal || rule == OthersRule::kEndpointFailed) {
    ev.error.errc = FabricErrc::kEndpointFailed;
    ev.error.what = kFailedEarlier + cause.ToString();
  }
  return ev;
}

void FailOutstanding(const FabricError& cause, std::span<const OutstandingOp> ops, OthersRule rule,
                     const std::function<void(Event)>& emit) {
  for (const OutstandingOp& op : ops) emit(FailedOpEvent(cause, op, rule));
}

}  // namespace railyard::fabric
