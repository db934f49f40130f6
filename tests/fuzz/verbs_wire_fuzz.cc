// Fuzz target `verbs_wire`: what the fabric's verbs transport decodes before any QP
// leaves INIT (proxy/fabric/verbs/verbs_wire.h): the first 24 bytes as a packed
// VerbsAddress (VerbsAddress::Unpack; exchanged out of band), the next 48 as the
// hello on the bootstrap connection (CheckHello as the connector and as the
// acceptor read it), the rest as a write-size record (WriteSizeRecord::Unpack, the
// SEND WITH IMM ending a Write of several work requests).
// Invariants: a refused address has a message and leaves the output untouched; an
// accepted one re-packs to exactly its 24 bytes (no field the decoder skips) and
// names itself; an accepted hello has the role asked for, a non-zero worker id
// and, from an acceptor, 4..4096 credits of 1..65536 bytes, from a connector a
// non-zero credit address; an accepted size record is 16 bytes, re-packs to them
// and names at most the limit asked for.
#include <algorithm>
#include <vector>

#include "proxy/fabric/verbs/verbs_wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace v = railyard::fabric::verbs;

namespace {

bool Address(std::span<const uint8_t> bytes) {
  v::VerbsAddress out;
  out.workerId = 0x7171;
  out.port = 0x72;
  out.ipv4 = 0x73;
  out.rails = 0x74;
  const railyard::Status s = v::VerbsAddress::Unpack(bytes, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.workerId == 0x7171 && out.port == 0x72 && out.ipv4 == 0x73 && out.rails == 0x74);
    return false;
  }
  FUZZ_CHECK(out.workerId != 0 && out.port != 0 && out.rails >= 1 && out.rails <= 16);
  const std::vector<uint8_t> again = out.Pack();
  FUZZ_CHECK(again.size() == bytes.size() && std::equal(again.begin(), again.end(), bytes.begin()));
  FUZZ_CHECK(!out.Name().empty());
  return true;
}

bool Hello(const v::VerbsHello& h, uint16_t role) {
  const railyard::Status s = v::CheckHello(h, role);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(h.magic == v::VerbsHello::kMagic && h.version == v::VerbsHello::kVersion && h.role == role &&
             h.workerId != 0);
  if (role == v::VerbsHello::kRoleAccept) {
    FUZZ_CHECK(h.recordCredits >= 4 && h.recordCredits <= 4096 && h.recordBytes >= 1 && h.recordBytes <= 65536);
  } else {
    FUZZ_CHECK(h.creditAddr != 0);
  }
  return true;
}

bool SizeRecord(std::span<const uint8_t> bytes) {
  constexpr uint64_t kMax = uint64_t{1} << 40;
  v::WriteSizeRecord out;
  out.bytes = 0x7575;
  const railyard::Status s = v::WriteSizeRecord::Unpack(bytes, kMax, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.bytes == 0x7575);
    return false;
  }
  FUZZ_CHECK(bytes.size() == v::WriteSizeRecord::kBytes && out.bytes <= kMax);
  const std::vector<uint8_t> again = out.Pack();
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(VerbsWire) {
  Input in(data, size);
  size_t n = 0;
  const uint8_t* addr = in.Span(v::VerbsAddress::kBytes, &n);
  bool accepted = Address({addr, n});
  v::VerbsHello h;
  in.Bytes(&h, sizeof h);
  accepted |= Hello(h, v::VerbsHello::kRoleConnect);
  accepted |= Hello(h, v::VerbsHello::kRoleAccept);
  size_t rest = 0;
  const uint8_t* tail = in.Span(v::WriteSizeRecord::kBytes + 1, &rest);
  accepted |= SizeRecord({tail, rest});
  return accepted;
}
