// The GIN / RMA tables' view of the process's shared one-sided fabric
// (plugin/one_sided_fabric.h: one Domain and RegistrationCache for GIN, RMA, CollNet,
// NCCL's regMr and the tiers) plus their options from the environment.
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

/// Takes one reference on the shared one-sided fabric (AcquireOneSidedFabric: its
/// rails and errors), options from the environment (RAILYARD_TIMEOUT_MS, queue depth 32 ×
/// maxRecvs) and the DMA-BUF hook (options.acquireDmaBuf: RegistrationCache::
/// AcquireDmaBuf with every access right; InvalidUsage naming the transport where the
/// Domain cannot register DMA-BUFs). Errors from env::Load, the interface choice and
/// CreateProcessDomain.
/// Thread-safe.
Status AcquireRuntime(Runtime* out);
/// Fabric mode (a runtime::CableSetDomain): waits, up to min(timeoutMs, 5000) ms, until
/// the cabling graph places every rail of the Domain on a cable, so that a Worker made
/// now (listen) has a per-cable Worker on every cable and its address lists every rail
/// (a CableSetWorker covers only the cables its graph knows when it is made; a peer
/// behind a cable it lacks fails the connect "no Worker on the cable"). Returns at once
/// for any other Domain; after the bound it returns anyway (a rail with no cable: an
/// INFO line names the rails the graph has not placed).
void AwaitCables(fabric::Domain& domain, int timeoutMs);
/// Drops one reference; the last destroys the cache and the Domain (every Worker
/// made from it must be gone).
void ReleaseRuntime();

}  // namespace railyard::plugin::gin
