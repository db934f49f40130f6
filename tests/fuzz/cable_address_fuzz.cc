// Fuzz target `cable_address`: the route decisions fabric mode takes on addresses a
// peer sent (issue 10). A HostAddress arrives in an NCCL handle or a tier tunnel and
// is turned into per-cable Worker addresses (runtime::PickCableGroups); a per-cable
// address arrives at a relay in a route-open record and is resolved to the port it
// leaves by (fabric::relay::MakeGraphResolveFn), or planned by a source
// (PlanSource). All over tests/fuzz/ring_graph.h's ring of 4, two rails a cable.
//
// Input: byte 0 selects (bit 0) the decision: 0 = HostAddress::Unpack then
// PickCableGroups, 1 = the relay's ResolveFn and the source's PlanSource; bits 1-2
// this host (h0..h3); bits 3-4 which of this host's two cables also have a verbs
// Forwarder port (mode 1). The rest is the peer's bytes.
//
// Checks on an accepted input: a HostAddress re-packs to an equal one; every cable
// group is one cable of one host (its address locates in the graph, of the group's
// transport, with a key slot < 16 per TCP rail); a resolved hop leaves by a port of
// the address's transport facing the next hop, and names as the next relay a
// Forwarder address of that host's end of the cable to this one; a source's plan
// leaves by a cable of this host. Refusals carry a message.
#include <algorithm>
#include <span>
#include <vector>

#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/runtime/cable_set_domain.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/ring_graph.h"

namespace {

using railyard::Status;
namespace fr = railyard::fabric::relay;
namespace rt = railyard::runtime;

constexpr uint16_t kTcpForwarderPort = 29519;
constexpr uint16_t kVerbsForwarderPort = 29522;

bool PickGroups(const railyard::topology::ClusterGraph& g, uint64_t self, std::span<const uint8_t> bytes) {
  rt::HostAddress a;
  const Status s = rt::HostAddress::Unpack(bytes, &a);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(!a.rails.empty() && a.rails.size() <= rt::HostAddress::kMaxRails);
  rt::HostAddress again;
  FUZZ_CHECK(rt::HostAddress::Unpack(a.Pack(), &again).ok() && again == a);
  std::vector<rt::CableGroup> groups;
  const Status p = rt::PickCableGroups(g, self, a, &groups);
  if (!p.ok()) {
    FUZZ_CHECK_REFUSAL(p);
    return false;
  }
  FUZZ_CHECK(!groups.empty() && groups.size() <= a.rails.size());
  uint64_t owner = 0;
  for (const rt::CableGroup& c : groups) {
    fr::AddressKind kind = fr::AddressKind::kTcp;
    fr::AddressCable where;
    FUZZ_CHECK(fr::LocatePacked(g, c.address, &kind, &where).ok());
    FUZZ_CHECK((kind == fr::AddressKind::kVerbs) == c.verbs);
    FUZZ_CHECK(owner == 0 || where.owner == owner);  // one host's cables only
    owner = where.owner;
    FUZZ_CHECK(!c.railIndices.empty());
    for (uint8_t i : c.railIndices) FUZZ_CHECK(i < 16);
    if (!c.verbs) {
      railyard::fabric::tcp::WorkerAddress w;
      FUZZ_CHECK(railyard::fabric::tcp::WorkerAddress::Unpack(c.address, &w).ok());
      FUZZ_CHECK(w.rails.size() == c.railIndices.size() && w.workerId == a.workerId);
    }
  }
  return true;
}

bool Resolve(const railyard::topology::ClusterGraph& g, uint64_t self, uint8_t verbsCables,
             std::span<const uint8_t> bytes) {
  // This relay's Forwarder ports: a TCP one per cable, a verbs one where the bits say.
  std::vector<uint64_t> ports;
  std::vector<fr::AddressKind> kinds;
  const std::vector<uint64_t> neighbours = g.Neighbours(self);
  for (size_t n = 0; n < neighbours.size(); ++n) {
    ports.push_back(neighbours[n]);
    kinds.push_back(fr::AddressKind::kTcp);
    if ((verbsCables >> n) & 1) {
      ports.push_back(neighbours[n]);
      kinds.push_back(fr::AddressKind::kVerbs);
    }
  }
  const fr::ResolveFn resolve = fr::MakeGraphResolveFn([&g] { return g; }, self, ports, kTcpForwarderPort, kinds,
                                                       kVerbsForwarderPort);
  bool accepted = false;
  fr::NextHop hop;
  const Status r = resolve(bytes, &hop);
  if (!r.ok()) {
    FUZZ_CHECK_REFUSAL(r);
  } else {
    accepted = true;
    fr::AddressKind kind = fr::AddressKind::kTcp;
    fr::AddressCable where;
    FUZZ_CHECK(fr::LocatePacked(g, bytes, &kind, &where).ok());
    FUZZ_CHECK(hop.port < ports.size() && kinds[hop.port] == kind);
    FUZZ_CHECK(hop.local == (where.owner == self));
    const bool straight = where.owner == self || where.entry == self;
    FUZZ_CHECK(straight == hop.via.empty());
    if (!hop.via.empty()) {
      fr::AddressKind viaKind = fr::AddressKind::kTcp;
      fr::AddressCable relay;
      FUZZ_CHECK(fr::LocatePacked(g, hop.via, &viaKind, &relay).ok());
      FUZZ_CHECK(viaKind == kind && relay.owner == ports[hop.port] && relay.entry == self);
    }
  }
  fr::SourcePlan plan;
  const Status p = fr::PlanSource(g, self, bytes, kTcpForwarderPort, &plan, kVerbsForwarderPort);
  if (!p.ok()) {
    FUZZ_CHECK_REFUSAL(p);
    return accepted;
  }
  const bool ownCable = std::find(neighbours.begin(), neighbours.end(), plan.neighbour) != neighbours.end();
  FUZZ_CHECK(ownCable || plan.neighbour == self);
  if (!plan.relay.empty()) {
    fr::AddressKind kind = fr::AddressKind::kTcp;
    fr::AddressCable relay;
    FUZZ_CHECK(fr::LocatePacked(g, plan.relay, &kind, &relay).ok());
    FUZZ_CHECK(relay.owner == plan.neighbour && relay.entry == self);
  }
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(CableAddress) {
  railyard::fuzz::Input in(data, size);
  const uint8_t select = in.Take<uint8_t>();
  size_t n = 0;
  const uint8_t* rest = in.Span(in.left(), &n);
  static const railyard::topology::ClusterGraph g = railyard::fuzz::RingOf4();
  const uint64_t self = ((select >> 1) & 3u) + 1;
  const std::span<const uint8_t> bytes(rest, n);
  if ((select & 1) == 0) return PickGroups(g, self, bytes);
  return Resolve(g, self, static_cast<uint8_t>((select >> 3) & 3u), bytes);
}
