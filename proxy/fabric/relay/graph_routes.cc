#include "proxy/fabric/relay/graph_routes.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace railyard::fabric::relay {

namespace {

std::string Ipv4Text(uint32_t networkOrder) {
  in_addr a{};
  a.s_addr = networkOrder;
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

std::string HostText(const topology::ClusterGraph& g, uint64_t h) {
  const std::string name = g.HostName(h);
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(h));
  return name.empty() ? std::string(id) : name;
}

/// Whether packed `address` (already located) listens at `port` (non-zero) on any rail.
bool AtPort(std::span<const uint8_t> address, uint16_t port) {
  if (port == 0) return false;
  tcp::WorkerAddress w;
  if (tcp::WorkerAddress::Unpack(address, &w).ok()) {
    return std::any_of(w.rails.begin(), w.rails.end(), [port](const auto& r) { return r.port == port; });
  }
  verbs::VerbsAddress v;
  return verbs::VerbsAddress::Unpack(address, &v).ok() && v.port == port;
}

}  // namespace

Status LocateAddress(const topology::ClusterGraph& graph, const tcp::WorkerAddress& address, AddressCable* out) {
  if (address.rails.empty()) return InvalidUsage("worker address without rails");
  AddressCable c;
  for (size_t i = 0; i < address.rails.size(); ++i) {
    const std::string ip = Ipv4Text(address.rails[i].ipv4);
    const topology::RailLink* found = nullptr;
    uint64_t owner = 0;
    for (const topology::RailLink& l : graph.Links()) {
      if (l.a.address == ip) {
        found = &l;
        owner = l.a.host;
      } else if (l.b.address == ip) {
        found = &l;
        owner = l.b.host;
      }
      if (found != nullptr) break;
    }
    if (found == nullptr) {
      return InvalidUsage("rail " + std::to_string(i) + " address " + ip + " is on no cable of the cluster graph");
    }
    const uint64_t entry = found->Other(owner).host;
    if (i == 0) {
      c.owner = owner;
      c.entry = entry;
    } else if (owner != c.owner || entry != c.entry) {
      return InvalidUsage("rail " + std::to_string(i) + " address " + ip + " is on the cable " + HostText(graph, owner) +
                          "-" + HostText(graph, entry) + ", not " + HostText(graph, c.owner) + "-" +
                          HostText(graph, c.entry) + " as rail 0");
    }
  }
  *out = c;
  return Status::Ok();
}

Status LocateAddress(const topology::ClusterGraph& graph, const verbs::VerbsAddress& address, AddressCable* out) {
  const std::string ip = Ipv4Text(address.ipv4);
  for (const topology::RailLink& l : graph.Links()) {
    if (l.a.address != ip && l.b.address != ip) continue;
    const uint64_t owner = l.a.address == ip ? l.a.host : l.b.host;
    *out = AddressCable{owner, l.Other(owner).host};
    return Status::Ok();
  }
  return InvalidUsage("verbs address " + address.Name() + ": its bootstrap address " + ip +
                      " is on no cable of the cluster graph");
}

Status LocatePacked(const topology::ClusterGraph& graph, std::span<const uint8_t> address, AddressKind* kind,
                    AddressCable* out) {
  tcp::WorkerAddress w;
  const Status asTcp = tcp::WorkerAddress::Unpack(address, &w);
  if (asTcp.ok()) {
    *kind = AddressKind::kTcp;
    return LocateAddress(graph, w, out);
  }
  verbs::VerbsAddress v;
  const Status asVerbs = verbs::VerbsAddress::Unpack(address, &v);
  if (!asVerbs.ok()) {
    return InvalidArgument("not a fabric worker address: as TCP, " + asTcp.message() + "; as verbs, " +
                           asVerbs.message());
  }
  *kind = AddressKind::kVerbs;
  return LocateAddress(graph, v, out);
}

Status ForwarderAddress(const topology::ClusterGraph& graph, uint64_t relay, uint64_t toward, uint16_t port,
                        std::vector<uint8_t>* out, AddressKind kind) {
  const std::vector<topology::RailLink> links = graph.LinksBetween(relay, toward);
  if (links.empty()) {
    return InvalidUsage("no cable between " + HostText(graph, relay) + " and " + HostText(graph, toward));
  }
  tcp::WorkerAddress w;
  w.workerId = relay != 0 ? relay : 1;
  for (const topology::RailLink& l : links) {
    if (w.rails.size() == tcp::WorkerAddress::kMaxRails) break;
    in_addr a{};
    if (inet_pton(AF_INET, l.End(relay).address.c_str(), &a) != 1) {
      return InvalidUsage("rail " + l.End(relay).ifname + " of " + HostText(graph, relay) + " has no IPv4 address");
    }
    w.rails.push_back({a.s_addr, port, static_cast<uint32_t>(std::max(0, l.End(relay).speedMbps))});
  }
  if (kind == AddressKind::kVerbs) {
    if (port == 0) {
      return InvalidUsage("no verbs Forwarder port (RAILYARD_FABRIC_RELAY_VERBS_PORT is 0): a verbs route cannot "
                          "be relayed through " + HostText(graph, relay));
    }
    verbs::VerbsAddress v;
    v.workerId = w.workerId;
    v.ipv4 = w.rails.front().ipv4;  // the bootstrap listener binds the cable's first rail
    v.port = port;
    v.rails = static_cast<uint16_t>(w.rails.size());
    *out = v.Pack();
    return Status::Ok();
  }
  *out = w.Pack();
  return Status::Ok();
}

std::vector<uint64_t> ForwardPathAfter(const topology::ClusterGraph& graph, uint64_t relay,
                                       const AddressCable& target) {
  std::vector<uint64_t> path;
  uint64_t at = relay;
  while (at != target.entry && at != target.owner && path.size() < 16) {
    uint64_t next = 0;
    if (!FirstHop(graph, at, target.entry, &next).ok()) break;
    path.push_back(next);
    at = next;
  }
  return path;
}

std::string ForwardRouteLabel(const topology::ClusterGraph& graph, std::span<const uint8_t> relay,
                              std::span<const uint8_t> target) {
  AddressKind kind = AddressKind::kTcp;
  AddressCable at;
  if (!LocatePacked(graph, relay, &kind, &at).ok()) return "";
  std::string label = graph.HostName(at.owner) + " (";
  tcp::WorkerAddress w;
  verbs::VerbsAddress v;
  if (kind == AddressKind::kTcp && tcp::WorkerAddress::Unpack(relay, &w).ok() && !w.rails.empty()) {
    label += tcp::RailAddressText(w.rails[0]);
  } else if (kind == AddressKind::kVerbs && verbs::VerbsAddress::Unpack(relay, &v).ok()) {
    label += Ipv4Text(v.ipv4) + ":" + std::to_string(v.port);
  }
  label += ")";
  AddressCable to;
  if (LocatePacked(graph, target, &kind, &to).ok()) {
    for (uint64_t h : ForwardPathAfter(graph, at.owner, to)) label += " -> " + HostText(graph, h);
  }
  return label;
}

Status FirstHop(const topology::ClusterGraph& graph, uint64_t from, uint64_t to, uint64_t* out) {
  const topology::Route r = graph.RouteTo(from, to);
  if (r.hops == 1) {
    *out = to;
    return Status::Ok();
  }
  if (r.hops == 0 || r.nextHops.empty()) {
    return InvalidUsage("no route from " + HostText(graph, from) + " to " + HostText(graph, to) +
                        " in the cluster graph");
  }
  *out = r.nextHops.front();
  return Status::Ok();
}

Status PlanSource(const topology::ClusterGraph& graph, uint64_t self, std::span<const uint8_t> target,
                  uint16_t forwarderPort, SourcePlan* out, uint16_t verbsForwarderPort) {
  AddressKind kind = AddressKind::kTcp;
  AddressCable c;
  RY_RETURN_IF_ERROR(LocatePacked(graph, target, &kind, &c));
  SourcePlan plan;
  if (c.entry == self || c.owner == self) {
    // A neighbour on this cable, or another process of this host (its rails are ours).
    plan.neighbour = c.entry == self ? c.owner : c.entry;
    *out = std::move(plan);
    return Status::Ok();
  }
  RY_RETURN_IF_ERROR(FirstHop(graph, self, c.entry, &plan.neighbour));
  RY_RETURN_IF_ERROR(ForwarderAddress(graph, plan.neighbour, self,
                                      kind == AddressKind::kVerbs ? verbsForwarderPort : forwarderPort, &plan.relay,
                                      kind));
  *out = std::move(plan);
  return Status::Ok();
}

RouteFn MakeGraphRouteFn(GraphFn graph, uint64_t self, uint64_t neighbour, uint16_t forwarderPort,
                         uint16_t verbsForwarderPort) {
  return [graph = std::move(graph), self, neighbour, forwarderPort, verbsForwarderPort](
             std::span<const uint8_t> target, std::vector<uint8_t>* relay) -> Status {
    const topology::ClusterGraph g = graph();
    SourcePlan plan;
    RY_RETURN_IF_ERROR(PlanSource(g, self, target, forwarderPort, &plan, verbsForwarderPort));
    if (plan.neighbour != neighbour) {
      return InvalidUsage("route leaves by the cable to " + HostText(g, plan.neighbour) + ", not to " +
                          HostText(g, neighbour));
    }
    *relay = std::move(plan.relay);
    return Status::Ok();
  };
}

ResolveFn MakeGraphResolveFn(GraphFn graph, uint64_t self, std::vector<uint64_t> portNeighbours,
                             uint16_t forwarderPort, std::vector<AddressKind> portKinds,
                             uint16_t verbsForwarderPort) {
  if (portKinds.empty()) portKinds.assign(portNeighbours.size(), AddressKind::kTcp);
  return [graph = std::move(graph), self, ports = std::move(portNeighbours), kinds = std::move(portKinds),
          forwarderPort, verbsForwarderPort](std::span<const uint8_t> address, NextHop* out) -> Status {
    const topology::ClusterGraph g = graph();
    AddressKind kind = AddressKind::kTcp;
    AddressCable c;
    RY_RETURN_IF_ERROR(LocatePacked(g, address, &kind, &c));
    // An address of this host (a Worker of a process here, on its cable to c.entry)
    // is carried straight on by the port facing c.entry: a connection within this host
    // over that cable's rails. Sources route here when the address they hold lists
    // only that cable (it was taken before this host's other cables came up) and this
    // host is their first hop towards c.entry.
    if (c.owner == self && (AtPort(address, forwarderPort) || AtPort(address, verbsForwarderPort))) {
      return InvalidUsage("the address is this relay's own Forwarder port");  // a route into itself
    }
    uint64_t next = c.owner == self ? c.entry : c.owner;
    if (c.owner != self && c.entry != self) RY_RETURN_IF_ERROR(FirstHop(g, self, c.entry, &next));
    size_t port = ports.size();
    for (size_t p = 0; p < ports.size() && p < kinds.size(); ++p) {
      if (ports[p] == next && kinds[p] == kind) port = p;
    }
    if (port == ports.size()) {
      return InvalidUsage("the next hop " + HostText(g, next) + " has no " +
                          (kind == AddressKind::kVerbs ? "verbs (RDMA) " : "TCP ") + "port at this relay");
    }
    NextHop hop;
    hop.port = port;
    hop.local = c.owner == self;
    hop.name = HostText(g, next);
    if (c.owner != self && c.entry != self) {
      RY_RETURN_IF_ERROR(ForwarderAddress(g, next, self, kind == AddressKind::kVerbs ? verbsForwarderPort : forwarderPort,
                                          &hop.via, kind));
    }
    *out = std::move(hop);
    return Status::Ok();
  };
}

std::vector<RailInfo> CableRails(const topology::ClusterGraph& graph, uint64_t self, uint64_t neighbour) {
  std::vector<RailInfo> rails;
  for (const topology::RailLink& l : graph.LinksBetween(self, neighbour)) {
    RailInfo r;
    r.device = l.End(self).ifname;
    r.address = l.End(self).address;
    r.speedMbps = static_cast<uint32_t>(std::max(0, l.End(self).speedMbps));
    rails.push_back(std::move(r));
  }
  return rails;
}

}  // namespace railyard::fabric::relay
