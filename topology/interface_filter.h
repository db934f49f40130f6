// NCCL's device-list grammar (NCCL_SOCKET_IFNAME; NCCL_IB_HCA shares the parser).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace railyard::topology {

/// One entry of an NCCL device list: a name (a prefix, or an exact name when the
/// list is exact) and a port, -1 meaning "any port".
struct DeviceListEntry {
  std::string name;
  int port = -1;
};

/// A parsed NCCL device list (NCCL 2.28.9 src/misc/utils.cc parseStringList and
/// matchIfList, plus the "^" / "=" header handled by its callers).
struct DeviceList {
  bool exclude = false;  ///< leading '^': the list names what NOT to use
  bool exact = false;    ///< '=' at the start or right after '^': names are exact, not prefixes
  std::vector<DeviceListEntry> entries;
};

/// NCCL's limit on NCCL_SOCKET_IFNAME entries (MAX_IFS in socket.cc); later entries are dropped.
inline constexpr std::size_t kNcclMaxSocketIfs = 16;
/// NCCL's limit on NCCL_IB_HCA entries (MAX_IB_DEVS in net_ib.cc).
inline constexpr std::size_t kNcclMaxIbDevs = 32;

/// Parses `text` the way NCCL 2.28.9 does, for any of its device lists:
///  - an optional leading '^' sets `exclude`, then an optional '=' sets `exact`
///    (so "^=a" is both; "=^a" is an exact list whose first name is "^a");
///  - the rest is split on ','; empty entries are skipped;
///  - a ':' ends the name; the port is atoi() of what follows (so "mlx5_0:" and
///    "mlx5_0:x" give port 0, as in NCCL), and anything up to the next ',' is
///    ignored (the 2.30 "rail:plane" fields are not understood by 2.28.9 either);
///    an entry with an empty name before ':' is skipped;
///  - nothing is trimmed: " eth0" is the prefix " eth0" (it matches no interface);
///  - at most `maxEntries` entries are kept; the rest are dropped, as NCCL does
///    (logged at WARN).
/// Never fails: NCCL has no syntax errors in this grammar.
DeviceList ParseDeviceList(std::string_view text, std::size_t maxEntries);

/// NCCL's matchIfList(name, port, ...) XOR exclude:
///  - prefix mode: `name` starts with an entry's name (so "eth1" matches "eth11");
///  - exact mode: `name` equals an entry's name;
///  - ports: -1 on either side matches any port, otherwise they must be equal;
///  - an empty list matches every name, so an empty exclude list ("^", "^=") matches none.
bool MatchDeviceList(const DeviceList& list, std::string_view name, int port);

/// An NCCL_SOCKET_IFNAME (or RAILYARD_SOCKET_IFNAME) value, parsed.
///
/// NCCL 2.28.9 (src/misc/socket.cc ncclFindInterfaces) uses the value only when it
/// is longer than one character; an empty or one-character value ("^", "=", "e")
/// means automatic selection. Ports play no part in socket matching: NCCL passes
/// port -1, so "eth0:1" behaves exactly like "eth0".
class InterfaceFilter {
 public:
  /// An automatic filter (no user list).
  InterfaceFilter() = default;

  /// Parses `value`; see ParseDeviceList (limit kNcclMaxSocketIfs). Never fails.
  /// Entries that contain whitespace are kept verbatim (as NCCL does) but logged at WARN.
  static InterfaceFilter Parse(std::string_view value);

  /// True when the value was empty or one character long: the caller should use
  /// its automatic choice (SelectSocketDevices does). Matches() is then true for all.
  bool automatic() const { return automatic_; }

  /// True when interface `ifname` passes the filter (see MatchDeviceList, port -1).
  bool Matches(std::string_view ifname) const;

  /// True when the filter names `ifname` explicitly and exactly: an exact, non-exclusive
  /// list ("=eth0", "=p0,eth0") with an entry equal to `ifname`. Prefixes ("eth"),
  /// exclusions ("^docker") and automatic values never do. Fabric mode takes a port that
  /// carries a default route as a rail only then (DiscoveryOptions::skipDefaultRoute).
  bool NamesExactly(std::string_view ifname) const;

  /// The parsed list (empty and non-exclusive when automatic()).
  const DeviceList& list() const { return list_; }

  /// The value as given to Parse().
  const std::string& text() const { return text_; }

 private:
  bool automatic_ = true;
  DeviceList list_;
  std::string text_;
};

}  // namespace railyard::topology
