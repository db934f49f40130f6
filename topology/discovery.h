// Rail discovery: netdevs (sysfs + getifaddrs), RDMA devices (sysfs, ibverbs),
// PCI locality (hwloc) and the skip rules that decide what is a rail.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "env/status.h"
#include "topology/netdev.h"
#include "topology/rail.h"

namespace railyard::topology {

/// Inputs of DiscoverRails. Defaults describe the live machine.
struct DiscoveryOptions {
  /// Root of the sysfs tree every attribute is read from ("/sys" on a live machine;
  /// a fixture directory in tests). See Documentation/ABI/testing/sysfs-class-net,
  /// Documentation/ABI/stable/sysfs-class-infiniband, Documentation/ABI/testing/sysfs-bus-pci.
  std::string sysfsRoot = "/sys";
  /// Addresses and flags of the interfaces, as ListNetDevices returns them (one entry
  /// per address). nullopt: call ListNetDevices(sysfsRoot) (getifaddrs on the live
  /// machine). Tests inject these so fixtures do not depend on the machine.
  /// Interfaces present in sysfs but not here have no address; their up/running flags
  /// then come from <sysfs>/class/net/<ifname>/flags.
  std::optional<std::vector<NetDevice>> interfaces;
  /// An hwloc 2.x XML topology file to use instead of the live topology
  /// (hwloc_topology_set_xml). Empty: the live topology, but only when sysfsRoot
  /// resolves to "/sys" (a fixture sysfs is never mixed with the live machine's hwloc).
  std::string hwlocXml;
  /// Do not use hwloc at all (NUMA then comes from sysfs numa_node; no nearest GPU).
  bool disableHwloc = false;
  /// RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME grammar (see InterfaceFilter);
  /// "" = every interface. Interfaces it rejects are skipped. Loopback interfaces are
  /// rails only when a non-exclusive list matches them explicitly.
  std::string ifnameFilter;
  /// Where ifnameFilter came from, for the skip reasons ("RAILYARD_SOCKET_IFNAME",
  /// "--ifname", ...): "filtered out by RAILYARD_SOCKET_IFNAME='mgmt0'".
  std::string ifnameFilterSource = "RAILYARD_SOCKET_IFNAME";
  /// Fabric mode's rule: an interface that carries an IPv4 default route is the uplink or
  /// management port, not a cable, so it is skipped, whatever ifnameFilter says, unless
  /// ifnameFilter names it explicitly and exactly (InterfaceFilter::NamesExactly, e.g.
  /// "=eth0"); such a rail is kept with Rail::carriesDefaultRoute set and a WARN.
  /// Off by default: the verbs transport outside fabric mode may use such a port.
  bool skipDefaultRoute = false;
  /// The interfaces that carry a default route, for skipDefaultRoute. nullopt: read
  /// /proc/net/route (DefaultRouteInterfaces) when sysfsRoot is the live /sys; a fixture
  /// has none. Tests inject a set.
  std::optional<std::set<std::string>> defaultRouteInterfaces;
  bool includeDown = false;       ///< keep rails whose interface or RDMA port is down
  bool includeNoAddress = false;  ///< keep rails with no IP address at all
  bool includeLinkLocal = false;  ///< keep rails whose only addresses are link-local
  /// Cross-check the sysfs RDMA devices with ibv_get_device_list() (only done when
  /// sysfsRoot resolves to "/sys"; zero devices is normal on hosts without RDMA).
  bool crossCheckIbverbs = true;
  /// Log each rail found ("rail N: ...") and each candidate skipped, at INFO. Off for a
  /// caller that looks up ports with another filter than the rails' (the verbs
  /// transport lists every RDMA port, unfiltered): its list is not the rails and would
  /// read as if it were.
  bool logRails = true;
};

/// Finds the rails of this host (or of the fixture `options` describes).
///
/// Interfaces are the union of <sysfs>/class/net/* and the names in the address list
/// (options.interfaces or getifaddrs). For each interface:
///  - sysfs attributes: speed (Mbps), mtu, address (MAC), operstate, carrier, flags,
///    dev_port, phys_port_name, device (PCI function, realpath);
///  - the RDMA device and port whose gid_attrs/ndevs name the interface, else the
///    RDMA device whose device/net/ holds it (<sysfs>/class/infiniband/<dev>/device/net/<ifname>);
///    its port state, link layer and GID table;
///  - PCIe current/max link width (lanes) and speed (GT/s) from the PCI function's sysfs
///    directory; a link trained below its maximum is logged at WARN and recorded in
///    Rail::warnings;
///  - hwloc (live, or options.hwlocXml; I/O objects kept with HWLOC_TYPE_FILTER_KEEP_ALL):
///    the PCI device (linkspeed GB/s), NUMA node and nearest GPU.
/// Skip rules, in this order (each skip is appended to `skipped` as
/// "<ifname>: <reason>" and logged at INFO; reasons start with "loopback",
/// "filtered out", "carries a default route", "down", "no address" or
/// "only link-local addresses"):
///  - loopback (IsLoopbackInterface), unless options.ifnameFilter is a non-exclusive list
///    matching it; the reason is LoopbackRailRule() (topology/loopback_rail.h: never a
///    fabric rail, whatever the filter names; SelectFabricRails drops a named one);
///  - not matched by options.ifnameFilter ("filtered out by <ifnameFilterSource>='<filter>'");
///  - with options.skipDefaultRoute: carries a default route, unless the filter names it exactly;
///  - down (not IFF_UP, no carrier/IFF_RUNNING, operstate "down"/"lowerlayerdown"/"notpresent",
///    or the RDMA port not ACTIVE), unless includeDown;
///  - no IP address, unless includeNoAddress;
///  - only link-local addresses (169.254/16, fe80::/10), unless includeLinkLocal.
/// RDMA devices that no interface maps to are also listed in `skipped`
/// ("<rdmadev>: no network interface").
/// Output order: PCI rails by bus id (domain, bus, device, function), then name;
/// then non-PCI rails (veth, ...) by name.
/// Errors: SystemError when getifaddrs fails; InvalidUsage when options.hwlocXml
/// cannot be loaded. A missing class/infiniband (no RDMA stack) or zero ibverbs
/// devices is not an error. `skipped` may be nullptr.
Status DiscoverRails(const DiscoveryOptions& options, std::vector<Rail>* rails,
                     std::vector<std::string>* skipped);

/// Parses one GID as sysfs prints it (8 groups of 4 hex digits separated by ':')
/// into 16 bytes. Returns false for anything else.
bool ParseGidText(const std::string& text, std::array<std::uint8_t, 16>* out);

/// Parses a PCIe speed as sysfs prints it ("32.0 GT/s PCIe", "8.0 GT/s", "2.5 GT/s")
/// into GT/s. nullopt for "Unknown", "Unknown speed" or garbage.
std::optional<double> ParsePcieSpeed(const std::string& text);

}  // namespace railyard::topology
