// Fuzz target `graph_json`: what railyardd prints (topology/graph_json.h
// GraphToJson(...).dump(2) and GraphToText) for a cluster graph built from
// fuzzed cabling datagrams, names included (host and interface names are the
// peers' bytes: not necessarily UTF-8).
// Printed with DumpJson as railyardd prints it; the output must be valid UTF-8.
// Input: this host's name (a 1-byte length, then up to 31 bytes), then datagrams,
// each a 2-byte little-endian length and that many bytes, decoded with
// DecodeCablingMessage. The graph is built as CablingAgent::Rebuild builds it:
// hello number i is heard on this host's rail "fz<i>" (a rail that hears one
// host is a cable end); the newest record per origin (higher seq) wins; a link
// counts when both ends report it and the far end is this host or has a record.
// Checks: nothing throws (a throw out of the dump is railyardd's std::terminate);
// the printed JSON parses and prints again to the same text; routes are consistent (a direct route
// has links, a longer one next hops that are neighbours).
#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tests/fuzz/fuzz_target.h"
#include "topology/cabling_agent.h"
#include "topology/graph_json.h"
#include "topology/utf8_name.h"

namespace t = railyard::topology;

namespace {

constexpr uint64_t kSelf = 0x5e1f5e1f5e1f5e1full;

std::string Ip(uint32_t networkOrder) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{networkOrder};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

struct Claim {
  uint64_t host;
  std::string ifname;
  uint64_t peer;
  std::string peerIf;
  bool operator<(const Claim& o) const {
    return std::tie(host, ifname, peer, peerIf) < std::tie(o.host, o.ifname, o.peer, o.peerIf);
  }
};
struct ClaimedLink {
  uint32_t addr = 0, peerAddr = 0;
  int speedMbps = 0;
};

}  // namespace

RAILYARD_FUZZ_TARGET(GraphJson) {
  Input in(data, size);
  char selfName[32] = {};
  in.Bytes(selfName, in.Take<uint8_t>() % 32);
  std::map<uint64_t, t::CablingMessage> records;  // newest per origin
  std::map<std::string, t::CablingMessage> heard;  // this host's rail -> the one host it hears
  int hellos = 0;
  while (in.left() >= 2) {
    const uint16_t len = in.Take<uint16_t>();
    size_t got = 0;
    const uint8_t* d = in.Span(len, &got);
    t::CablingMessage m;
    if (!t::DecodeCablingMessage(d, got, &m).ok() || m.origin == kSelf) continue;
    if (m.hello) {
      heard["fz" + std::to_string(hellos++)] = m;
    } else if (auto it = records.find(m.origin); it == records.end() || m.seq > it->second.seq) {
      records[m.origin] = m;
    }
  }

  std::map<Claim, ClaimedLink> claims;
  t::ClusterGraph g;
  g.AddHost(kSelf, std::string(selfName, strnlen(selfName, sizeof selfName)));
  for (const auto& [rail, m] : heard) claims[{kSelf, rail, m.origin, m.ifname}] = {0x0100000a, m.addr, m.speedMbps};
  for (const auto& [origin, rec] : records) {
    g.AddHost(origin, rec.hostName);
    for (const t::CablingMessage::Link& l : rec.links) {
      claims[{origin, l.ifname, l.peerHost, l.peerIfname}] = {l.addr, l.peerAddr, l.speedMbps};
    }
  }
  for (const auto& [c, l] : claims) {
    if (c.host > c.peer) continue;
    if (claims.count({c.peer, c.peerIf, c.host, c.ifname}) == 0) continue;
    if (c.peer != kSelf && records.count(c.peer) == 0) continue;
    g.AddLink({c.host, c.ifname, Ip(l.addr), l.speedMbps}, {c.peer, c.peerIf, Ip(l.peerAddr), l.speedMbps});
  }

  for (const t::Route& r : g.Routes(kSelf)) {
    if (r.hops == 1) FUZZ_CHECK(!r.direct.empty());
    if (r.hops > 1) {
      FUZZ_CHECK(!r.nextHops.empty());
      const std::vector<uint64_t> nb = g.Neighbours(kSelf);
      for (uint64_t n : r.nextHops) FUZZ_CHECK(std::find(nb.begin(), nb.end(), n) != nb.end());
    }
  }
  // No try/catch here: an exception escaping is the finding (railyardd would die).
  // Printed as railyardd prints it (tools/railyardd/main.cc: DumpJson, indent 2).
  const nlohmann::json j = t::GraphToJson(g, kSelf);
  const std::string printed = t::DumpJson(j, 2);
  FUZZ_CHECK(t::IsValidUtf8(printed));
  FUZZ_CHECK(nlohmann::json::parse(printed).dump(2) == printed);
  FUZZ_CHECK(!t::GraphToText(g, kSelf).empty());
  return !g.Links().empty();
}
