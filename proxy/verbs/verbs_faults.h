// Fault reporting shared by the verbs comms: error texts that name rank, peer,
// device, rail, QP number and message sequence, the control-socket watch, and
// the async-event subscription.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "env/status.h"
#include "proxy/comm.h"
#include "proxy/verbs/verbs_comm.h"

namespace railyard::proxy::verbs {

/// "(rank R, peer host (pid N, ip:port) on rail D, rail dev:port → peerdev:port, QP n, seq s)"
/// for the QP with number `qpn` of `link` (qpn 0 = no particular QP).
std::string FaultContext(const VerbsLink& link, uint32_t qpn, uint64_t seq);

/// SystemError for a failed work completion: "<what> failed with <status text>
/// (vendor error V)" plus FaultContext.
Status CompletionError(const VerbsLink& link, const ibv_wc& wc, const char* what, uint64_t seq);

/// Watches the control socket without blocking. Ok while it is open and quiet;
/// sets *eof when the peer closed it (process exit or close). SystemError when it
/// broke or carries bytes (nothing is sent on it after the handshake).
Status CheckControl(const VerbsLink& link, bool* eof);

/// Subscribes `poison` to async faults of the link's rails (port down, device fatal,
/// errors of its QPs); `seqHint` gives the sequence to name. Returns the id.
int SubscribeFaults(const VerbsLink& link, Poison* poison, const std::atomic<uint64_t>* seqHint);

}  // namespace railyard::proxy::verbs
