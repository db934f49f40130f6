// IP network interfaces (getifaddrs + sysfs) and the TCP transport's device choice.
#pragma once

#include <sys/socket.h>

#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "env/status.h"
#include "topology/interface_filter.h"

namespace railyard::topology {

/// One IPv4 or IPv6 address of one network interface, with the interface's flags
/// and sysfs attributes. ListNetDevices returns one per address; the Select*
/// functions return one per interface (its preferred address).
struct NetDevice {
  std::string name;            ///< interface name, e.g. "eth0"
  int ifIndex = 0;             ///< if_nametoindex(name); 0 if unknown
  sockaddr_storage addr{};     ///< AF_INET or AF_INET6, port 0; IPv6 keeps sin6_scope_id
  std::string addrString;      ///< numeric form without port or brackets, e.g. "192.0.2.2", "fe80::1"
  int prefixLen = 0;           ///< bits set in the netmask (0 if none was reported)
  bool up = false;             ///< IFF_UP
  bool running = false;        ///< IFF_RUNNING (carrier present)
  bool loopback = false;       ///< IFF_LOOPBACK
  bool linkLocal = false;      ///< IPv4 169.254.0.0/16 or IPv6 fe80::/10
  /// /sys/class/net/<name>/speed in Mbps; nullopt when missing, unreadable,
  /// not a number, or <= 0 (the kernel reports -1 for unknown). NCCL 2.28.9
  /// net_socket then reports 10000 Mb/s; callers use env::Config::defaultSpeedMbps.
  std::optional<int> speedMbps;
  /// realpath of /sys/class/net/<name>/device when it lies under <sysfs>/devices/pci*,
  /// else empty (virtual interfaces, loopback, or a non-PCI bus).
  std::string pciPath;

  int family() const { return addr.ss_family; }
  /// speedMbps, or `fallbackMbps` when unknown.
  int SpeedOr(int fallbackMbps) const { return speedMbps.value_or(fallbackMbps); }
};

/// Reads <sysfsRoot>/class/net/<ifname>/speed. Returns the value in Mbps when it
/// is an integer > 0 (at most INT_MAX); nullopt otherwise (no file, EINVAL as the
/// kernel gives for a link that is down, "-1", garbage, 0). `ifname` containing
/// '/' or equal to "." / ".." yields nullopt.
std::optional<int> ReadSpeedMbps(std::string_view ifname, const std::string& sysfsRoot = "/sys");

/// realpath(3) of `path`: the absolute path with every link resolved; "" when it
/// does not resolve (missing, dangling link, no permission).
std::string RealPath(const std::string& path);

/// realpath(<sysfsRoot>/class/net/<ifname>/device) if it resolves to a path under
/// realpath(<sysfsRoot>)/devices/pci*, else "" (missing or dangling link, virtual
/// device, platform bus). Same `ifname` restrictions as ReadSpeedMbps.
std::string ReadPciPath(std::string_view ifname, const std::string& sysfsRoot = "/sys");

/// The interfaces that carry an IPv4 default route (destination 0.0.0.0/0), read from
/// `procNetRoute` (the kernel's /proc/net/route table: a header line, then one route a line,
/// "Iface Destination Gateway ..." with the destination in hex). A default-route port is the
/// uplink or management port, never a cable of the fabric (see DiscoveryOptions::skipDefaultRoute).
/// A missing or unreadable file gives an empty set (no routes known); malformed lines are skipped.
std::set<std::string> DefaultRouteInterfaces(const std::string& procNetRoute = "/proc/net/route");

/// Every IPv4/IPv6 address of every interface (getifaddrs), with sysfs attributes
/// read under `sysfsRoot`. Sorted by name, then IPv4 before IPv6, then routable
/// before link-local, then address text. Errors: SystemError if getifaddrs fails.
Status ListNetDevices(std::vector<NetDevice>* out, const std::string& sysfsRoot = "/sys");

/// The TCP transport's device choice from a given candidate list (pure; no system
/// calls). One device per interface, sorted by name. Preferred address per
/// interface: IPv4 routable, IPv4 link-local, IPv6 routable, IPv6 link-local;
/// the IPv6 loopback address ::1 is never used (NCCL skips it too).
///  - filter not automatic: every interface the filter matches, whatever its flags
///    (loopback included when matched; a down interface is kept but logged), as
///    NCCL's findInterfaces does, except that an exclusion list ("^mgmt0") takes
///    loopback only when it leaves nothing else (NCCL keeps it: a device on lo
///    cannot reach another host). Errors: InvalidUsage naming the filter and
///    listing the interfaces present when nothing matches.
///  - automatic (empty or 1-character value): every interface that is up, not
///    loopback, not docker* / virbr*, and has a routable (non-link-local) address;
///    if there is none, the loopback interface(s) (normally "lo").
///    Errors: SystemError when not even a loopback interface exists.
///    (NCCL's own auto order prefers ib* interfaces first and takes docker/lo/virbr
///    later; Railyard uses all fitting interfaces as separate devices instead.)
/// Each choice and each skip is logged at INFO (NET|INIT) with the reason.
/// `source` names where the filter came from in the error when nothing matches
/// (railyardd says "--ifname").
Status SelectSocketDevicesFrom(const InterfaceFilter& filter, std::span<const NetDevice> candidates,
                               std::vector<NetDevice>* out,
                               std::string_view source = "RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME");

/// ListNetDevices(sysfsRoot) then SelectSocketDevicesFrom(InterfaceFilter::Parse(filter)).
/// `filter` is the RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME value
/// (env::Config::socketIfname); "" = automatic. Errors as the two functions above.
Status SelectSocketDevices(std::string_view filter, std::vector<NetDevice>* out,
                           const std::string& sysfsRoot = "/sys",
                           std::string_view source = "RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME");

}  // namespace railyard::topology
