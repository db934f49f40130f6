// Fuzz target `cabling`: one UDP datagram off a rail, decoded as the cabling
// agent does (topology/cabling_agent.h DecodeCablingMessage, wire version 2): a
// hello or a link-state record, with or without a MAC. Input: the datagram (at
// most the agent's receive size, 80 + 8 + 64 x 56 + 32 bytes). Checks: a decoded
// datagram is exactly 80 + body (+ 32 with a MAC) bytes, a hello's body 24 bytes,
// a record's 8 + 56 x links with at most 64 links; origin and speaker are not 0;
// every name is valid UTF-8 without NUL or control bytes, at most 31 bytes of a
// host name and 15 of an interface name; a refusal carries a message and says
// kBadVersion only for the RYCB magic with another version.
#include <cstring>

#include "tests/fuzz/fuzz_target.h"
#include "topology/cabling_agent.h"
#include "topology/utf8_name.h"

namespace t = railyard::topology;

namespace {
bool CleanName(const std::string& s, size_t maxBytes) {
  if (s.size() > maxBytes || !t::IsValidUtf8(s)) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}
}  // namespace

RAILYARD_FUZZ_TARGET(Cabling) {
  if (size > 80 + 8 + 64 * 56 + 32) return false;  // the agent refuses a longer datagram before decoding
  t::CablingMessage m;
  t::CablingRefusal why = t::CablingRefusal::kNone;
  const railyard::Status s = t::DecodeCablingMessage(data, size, &m, &why);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(why != t::CablingRefusal::kNone);
    if (why == t::CablingRefusal::kBadVersion) {
      FUZZ_CHECK(size >= 8 && std::memcmp(data, "RYCB", 4) == 0 && (data[4] != 2 || data[5] != 0));
    }
    return false;
  }
  FUZZ_CHECK(why == t::CablingRefusal::kNone);
  FUZZ_CHECK(m.origin != 0 && m.speaker != 0);
  FUZZ_CHECK(CleanName(m.hostName, 31));
  const size_t mac = m.hasMac ? 32 : 0;
  if (m.hello) {
    FUZZ_CHECK(size == 80 + 24 + mac && m.links.empty());
    FUZZ_CHECK(CleanName(m.ifname, 15));
  } else {
    FUZZ_CHECK(m.links.size() <= 64 && size == 80 + 8 + 56 * m.links.size() + mac);
    for (const t::CablingMessage::Link& l : m.links) {
      FUZZ_CHECK(CleanName(l.ifname, 15) && CleanName(l.peerIfname, 15));
    }
  }
  return true;
}
