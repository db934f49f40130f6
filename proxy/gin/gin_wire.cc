// See gin_wire.h.
#include "proxy/gin/gin_wire.h"

#include <cstring>

namespace railyard::gin {
namespace {

constexpr uint32_t kHandleMagic = 0x4E475952;  // "RYGN" little-endian
constexpr uint32_t kRecordMagic = 0x52475952;  // "RYGR"
constexpr size_t kRecordHeaderBytes = 52;

void Put16(std::vector<uint8_t>* v, uint16_t x) { for (int i = 0; i < 2; ++i) v->push_back(uint8_t(x >> (8 * i))); }
void Put32(std::vector<uint8_t>* v, uint32_t x) { for (int i = 0; i < 4; ++i) v->push_back(uint8_t(x >> (8 * i))); }
void Put64(std::vector<uint8_t>* v, uint64_t x) { for (int i = 0; i < 8; ++i) v->push_back(uint8_t(x >> (8 * i))); }
uint64_t Get(const uint8_t* p, int n) {
  uint64_t x = 0;
  for (int i = 0; i < n; ++i) x |= uint64_t{p[i]} << (8 * i);
  return x;
}

}  // namespace

Status PackHandle(std::span<const uint8_t> workerAddress, uint8_t out[kHandleBytes]) {
  if (workerAddress.empty() || workerAddress.size() > kMaxAddressBytes) {
    return InvalidArgument("GIN handle: a Worker address of " + std::to_string(workerAddress.size()) +
                           " bytes does not fit (1.." + std::to_string(kMaxAddressBytes) +
                           "; fewer rails would)");
  }
  std::memset(out, 0, kHandleBytes);
  std::vector<uint8_t> h;
  Put32(&h, kHandleMagic);
  Put16(&h, kWireVersion);
  Put16(&h, uint16_t(workerAddress.size()));
  std::memcpy(out, h.data(), h.size());
  std::memcpy(out + kHandleHeaderBytes, workerAddress.data(), workerAddress.size());
  return Status::Ok();
}

Status UnpackHandle(const uint8_t handle[kHandleBytes], int rank, std::vector<uint8_t>* address) {
  const std::string who = "GIN handle of rank " + std::to_string(rank);
  if (handle == nullptr) return InvalidArgument(who + " is NULL");
  if (Get(handle, 4) != kHandleMagic) return InvalidArgument(who + ": bad magic (not a Railyard GIN handle)");
  const uint16_t version = uint16_t(Get(handle + 4, 2));
  if (version != kWireVersion) {
    return InvalidUsage(who + " speaks GIN wire version " + std::to_string(version) + ", this rank " +
                        std::to_string(kWireVersion));
  }
  const size_t len = Get(handle + 6, 2);
  if (len == 0 || len > kMaxAddressBytes) {
    return InvalidArgument(who + ": address length " + std::to_string(len) + " outside 1.." +
                           std::to_string(kMaxAddressBytes));
  }
  for (size_t i = kHandleHeaderBytes + len; i < kHandleBytes; ++i) {
    if (handle[i] != 0) return InvalidArgument(who + ": non-zero padding at byte " + std::to_string(i));
  }
  address->assign(handle + kHandleHeaderBytes, handle + kHandleHeaderBytes + len);
  return Status::Ok();
}

std::vector<uint8_t> Record::Pack() const {
  std::vector<uint8_t> packedKey = kind == RecordKind::kWindow ? key.Pack() : std::vector<uint8_t>{};
  std::vector<uint8_t> v;
  v.reserve(kRecordHeaderBytes + packedKey.size());
  Put32(&v, kRecordMagic);
  Put16(&v, kWireVersion);
  Put16(&v, uint16_t(kind));
  Put32(&v, rank);
  Put32(&v, nranks);
  Put64(&v, meshId);
  Put64(&v, seq);
  Put64(&v, bytes);
  Put64(&v, mrFlags);
  Put16(&v, uint16_t(packedKey.size()));
  Put16(&v, 0);
  v.insert(v.end(), packedKey.begin(), packedKey.end());
  return v;
}

Status Record::Unpack(std::span<const uint8_t> b, Record* out) {
  if (b.size() < kRecordHeaderBytes) {
    return InvalidArgument("GIN record of " + std::to_string(b.size()) + " bytes (header is " +
                           std::to_string(kRecordHeaderBytes) + ")");
  }
  const uint8_t* p = b.data();
  if (Get(p, 4) != kRecordMagic) return InvalidArgument("GIN record: bad magic");
  const uint16_t version = uint16_t(Get(p + 4, 2));
  Record r;
  r.rank = uint32_t(Get(p + 8, 4));
  if (version != kWireVersion) {
    return InvalidUsage("GIN record from rank " + std::to_string(r.rank) + " speaks GIN wire version " +
                        std::to_string(version) + ", this rank " + std::to_string(kWireVersion));
  }
  const uint16_t kind = uint16_t(Get(p + 6, 2));
  if (kind != uint16_t(RecordKind::kHello) && kind != uint16_t(RecordKind::kWindow)) {
    return InvalidArgument("GIN record: unknown kind " + std::to_string(kind));
  }
  r.kind = RecordKind(kind);
  r.nranks = uint32_t(Get(p + 12, 4));
  r.meshId = Get(p + 16, 8);
  r.seq = Get(p + 24, 8);
  r.bytes = Get(p + 32, 8);
  r.mrFlags = Get(p + 40, 8);
  const size_t keyLen = Get(p + 48, 2);
  if (Get(p + 50, 2) != 0) return InvalidArgument("GIN record: non-zero reserved field");
  if (b.size() != kRecordHeaderBytes + keyLen) {
    return InvalidArgument("GIN record: " + std::to_string(b.size()) + " bytes for a key of " +
                           std::to_string(keyLen));
  }
  if (r.kind == RecordKind::kHello) {
    if (keyLen != 0) return InvalidArgument("GIN hello record carries a key");
  } else {
    RY_RETURN_IF_ERROR(fabric::RemoteKey::Unpack(b.subspan(kRecordHeaderBytes), &r.key));
    if (r.key.length != r.bytes) {
      return InvalidArgument("GIN window record of rank " + std::to_string(r.rank) + ": key covers " +
                             std::to_string(r.key.length) + " bytes, window " + std::to_string(r.bytes));
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

uint64_t MeshId(std::span<const std::vector<uint8_t>> addresses) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& a : addresses) {
    for (uint8_t c : a) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  }
  return h;
}

}  // namespace railyard::gin
