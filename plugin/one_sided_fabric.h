// The one fabric the plugin's one-sided tables share (GIN v11, RMA v13/v14 and
// CollNet v8-v12): one lease on the process's shared Domain and RegistrationCache
// (proxy/runtime/process_fabric.h: NCCL device 0's when the plugin's init made the
// fabric comms' runtime, so NCCL's regMr, these tables and the storage tiers share
// registrations; else the process's own Domain), taken on the first Acquire and
// returned by the last Release, so a window GIN registered and a buffer CollNet
// registers over it are one registration.
#pragma once

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"

namespace railyard::plugin {

/// What an Acquire hands out; valid until the matching ReleaseOneSidedFabric.
struct OneSidedFabric {
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  const env::Config* config = nullptr;  ///< the process's configuration (never freed)
};

/// Most rails of the shared Domain: a Worker address of 16 + 16 x rails bytes must fit
/// NCCL's 128-byte connect handle beside the tables' own header
/// (../shared/docs/nccl-net-abi.md: NCCL_NET_HANDLE_MAXSIZE).
constexpr size_t kOneSidedMaxRails = 6;

/// Takes one reference, leasing the Domain on the first (AcquireProcessFabric, no
/// peer: NCCL device 0's Domain when NCCL's fabric runtime exists and its rails fit;
/// else the process's own, CreateProcessDomain over the interfaces the net plugin's
/// devices come from (RAILYARD_SOCKET_IFNAME, falling back to NCCL_SOCKET_IFNAME), at
/// most kOneSidedMaxRails rails, 127.0.0.1 when none qualifies). `who` names the
/// caller in the INFO line. Errors from env::Load and CreateProcessDomain; `*out` is
/// unchanged on error. Thread-safe.
Status AcquireOneSidedFabric(const char* who, OneSidedFabric* out);
/// Drops one reference; the last returns the lease (an own Domain's last lease destroys
/// its cache and the Domain: every Worker made from it must be gone by then). A
/// Release without an Acquire is ignored.
void ReleaseOneSidedFabric();

}  // namespace railyard::plugin
