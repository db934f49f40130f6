#include "storage/expert/expert_error.h"

#include <string_view>

namespace railyard::expert {
namespace {
constexpr const char* kNames[] = {
    "OK",           "MANIFEST_TOO_LARGE", "MANIFEST_TRUNCATED", "MANIFEST_VERSION", "MANIFEST_INVALID",
    "STORE_INCONSISTENT", "UNKNOWN_TRANSPORT", "OUT_OF_RANGE", "PEER_LOST", "STORE_CHANGED",
    "CHECKSUM_MISMATCH", "ADMISSION_REFUSED", "PROTOCOL", "SYSTEM", "INVALID_ARGUMENT", "PACK_INPUT",
};
constexpr int kCount = static_cast<int>(sizeof kNames / sizeof kNames[0]);
}  // namespace

const char* ExpertErrcName(ExpertErrc errc) {
  const int v = static_cast<int>(errc);
  return v >= 0 && v < kCount ? kNames[v] : "UNKNOWN";
}

Status ExpertError(ExpertErrc errc, const std::string& what) {
  Code code = Code::kInvalidArgument;
  switch (errc) {
    case ExpertErrc::kOk: return Status::Ok();
    case ExpertErrc::kPeerLost:
    case ExpertErrc::kSystem: code = Code::kSystemError; break;
    case ExpertErrc::kStoreChanged:
    case ExpertErrc::kChecksumMismatch:
    case ExpertErrc::kAdmissionRefused:
    case ExpertErrc::kProtocol:
    case ExpertErrc::kUnknownTransport: code = Code::kRemoteError; break;
    default: break;
  }
  return Status(code, std::string("expert ") + ExpertErrcName(errc) + ": " + what);
}

ExpertErrc ExpertErrcOf(const Status& status) {
  if (status.ok()) return ExpertErrc::kOk;
  std::string_view m = status.message();
  constexpr std::string_view kPrefix = "expert ";
  if (m.substr(0, kPrefix.size()) == kPrefix) {
    m.remove_prefix(kPrefix.size());
    for (int i = 1; i < kCount; ++i) {
      std::string_view n = kNames[i];
      if (m.size() > n.size() && m.substr(0, n.size()) == n && m[n.size()] == ':') return static_cast<ExpertErrc>(i);
    }
  }
  return ExpertErrc::kSystem;
}

}  // namespace railyard::expert
