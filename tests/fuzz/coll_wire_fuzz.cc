// Fuzz target `coll_wire`: what collective peers exchange
// (proxy/collectives/coll_wire.h): the connect record each rank sends its ring
// neighbours (ConnectRecord::Unpack on the whole input), and the 32-bit immediates
// of the data stream (the first 4 bytes through ImmKindOf / ImmStream / WidenSeq
// against the next 8 as the expected base).
// Invariants: a refused record has a message and leaves the output untouched
// (sentinel); an accepted one re-packs (ConnectRecord::Pack) to exactly the input
// bytes; a widened sequence is at or after its base, within 2^24 of it, with the
// immediate's low 24 bits, and re-packs (PackImm) to the same immediate.
#include <algorithm>
#include <vector>

#include "proxy/collectives/coll_wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace c = railyard::collectives;

namespace {

bool Connect(std::span<const uint8_t> bytes) {
  c::ConnectRecord out;
  out.shape = 10;
  out.rank = 11;
  out.nranks = 12;
  out.chunkBytes = 13;
  out.slots = 14;
  out.smallBytes = 16;
  out.staging.softwareKey = 15;
  const railyard::Status s = c::ConnectRecord::Unpack(bytes, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.shape == 10 && out.rank == 11 && out.nranks == 12 && out.chunkBytes == 13 && out.slots == 14 &&
               out.smallBytes == 16 &&
               out.staging.softwareKey == 15 && out.staging.length == 0);
    return false;
  }
  FUZZ_CHECK(out.staging.softwareKey != 0);
  const std::vector<uint8_t> again = out.Pack();
  FUZZ_CHECK(again.size() == bytes.size() && std::equal(again.begin(), again.end(), bytes.begin()));
  return true;
}

void Immediate(const uint8_t* data, size_t size) {
  railyard::fuzz::Input in(data, size);
  const uint32_t imm = in.Take<uint32_t>();
  const uint64_t base = in.Take<uint64_t>();
  const uint64_t seq = c::WidenSeq(imm, base);
  FUZZ_CHECK(seq - base <= c::kImmSeqMask);  // at or after base (mod 2^64), less than 2^24 ahead
  FUZZ_CHECK((seq & c::kImmSeqMask) == (imm & c::kImmSeqMask));
  const uint32_t kind = imm >> 30;
  FUZZ_CHECK(static_cast<uint32_t>(c::ImmKindOf(imm)) == kind);
  FUZZ_CHECK(c::PackImm(c::ImmKindOf(imm), c::ImmStream(imm), seq) == imm);
}

}  // namespace

RAILYARD_FUZZ_TARGET(CollWire) {
  Immediate(data, size);
  return Connect({data, size});
}
