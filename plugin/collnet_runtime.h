// The process's fabric for the CollNet tables: one Domain, its RegistrationCache
// and the CollOptions from the environment, created on first use and destroyed when
// the last user lets go. This is the ONE place that creates them (DESIGN.md §3):
// when the runtime object owning the process's Domain lands, re-point
// collnet_runtime.cc at it and nothing else changes.
#pragma once

#include "env/status.h"
#include "proxy/collectives/coll_comm.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"

namespace railyard::plugin::collnet {

/// What collComms are built from. Valid from AcquireRuntime until the matching
/// ReleaseRuntime.
struct Runtime {
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  collectives::CollOptions options;
};

/// Takes one reference, creating the Domain on the first: a TCP Domain whose rails
/// are the IPv4 addresses of the RAILYARD_SOCKET_IFNAME interfaces (127.0.0.1 when
/// none qualifies; at most 6 rails, so the Worker address fits NCCL's 128-byte
/// handle); RAILYARD_TIMEOUT_MS, RAILYARD_COLLNET_CHUNK_BYTES and _SLOTS for the
/// collectives. Errors from env::Load and
/// CreateTcpDomain. Thread-safe.
Status AcquireRuntime(Runtime* out);
/// Drops one reference; the last destroys the cache and the Domain (every Worker
/// made from it must be gone).
void ReleaseRuntime();

}  // namespace railyard::plugin::collnet
