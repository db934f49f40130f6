// The process's fabric for the GIN / RMA tables: one Domain, its RegistrationCache
// and the GinOptions from the environment, created on first use and destroyed when
// the last user lets go. This is the ONE place that creates them (DESIGN.md §3):
// when the runtime object owning the process's Domain lands, re-point gin_runtime.cc
// at it and nothing else changes.
#pragma once

#include <memory>

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/gin/gin_comm.h"

namespace railyard::plugin::gin {

/// What GIN/RMA comms are built from. Valid from AcquireRuntime until the matching
/// ReleaseRuntime.
struct Runtime {
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  railyard::gin::GinOptions options;
};

/// Takes one reference, creating the Domain on the first: a TCP Domain whose rails
/// are the IPv4 addresses of the RAILYARD_SOCKET_IFNAME interfaces (127.0.0.1 when
/// none qualifies; at most 6 rails, so the Worker address fits NCCL's 128-byte
/// handle), options from the environment (RAILYARD_TIMEOUT_MS, queue depth 32 ×
/// maxRecvs). Errors from env::Load, the interface choice and CreateTcpDomain.
/// Thread-safe.
Status AcquireRuntime(Runtime* out);
/// Drops one reference; the last destroys the cache and the Domain (every Worker
/// made from it must be gone).
void ReleaseRuntime();

}  // namespace railyard::plugin::gin
