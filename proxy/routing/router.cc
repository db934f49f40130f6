#include "proxy/routing/router.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "env/log.h"
#include "proxy/routing/socket_hops.h"
#include "proxy/wire.h"
#include "topology/discovery.h"
#include "topology/interface_filter.h"
#include "topology/loopback_rail.h"

namespace railyard::proxy {

namespace {

sockaddr_storage Ipv4(const std::string& text, uint16_t port) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  inet_pton(AF_INET, text.c_str(), &a->sin_addr);
  return ss;
}

}  // namespace

size_t WeightedPick(const std::vector<int>& speedsMbps, int k) {
  const size_t n = speedsMbps.size();
  if (n <= 1) return 0;
  // Weights 1..8 relative to the fastest rail (so 10000 vs 10001 Mbps is 1:1),
  // then smooth weighted round robin: every prefix of the sequence is as close to
  // the weights as it can be, and equal rails alternate.
  const int top = std::max(1, *std::max_element(speedsMbps.begin(), speedsMbps.end()));
  std::vector<int> w(n), current(n, 0);
  int total = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = std::clamp(static_cast<int>(std::lround(8.0 * std::max(1, speedsMbps[i]) / top)), 1, 8);
    total += w[i];
  }
  size_t pick = 0;
  for (int step = 0; step <= k % total; ++step) {
    for (size_t i = 0; i < n; ++i) current[i] += w[i];
    pick = static_cast<size_t>(std::max_element(current.begin(), current.end()) - current.begin());
    current[pick] -= total;
  }
  return pick;
}

std::string BootstrapRailSkipReason(const std::string& netdev, const std::string& bootstrapFilter) {
  const topology::InterfaceFilter bootstrap = topology::InterfaceFilter::Parse(bootstrapFilter);
  if (bootstrap.automatic() || bootstrap.list().exclude || !bootstrap.Matches(netdev)) return "";
  return netdev + ": NCCL_SOCKET_IFNAME='" + bootstrap.text() +
         "' makes it NCCL's bootstrap (management) network, never a cable "
         "(RAILYARD_SOCKET_IFNAME chooses the rails)";
}

Status SelectFabricRails(const std::string& ifnameFilter, int defaultSpeedMbps,
                         std::vector<FabricRail>* out, std::string* whyNone,
                         const std::string& filterSource, const std::string& bootstrapFilter) {
  out->clear();
  topology::DiscoveryOptions opt;
  opt.ifnameFilter = ifnameFilter;
  opt.ifnameFilterSource = filterSource;
  opt.skipDefaultRoute = true;  // an uplink is never a cable (unless named exactly)
  opt.includeDown = true;
  opt.crossCheckIbverbs = false;
  // Name, address, speed and state come from sysfs and getifaddrs; hwloc adds only NUMA
  // and the nearest GPU, which no fabric rail uses, and loading its topology was most
  // of a railyard-info run under ASan (every init, railyardd and tier client pay it too).
  opt.disableHwloc = true;
  std::vector<topology::Rail> rails;
  std::vector<std::string> skipped;
  std::vector<std::string> namedLoopback;  // loopback the filter named (discovery kept it)
  RY_RETURN_IF_ERROR(topology::DiscoverRails(opt, &rails, &skipped));
  for (const topology::Rail& r : rails) {
    if (topology::IsLoopbackInterface(r.netdev, false)) {  // named by the filter: still never a fabric rail
      namedLoopback.push_back(topology::LoopbackSkipReason(r.netdev));
      continue;
    }
    if (const std::string why = BootstrapRailSkipReason(r.netdev, bootstrapFilter); !why.empty()) {
      RY_INFO(log::kInit | log::kNet, "fabric: %s", why.c_str());
      skipped.push_back(why);
      continue;
    }
    bool found = false;
    for (const topology::RailAddress& a : r.addresses) {
      if (a.family != AF_INET || a.linkLocal || a.address.rfind("127.", 0) == 0) continue;
      FabricRail f;
      f.ifname = r.netdev;
      f.addr = reinterpret_cast<const sockaddr_in*>(&a.sockaddr)->sin_addr;
      f.prefixLen = a.prefixLen;
      f.speedMbps = r.speedMbps.value_or(defaultSpeedMbps);
      f.mac = r.mac;
      f.namedUplink = r.carriesDefaultRoute;
      RY_INFO(log::kInit | log::kNet, "fabric: rail %s %s speed %d Mbps%s", f.ifname.c_str(),
              a.address.c_str(), f.speedMbps, f.namedUplink ? " (an uplink, named exactly)" : "");
      out->push_back(f);
      found = true;
      break;
    }
    if (!found) skipped.push_back(r.netdev + ": no routable IPv4 address");
  }
  if (out->empty() && whyNone != nullptr) {
    // Loopback the filter named is news (the user asked for it); loopback discovery left
    // out unasked is not, beside other reasons. Either way in the rule's one wording.
    whyNone->clear();
    for (const std::string& s : namedLoopback) *whyNone += (whyNone->empty() ? "" : "; ") + s;
    for (const std::string& s : skipped) {
      if (topology::IsLoopbackSkipReason(s)) continue;
      *whyNone += (whyNone->empty() ? "" : "; ") + s;
    }
    if (whyNone->empty()) {
      std::string lo = "lo";
      for (const std::string& s : skipped) {
        if (topology::IsLoopbackSkipReason(s, &lo)) break;
      }
      *whyNone = topology::LoopbackSkipReason(lo) + "; no other network interface";
    }
  }
  return Status::Ok();
}

Status Router::Start(std::vector<FabricRail> rails, const RouterOptions& options,
                     std::unique_ptr<Router>* out) {
  std::unique_ptr<Router> f(new Router());
  f->rails_ = std::move(rails);
  f->options_ = options;
  std::vector<topology::AgentRail> agentRails;
  for (const FabricRail& r : f->rails_) {
    agentRails.push_back({r.ifname, r.addr, r.speedMbps, r.mac, r.namedUplink});
  }
  RY_RETURN_IF_ERROR(topology::CablingAgent::Start(options.hostName, agentRails, options.agent,
                                                   &f->agent_, topology::LocalHostId()));
  *out = std::move(f);
  return Status::Ok();
}

int Router::SpeedMbps() const {
  int s = 0;
  for (const FabricRail& r : rails_) s += r.speedMbps;
  return s;
}

std::string Router::HostNameOfAddress(const in_addr& a) const {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  const topology::ClusterGraph g = agent_->Graph();
  for (const topology::RailLink& l : g.Links()) {
    for (const topology::RailEnd* e : {&l.a, &l.b}) {
      if (e->address == text) return g.HostName(e->host);
    }
  }
  return "";
}

Status MakeRelayPrefix(uint64_t destHost, uint16_t destPort, int sockIndex, int hops, const std::string& originName,
                       uint64_t originHost, const topology::ClusterKey* key, std::vector<uint8_t>* out) {
  RelayRecord rec{};
  rec.header = MakeHeader(RecordKind::kRelay);
  rec.destHost = destHost;
  rec.originHost = originHost;
  rec.destPort = destPort;
  rec.sockIndex = static_cast<uint16_t>(sockIndex);
  rec.hops = static_cast<uint8_t>(hops);
  std::snprintf(rec.originName, sizeof rec.originName, "%s", originName.c_str());
  topology::ClusterMac mac{};
  if (key != nullptr) {
    rec.flags = kRelayFlagMac;
    if (!key->Mac(kRelayMacPurpose, &rec, sizeof rec, &mac)) {
      return InternalError("relay record: computing its MAC failed (OpenSSL)");
    }
  }
  const auto* p = reinterpret_cast<const uint8_t*>(&rec);
  out->assign(p, p + sizeof rec);
  if (key != nullptr) out->insert(out->end(), mac.begin(), mac.end());
  return Status::Ok();
}

Status Router::PlanSocket(uint64_t destHost, uint16_t destPort, int sockIndex, int hops,
                          const std::string& originName, uint64_t originHost, SocketTarget* out,
                          bool* ready) const {
  *ready = false;
  const uint64_t self = agent_->HostId();
  if (destHost == self) {
    // Same host: loopback, no rail involved.
    out->remote = Ipv4("127.0.0.1", destPort);
    out->remoteLen = sizeof(sockaddr_in);
    out->local = sockaddr_storage{};
    out->localLen = 0;
    out->rail = "lo";
    *ready = true;
    return Status::Ok();
  }
  const topology::ClusterGraph g = agent_->Graph();
  const HopChoice hop = ChooseHop(g, self, destHost, sockIndex, hops);
  if (!hop.reachable) return Status::Ok();  // not (yet) reachable
  const topology::RailLink& l = hop.link;
  if (hop.direct) {
    out->remote = Ipv4(l.Other(self).address, destPort);
    out->remoteLen = sizeof(sockaddr_in);
    out->local = Ipv4(l.End(self).address, 0);
    out->localLen = sizeof(sockaddr_in);
    out->rail = l.End(self).ifname;
    *ready = true;
    return Status::Ok();
  }
  if (hops >= kMaxRelayHops) {
    return InvalidUsage("route to host " + g.HostName(destHost) + " needs more than " +
                        std::to_string(kMaxRelayHops) + " relays");
  }
  // Spread over every tied next hop (both ring directions), then over the rails of
  // the cable to that hop (socket_hops.h).
  const uint64_t next = hop.next;
  out->remote = Ipv4(l.Other(self).address, options_.relayPort);
  out->remoteLen = sizeof(sockaddr_in);
  out->local = Ipv4(l.End(self).address, 0);
  out->localLen = sizeof(sockaddr_in);
  out->rail = l.End(self).ifname + " via " + g.HostName(next) + " (" + l.Other(self).address + ":" +
              std::to_string(options_.relayPort) + ")";
  std::vector<uint8_t> prefix;
  RY_RETURN_IF_ERROR(
      MakeRelayPrefix(destHost, destPort, sockIndex, hops, originName, originHost, options_.clusterKey.get(), &prefix));
  out->prefix.assign(prefix.begin(), prefix.end());
  *ready = true;
  return Status::Ok();
}

Status Router::PlanConnection(uint64_t destHost, uint16_t destPort, int nsocks, uint32_t salt,
                              std::vector<SocketTarget>* out, bool* ready) const {
  out->assign(static_cast<size_t>(nsocks) + 1, SocketTarget{});
  *ready = agent_->Settled();
  if (!*ready) return Status::Ok();
  for (int i = 0; i <= nsocks; ++i) {
    // The control socket rides with data socket 0's choice shifted by the salt so
    // connections do not all put their control traffic on the same rail.
    const int index = static_cast<int>((static_cast<uint32_t>(i) + salt) % 65536u);
    bool ok = false;
    RY_RETURN_IF_ERROR(PlanSocket(destHost, destPort, index, 0, options_.hostName, HostId(),
                                  &(*out)[static_cast<size_t>(i)], &ok));
    if (!ok) {
      *ready = false;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
