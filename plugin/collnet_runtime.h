// The CollNet tables' view of the process's shared one-sided fabric
// (plugin/one_sided_fabric.h: one TCP Domain and RegistrationCache for GIN, RMA and
// CollNet together) plus their options from the environment.
#pragma once

#include <string>

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
  collectives::CollOptions options;  ///< topology left to connect (CollnetTopology)
  std::string shapeSetting;          ///< RAILYARD_COLLNET_SHAPE
};

/// Takes one reference on the shared one-sided fabric (AcquireOneSidedFabric: its
/// rails and errors); RAILYARD_TIMEOUT_MS, RAILYARD_COLLNET_CHUNK_BYTES, _SLOTS,
/// _SMALL_BYTES and _SHAPE for the collectives. Errors from env::Load and
/// CreateTcpDomain. Thread-safe.
Status AcquireRuntime(Runtime* out);
/// Drops one reference; the last destroys the cache and the Domain (every Worker
/// made from it must be gone).
void ReleaseRuntime();

}  // namespace railyard::plugin::collnet
