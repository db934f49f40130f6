// The one TCP fabric the plugin's one-sided tables share (GIN v11, RMA v13/v14 and
// CollNet v8-v12): one Domain and one RegistrationCache per process, created on the
// first Acquire and destroyed by the last Release, so a window GIN registered and a
// buffer CollNet registers over it are one registration. The storage tiers keep
// their own (plugin/expert_domain.cc, plugin/snapshot_runtime.cc) until the runtime
// object owns the process's Domains (proxy/runtime/).
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

/// Takes one reference, creating the Domain on the first: a TCP Domain whose rails are
/// the IPv4 addresses of the interfaces the net plugin's devices come from
/// (RAILYARD_SOCKET_IFNAME, falling back to NCCL_SOCKET_IFNAME), in that order, at most
/// kOneSidedMaxRails; 127.0.0.1 when none qualifies. `who` names the caller in the INFO
/// line. Errors from env::Load and CreateTcpDomain; `*out` is unchanged on error.
/// Thread-safe.
Status AcquireOneSidedFabric(const char* who, OneSidedFabric* out);
/// Drops one reference; the last destroys the cache and the Domain (every Worker made
/// from it must be gone by then). A Release without an Acquire is ignored.
void ReleaseOneSidedFabric();

}  // namespace railyard::plugin
