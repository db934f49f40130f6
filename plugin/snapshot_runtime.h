// The process's fabric for the snapshot tier: the ONE place the snapshot C API
// (plugin/snapshot_api.cc) and railyardd's arenas (tools/railyardd/snapshot_serve.cc)
// get their Domain and RegistrationCache, as leases on the process's shared fabric
// (proxy/runtime/process_fabric.h): NCCL's device Domain when the plugin runs the
// fabric comms in this process (so staging NCCL registered is a cache hit), else the
// process's own Domain over RAILYARD_SOCKET_IFNAME's addresses (the fabric rail rules
// of proxy::SelectFabricRails), 127.0.0.1 when the variable is unset.
#pragma once

#include <string>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/runtime/process_fabric.h"

namespace railyard::plugin {

/// A lease for one snapshot client of `peerHost` (numeric IPv4 picks the NCCL device
/// whose rail reaches it); return it with runtime::ReleaseProcessFabric after the
/// client and its Worker are gone. Errors of env::Load and AcquireProcessFabric.
Status AcquireSnapshotFabric(const std::string& peerHost, runtime::FabricLease* out);
/// The same with the configuration given: its railIfname picks the rails (railyardd's
/// --ifname stands in for RAILYARD_SOCKET_IFNAME so). Errors of AcquireProcessFabric.
Status AcquireSnapshotFabric(const std::string& peerHost, const env::Config& cfg, runtime::FabricLease* out);

/// A process-lifetime lease (railyardd's server: taken on first use, thread-safe,
/// never returned). Errors of AcquireSnapshotFabric (the same error on every later call).
Status SnapshotFabric(fabric::Domain** domain, fabric::RegistrationCache** cache);
/// The same with the configuration given (railyardd: the rails its --ifname chose). The
/// first call of either decides the lease; later ones return it, whatever `cfg` says.
Status SnapshotFabric(const env::Config& cfg, fabric::Domain** domain, fabric::RegistrationCache** cache);

}  // namespace railyard::plugin
