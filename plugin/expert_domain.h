// The fabric Domain the expert tier uses. railyardd --expert-store (a daemon: no NCCL
// in it) makes its own, runtime::CreateProcessDomain over RAILYARD_SOCKET_IFNAME, or
// 127.0.0.1 when it is unset; verbs when RAILYARD_TRANSPORT chooses it. The
// railyard_expert_* C API (a client inside an inference engine, beside NCCL) leases the
// process's shared Domain and RegistrationCache instead (proxy/runtime/process_fabric.h),
// so an arena NCCL registered through regMr is not registered or pinned again.
#pragma once

#include <memory>
#include <string>

#include "env/config.h"
#include "proxy/fabric/domain.h"
#include "proxy/runtime/process_fabric.h"

namespace railyard::plugin {

/// Creates the Domain. SystemError/InvalidArgument when the interfaces the filter
/// names have no IPv4 address or cannot be listed.
Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out);

/// Leases the process's shared Domain for an expert client of `peer` ("host:port"; the
/// host picks the NCCL device whose rail reaches it): NCCL's, or the process's own with
/// CreateExpertDomain's rails. Return it with runtime::ReleaseProcessFabric. Errors of
/// AcquireProcessFabric.
Status AcquireExpertFabric(const env::Config& config, const std::string& peer, runtime::FabricLease* out);

}  // namespace railyard::plugin
