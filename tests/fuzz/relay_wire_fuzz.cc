// Fuzz target `relay_wire`: the wire of relayed fabric Endpoints
// (proxy/fabric/relay/relay_wire.h) as a relay or a source receives it:
//   - DecodeSlotHeader on a slot of the ring (the first input byte chooses the slot
//     size, 257..4352 bytes, and whether the expected sequence is the header's own
//     or the next 8 input bytes; the rest fills the slot);
//   - DecodeControl on the whole input (a control record, a fabric Send), and
//     DecodeRouteOpen on an accepted kOpen's body and on the whole input.
// Invariants: a refusal has a message and leaves the output as it was (sentinels);
// an accepted Write chunk lies inside the Write its header names (version 2), its
// last-chunk flag exactly on the chunk that ends it, an immediate only there;
// an accepted slot header re-encodes (EncodeSlotHeader with its key re-packed) to
// the same header and key bytes, its payload inside the slot; an accepted control
// record or route open re-encodes to exactly the input bytes.
#include <algorithm>
#include <vector>

#include "proxy/fabric/relay/relay_wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace r = railyard::fabric::relay;
using railyard::fabric::RemoteKey;

namespace {

RemoteKey SentinelKey() {
  RemoteKey k;
  k.base = 0x4242;
  k.length = 0x99;
  k.softwareKey = 0xbeef;
  k.railRkeys = {7};
  return k;
}

bool SameOpen(const r::RouteOpen& a, const r::RouteOpen& b) {
  return a.slots == b.slots && a.slotBytes == b.slotBytes && a.returnSlots == b.returnSlots && a.source == b.source &&
         a.target == b.target && a.returnKey == b.returnKey && a.nonce == b.nonce &&
         std::memcmp(a.mac, b.mac, sizeof a.mac) == 0;
}

r::RouteOpen SentinelOpen() {
  r::RouteOpen o;
  o.slots = 3;
  o.slotBytes = 1000;
  o.source = {1};
  o.nonce = 0x55;
  o.mac[0] = 0x66;
  return o;
}

bool RouteOpen(std::span<const uint8_t> body) {
  r::RouteOpen out = SentinelOpen();
  const railyard::Status s = r::DecodeRouteOpen(body, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(SameOpen(out, SentinelOpen()));
    return false;
  }
  FUZZ_CHECK(out.slots >= 1 && out.slots <= r::kMaxSlots && out.returnSlots >= 1 && out.returnSlots <= r::kMaxSlots);
  FUZZ_CHECK(out.slotBytes > r::kSlotPayloadOffset && !out.source.empty() && !out.target.empty());
  RemoteKey k;
  FUZZ_CHECK(RemoteKey::Unpack(out.returnKey, &k).ok() && k.length / out.slotBytes >= out.returnSlots);
  const std::vector<uint8_t> again = r::EncodeRouteOpen(out);
  FUZZ_CHECK(again.size() == body.size() && std::equal(again.begin(), again.end(), body.begin()));
  return true;
}

bool Control(std::span<const uint8_t> bytes) {
  r::Control out;
  out.kind = r::ControlKind::kClose;
  out.route = 0x1234;
  out.a = 5;
  out.b = 6;
  out.body = {4, 4};
  const railyard::Status s = r::DecodeControl(bytes, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.kind == r::ControlKind::kClose && out.route == 0x1234 && out.a == 5 && out.b == 6 &&
               out.body == (std::vector<uint8_t>{4, 4}));
    return false;
  }
  const std::vector<uint8_t> again = r::EncodeControl(out);
  FUZZ_CHECK(again.size() == bytes.size() && std::equal(again.begin(), again.end(), bytes.begin()));
  if (out.kind == r::ControlKind::kOpen) (void)RouteOpen(out.body);
  return true;
}

bool Slot(const uint8_t* data, size_t size) {
  railyard::fuzz::Input in(data, size);
  const uint8_t shape = in.Take<uint8_t>();
  const uint64_t slotBytes = r::kSlotPayloadOffset + 1 + (shape >> 1) * 32;
  uint64_t expect = in.Take<uint64_t>();
  std::vector<uint8_t> slot(slotBytes, 0);
  in.Bytes(slot.data(), slot.size());
  if (shape & 1) std::memcpy(&expect, slot.data() + offsetof(r::SlotHeader, slotSeq), 8);
  r::SlotView out;
  out.header.magic = 0x1;
  out.header.opSeq = 0x77;
  out.key = SentinelKey();
  const railyard::Status s = r::DecodeSlotHeader(slot.data(), slotBytes, expect, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.header.magic == 0x1 && out.header.opSeq == 0x77 && out.header.kind == 0 && out.key == SentinelKey());
    return false;
  }
  const r::SlotHeader& h = out.header;
  FUZZ_CHECK(h.magic == r::kSlotMagic && h.version == r::kRelayWireVersion && h.slotSeq == expect);
  FUZZ_CHECK(h.payloadBytes <= slotBytes - r::kSlotPayloadOffset);
  if (h.kind == static_cast<uint8_t>(r::SlotKind::kWrite)) {
    // Version 2: a Write chunk lies inside its Write, and only the chunk that ends it
    // is the last (and may carry the immediate).
    FUZZ_CHECK(h.value <= h.opBytes && h.payloadBytes <= h.opBytes - h.value);
    FUZZ_CHECK(((h.flags & r::kSlotLast) != 0) == (h.value + h.payloadBytes == h.opBytes));
    FUZZ_CHECK(h.payloadBytes > 0 || h.opBytes == 0);
  }
  FUZZ_CHECK((h.flags & r::kSlotHasImm) == 0 ||
             (h.kind == static_cast<uint8_t>(r::SlotKind::kWrite) && (h.flags & r::kSlotLast) != 0));
  std::vector<uint8_t> packed;
  if (h.keyBytes > 0) packed = out.key.Pack();
  FUZZ_CHECK(packed.size() == h.keyBytes);
  std::vector<uint8_t> again(slotBytes, 0);
  FUZZ_CHECK(r::EncodeSlotHeader(h, packed, again.data()).ok());
  const size_t used = sizeof(r::SlotHeader) + h.keyBytes;
  FUZZ_CHECK(std::memcmp(again.data(), slot.data(), used) == 0);
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(RelayWire) {
  bool accepted = Slot(data, size);
  accepted |= Control({data, size});
  accepted |= RouteOpen({data, size});
  return accepted;
}
