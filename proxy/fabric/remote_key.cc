#include "proxy/fabric/remote_key.h"

#include <bit>
#include <cstring>
#include <string>

#include "proxy/fabric/access.h"

static_assert(std::endian::native == std::endian::little, "packed keys assume a little-endian host");

namespace railyard::fabric {
namespace {

constexpr uint32_t kMagic = 0x4b525952;  // "RYRK" little-endian

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof v);
  std::memcpy(out->data() + at, &v, sizeof v);
}

template <typename T>
T Get(std::span<const uint8_t> b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

}  // namespace

std::vector<uint8_t> RemoteKey::Pack() const {
  std::vector<uint8_t> out;
  out.reserve(PackedBytes(railRkeys.size()));
  Put<uint32_t>(&out, kMagic);
  Put<uint16_t>(&out, kVersion);
  Put<uint16_t>(&out, static_cast<uint16_t>(railRkeys.size()));
  Put<uint64_t>(&out, base);
  Put<uint64_t>(&out, length);
  Put<uint64_t>(&out, softwareKey);
  Put<uint32_t>(&out, access);
  Put<uint32_t>(&out, 0);
  for (uint32_t rkey : railRkeys) Put<uint32_t>(&out, rkey);
  return out;
}

Status RemoteKey::Unpack(std::span<const uint8_t> b, RemoteKey* out) {
  if (b.size() < PackedBytes(0)) {
    return InvalidArgument("remote key of " + std::to_string(b.size()) + " bytes is shorter than " +
                           std::to_string(PackedBytes(0)));
  }
  if (Get<uint32_t>(b, 0) != kMagic) return InvalidArgument("remote key has a wrong magic (not a Railyard key)");
  const uint16_t version = Get<uint16_t>(b, 4);
  if (version != kVersion) {
    return InvalidArgument("remote key version " + std::to_string(version) + ", this build speaks " +
                           std::to_string(kVersion));
  }
  const uint16_t rails = Get<uint16_t>(b, 6);
  if (rails > kMaxRails) {
    return InvalidArgument("remote key names " + std::to_string(rails) + " rails (at most " +
                           std::to_string(kMaxRails) + ")");
  }
  if (b.size() != PackedBytes(rails)) {
    return InvalidArgument("remote key of " + std::to_string(b.size()) + " bytes, expected " +
                           std::to_string(PackedBytes(rails)) + " for " + std::to_string(rails) + " rails");
  }
  RemoteKey k;
  k.base = Get<uint64_t>(b, 8);
  k.length = Get<uint64_t>(b, 16);
  k.softwareKey = Get<uint64_t>(b, 24);
  k.access = Get<uint32_t>(b, 32);
  if (k.base + k.length < k.base) return InvalidArgument("remote key range wraps the address space");
  if (k.softwareKey == 0) return InvalidArgument("remote key has software key 0");
  if (!ValidAccess(k.access)) {
    return InvalidArgument("remote key has unknown access bits " + std::to_string(k.access));
  }
  if (Get<uint32_t>(b, 36) != 0) return InvalidArgument("remote key has non-zero reserved bits");
  k.railRkeys.resize(rails);
  for (size_t i = 0; i < rails; ++i) k.railRkeys[i] = Get<uint32_t>(b, PackedBytes(0) + 4 * i);
  *out = std::move(k);
  return Status::Ok();
}

}  // namespace railyard::fabric
