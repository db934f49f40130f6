#include "proxy/fabric/relay/relay_options.h"

#include <string>

#include "proxy/fabric/relay/relay_wire.h"

namespace railyard::fabric::relay {

RelayOptions RelayOptions::FromConfig(const env::Config& config) {
  RelayOptions o;
  o.timeoutMs = config.timeoutMs;
  o.maxRoutesPerPeer = config.relayMaxPerPeer;
  o.idleMs = config.relayIdleMs;
  return o;
}

Status RelayOptions::Validate() const {
  if (slots < 1 || slots > kMaxSlots) return InvalidArgument("relay slots " + std::to_string(slots) + " (1..4096)");
  if (returnSlots < 1 || returnSlots > kMaxSlots) {
    return InvalidArgument("relay return slots " + std::to_string(returnSlots) + " (1..4096)");
  }
  if (slotBytes < kSlotPayloadOffset + 64 * 1024 || slotBytes > (64ull << 20) || slotBytes % 64 != 0) {
    return InvalidArgument("relay slot bytes " + std::to_string(slotBytes) + " (65,792..64 MiB, a multiple of 64)");
  }
  if (timeoutMs < 1) return InvalidArgument("relay timeout " + std::to_string(timeoutMs) + " ms");
  if (maxRoutesPerPeer < 1) return InvalidArgument("relay routes per peer must be >= 1");
  if (idleMs < 1) return InvalidArgument("relay idle limit must be >= 1 ms");
  return Status::Ok();
}

}  // namespace railyard::fabric::relay
