// Fuzz target `cabling`: one UDP datagram off a rail, decoded as the cabling
// agent does (topology/cabling_agent.h DecodeCablingMessage): a hello or a
// link-state record. Input: the datagram (at most the agent's 3704-byte receive
// buffer). Checks: a decoded hello is exactly 80 bytes, a record 64 + 56 x links
// with at most 64 links; every string stops at its first NUL and within its
// field (a host name has at most 32 bytes, an interface name 16: a field without
// a NUL is taken whole); a refusal carries a message.
#include "tests/fuzz/fuzz_target.h"
#include "topology/cabling_agent.h"

namespace t = railyard::topology;

RAILYARD_FUZZ_TARGET(Cabling) {
  if (size > 56 + 8 + 64 * 56) return false;  // recv() into the agent's buffer cuts the rest
  t::CablingMessage m;
  const railyard::Status s = t::DecodeCablingMessage(data, size, &m);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(m.hostName.size() <= 32 && m.hostName.find('\0') == std::string::npos);
  if (m.hello) {
    FUZZ_CHECK(size == 80 && m.links.empty());
    FUZZ_CHECK(m.ifname.size() <= 16 && m.ifname.find('\0') == std::string::npos);
  } else {
    FUZZ_CHECK(m.links.size() <= 64 && size == 64 + 56 * m.links.size());
    for (const t::CablingMessage::Link& l : m.links) {
      FUZZ_CHECK(l.ifname.size() <= 16 && l.peerIfname.size() <= 16);
      FUZZ_CHECK(l.ifname.find('\0') == std::string::npos && l.peerIfname.find('\0') == std::string::npos);
    }
  }
  return true;
}
