// NCCL's device-list grammar; see interface_filter.h.
#include "topology/interface_filter.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "env/log.h"

namespace railyard::topology {
namespace {

// atoi() semantics on a string_view (leading spaces, sign, digits; 0 if none).
int AtoiPrefix(std::string_view s) {
  std::string copy(s);  // atoi needs a terminator
  return std::atoi(copy.c_str());
}

}  // namespace

DeviceList ParseDeviceList(std::string_view text, std::size_t maxEntries) {
  DeviceList list;
  if (!text.empty() && text.front() == '^') {
    list.exclude = true;
    text.remove_prefix(1);
  }
  if (!text.empty() && text.front() == '=') {
    list.exact = true;
    text.remove_prefix(1);
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    DeviceListEntry entry;
    std::size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      // NCCL: ':' ends the name; the port is atoi() of the rest; a nameless entry is dropped.
      std::string_view rest = item.substr(colon + 1);
      item = item.substr(0, colon);
      entry.port = AtoiPrefix(rest);
    }
    if (item.empty()) continue;
    if (list.entries.size() == maxEntries) {
      RY_WARN("device list '%.*s' has more than %zu entries; '%.*s' and later ones are ignored "
              "(as NCCL does)",
              static_cast<int>(text.size()), text.data(), maxEntries,
              static_cast<int>(item.size()), item.data());
      break;
    }
    entry.name = std::string(item);
    list.entries.push_back(std::move(entry));
  }
  return list;
}

bool MatchDeviceList(const DeviceList& list, std::string_view name, int port) {
  bool matched = list.entries.empty();  // NCCL: no user list matches everything
  for (const DeviceListEntry& entry : list.entries) {
    if (matched) break;
    bool nameOk = list.exact ? name == entry.name : name.starts_with(entry.name);
    bool portOk = port == -1 || entry.port == -1 || port == entry.port;
    matched = nameOk && portOk;
  }
  return matched != list.exclude;
}

InterfaceFilter InterfaceFilter::Parse(std::string_view value) {
  InterfaceFilter filter;
  filter.text_ = std::string(value);
  // NCCL 2.28.9 ncclFindInterfaces: `if (env && strlen(env) > 1)`.
  if (value.size() <= 1) return filter;
  filter.automatic_ = false;
  filter.list_ = ParseDeviceList(value, kNcclMaxSocketIfs);
  for (const DeviceListEntry& entry : filter.list_.entries) {
    for (char c : entry.name) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        RY_WARN("socket interface list '%s': entry '%s' contains whitespace, which NCCL does "
                "not trim; it is kept verbatim and will likely match nothing",
                filter.text_.c_str(), entry.name.c_str());
        break;
      }
    }
  }
  return filter;
}

bool InterfaceFilter::Matches(std::string_view ifname) const {
  if (automatic_) return true;
  return MatchDeviceList(list_, ifname, -1);
}

bool InterfaceFilter::NamesExactly(std::string_view ifname) const {
  if (automatic_ || !list_.exact || list_.exclude) return false;
  for (const DeviceListEntry& entry : list_.entries) {
    if (entry.name == ifname) return true;
  }
  return false;
}

}  // namespace railyard::topology
