#include "storage/tunnel/tunnel_wire.h"

#include <cstring>
#include <string>

namespace railyard::storage::tunnel {
namespace {

/// Payload size bounds of each type: [min, max].
bool PayloadBounds(TunnelRecordType t, size_t* lo, size_t* hi) {
  switch (t) {
    case TunnelRecordType::kOpen: *lo = 1; *hi = kMaxAddressBytes; return true;
    case TunnelRecordType::kData: *lo = 1; *hi = kMaxDataBytes; return true;
    case TunnelRecordType::kCredit: *lo = 0; *hi = 0; return true;
    case TunnelRecordType::kClose: *lo = 0; *hi = kMaxReasonBytes; return true;
  }
  return false;
}

}  // namespace

Status Encode(const TunnelRecord& r, std::vector<uint8_t>* out) {
  size_t lo = 0, hi = 0;
  if (!PayloadBounds(r.type, &lo, &hi)) return InvalidArgument("tunnel record of unknown type");
  if (r.payload.size() < lo || r.payload.size() > hi) {
    return InvalidArgument("tunnel record payload of " + std::to_string(r.payload.size()) + " bytes for its type");
  }
  if (r.tunnel == 0) return InvalidArgument("tunnel record with tunnel id 0");
  out->assign(kHeaderBytes + r.payload.size(), 0);
  const uint32_t magic = kMagic;
  const uint16_t version = kVersion;
  std::memcpy(out->data(), &magic, 4);
  std::memcpy(out->data() + 4, &version, 2);
  (*out)[6] = static_cast<uint8_t>(r.type);
  std::memcpy(out->data() + 8, &r.tunnel, 8);
  std::memcpy(out->data() + 16, &r.value, 8);
  if (!r.payload.empty()) std::memcpy(out->data() + kHeaderBytes, r.payload.data(), r.payload.size());
  return Status::Ok();
}

Status Decode(std::span<const uint8_t> b, TunnelRecord* out) {
  if (b.size() < kHeaderBytes) return InvalidArgument("tunnel record of " + std::to_string(b.size()) + " bytes (header 24)");
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, b.data(), 4);
  std::memcpy(&version, b.data() + 4, 2);
  if (magic != kMagic) return InvalidArgument("not a control tunnel record (bad magic)");
  if (version != kVersion) {
    return InvalidArgument("tunnel record version " + std::to_string(version) + ", this build speaks " +
                           std::to_string(kVersion));
  }
  const auto type = static_cast<TunnelRecordType>(b[6]);
  size_t lo = 0, hi = 0;
  if (!PayloadBounds(type, &lo, &hi)) return InvalidArgument("tunnel record type " + std::to_string(b[6]) + " is unknown");
  if (b[7] != 0) return InvalidArgument("tunnel record with reserved bits set");
  TunnelRecord r;
  r.type = type;
  std::memcpy(&r.tunnel, b.data() + 8, 8);
  std::memcpy(&r.value, b.data() + 16, 8);
  if (r.tunnel == 0) return InvalidArgument("tunnel record with tunnel id 0");
  if (type != TunnelRecordType::kCredit && r.value != 0) return InvalidArgument("tunnel record with a value for its type");
  const size_t payload = b.size() - kHeaderBytes;
  if (payload < lo || payload > hi) {
    return InvalidArgument("tunnel record type " + std::to_string(b[6]) + " with a " + std::to_string(payload) +
                           "-byte payload (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  r.payload.assign(b.begin() + kHeaderBytes, b.end());
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace railyard::storage::tunnel
