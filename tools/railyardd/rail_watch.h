// railyardd's watch over its rails: the cabling agent binds one socket per rail at start,
// so a rail whose address comes later (a boot where the cables' addresses are configured
// after the daemon starts), is re-addressed, or whose netdev is deleted and created again
// is never taken (new-user trial: the cable stayed out of the graph until a manual
// restart, and a re-addressed rail blamed its neighbour for "misaddressed" hellos). The
// daemon polls this and, on a change, drains and restarts itself on the new rails.
#pragma once

#include <string>
#include <vector>

#include "proxy/routing/router.h"

namespace railyard::tools {

/// The rails railyardd runs on, and what the host's interfaces say they are now.
/// Not thread-safe; one owner (railyardd's serve loop).
class RailWatch {
 public:
  /// Takes the interfaces' fingerprint now: built before the daemon selects its rails,
  /// so an address that comes while the daemon starts (a swap file's rebuild can take
  /// minutes) is a change. `filter` (RAILYARD_SOCKET_IFNAME or --ifname; `filterSource`
  /// names which), `defaultSpeedMbps` and `bootstrapFilter` are SelectFabricRails'
  /// arguments, the same it is called with again on a change.
  RailWatch(std::string filter, std::string filterSource, int defaultSpeedMbps, std::string bootstrapFilter);

  /// The rails the daemon runs on (what SelectFabricRails returned at start).
  void Running(const std::vector<proxy::FabricRail>& rails) { running_ = Describe(rails); }

  /// Cheap when nothing changed: one getifaddrs. When an interface's IPv4 address,
  /// prefix or index changed since the last look, selects the rails again; true when a
  /// rail was gained or changed (re-addressed, or its netdev recreated) against the
  /// running ones, with `*what` saying how ("new: trvp1 10.77.3.2/30 (index 7); the rails
  /// now: trvp0 ..., trvp1 ...", after "no longer: ...; " for rails replaced). Rails
  /// only lost are no change (an address flushed and added again, a netdev between its
  /// deletion and creation: their return is). A selection that fails is looked at
  /// again at the next call.
  bool Changed(std::string* what);

  /// One line per rail, "ifname addr/prefix (index N)", sorted: what Changed compares.
  static std::vector<std::string> Describe(const std::vector<proxy::FabricRail>& rails);

 private:
  /// Every IPv4 address of every interface with its prefix and interface index, sorted.
  static std::string InterfaceFingerprint();

  std::vector<std::string> running_;
  std::string filter_, filterSource_, bootstrapFilter_;
  int defaultSpeedMbps_ = 0;
  std::string fingerprint_;
};

}  // namespace railyard::tools
