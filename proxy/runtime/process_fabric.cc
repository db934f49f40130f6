#include "proxy/runtime/process_fabric.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "env/log.h"
#include "proxy/runtime/fabric_runtime.h"
#include "topology/netdev.h"

namespace railyard::runtime {
namespace {

/// One own Domain and the lessees sharing it.
struct OwnDomain {
  std::string ifname;
  bool loopbackWhenUnset = false;
  size_t maxRails = 0;
  uint64_t refs = 0;
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
};

struct ProcessFabricState {
  std::mutex mu;
  std::list<OwnDomain> own;  // list: leases point at elements that stay put
  uint64_t nextId = 1;
  uint64_t ncclLeases = 0;
  uint64_t ownCreated = 0;
  /// Live leases: id -> own Domain (NULL for an NCCL device's).
  std::vector<std::pair<uint64_t, OwnDomain*>> live;
};

ProcessFabricState& ProcessFabricS() {
  static ProcessFabricState* s = new ProcessFabricState;  // never destroyed: tier handles may outlive static teardown
  return *s;
}

bool ParseIpv4(const std::string& text, uint32_t* hostOrder) {
  in_addr a{};
  if (text.empty() || ::inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  *hostOrder = ntohl(a.s_addr);
  return true;
}

/// (address, prefix length) of every local IPv4 interface; empty when they cannot be listed.
std::vector<std::pair<std::string, int>> LocalInterfaces() {
  std::vector<topology::NetDevice> devs;
  std::vector<std::pair<std::string, int>> out;
  if (!topology::ListNetDevices(&devs).ok()) return out;
  for (const topology::NetDevice& d : devs) {
    if (d.family() == AF_INET) out.emplace_back(d.addrString, d.prefixLen);
  }
  return out;
}

}  // namespace

std::string RoutedInterface(const std::string& peerHost) {
  if (peerHost.empty()) return "";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(peerHost.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "";
  sockaddr_in peer{};
  std::memcpy(&peer, res->ai_addr, sizeof peer);
  ::freeaddrinfo(res);
  if ((ntohl(peer.sin_addr.s_addr) >> 24) == 127) return "";  // this host: loopback is right
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  // A datagram socket's connect sends nothing: it asks the kernel for the route and
  // the source address it would use.
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool routed = ::connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) == 0 &&
                      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  ::close(fd);
  if (!routed) return "";
  char text[INET_ADDRSTRLEN] = "";
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  std::vector<topology::NetDevice> devs;
  if (!topology::ListNetDevices(&devs).ok()) return "";
  for (const topology::NetDevice& d : devs) {
    if (d.family() == AF_INET && d.addrString == text && !d.loopback) return d.name;
  }
  return "";
}

size_t DeviceReaching(const std::vector<std::vector<fabric::RailInfo>>& deviceRails, const std::string& peerHost,
                      const std::vector<std::pair<std::string, int>>& interfaces) {
  uint32_t peer = 0;
  if (!ParseIpv4(peerHost, &peer)) return 0;
  for (size_t d = 0; d < deviceRails.size(); ++d) {
    for (const fabric::RailInfo& r : deviceRails[d]) {
      if (r.address == peerHost) return d;
    }
  }
  for (size_t d = 0; d < deviceRails.size(); ++d) {
    for (const fabric::RailInfo& r : deviceRails[d]) {
      uint32_t local = 0;
      if (!ParseIpv4(r.address, &local)) continue;
      for (const auto& [address, prefix] : interfaces) {
        if (address != r.address || prefix <= 0 || prefix > 32) continue;
        const uint32_t mask = prefix == 32 ? ~0u : ~((1u << (32 - prefix)) - 1);
        if ((local & mask) == (peer & mask)) return d;
      }
    }
  }
  return 0;
}

Status AcquireProcessFabric(const env::Config& config, const LeaseOptions& options, FabricLease* out) {
  ProcessDomainOptions o = options.domain;
  if (o.ifname.empty() && o.loopbackWhenUnset) {
    // A tier client with no RAILYARD_SOCKET_IFNAME: its rail is loopback, which reaches
    // only this host. A peer elsewhere is reached from the interface the kernel routes it
    // through (new-user trial: the expert tier's default read transport failed across
    // hosts, "connect on rail 0 (lo 127.0.0.1) ...: Invalid argument").
    if (const std::string dev = RoutedInterface(options.peerHost); !dev.empty()) {
      o.ifname = "=" + dev;
      RY_INFO(log::kNet | log::kInit, "%s: RAILYARD_SOCKET_IFNAME is unset and peer %s is routed through %s: a rail there",
              o.who.c_str(), options.peerHost.c_str(), dev.c_str());
    }
  }
  if (o.maxRails < 1 || o.maxRails > fabric::RemoteKey::kMaxRails) {
    return InvalidArgument("maxRails " + std::to_string(o.maxRails) + " is outside 1.." +
                           std::to_string(fabric::RemoteKey::kMaxRails));
  }
  ProcessFabricState& s = ProcessFabricS();
  std::lock_guard lock(s.mu);
  FabricRuntime* rt = Fabric();
  if (rt != nullptr && options.everyRank && rt->devices() > 1) {
    RY_INFO(log::kNet | log::kInit, "%s: NCCL's %zu devices each hold part of the rails: a Domain of its own",
            o.who.c_str(), rt->devices());
    rt = nullptr;
  }
  if (rt != nullptr && rt->devices() > 0) {
    // NCCL's devices, those whose rails the lessee can take.
    std::vector<size_t> index;
    std::vector<std::vector<fabric::RailInfo>> rails;
    for (size_t d = 0; d < rt->devices(); ++d) {
      if (rt->domain(d).rails().size() > o.maxRails) continue;
      index.push_back(d);
      rails.push_back(rt->domain(d).rails());
    }
    if (!index.empty()) {
      const size_t pick = index[DeviceReaching(rails, options.peerHost,
                                               options.peerHost.empty() ? decltype(LocalInterfaces()){} : LocalInterfaces())];
      // What regMr asks for host memory (proxy/runtime/net_registrations.cc FabricAccessOf): a region a tier
      // registers first then serves NCCL's regMr too (RegistrationCache::SetAccessFloor).
      rt->registrations(pick).SetAccessFloor(fabric::kAccessLocal | fabric::kAccessRemoteWrite);
      *out = FabricLease{&rt->domain(pick), &rt->registrations(pick), static_cast<int>(pick), s.nextId++};
      s.live.emplace_back(out->id, nullptr);
      ++s.ncclLeases;
      RY_INFO(log::kNet | log::kInit, "%s: shares NCCL device %zu's fabric (%s, %zu rail(s))", o.who.c_str(), pick,
              out->domain->TransportName(), out->domain->rails().size());
      return Status::Ok();
    }
    RY_INFO(log::kNet | log::kInit, "%s: every NCCL device has more than %zu rails: a Domain of its own", o.who.c_str(),
            o.maxRails);
  }
  OwnDomain* own = nullptr;
  for (OwnDomain& d : s.own) {
    if (d.ifname == o.ifname && d.loopbackWhenUnset == o.loopbackWhenUnset && d.maxRails == o.maxRails) own = &d;
  }
  if (own == nullptr) {
    OwnDomain d;
    d.ifname = o.ifname;
    d.loopbackWhenUnset = o.loopbackWhenUnset;
    d.maxRails = o.maxRails;
    RY_RETURN_IF_ERROR(CreateProcessDomain(config, o, &d.domain));
    d.cache = std::make_unique<fabric::RegistrationCache>(*d.domain);
    s.own.push_back(std::move(d));
    own = &s.own.back();
    ++s.ownCreated;
  }
  ++own->refs;
  *out = FabricLease{own->domain.get(), own->cache.get(), -1, s.nextId++};
  s.live.emplace_back(out->id, own);
  return Status::Ok();
}

void ReleaseProcessFabric(FabricLease* lease) {
  if (lease == nullptr || lease->id == 0) return;
  ProcessFabricState& s = ProcessFabricS();
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Domain> domain;
  {
    std::lock_guard lock(s.mu);
    for (auto it = s.live.begin(); it != s.live.end(); ++it) {
      if (it->first != lease->id) continue;
      OwnDomain* own = it->second;
      s.live.erase(it);
      if (own == nullptr) {
        --s.ncclLeases;
      } else if (--own->refs == 0) {
        cache = std::move(own->cache);
        domain = std::move(own->domain);
        s.own.remove_if([own](const OwnDomain& d) { return &d == own; });
      }
      break;
    }
  }
  *lease = FabricLease{};
  cache.reset();  // deregisters what a lessee left, before its Domain goes
  domain.reset();
}

ProcessFabricStats GetProcessFabricStats() {
  ProcessFabricState& s = ProcessFabricS();
  std::lock_guard lock(s.mu);
  ProcessFabricStats st;
  st.ncclLeases = s.ncclLeases;
  for (const OwnDomain& d : s.own) st.ownLeases += d.refs;
  st.ownDomains = s.own.size();
  st.ownCreated = s.ownCreated;
  return st;
}

}  // namespace railyard::runtime
