// Rails: one usable NIC port each, with its RDMA device, PCI locality and GIDs.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace railyard::topology {

/// One entry of an RDMA port's GID table, as the kernel exposes it under
/// <sysfs>/class/infiniband/<dev>/ports/<port>/ (Documentation/ABI/stable/sysfs-class-infiniband:
/// gids/<index>, gid_attrs/types/<index>, gid_attrs/ndevs/<index>).
/// All-zero GIDs (holes in the table) are never reported.
struct Gid {
  int index = 0;                     ///< the table index (the file name under gids/)
  std::array<std::uint8_t, 16> raw{};  ///< the 16 GID bytes, network order
  std::string text;                  ///< as sysfs prints it: "fe80:0000:0000:0000:0e42:a1ff:fe5b:1c2a"
  /// "RoCE v2", "RoCE v1", "IB", or "" when gid_attrs/types/<index> could not be read
  /// (it fails with EINVAL in some containers). The kernel writes "IB/RoCE v1" for
  /// both IB and RoCE v1; it is reported as "IB" on an InfiniBand port and
  /// "RoCE v1" on an Ethernet one.
  std::string type;
  std::string ndev;       ///< gid_attrs/ndevs/<index>: the netdev the GID belongs to; "" if unreadable
  /// The IP address the GID encodes: dotted IPv4 for an IPv4-mapped GID
  /// (::ffff:a.b.c.d, RFC 4291 section 2.5.5.2), otherwise the compressed IPv6 text.
  std::string ip;
  bool ipv4Mapped = false;  ///< raw is ::ffff:0:0/96 (a RoCE v2 / v1 GID for an IPv4 address)
  bool linkLocal = false;   ///< raw is fe80::/10 (the default GID derived from the MAC)
};

/// One IP address of a rail's interface (from getifaddrs or DiscoveryOptions::interfaces).
struct RailAddress {
  int family = 0;          ///< AF_INET or AF_INET6
  std::string address;     ///< numeric, e.g. "192.0.2.2", "fd00::2"
  int prefixLen = 0;       ///< netmask bits
  bool linkLocal = false;  ///< IPv4 169.254.0.0/16 or IPv6 fe80::/10
  sockaddr_storage sockaddr{};  ///< the address, port 0 (IPv6 keeps its scope id)
};

/// PCIe link state of a PCI function, from sysfs (Documentation/ABI/testing/sysfs-bus-pci:
/// current_link_speed, current_link_width, max_link_speed, max_link_width).
/// Each field is nullopt when the file is missing or unparsable.
struct PcieLink {
  std::optional<int> currentWidth;     ///< lanes the link trained at (x1..x32)
  std::optional<int> maxWidth;         ///< lanes the device/slot supports
  std::optional<double> currentSpeed;  ///< GT/s per lane, e.g. 32.0 for PCIe Gen5
  std::optional<double> maxSpeed;      ///< GT/s per lane the device supports
  /// True when the link trained narrower or slower than it can (current < max).
  bool degraded() const {
    return (currentWidth && maxWidth && *currentWidth < *maxWidth) ||
           (currentSpeed && maxSpeed && *currentSpeed < *maxSpeed);
  }
};

/// One rail: one usable NIC port with its netdev, its RDMA device and port (when
/// there is one), its PCI function and locality. DiscoverRails (topology/discovery.h)
/// produces these. Strings are empty and numbers -1/0/nullopt where unknown.
struct Rail {
  // --- network interface ---------------------------------------------------
  std::string netdev;  ///< interface name, e.g. "enp1s0f0np0"
  int ifIndex = 0;     ///< <sysfs>/class/net/<netdev>/ifindex (or if_nametoindex); 0 if unknown
  std::string mac;     ///< <sysfs>/class/net/<netdev>/address, e.g. "0c:42:a1:5b:1c:2a"
  int mtu = 0;         ///< <sysfs>/class/net/<netdev>/mtu in bytes; 0 if unknown
  /// <sysfs>/class/net/<netdev>/speed in Mbps (e.g. 200000 for 200GbE); nullopt if unknown.
  std::optional<int> speedMbps;
  std::vector<RailAddress> addresses;  ///< every IPv4/IPv6 address, link-local ones included (flagged)

  // --- link state -----------------------------------------------------------
  bool up = false;       ///< IFF_UP (getifaddrs flags, else <sysfs>/class/net/<netdev>/flags)
  bool running = false;  ///< IFF_RUNNING (getifaddrs flags, else sysfs flags)
  std::optional<bool> carrier;  ///< <sysfs>/class/net/<netdev>/carrier; nullopt when unreadable (down links give EINVAL)
  std::string operState;  ///< <sysfs>/class/net/<netdev>/operstate (RFC 2863 name: "up", "down", "unknown", ...)

  // --- physical port ----------------------------------------------------------
  /// The physical (e.g. QSFP) port this rail leaves the host through, 0-based; -1 unknown.
  /// From phys_port_name "p<N>" when present, else dev_port when > 0 (multi-port
  /// functions), else the PCI function number (ConnectX dual-function layouts such as
  /// DGX Spark: f0 = port 0, f1 = port 1, one cable carrying the rails of both PCIe
  /// devices), else dev_port. See Documentation/ABI/testing/sysfs-class-net.
  int physicalPort = -1;
  std::string physicalPortSource;  ///< "phys_port_name", "dev_port", "pci function" or ""
  std::string physPortName;        ///< <sysfs>/class/net/<netdev>/phys_port_name, e.g. "p0"

  // --- RDMA -------------------------------------------------------------------
  std::string rdmaDevice;  ///< e.g. "rocep1s0f0" or "mlx5_0"; "" when the netdev has none
  int rdmaPort = 0;        ///< 1-based port number of rdmaDevice; 0 when none
  std::string rdmaPortState;  ///< ports/<p>/state without the number, e.g. "ACTIVE"; "" unknown
  std::string linkLayer;      ///< ports/<p>/link_layer: "Ethernet" (RoCE) or "InfiniBand"
  std::vector<Gid> gids;      ///< non-zero GID table entries, by index

  // --- PCI and locality -------------------------------------------------------
  std::string pciPath;   ///< realpath of <sysfs>/class/net/<netdev>/device under devices/pci*; "" if not PCI
  /// "0000:01:00.0" (domain:bus:device.function, lower-case hex): the name of pciPath, or of
  /// its nearest ancestor named like a bus id (virtio-net: ".../0000:00:03.0/virtio2");
  /// hwloc's PCI device when sysfs has none; "" if not PCI. PCIe link attributes and
  /// numa_node are read from that function's directory.
  std::string pciBusId;
  int pciFunction = -1;  ///< the function number of pciBusId; -1 if not PCI
  PcieLink pcie;         ///< sysfs link width/speed of the function
  /// PCI link bandwidth as hwloc reports it (hwloc_obj_attr_u::hwloc_pcidev_attr_s::linkspeed,
  /// GB/s, lanes x GT/s x encoding / 8); 0 when unknown.
  float hwlocLinkSpeedGBps = 0;
  /// NUMA node (OS index) closest to the function: hwloc's non-I/O ancestor's nodeset
  /// when it holds exactly one node, else <pci>/numa_node; -1 unknown.
  int numaNode = -1;
  /// The GPU closest to the function in hwloc's tree (the one sharing the closest common
  /// ancestor): an OS device name such as "cuda0" or "nvml0", or a PCI bus id when hwloc
  /// sees the GPU only as a PCI device; "" when hwloc sees no GPU (or was not used).
  std::string nearestGpu;

  /// The interface carries an IPv4 default route (an uplink). Set only when
  /// DiscoveryOptions::skipDefaultRoute kept it because the filter named it exactly.
  bool carriesDefaultRoute = false;

  /// Problems found while describing this rail (e.g. a PCIe link narrower than its slot).
  /// Each one was also logged at WARN.
  std::vector<std::string> warnings;

  /// True when pciBusId is set.
  bool isPci() const { return !pciBusId.empty(); }
};

}  // namespace railyard::topology
