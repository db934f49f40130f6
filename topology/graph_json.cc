#include "topology/graph_json.h"

#include <cstdio>
#include <sstream>

namespace railyard::topology {

std::string HostIdText(uint64_t id) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

namespace {
nlohmann::json EndJson(const ClusterGraph& g, const RailEnd& e) {
  return {{"host", HostIdText(e.host)}, {"name", g.HostName(e.host)}, {"ifname", e.ifname},
          {"address", e.address}, {"speed_mbps", e.speedMbps}};
}
}  // namespace

nlohmann::json GraphToJson(const ClusterGraph& g, uint64_t self) {
  nlohmann::json j;
  j["self"] = {{"id", HostIdText(self)}, {"name", g.HostName(self)}};
  j["shape"] = ShapeName(g.DeriveShape());
  j["hosts"] = nlohmann::json::array();
  for (uint64_t h : g.Hosts()) j["hosts"].push_back({{"id", HostIdText(h)}, {"name", g.HostName(h)}});
  j["links"] = nlohmann::json::array();
  for (const RailLink& l : g.Links()) j["links"].push_back({{"a", EndJson(g, l.a)}, {"b", EndJson(g, l.b)}});
  j["routes"] = nlohmann::json::array();
  for (const Route& r : g.Routes(self)) {
    // hops 0: no path in the graph (the text form's "unreachable"), said outright too.
    nlohmann::json route = {{"peer", HostIdText(r.peer)}, {"name", g.HostName(r.peer)}, {"hops", r.hops},
                            {"reachable", r.hops > 0}};
    route["direct"] = nlohmann::json::array();
    for (const RailLink& l : r.direct) {
      const RailEnd& mine = l.End(self);
      const RailEnd& theirs = l.Other(self);
      route["direct"].push_back({{"local_if", mine.ifname}, {"local_address", mine.address},
                                 {"peer_if", theirs.ifname}, {"peer_address", theirs.address},
                                 {"speed_mbps", std::min(mine.speedMbps, theirs.speedMbps)}});
    }
    route["next_hops"] = nlohmann::json::array();
    for (uint64_t n : r.nextHops) route["next_hops"].push_back(g.HostName(n));
    j["routes"].push_back(route);
  }
  return j;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string HostCountText(const ClusterGraph& g) {
  const size_t uncabled = g.UncabledHosts();
  const size_t cabled = g.Hosts().size() - uncabled;
  if (cabled == 0) {
    // "No cable yet" was said after a cable went down too (new-user trial).
    return g.Hosts().size() <= 1 ? "no cable up (this host alone)"
                                 : "no cable up (" + std::to_string(g.Hosts().size()) + " hosts known)";
  }
  return std::to_string(cabled) + " hosts" + (uncabled == 0 ? "" : " (+" + std::to_string(uncabled) + " with no cable)");
}

std::string GraphToText(const ClusterGraph& g, uint64_t self) {
  std::ostringstream o;
  o << "Host " << g.HostName(self) << " (" << HostIdText(self) << "), cluster shape "
    << ShapeName(g.DeriveShape()) << ", " << HostCountText(g) << "\n";
  o << "Neighbours:\n";
  for (uint64_t n : g.Neighbours(self)) {
    for (const RailLink& l : g.LinksBetween(self, n)) {
      o << "  " << l.End(self).ifname << " (" << l.End(self).address << ") <-> " << g.HostName(n)
        << " " << l.Other(self).ifname << " (" << l.Other(self).address << ")\n";
    }
  }
  o << "Routes:\n";
  for (const Route& r : g.Routes(self)) {
    o << "  " << g.HostName(r.peer) << ": ";
    if (r.hops == 0) {
      o << "unreachable\n";
    } else if (r.hops == 1) {
      o << "direct over " << r.direct.size() << " rail(s)\n";
    } else {
      // The next hops are alternatives, not a path (new-user trial: "via h2 h0" read as
      // "through h2, then h0").
      o << r.hops << " hops, next hop ";
      for (size_t i = 0; i < r.nextHops.size(); ++i) o << (i == 0 ? "" : " or ") << g.HostName(r.nextHops[i]);
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace railyard::topology
