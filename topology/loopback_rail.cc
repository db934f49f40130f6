#include "topology/loopback_rail.h"

namespace railyard::topology {

bool IsLoopbackInterface(const std::string& ifname, bool iffLoopback) { return iffLoopback || ifname == "lo"; }

const std::string& LoopbackRailRule() {
  static const std::string rule =
      "loopback, never a fabric rail (its packets never leave this host), whatever RAILYARD_SOCKET_IFNAME (or railyardd --ifname) names; "
      "the tiers' TCP rail (127.0.0.1) while neither RAILYARD_SOCKET_IFNAME nor railyardd --ifname is set";
  return rule;
}

std::string LoopbackSkipReason(const std::string& ifname) { return ifname + ": " + LoopbackRailRule(); }

bool IsLoopbackSkipReason(const std::string& skipReason, std::string* ifname) {
  const std::string tail = ": " + LoopbackRailRule();
  if (skipReason.size() <= tail.size() ||
      skipReason.compare(skipReason.size() - tail.size(), tail.size(), tail) != 0) {
    return false;
  }
  if (ifname != nullptr) *ifname = skipReason.substr(0, skipReason.size() - tail.size());
  return true;
}

std::string FabricRailRequirement(const std::string& filterSource) {
  return "an IPv4 interface, not loopback (never a fabric rail), without a default route unless " + filterSource +
         " names it exactly (=NAME); " + filterSource + " chooses";
}

std::string FabricOnWithoutRailText(const std::string& filterSource, const std::string& whyNone) {
  return "RAILYARD_FABRIC=on but no interface qualifies as a rail (" + FabricRailRequirement(filterSource) +
         "): " + (whyNone.empty() ? std::string("none found") : whyNone);
}

}  // namespace railyard::topology
