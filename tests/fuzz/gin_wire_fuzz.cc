// Fuzz target `gin_wire`: what GIN/RMA ranks exchange (proxy/gin/gin_wire.h): the
// 128-byte connect handle NCCL allgathers (UnpackHandle on the first 128 bytes) and
// the mesh records of connect and of every symmetric registration (Record::Unpack
// on the whole input).
// Invariants: a refusal has a message and leaves the output untouched (sentinels);
// an accepted handle re-packs (PackHandle) to exactly its 128 bytes; an accepted
// record re-packs (Record::Pack) to exactly the input bytes, a window's key
// covering exactly its window, a hello carrying none.
#include <algorithm>
#include <vector>

#include "proxy/gin/gin_wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace g = railyard::gin;
using railyard::fabric::RemoteKey;

namespace {

bool Handle(const uint8_t* data, size_t size) {
  uint8_t h[g::kHandleBytes] = {};
  std::memcpy(h, data, std::min(size, sizeof h));
  std::vector<uint8_t> address = {3, 1, 4};
  const railyard::Status s = g::UnpackHandle(h, 1, &address);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(address == (std::vector<uint8_t>{3, 1, 4}));
    return false;
  }
  FUZZ_CHECK(!address.empty() && address.size() <= g::kMaxAddressBytes);
  uint8_t again[g::kHandleBytes];
  FUZZ_CHECK(g::PackHandle(address, again).ok());
  FUZZ_CHECK(std::memcmp(again, h, sizeof h) == 0);
  return true;
}

bool Record(std::span<const uint8_t> bytes) {
  g::Record out;
  out.kind = g::RecordKind::kWindow;
  out.rank = 99;
  out.seq = 98;
  out.key.softwareKey = 97;
  const railyard::Status s = g::Record::Unpack(bytes, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.kind == g::RecordKind::kWindow && out.rank == 99 && out.seq == 98 && out.nranks == 0 &&
               out.key.softwareKey == 97 && out.key.length == 0);
    return false;
  }
  if (out.kind == g::RecordKind::kWindow) FUZZ_CHECK(out.key.length == out.bytes && out.key.softwareKey != 0);
  const std::vector<uint8_t> again = out.Pack();
  FUZZ_CHECK(again.size() == bytes.size() && std::equal(again.begin(), again.end(), bytes.begin()));
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(GinWire) {
  bool accepted = Handle(data, size);
  accepted |= Record({data, size});
  return accepted;
}
