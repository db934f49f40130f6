// What Worker::Progress returns: operation completions, immediates and records that
// arrived, and errors.
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/fabric/fabric_error.h"

namespace railyard::fabric {

/// The operations of an Endpoint.
enum class OpType : uint8_t { kNone = 0, kSend, kWrite, kRead, kFetchAdd, kFence };

/// "send", "write", ...
const char* OpTypeName(OpType op);

/// Kinds of events.
enum class EventKind : uint8_t {
  kDone,       ///< an op of this process completed (cookie, op; value = old value for FetchAdd)
  kImmediate,  ///< a peer's Write with immediate landed here (value = the 32-bit immediate)
  kRecord,     ///< a peer's Send record arrived here (record = its bytes)
  kError,      ///< an op failed (cookie, op), or a peer's connection failed here (op kNone)
};

/// One event. Immediates and records name the peer worker they came from.
struct Event {
  EventKind kind = EventKind::kDone;
  OpType op = OpType::kNone;
  uint64_t cookie = 0;   ///< the caller's cookie of the op (kDone, kError)
  uint64_t value = 0;    ///< FetchAdd: the old value; kImmediate: the immediate
  uint64_t peer = 0;     ///< kImmediate/kRecord/kError at a target: the peer worker's id
  std::vector<uint8_t> record;  ///< kRecord: the bytes sent
  FabricError error;     ///< kError: what failed and where
  /// kImmediate: bytes the Write carried, the whole Write even when it was striped or
  /// cut into chunks (verbs: byte_len of a one-WR Write, else its write-size record),
  /// so a receiver can learn a message's size from its one Write. Added for proxy/nccl.
  uint64_t bytes = 0;
};

}  // namespace railyard::fabric
