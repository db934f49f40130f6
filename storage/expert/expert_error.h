// Named errors of the expert tier. Every Status the tier returns carries one of these
// names in its message ("expert OUT_OF_RANGE: layer 9 of 8 ..."), and the C API returns
// its number, so callers and tests tell the causes apart.
#pragma once

#include <cstdint>
#include <string>

#include "env/status.h"

namespace railyard::expert {

/// One name per cause. The numbers are the C API's RAILYARD_EXPERT_E* values
/// (include/railyard/railyard.h): never renumber.
enum class ExpertErrc : int {
  kOk = 0,
  kManifestTooLarge = 1,     ///< a manifest over kMaxManifestBytes (file or wire)
  kManifestTruncated = 2,    ///< a manifest that ends early (JSON or wire)
  kManifestVersion = 3,      ///< another format or version
  kManifestInvalid = 4,      ///< malformed JSON or a field out of range / inconsistent
  kStoreInconsistent = 5,    ///< the layer files disagree with the manifest (missing, size)
  kUnknownTransport = 6,     ///< a transport byte the peer does not know
  kOutOfRange = 7,           ///< layer or expert outside the store, or a record outside the arena
  kPeerLost = 8,             ///< the peer closed, reset or went silent mid-request
  kStoreChanged = 9,         ///< the peer's store no longer matches its manifest (size, mtime)
  kChecksumMismatch = 10,    ///< a fetched record's xxHash differs from the manifest's
  kAdmissionRefused = 11,    ///< the peer's pin ledger (RAILYARD_EXPERT_PIN_CAP) is full
  kProtocol = 12,            ///< a malformed or unexpected message from the peer
  kSystem = 13,              ///< a local syscall or registration failed
  kInvalidArgument = 14,     ///< a bad local argument (NULL, zero bytes, closed handle)
  kPackInput = 15,           ///< railyard-pack: a checkpoint it refuses (header, names, shapes)
};

/// "MANIFEST_TOO_LARGE", ...; "UNKNOWN" outside the enum.
const char* ExpertErrcName(ExpertErrc errc);
/// A Status whose message is "expert <NAME>: <what>" (the code follows the cause:
/// kRemoteError for peer faults, kSystemError for lost peers and syscalls,
/// kInvalidArgument for local arguments and bad input).
Status ExpertError(ExpertErrc errc, const std::string& what);
/// The cause named in a Status made by ExpertError (kOk for ok; kSystem when the
/// message names none, e.g. a fabric error passed through).
ExpertErrc ExpertErrcOf(const Status& status);

}  // namespace railyard::expert
