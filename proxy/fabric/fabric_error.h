// Named fabric errors and where they happened: rank, peer, device, rail, QP (or
// socket) and operation sequence, as issue 10 ("Faults") asks every fabric error
// to say. Converts to a Status (env/status.h) for the layers above.
#pragma once

#include <cstdint>
#include <string>

#include "env/status.h"

namespace railyard::fabric {

/// What went wrong, one name per cause. The names (FabricErrcName) appear in every
/// message, so logs and tests can tell the causes apart; transports that cannot
/// tell the remote-access causes apart (verbs reports IBV_WC_REM_ACCESS_ERR for all
/// of them) report kRemoteAccess, and IsRemoteAccess() is true for every one.
enum class FabricErrc : uint32_t {
  kNone = 0,
  kRemoteAccess = 1,   ///< the target refused a remote access (cause unknown)
  kOutOfBounds = 2,    ///< [addr, addr+len) not inside the region the key names
  kBadKey = 3,         ///< no live region has this software key
  kAccessDenied = 4,   ///< the region lacks the right (e.g. written when remote-read only)
  kDeregistered = 5,   ///< the region went away while the operation was under way
  kMisaligned = 6,     ///< FetchAdd target not 8-byte aligned
  kMalformed = 7,      ///< a frame or record from the peer broke the protocol
  kPeerClosed = 8,     ///< the peer closed or reset the connection (killed, crashed)
  kTimeout = 9,        ///< no progress for the timeout (frozen peer, cut cable)
  kConnectFailed = 10, ///< the connection could not be set up
  kLocalArgument = 11, ///< a bad local argument (local buffer outside its region, size)
  kEndpointFailed = 12,///< the endpoint failed earlier (this op was still outstanding)
  kSystem = 13,        ///< a syscall failed locally
  kVersion = 14,       ///< the peer speaks another fabric wire version
};

/// "OUT_OF_BOUNDS", "BAD_KEY", ...; "UNKNOWN" for a value outside the enum.
const char* FabricErrcName(FabricErrc errc);
/// Parses what the wire carries (a NACK's code); kMalformed for unknown values.
FabricErrc FabricErrcFromWire(uint64_t value);
/// True for kRemoteAccess, kOutOfBounds, kBadKey, kAccessDenied, kDeregistered, kMisaligned.
bool IsRemoteAccess(FabricErrc errc);

/// Where an error happened. Unknown fields stay at their defaults and are left out
/// of the text.
struct ErrorSite {
  int rank = -1;             ///< this process's rank, when the layer above set it
  std::string peer;          ///< the peer: worker id and address, e.g. "w=3f2a... 127.0.0.2:40121"
  std::string device;        ///< local device of the rail (interface name or HCA)
  int rail = -1;             ///< rail index inside the Domain
  int64_t qp = -1;           ///< verbs: QP number; TCP: socket index within the rail
  const char* qpName = "QP"; ///< "QP" or "socket": what `qp` counts
  int64_t seq = -1;          ///< operation sequence number on the endpoint
};

/// One fabric error: the cause, where, and a sentence saying what failed.
struct FabricError {
  FabricErrc errc = FabricErrc::kNone;
  ErrorSite site;
  std::string what;

  bool ok() const { return errc == FabricErrc::kNone; }
  /// "fabric BAD_KEY: rank 0 peer w=... device lo rail 1 socket 0 seq 7: <what>".
  std::string ToString() const;
  /// As a Status: kRemoteError for remote-access and malformed-peer causes,
  /// kSystemError for lost peers, timeouts and syscalls, kInvalidArgument for local
  /// arguments; the message is ToString().
  Status ToStatus() const;
};

}  // namespace railyard::fabric
