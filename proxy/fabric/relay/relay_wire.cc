#include "proxy/fabric/relay/relay_wire.h"

#include <cstring>

namespace railyard::fabric::relay {
namespace {

void Put32(std::vector<uint8_t>* v, uint32_t x) {
  const size_t at = v->size();
  v->resize(at + 4);
  std::memcpy(v->data() + at, &x, 4);
}
void Put64(std::vector<uint8_t>* v, uint64_t x) {
  const size_t at = v->size();
  v->resize(at + 8);
  std::memcpy(v->data() + at, &x, 8);
}
void PutBytes(std::vector<uint8_t>* v, std::span<const uint8_t> b) {
  Put32(v, static_cast<uint32_t>(b.size()));
  v->insert(v->end(), b.begin(), b.end());
}

/// A bounds-checked reader over peer bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool U32(uint32_t* x) { return Take(x, 4); }
  bool U64(uint64_t* x) { return Take(x, 8); }
  bool Bytes(size_t max, std::vector<uint8_t>* out) {
    uint32_t n = 0;
    if (!U32(&n) || n > max || n > b_.size() - at_) return false;
    out->assign(b_.begin() + static_cast<std::ptrdiff_t>(at_), b_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return true;
  }
  bool Raw(void* p, size_t n) { return Take(p, n); }
  size_t left() const { return b_.size() - at_; }

 private:
  bool Take(void* p, size_t n) {
    if (n > b_.size() - at_) return false;
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

bool KnownKind(uint8_t k) { return k >= 1 && k <= 5; }

}  // namespace

Status EncodeSlotHeader(const SlotHeader& h, std::span<const uint8_t> packedKey, uint8_t* slot) {
  if (packedKey.size() > kSlotPayloadOffset - sizeof(SlotHeader)) {
    return InvalidArgument("relay slot: a packed key of " + std::to_string(packedKey.size()) + " bytes does not fit");
  }
  SlotHeader w = h;
  w.magic = kSlotMagic;
  w.version = kRelayWireVersion;
  w.keyBytes = static_cast<uint16_t>(packedKey.size());
  std::memcpy(slot, &w, sizeof w);
  if (!packedKey.empty()) std::memcpy(slot + sizeof w, packedKey.data(), packedKey.size());
  return Status::Ok();
}

Status DecodeSlotHeader(const uint8_t* slot, uint64_t slotBytes, uint64_t expectSeq, SlotView* out) {
  if (slotBytes < kSlotPayloadOffset) {
    return InvalidArgument("relay slot: a slot of " + std::to_string(slotBytes) + " bytes has no room for its header");
  }
  SlotHeader h;
  std::memcpy(&h, slot, sizeof h);
  if (h.magic != kSlotMagic) return InvalidArgument("relay slot: not a Railyard relay slot (bad magic)");
  if (h.version != kRelayWireVersion) {
    return InvalidArgument("relay slot: wire version " + std::to_string(h.version) + ", this side speaks " +
                           std::to_string(kRelayWireVersion));
  }
  if (!KnownKind(h.kind)) return InvalidArgument("relay slot: unknown kind " + std::to_string(h.kind));
  if ((h.flags & ~(kSlotLast | kSlotHasImm)) != 0) return InvalidArgument("relay slot: unknown flags");
  if (h.slotSeq != expectSeq) {
    return InvalidArgument("relay slot: sequence " + std::to_string(h.slotSeq) + " where " +
                           std::to_string(expectSeq) + " was due");
  }
  if (h.payloadBytes > slotBytes - kSlotPayloadOffset) {
    return InvalidArgument("relay slot: payload of " + std::to_string(h.payloadBytes) + " bytes overruns the slot");
  }
  if (h.reserved != 0 || h.reserved2 != 0) return InvalidArgument("relay slot: reserved bytes set");
  const auto kind = static_cast<SlotKind>(h.kind);
  const bool wantsKey = kind == SlotKind::kWrite || kind == SlotKind::kRead || kind == SlotKind::kFetchAdd;
  if (wantsKey != (h.keyBytes > 0)) return InvalidArgument("relay slot: a key where none belongs, or none where one must be");
  if ((kind == SlotKind::kRead || kind == SlotKind::kFetchAdd) && h.payloadBytes != 0) {
    return InvalidArgument("relay slot: a read or fetch-add request with a payload");
  }
  if (kind == SlotKind::kRecord && h.payloadBytes == 0) return InvalidArgument("relay slot: an empty record");
  if (kind == SlotKind::kWrite) {
    if (h.value > h.opBytes || h.payloadBytes > h.opBytes - h.value) {
      return InvalidArgument("relay slot: write chunk outside its write (" + std::to_string(h.value) + " + " +
                             std::to_string(h.payloadBytes) + " of " + std::to_string(h.opBytes) + " bytes)");
    }
    if (h.addr + h.payloadBytes < h.addr) return InvalidArgument("relay slot: write chunk wraps the address space");
    const bool ends = h.value + h.payloadBytes == h.opBytes;
    if (ends != ((h.flags & kSlotLast) != 0)) return InvalidArgument("relay slot: the last-chunk flag disagrees with the write's total");
    if (h.payloadBytes == 0 && h.opBytes != 0) return InvalidArgument("relay slot: an empty chunk of a non-empty write");
  } else if ((h.flags & kSlotHasImm) != 0) {
    return InvalidArgument("relay slot: an immediate on a slot that is not a write");
  }
  if ((h.flags & kSlotHasImm) != 0 && (h.flags & kSlotLast) == 0) {
    return InvalidArgument("relay slot: an immediate on a write chunk that is not the last");
  }
  if (kind == SlotKind::kReadData && (h.value > h.opBytes || h.payloadBytes > h.opBytes - h.value)) {
    return InvalidArgument("relay slot: read data outside its read");
  }
  if (h.keyBytes > kSlotPayloadOffset - sizeof h) return InvalidArgument("relay slot: key overruns the header area");
  // The key is unpacked before anything is written: a refused slot leaves `out` as
  // it was (the fuzz target relay_wire found the header written before a bad key).
  RemoteKey key;
  if (h.keyBytes > 0) {
    Status s = RemoteKey::Unpack(std::span<const uint8_t>(slot + sizeof h, h.keyBytes), &key);
    if (!s.ok()) return InvalidArgument("relay slot: " + s.message());
    out->key = std::move(key);
  }
  out->header = h;
  return Status::Ok();
}

std::vector<uint8_t> EncodeControl(const Control& c) {
  std::vector<uint8_t> v;
  v.reserve(kControlHeaderBytes + c.body.size());
  Put32(&v, kControlMagic);
  v.push_back(kRelayWireVersion);
  v.push_back(static_cast<uint8_t>(c.kind));
  v.push_back(0);
  v.push_back(0);
  Put32(&v, c.route);
  Put32(&v, static_cast<uint32_t>(c.body.size()));
  Put64(&v, c.a);
  Put64(&v, c.b);
  v.insert(v.end(), c.body.begin(), c.body.end());
  return v;
}

Status DecodeControl(std::span<const uint8_t> bytes, Control* out) {
  if (bytes.size() < kControlHeaderBytes) return InvalidArgument("relay control record of " + std::to_string(bytes.size()) + " bytes");
  Reader r(bytes);
  uint32_t magic = 0, route = 0, body = 0;
  uint8_t vk[4] = {};
  Control c;
  r.U32(&magic);
  r.Raw(vk, 4);
  r.U32(&route);
  r.U32(&body);
  r.U64(&c.a);
  r.U64(&c.b);
  if (magic != kControlMagic) return InvalidArgument("relay control record: bad magic");
  if (vk[0] != kRelayWireVersion) return InvalidArgument("relay control record: wire version " + std::to_string(vk[0]));
  if (vk[1] < 1 || vk[1] > 7) return InvalidArgument("relay control record: unknown kind " + std::to_string(vk[1]));
  if (vk[2] != 0 || vk[3] != 0) return InvalidArgument("relay control record: reserved bytes set");
  if (body != r.left()) return InvalidArgument("relay control record: body size does not match");
  c.kind = static_cast<ControlKind>(vk[1]);
  c.route = route;
  c.body.assign(bytes.begin() + kControlHeaderBytes, bytes.end());
  const bool hasBody = c.kind == ControlKind::kOpen || c.kind == ControlKind::kOpenOk || c.kind == ControlKind::kError;
  if (!hasBody && !c.body.empty()) return InvalidArgument("relay control record: a body where none belongs");
  *out = std::move(c);
  return Status::Ok();
}

std::vector<uint8_t> EncodeRouteOpen(const RouteOpen& o) {
  std::vector<uint8_t> v;
  Put32(&v, o.slots);
  Put64(&v, o.slotBytes);
  Put32(&v, o.returnSlots);
  PutBytes(&v, o.source);
  PutBytes(&v, o.target);
  PutBytes(&v, o.returnKey);
  Put64(&v, o.nonce);
  v.insert(v.end(), o.mac, o.mac + sizeof o.mac);
  return v;
}

Status DecodeRouteOpen(std::span<const uint8_t> body, RouteOpen* out) {
  Reader r(body);
  RouteOpen o;
  if (!r.U32(&o.slots) || !r.U64(&o.slotBytes) || !r.U32(&o.returnSlots)) return InvalidArgument("relay open: truncated");
  if (!r.Bytes(kMaxAddressBytes, &o.source) || o.source.empty()) return InvalidArgument("relay open: bad source address");
  if (!r.Bytes(kMaxAddressBytes, &o.target) || o.target.empty()) return InvalidArgument("relay open: bad target address");
  if (!r.Bytes(RemoteKey::PackedBytes(RemoteKey::kMaxRails), &o.returnKey)) return InvalidArgument("relay open: bad return key");
  if (!r.U64(&o.nonce) || !r.Raw(o.mac, sizeof o.mac) || r.left() != 0) return InvalidArgument("relay open: bad size");
  if (o.slots < 1 || o.slots > kMaxSlots || o.returnSlots < 1 || o.returnSlots > kMaxSlots) {
    return InvalidArgument("relay open: slot counts out of range");
  }
  if (o.slotBytes <= kSlotPayloadOffset || o.slotBytes > (64ull << 20)) return InvalidArgument("relay open: slot size out of range");
  RemoteKey k;
  Status s = RemoteKey::Unpack(o.returnKey, &k);
  if (!s.ok()) return InvalidArgument("relay open: return key: " + s.message());
  if (k.length / o.slotBytes < o.returnSlots) return InvalidArgument("relay open: the return ring is smaller than its slots");
  *out = std::move(o);
  return Status::Ok();
}

Control MakeErrorControl(uint32_t route, uint64_t opSeq, const FabricError& err) {
  Control c;
  c.kind = ControlKind::kError;
  c.route = route;
  c.a = opSeq;
  c.b = static_cast<uint64_t>(err.errc);
  std::string t = err.ToString();
  if (t.size() > kMaxErrorText) t.resize(kMaxErrorText);
  c.body.assign(t.begin(), t.end());
  return c;
}

}  // namespace railyard::fabric::relay
