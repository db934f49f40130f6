// RAILYARD_HCA (alias NCCL_IB_HCA): which RDMA devices and ports the verbs
// transport uses, and the skip rules that turn discovered rails into verbs devices.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/verbs/gid_select.h"
#include "topology/interface_filter.h"
#include "topology/rail.h"

namespace railyard::proxy::verbs {

/// True when the list entry `entry` matches RDMA device name `device` as a prefix,
/// under Railyard's rule (which differs from NCCL on purpose):
///  - `device` must start with `entry`, and
///  - when `entry` ends in a digit, the device name must not continue that number:
///    the character after the prefix, if any, must not be a digit.
/// So "mlx5_1" matches "mlx5_1" but NOT "mlx5_10" or "mlx5_11"; "mlx5" matches
/// "mlx5_0" (the next character is '_') but not "mlx50"; "mlx" matches every
/// "mlx5_*"; "rocep1s0f" matches "rocep1s0f0" and "rocep1s0f1".
/// NCCL 2.28.9 (src/misc/utils.cc matchIfList, prefix mode) uses a plain strncmp,
/// so there "mlx5_1" also selects mlx5_10..mlx5_19 — a classic surprise on hosts
/// with more than ten HCAs. An empty `entry` matches every name.
bool HcaPrefixMatches(std::string_view entry, std::string_view device);

/// A parsed RAILYARD_HCA / NCCL_IB_HCA value: NCCL_IB_HCA's grammar exactly
/// (topology::ParseDeviceList with the 32-entry limit, kNcclMaxIbDevs):
///  - comma list of `name[:port]`; an omitted port matches every port;
///  - a leading '^' makes it an exclude list; '=' (first, or right after '^')
///    makes names exact instead of prefixes: "^=mlx5_1,mlx5_4" excludes both;
///  - anything after a second ':' is ignored (NCCL 2.28.9 has no rail:plane fields);
///  - nothing is trimmed; there are no syntax errors.
/// Matching differs from NCCL only in prefix mode (see HcaPrefixMatches).
/// An empty value (unset) selects every device. A value that is only "^" or "^="
/// is an empty exclude list: as in NCCL (matchIfList returns true for an empty list,
/// XOR the exclude flag), it selects NO device.
class HcaFilter {
 public:
  /// Every device and port (RAILYARD_HCA unset).
  HcaFilter() = default;

  /// Parses `value`; an empty value gives the select-all filter. Never fails.
  /// Entries containing whitespace are kept verbatim (as NCCL does) and logged at WARN.
  static HcaFilter Parse(std::string_view value);

  /// True when port `port` (1-based ibverbs port number; -1 = any) of RDMA device
  /// `device` (e.g. "mlx5_0", "rocep1s0f0") passes the filter: the entry-wise match
  /// (exact or HcaPrefixMatches; ports equal or either side -1) XOR exclude.
  bool Matches(std::string_view device, int port) const;

  /// True when no value was given (every device and port passes).
  bool selectsAll() const { return selectAll_; }

  /// The parsed list (empty and non-exclusive when selectsAll()).
  const topology::DeviceList& list() const { return list_; }

  /// The value as given to Parse().
  const std::string& text() const { return text_; }

 private:
  bool selectAll_ = true;
  topology::DeviceList list_;
  std::string text_;
};

/// One RDMA device port the verbs transport will use.
struct VerbsDevice {
  std::string device;    ///< RDMA device name, e.g. "rocep1s0f0"
  int port = 0;          ///< 1-based ibverbs port number
  std::string netdev;    ///< the netdev of the port (the rail), e.g. "enp1s0f0np0"
  GidChoice gid;         ///< the GID ChooseGid picks with no peer known (re-chosen per connection)
  const topology::Rail* rail = nullptr;  ///< the rail in the caller's vector (not owned)
};

/// Turns discovered rails (topology::DiscoverRails; run it with includeDown so that
/// down ports are reported here) into verbs devices, in rail order. Each rail is:
///  - ignored silently when it has no RDMA device (not a verbs candidate at all);
///  - skipped when `filter` rejects (rdmaDevice, rdmaPort): "filtered out by RAILYARD_HCA='...'";
///  - skipped when the RDMA port is not ACTIVE ("port down (state DOWN)") or its
///    link layer is not Ethernet ("link layer InfiniBand: only RoCE is supported");
///    NCCL 2.28.9 likewise uses only ACTIVE ports (net_ib.cc ncclIbInitDevices);
///  - skipped when ChooseGid(rail.gids, policy, nullptr) finds no usable GID
///    ("no usable GID: <why>");
///  - skipped past kNcclMaxIbDevs (32) devices, as NCCL caps MAX_IB_DEVS.
/// Each skip is logged at INFO (subsystem NET|INIT) and appended to `skipped` as
/// "<rdmadev>:<port> (<netdev>): <reason>"; `skipped` may be nullptr.
/// The returned VerbsDevice::rail pointers point into `rails`.
std::vector<VerbsDevice> SelectVerbsDevices(const std::vector<topology::Rail>& rails,
                                            const HcaFilter& filter, const GidPolicy& policy,
                                            std::vector<std::string>* skipped);

}  // namespace railyard::proxy::verbs
