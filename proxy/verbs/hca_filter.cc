// RAILYARD_HCA matching and verbs device selection; see hca_filter.h.
#include "proxy/verbs/hca_filter.h"

#include <cctype>
#include <string>

#include "env/log.h"

namespace railyard::proxy::verbs {
namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

void SkipHca(const topology::Rail& rail, const std::string& reason,
          std::vector<std::string>* skipped) {
  std::string line = rail.rdmaDevice + ":" + std::to_string(rail.rdmaPort) + " (" + rail.netdev +
                     "): " + reason;
  RY_INFO(log::kNet | log::kInit, "NET/Railyard/verbs: skipping %s", line.c_str());
  if (skipped != nullptr) skipped->push_back(std::move(line));
}

}  // namespace

bool HcaPrefixMatches(std::string_view entry, std::string_view device) {
  if (!device.starts_with(entry)) return false;
  if (entry.empty() || device.size() == entry.size()) return true;
  // "mlx5_1" must not select "mlx5_11": a trailing number in the entry is whole.
  return !(IsDigit(entry.back()) && IsDigit(device[entry.size()]));
}

HcaFilter HcaFilter::Parse(std::string_view value) {
  HcaFilter filter;
  filter.text_ = std::string(value);
  if (value.empty()) return filter;
  filter.selectAll_ = false;
  filter.list_ = topology::ParseDeviceList(value, topology::kNcclMaxIbDevs);
  for (const topology::DeviceListEntry& entry : filter.list_.entries) {
    for (char c : entry.name) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        RY_WARN("RAILYARD_HCA='%s': entry '%s' contains whitespace, which NCCL does not trim; "
                "it will match no device",
                filter.text_.c_str(), entry.name.c_str());
        break;
      }
    }
  }
  return filter;
}

bool HcaFilter::Matches(std::string_view device, int port) const {
  if (selectAll_) return true;
  // topology::MatchDeviceList, with HcaPrefixMatches in place of starts_with.
  bool matched = list_.entries.empty();  // NCCL: an empty list matches everything
  for (const topology::DeviceListEntry& entry : list_.entries) {
    if (matched) break;
    const bool nameOk = list_.exact ? device == entry.name : HcaPrefixMatches(entry.name, device);
    const bool portOk = port == -1 || entry.port == -1 || port == entry.port;
    matched = nameOk && portOk;
  }
  return matched != list_.exclude;
}

std::vector<VerbsDevice> SelectVerbsDevices(const std::vector<topology::Rail>& rails,
                                            const HcaFilter& filter, const GidPolicy& policy,
                                            std::vector<std::string>* skipped) {
  std::vector<VerbsDevice> out;
  for (const topology::Rail& rail : rails) {
    if (rail.rdmaDevice.empty()) continue;
    if (!filter.Matches(rail.rdmaDevice, rail.rdmaPort)) {
      SkipHca(rail, "filtered out by RAILYARD_HCA='" + filter.text() + "'", skipped);
      continue;
    }
    if (rail.rdmaPortState != "ACTIVE") {
      SkipHca(rail,
           "port down (state " + (rail.rdmaPortState.empty() ? std::string("unknown")
                                                             : rail.rdmaPortState) +
               ")",
           skipped);
      continue;
    }
    if (rail.linkLayer != "Ethernet") {
      SkipHca(rail,
           "link layer " + (rail.linkLayer.empty() ? std::string("unknown") : rail.linkLayer) +
               ": only RoCE (Ethernet) is supported",
           skipped);
      continue;
    }
    GidChoice gid = ChooseGid(rail.gids, policy, nullptr);
    if (!gid.ok()) {
      SkipHca(rail, gid.error, skipped);
      continue;
    }
    if (out.size() == topology::kNcclMaxIbDevs) {
      SkipHca(rail, "more than " + std::to_string(topology::kNcclMaxIbDevs) +
                     " devices (NCCL's MAX_IB_DEVS)",
           skipped);
      continue;
    }
    RY_INFO(log::kNet | log::kInit, "NET/Railyard/verbs: using %s:%d (%s), %s",
            rail.rdmaDevice.c_str(), rail.rdmaPort, rail.netdev.c_str(), gid.reason.c_str());
    if (!gid.warning.empty()) RY_WARN("%s:%d: %s", rail.rdmaDevice.c_str(), rail.rdmaPort, gid.warning.c_str());
    out.push_back({rail.rdmaDevice, rail.rdmaPort, rail.netdev, std::move(gid), &rail});
  }
  return out;
}

}  // namespace railyard::proxy::verbs
