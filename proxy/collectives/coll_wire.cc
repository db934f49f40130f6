#include "proxy/collectives/coll_wire.h"

#include <cstring>
#include <string>

namespace railyard::collectives {
namespace {
constexpr uint8_t kMagic[4] = {'R', 'Y', 'C', 'N'};
constexpr size_t kHeader = 4 + 2 + 2 + 4 + 4 + 8 + 4 + 8 + 4;

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}
template <typename T>
T Take(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}
}  // namespace

std::vector<uint8_t> ConnectRecord::Pack() const {
  const std::vector<uint8_t> key = staging.Pack();
  std::vector<uint8_t> out(kMagic, kMagic + 4);
  Put<uint16_t>(&out, kVersion);
  Put<uint16_t>(&out, shape);
  Put<uint32_t>(&out, rank);
  Put<uint32_t>(&out, nranks);
  Put<uint64_t>(&out, chunkBytes);
  Put<uint32_t>(&out, slots);
  Put<uint64_t>(&out, smallBytes);
  Put<uint32_t>(&out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  return out;
}

Status ConnectRecord::Unpack(std::span<const uint8_t> bytes, ConnectRecord* out) {
  if (bytes.size() < kHeader) {
    return InvalidArgument("collnet connect record: " + std::to_string(bytes.size()) +
                                   " bytes, shorter than its " + std::to_string(kHeader) + "-byte header");
  }
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic, 4) != 0) return InvalidArgument("collnet connect record: bad magic");
  if (Take<uint16_t>(p + 4) != kVersion) {
    return InvalidArgument("collnet connect record: version " + std::to_string(Take<uint16_t>(p + 4)) +
                                   ", this build speaks " + std::to_string(kVersion));
  }
  // Bytes 6-7 were reserved in version 1 (required zero: the fuzz target coll_wire
  // found them skipped); version 2 gives them to the shape, checked in full here.
  ConnectRecord r;
  r.shape = Take<uint16_t>(p + 6);
  if (r.shape > 2) return InvalidArgument("collnet connect record: unknown shape " + std::to_string(r.shape));
  r.rank = Take<uint32_t>(p + 8);
  r.nranks = Take<uint32_t>(p + 12);
  r.chunkBytes = Take<uint64_t>(p + 16);
  r.slots = Take<uint32_t>(p + 24);
  r.smallBytes = Take<uint64_t>(p + 28);
  const uint32_t keyLen = Take<uint32_t>(p + 36);
  if (keyLen != bytes.size() - kHeader) {
    return InvalidArgument("collnet connect record: key length " + std::to_string(keyLen) +
                                   " but " + std::to_string(bytes.size() - kHeader) + " bytes follow");
  }
  RY_RETURN_IF_ERROR(fabric::RemoteKey::Unpack(bytes.subspan(kHeader), &r.staging));
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace railyard::collectives
