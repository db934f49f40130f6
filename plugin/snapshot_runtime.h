// The process's fabric for the snapshot tier: the ONE place that creates a Domain
// and RegistrationCache for the snapshot C API (plugin/snapshot_api.cc) and for
// railyardd's arenas (tools/railyardd/snapshot_serve.cc), until the process runtime
// object owns them (DESIGN.md §3: the coordinator re-points this file at it).
//
// The Domain is TCP: its rails are RAILYARD_SOCKET_IFNAME's addresses (the fabric
// rail rules of proxy::SelectFabricRails), 127.0.0.1 when the variable is unset.
#pragma once

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"

namespace railyard::plugin {

/// The process-wide snapshot Domain and its RegistrationCache, created on first
/// use (thread-safe); they live until the process exits. Errors of env::Load,
/// rail discovery and CreateTcpDomain (the same error on every later call).
Status SnapshotFabric(fabric::Domain** domain, fabric::RegistrationCache** cache);

}  // namespace railyard::plugin
