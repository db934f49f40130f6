// Interface enumeration and socket-device selection; see netdev.h.
#include "topology/netdev.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>

#include "env/log.h"

namespace railyard::topology {
namespace {

constexpr unsigned long kNetdevLog = log::kNet | log::kInit;

bool SafeIfname(std::string_view ifname) {
  return !ifname.empty() && ifname != "." && ifname != ".." &&
         ifname.find('/') == std::string_view::npos && ifname.find('\0') == std::string_view::npos;
}

std::string NetPath(const std::string& sysfsRoot, std::string_view ifname, const char* leaf) {
  return sysfsRoot + "/class/net/" + std::string(ifname) + "/" + leaf;
}

int PrefixLength(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  int bits = 0;
  if (mask->sa_family == AF_INET) {
    const auto* m = reinterpret_cast<const sockaddr_in*>(mask);
    bits = std::popcount(static_cast<uint32_t>(m->sin_addr.s_addr));
  } else if (mask->sa_family == AF_INET6) {
    const auto* m = reinterpret_cast<const sockaddr_in6*>(mask);
    for (unsigned char byte : m->sin6_addr.s6_addr) bits += std::popcount(byte);
  }
  return bits;
}

// Preference rank of an address within its interface; lower is better.
int AddressRank(const NetDevice& d) {
  int rank = d.family() == AF_INET ? 0 : 2;
  return rank + (d.linkLocal ? 1 : 0);
}

bool IsIpv6Loopback(const NetDevice& d) {
  if (d.family() != AF_INET6) return false;
  const auto* sa = reinterpret_cast<const sockaddr_in6*>(&d.addr);
  return IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr);
}

std::string Describe(const NetDevice& d) {
  std::string s = d.name + " " + d.addrString + "/" + std::to_string(d.prefixLen);
  s += d.up ? " up" : " down";
  if (d.running) s += " running";
  if (d.loopback) s += " loopback";
  s += d.speedMbps ? " " + std::to_string(*d.speedMbps) + "Mbps" : " speed=unknown";
  if (!d.pciPath.empty()) s += " pci=" + d.pciPath;
  return s;
}

}  // namespace

std::string RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(realpath(path.c_str(), nullptr), &std::free);
  return resolved ? std::string(resolved.get()) : std::string();
}

std::optional<int> ReadSpeedMbps(std::string_view ifname, const std::string& sysfsRoot) {
  if (!SafeIfname(ifname)) return std::nullopt;
  std::ifstream in(NetPath(sysfsRoot, ifname, "speed"));
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);  // fails with EINVAL on real sysfs for down links
  if (in.bad() || text.empty()) return std::nullopt;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  long long value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  if (value <= 0 || value > INT_MAX) return std::nullopt;  // -1 = SPEED_UNKNOWN
  return static_cast<int>(value);
}

std::string ReadPciPath(std::string_view ifname, const std::string& sysfsRoot) {
  if (!SafeIfname(ifname)) return {};
  std::string resolved = RealPath(NetPath(sysfsRoot, ifname, "device"));
  if (resolved.empty()) return {};
  std::string root = RealPath(sysfsRoot);
  if (root.empty()) return {};
  std::string pciPrefix = (root == "/" ? std::string() : root) + "/devices/pci";
  if (!resolved.starts_with(pciPrefix)) return {};
  return resolved;
}

std::set<std::string> DefaultRouteInterfaces(const std::string& procNetRoute) {
  std::set<std::string> out;
  std::ifstream f(procNetRoute);
  std::string line;
  std::getline(f, line);  // header: Iface Destination Gateway Flags RefCnt Use Metric Mask ...
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string iface, dest, gateway, flags, refcnt, use, metric, mask;
    if (!(is >> iface >> dest)) continue;
    // A default route: destination 0 with mask 0 (the mask column is absent in old tables).
    if (dest == "00000000" && (!(is >> gateway >> flags >> refcnt >> use >> metric >> mask) ||
                               mask == "00000000")) {
      out.insert(iface);
    }
  }
  return out;
}

Status ListNetDevices(std::vector<NetDevice>* out, const std::string& sysfsRoot) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) {
    int err = errno;
    return SystemError(std::string("getifaddrs failed: ") + std::strerror(err));
  }
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, &freeifaddrs);

  // sysfs is read once per interface, not once per address.
  struct SysAttrs {
    std::optional<int> speed;
    std::string pci;
  };
  std::map<std::string, SysAttrs, std::less<>> sys;

  std::vector<NetDevice> devices;
  for (const ifaddrs* ifa = raw; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_name == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;

    NetDevice d;
    d.name = ifa->ifa_name;
    d.ifIndex = static_cast<int>(if_nametoindex(ifa->ifa_name));
    char text[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
      const auto* sa = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
      std::memcpy(&d.addr, sa, sizeof(*sa));
      reinterpret_cast<sockaddr_in*>(&d.addr)->sin_port = 0;
      inet_ntop(AF_INET, &sa->sin_addr, text, sizeof(text));
      d.linkLocal = (ntohl(sa->sin_addr.s_addr) & 0xffff0000u) == 0xa9fe0000u;  // 169.254/16
    } else {
      const auto* sa = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      std::memcpy(&d.addr, sa, sizeof(*sa));
      reinterpret_cast<sockaddr_in6*>(&d.addr)->sin6_port = 0;
      inet_ntop(AF_INET6, &sa->sin6_addr, text, sizeof(text));
      d.linkLocal = IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr);
    }
    d.addrString = text;
    d.prefixLen = PrefixLength(ifa->ifa_netmask);
    d.up = (ifa->ifa_flags & IFF_UP) != 0;
    d.running = (ifa->ifa_flags & IFF_RUNNING) != 0;
    d.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;

    auto it = sys.find(d.name);
    if (it == sys.end()) {
      it = sys.emplace(d.name, SysAttrs{ReadSpeedMbps(d.name, sysfsRoot), ReadPciPath(d.name, sysfsRoot)})
               .first;
    }
    d.speedMbps = it->second.speed;
    d.pciPath = it->second.pci;
    devices.push_back(std::move(d));
  }
  std::sort(devices.begin(), devices.end(), [](const NetDevice& a, const NetDevice& b) {
    return std::make_tuple(std::string_view(a.name), AddressRank(a), std::string_view(a.addrString)) <
           std::make_tuple(std::string_view(b.name), AddressRank(b), std::string_view(b.addrString));
  });
  *out = std::move(devices);
  return Status::Ok();
}

Status SelectSocketDevicesFrom(const InterfaceFilter& filter, std::span<const NetDevice> candidates,
                               std::vector<NetDevice>* out, std::string_view source) {
  // Group by interface name (std::map: deterministic, by name), best address first.
  std::map<std::string, std::vector<const NetDevice*>, std::less<>> byName;
  for (const NetDevice& d : candidates) byName[d.name].push_back(&d);
  for (auto& [name, addrs] : byName) {
    std::stable_sort(addrs.begin(), addrs.end(), [](const NetDevice* a, const NetDevice* b) {
      return AddressRank(*a) < AddressRank(*b);
    });
  }
  // The best usable address of an interface; `routableOnly` drops link-local ones.
  auto pick = [](const std::vector<const NetDevice*>& addrs, bool routableOnly) -> const NetDevice* {
    for (const NetDevice* d : addrs) {
      if (IsIpv6Loopback(*d)) continue;
      if (routableOnly && d->linkLocal) continue;
      return d;
    }
    return nullptr;
  };

  std::vector<NetDevice> chosen;
  if (!filter.automatic()) {
    // An exclusion list ("^mgmt0") takes loopback only when it leaves nothing else: an
    // NCCL device on lo cannot reach another host, and the peers' handles would name
    // 127.0.0.1 (new-user trial). NCCL itself keeps lo there; naming it ("lo") still works.
    const NetDevice* excludedLoopback = nullptr;
    for (const auto& [name, addrs] : byName) {
      if (!filter.Matches(name)) {
        RY_INFO(kNetdevLog, "socket device %s skipped: does not match '%s'", name.c_str(),
                filter.text().c_str());
        continue;
      }
      if (filter.list().exclude && addrs.front()->loopback) {
        excludedLoopback = pick(addrs, /*routableOnly=*/false);
        RY_INFO(kNetdevLog, "socket device %s skipped: loopback, taken by an exclusion list ('%s') only when "
                "nothing else is left (name it to use it)", name.c_str(), filter.text().c_str());
        continue;
      }
      const NetDevice* d = pick(addrs, /*routableOnly=*/false);
      if (d == nullptr) {
        RY_INFO(kNetdevLog, "socket device %s skipped: matches '%s' but has no usable address",
                name.c_str(), filter.text().c_str());
        continue;
      }
      RY_INFO(kNetdevLog, "socket device %zu: %s (matches '%s')%s", chosen.size(),
              Describe(*d).c_str(), filter.text().c_str(), d->up ? "" : "; interface is down");
      chosen.push_back(*d);
    }
    if (chosen.empty() && excludedLoopback != nullptr) {
      RY_INFO(kNetdevLog, "socket device 0: %s (the exclusion list '%s' leaves nothing else)",
              Describe(*excludedLoopback).c_str(), filter.text().c_str());
      chosen.push_back(*excludedLoopback);
    }
    if (chosen.empty()) {
      std::string present;
      for (const auto& [name, addrs] : byName) present += (present.empty() ? "" : ", ") + name;
      return InvalidUsage("socket interface list '" + filter.text() + "' (" + std::string(source) +
                          ") matches no interface "
                          "with an IP address; present: " +
                          (present.empty() ? std::string("none") : present));
    }
    *out = std::move(chosen);
    return Status::Ok();
  }

  for (const auto& [name, addrs] : byName) {
    const NetDevice& first = *addrs.front();
    const char* reason = nullptr;
    if (first.loopback) {
      reason = "loopback (used only when nothing else fits)";
    } else if (!first.up) {
      reason = "interface is down";
    } else if (name.starts_with("docker") || name.starts_with("virbr")) {
      reason = "docker*/virbr* bridges are not used automatically";
    }
    const NetDevice* d = reason == nullptr ? pick(addrs, /*routableOnly=*/true) : nullptr;
    if (reason == nullptr && d == nullptr) reason = "only link-local addresses";
    if (reason != nullptr) {
      RY_INFO(kNetdevLog, "socket device %s skipped: %s", name.c_str(), reason);
      continue;
    }
    RY_INFO(kNetdevLog, "socket device %zu: %s (automatic)", chosen.size(), Describe(*d).c_str());
    chosen.push_back(*d);
  }
  if (chosen.empty()) {
    for (const auto& [name, addrs] : byName) {
      if (!addrs.front()->loopback) continue;
      const NetDevice* d = pick(addrs, /*routableOnly=*/false);
      if (d == nullptr) continue;
      RY_INFO(kNetdevLog, "socket device %zu: %s (automatic fallback: no other interface fits)",
              chosen.size(), Describe(*d).c_str());
      chosen.push_back(*d);
    }
  }
  if (chosen.empty()) {
    return SystemError("no usable network interface for the socket transport: none is up with a "
                       "routable address and there is no loopback interface");
  }
  *out = std::move(chosen);
  return Status::Ok();
}

Status SelectSocketDevices(std::string_view filter, std::vector<NetDevice>* out,
                           const std::string& sysfsRoot, std::string_view source) {
  std::vector<NetDevice> all;
  RY_RETURN_IF_ERROR(ListNetDevices(&all, sysfsRoot));
  return SelectSocketDevicesFrom(InterfaceFilter::Parse(filter), all, out, source);
}

}  // namespace railyard::topology
