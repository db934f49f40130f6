// The forms of an NCCL device list that Railyard accepts in its own variables and flags
// (RAILYARD_SOCKET_IFNAME, RAILYARD_HCA and their NCCL aliases, railyardd/railyard-info
// --ifname). topology::ParseDeviceList reads a list the way NCCL 2.28.9 does and never
// fails; this check comes first and refuses what NCCL would read as something nobody
// means (a header with no name after it, a '^' or '=' in the middle of the list).
#pragma once

#include <string_view>

#include "env/status.h"

namespace railyard::env {

/// Checks `value` against NCCL's documented forms (docs/nccl NCCL_SOCKET_IFNAME and
/// NCCL_IB_HCA; /work/shared/docs/nccl-net-abi.md): a comma list of names (prefixes,
/// each optionally `:port`), led by nothing, `^` (exclude), `=` (exact names) or `^=`
/// (exclude exact names): `eth`, `=eth0`, `^docker`, `^=docker0,virbr0`, `mlx5_0:1`.
/// Ok for an empty value (unset) and for every value of those forms, including the
/// one-character value NCCL ignores (e.g. `e`: automatic).
/// InvalidUsage naming `source` (the variable or flag), the value and the fault:
///  - the header with no name after it: `^`, `=`, `^=`, `^,`, `=:1` (NCCL would read
///    `^` as "automatic", `^=` as "exclude nothing" = select nothing);
///  - a `^` or `=` anywhere but the header: `=^eth0` (NCCL: the exact name "^eth0"),
///    `^^eth0`, `==eth0`, `eth0,^docker` (NCCL: the prefix "^docker", matching nothing).
/// The message ends with examples of the forms: RDMA device names when `source` names
/// an HCA list (RAILYARD_HCA, NCCL_IB_HCA), interface names otherwise.
Status CheckDeviceListSyntax(std::string_view value, std::string_view source);

}  // namespace railyard::env
