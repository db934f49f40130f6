#include "tools/railyardd/rail_watch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <bit>
#include <utility>

namespace railyard::tools {

RailWatch::RailWatch(std::string filter, std::string filterSource, int defaultSpeedMbps, std::string bootstrapFilter)
    : filter_(std::move(filter)),
      filterSource_(std::move(filterSource)),
      bootstrapFilter_(std::move(bootstrapFilter)),
      defaultSpeedMbps_(defaultSpeedMbps),
      fingerprint_(InterfaceFingerprint()) {}

std::vector<std::string> RailWatch::Describe(const std::vector<proxy::FabricRail>& rails) {
  std::vector<std::string> out;
  for (const proxy::FabricRail& r : rails) {
    char addr[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &r.addr, addr, sizeof addr);
    out.push_back(r.ifname + " " + addr + "/" + std::to_string(r.prefixLen) + " (index " +
                  std::to_string(::if_nametoindex(r.ifname.c_str())) + ")");
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string RailWatch::InterfaceFingerprint() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::vector<std::string> lines;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || a->ifa_name == nullptr) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    const auto* mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask);
    char addr[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
    const int prefix = mask != nullptr ? std::popcount(ntohl(mask->sin_addr.s_addr)) : 32;
    lines.push_back(std::string(a->ifa_name) + " " + addr + "/" + std::to_string(prefix) + " " +
                    std::to_string(::if_nametoindex(a->ifa_name)));
  }
  ::freeifaddrs(list);
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

bool RailWatch::Changed(std::string* what) {
  const std::string now = InterfaceFingerprint();
  if (now.empty() || now == fingerprint_) return false;
  std::vector<proxy::FabricRail> rails;
  if (!proxy::SelectFabricRails(filter_, defaultSpeedMbps_, &rails, nullptr, filterSource_, bootstrapFilter_).ok()) {
    return false;  // the fingerprint kept: looked at again next time
  }
  fingerprint_ = now;
  const std::vector<std::string> fresh = Describe(rails);
  const bool gained = std::any_of(fresh.begin(), fresh.end(), [&](const std::string& r) {
    return std::find(running_.begin(), running_.end(), r) == running_.end();
  });
  if (!gained) return false;  // the same rails, or fewer: nothing to restart for
  std::string gone, added;
  for (const std::string& r : running_) {
    if (std::find(fresh.begin(), fresh.end(), r) == fresh.end()) gone += (gone.empty() ? "" : ", ") + r;
  }
  for (const std::string& r : fresh) {
    if (std::find(running_.begin(), running_.end(), r) == running_.end()) added += (added.empty() ? "" : ", ") + r;
  }
  // The whole new set too (new-user trial: "now: " listed only the added rails).
  std::string all;
  for (const std::string& r : fresh) all += (all.empty() ? "" : ", ") + r;
  *what = (gone.empty() ? "" : "no longer: " + gone + "; ") + "new: " + added + "; the rails now: " + all;
  return true;
}

}  // namespace railyard::tools
