// Fuzz target `nccl_records`: the records of the NCCL comms over the fabric
// (proxy/nccl/nccl_records.h), every decoder on the same bytes:
//   - DecodeFabricHandle on the first 128 bytes (the listen handle NCCL carries to
//     connect()), IsFabricHandle agreeing with it;
//   - DecodeHello on the whole input (a fabric Send record at the listener);
//   - DecodeCts on the input laid out as a FabricCts, with the input's own length
//     as the byte count the Write delivered (the sender's FIFO slot);
//   - DecodeClose on the whole input.
// Invariants: a refusal carries a message and leaves every output untouched (each
// output is pre-filled with a sentinel and compared after); an accepted record
// re-encodes (Encode*) to bytes that decode to the same values; an accepted CTS
// has 1..kMaxRecvs buffers, each inside the region its key covers.
#include <algorithm>

#include "proxy/fabric/remote_key.h"
#include "proxy/nccl/nccl_records.h"
#include "tests/fuzz/fuzz_target.h"

namespace n = railyard::proxy::nccl;
namespace p = railyard::proxy;
using railyard::fabric::RemoteKey;

namespace {

RemoteKey SentinelKey() {
  RemoteKey k;
  k.base = 0x5151;
  k.length = 0x77;
  k.softwareKey = 0xdead;
  k.access = 0x3;
  k.railRkeys = {1, 2, 3};
  return k;
}

bool SameHello(const n::Hello& a, const n::Hello& b) {
  return a.listenId == b.listenId && a.sendCommId == b.sendCommId && a.pid == b.pid && a.host == b.host &&
         a.fifoKey == b.fifoKey && a.address == b.address;
}

n::Hello SentinelHello() {
  n::Hello h;
  h.listenId = 0x1111;
  h.sendCommId = 0x2222;
  h.pid = 0x3333;
  h.host = "sentinel";
  h.fifoKey = {9, 9};
  h.address = {8, 8, 8};
  return h;
}

bool Handle(const uint8_t* data, size_t size) {
  uint8_t wire[sizeof(n::FabricHandleWire)] = {};
  std::memcpy(wire, data, std::min(size, sizeof wire));
  n::FabricHandle out;
  out.listenId = 0xabc;
  out.host = "sentinel";
  out.address = {1, 2, 3};
  const railyard::Status s = n::DecodeFabricHandle(wire, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.listenId == 0xabc && out.pid == 0 && out.host == "sentinel" && out.address == (std::vector<uint8_t>{1, 2, 3}));
    return false;
  }
  FUZZ_CHECK(n::IsFabricHandle(wire));
  FUZZ_CHECK(!out.address.empty() && out.address.size() <= n::kHandleAddressBytes);
  FUZZ_CHECK(out.host.size() < 24 && out.host.find('\0') == std::string::npos);
  uint8_t again[sizeof(n::FabricHandleWire)];
  FUZZ_CHECK(n::EncodeFabricHandle(out, again).ok());
  n::FabricHandle back;
  FUZZ_CHECK(n::DecodeFabricHandle(again, &back).ok());
  FUZZ_CHECK(back.listenId == out.listenId && back.pid == out.pid && back.host == out.host && back.address == out.address);
  return true;
}

bool Hello(const uint8_t* data, size_t size) {
  n::Hello out = SentinelHello();
  RemoteKey key = SentinelKey();
  const railyard::Status s = n::DecodeHello({data, size}, &out, &key);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(SameHello(out, SentinelHello()) && key == SentinelKey());
    return false;
  }
  FUZZ_CHECK(out.sendCommId != 0 && !out.address.empty() && out.address.size() <= n::kMaxPackedBytes);
  FUZZ_CHECK(out.host.size() < 32 && out.host.find('\0') == std::string::npos);
  RemoteKey unpacked;
  FUZZ_CHECK(RemoteKey::Unpack(out.fifoKey, &unpacked).ok() && unpacked == key);
  FUZZ_CHECK(key.length >= sizeof(n::FabricCts) * 32);
  const std::vector<uint8_t> again = n::EncodeHello(out);
  n::Hello back;
  RemoteKey backKey;
  FUZZ_CHECK(n::DecodeHello(again, &back, &backKey).ok());
  FUZZ_CHECK(SameHello(back, out) && backKey == key);
  FUZZ_CHECK(n::RecordKindOf(again) == static_cast<uint16_t>(p::RecordKind::kFabricHello));
  return true;
}

bool Cts(const uint8_t* data, size_t size) {
  static n::FabricCts rec;  // 1 KiB+: static, zeroed where the input is short
  std::memset(&rec, 0, sizeof rec);
  std::memcpy(&rec, data, std::min(size, sizeof rec));
  p::CtsRecord plain;
  std::memset(&plain, 0x5a, sizeof plain);
  p::CtsRecord plainBefore;
  std::memcpy(&plainBefore, &plain, sizeof plain);
  RemoteKey keys[p::kMaxRecvs];
  for (RemoteKey& k : keys) k = SentinelKey();
  const railyard::Status s = n::DecodeCts(rec, size, &plain, keys);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(std::memcmp(&plain, &plainBefore, sizeof plain) == 0);
    for (const RemoteKey& k : keys) FUZZ_CHECK(k == SentinelKey());
    return false;
  }
  FUZZ_CHECK(plain.n >= 1 && plain.n <= static_cast<uint32_t>(p::kMaxRecvs) && size == n::FabricCtsBytes(plain.n));
  FUZZ_CHECK(plain.seq == rec.seq);
  for (uint32_t i = 0; i < plain.n; ++i) {
    const p::CtsEntry& e = plain.entries[i];
    FUZZ_CHECK(e.addr >= keys[i].base && e.size <= keys[i].length && e.addr - keys[i].base <= keys[i].length - e.size);
    FUZZ_CHECK(e.tag == rec.entries[i].tag);
  }
  return true;
}

bool Close(const uint8_t* data, size_t size) {
  n::CloseNotice out;
  out.commId = 0x7777;
  const railyard::Status s = n::DecodeClose({data, size}, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.commId == 0x7777);
    return false;
  }
  n::CloseNotice back;
  FUZZ_CHECK(n::DecodeClose(n::EncodeClose(out), &back).ok() && back.commId == out.commId);
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(NcclRecords) {
  bool accepted = Handle(data, size);
  accepted |= Hello(data, size);
  accepted |= Cts(data, size);
  accepted |= Close(data, size);
  const uint16_t kind = n::RecordKindOf({data, size});
  if (size >= sizeof(p::RecordHeader)) {
    uint32_t magic;
    std::memcpy(&magic, data, 4);
    FUZZ_CHECK(kind == 0 || magic == p::kMagic);
  } else {
    FUZZ_CHECK(kind == 0);
  }
  return accepted;
}
