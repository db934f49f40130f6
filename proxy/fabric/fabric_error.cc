#include "proxy/fabric/fabric_error.h"

namespace railyard::fabric {

const char* FabricErrcName(FabricErrc errc) {
  switch (errc) {
    case FabricErrc::kNone: return "OK";
    case FabricErrc::kRemoteAccess: return "REMOTE_ACCESS";
    case FabricErrc::kOutOfBounds: return "OUT_OF_BOUNDS";
    case FabricErrc::kBadKey: return "BAD_KEY";
    case FabricErrc::kAccessDenied: return "ACCESS_DENIED";
    case FabricErrc::kDeregistered: return "DEREGISTERED";
    case FabricErrc::kMisaligned: return "MISALIGNED";
    case FabricErrc::kMalformed: return "MALFORMED";
    case FabricErrc::kPeerClosed: return "PEER_CLOSED";
    case FabricErrc::kTimeout: return "TIMEOUT";
    case FabricErrc::kConnectFailed: return "CONNECT_FAILED";
    case FabricErrc::kLocalArgument: return "LOCAL_ARGUMENT";
    case FabricErrc::kEndpointFailed: return "ENDPOINT_FAILED";
    case FabricErrc::kSystem: return "SYSTEM";
    case FabricErrc::kVersion: return "VERSION";
  }
  return "UNKNOWN";
}

FabricErrc FabricErrcFromWire(uint64_t value) {
  if (value >= 1 && value <= static_cast<uint64_t>(FabricErrc::kVersion)) {
    return static_cast<FabricErrc>(value);
  }
  return FabricErrc::kMalformed;
}

bool IsRemoteAccess(FabricErrc errc) {
  switch (errc) {
    case FabricErrc::kRemoteAccess:
    case FabricErrc::kOutOfBounds:
    case FabricErrc::kBadKey:
    case FabricErrc::kAccessDenied:
    case FabricErrc::kDeregistered:
    case FabricErrc::kMisaligned:
      return true;
    default:
      return false;
  }
}

std::string FabricError::ToString() const {
  std::string s = std::string("fabric ") + FabricErrcName(errc) + ":";
  if (site.rank >= 0) s += " rank " + std::to_string(site.rank);
  if (!site.peer.empty()) s += " peer " + site.peer;
  if (!site.device.empty()) s += " device " + site.device;
  if (site.rail >= 0) s += " rail " + std::to_string(site.rail);
  if (site.qp >= 0) s += std::string(" ") + site.qpName + " " + std::to_string(site.qp);
  if (site.seq >= 0) s += " seq " + std::to_string(site.seq);
  s += ": " + what;
  return s;
}

Status FabricError::ToStatus() const {
  if (ok()) return Status::Ok();
  const std::string m = ToString();
  if (IsRemoteAccess(errc) || errc == FabricErrc::kMalformed || errc == FabricErrc::kVersion) {
    return RemoteError(m);
  }
  if (errc == FabricErrc::kLocalArgument) return InvalidArgument(m);
  return SystemError(m);
}

}  // namespace railyard::fabric
