// ProcessFabric: the ONE owner of the Domain + RegistrationCache that the one-sided
// users of this process (GIN/RMA windows, CollNet staging: plugin/one_sided_fabric.cc)
// and the storage tiers (expert arenas: plugin/expert_api.cc; snapshot staging:
// plugin/snapshot_runtime.cc) share with NCCL's regMr, so a buffer registered by one
// of them is a cache hit for the others (one registration, one pin).
//
// Which Domain a lease gets (the choice, and why):
// - When the plugin's init created NCCL's FabricRuntime (runtime::Fabric(); plain TCP
//   mode on IPv4 devices, verbs mode unless RAILYARD_COMMS=legacy), the Domain and
//   cache of ONE NCCL device: the device one of whose rails reaches the lessee's peer
//   (the rail's address is the peer's, or the peer is on the rail interface's IPv4
//   subnet), else device 0. NCCL's regMr registers every buffer in every device's
//   cache (proxy/runtime/net_registrations.cc MakeHandle), so any device gives the cache hit; the peer
//   rule only makes the tier's Endpoint leave on a rail that reaches its peer. A fused
//   Domain over all rails was not chosen: it would be a second Domain beside NCCL's,
//   i.e. every NCCL buffer registered (and, over verbs, pinned) twice.
//   The lease sets that cache's access floor to what regMr asks for host memory
//   (local + remote write; RegistrationCache::SetAccessFloor), so a tier's arena
//   registered first (local access only) also serves NCCL's later regMr inside it.
//   Cost: such a region grants remote write over the whole arena, which only a peer
//   holding its key can use; the tiers never send their arenas' keys, and NCCL sends
//   it (as for any reused region) only to the peer of the comm it registered for.
//   These Domains live for the process (the FabricRuntime is never freed): a lease
//   on one outlives NCCL's last finalize (which stops NCCL's comm threads only).
// - Otherwise (no NCCL in this process yet, fabric mode or the legacy comms, whose
//   registrations are not fabric Regions, or an NCCL device with more rails than the
//   lessee takes): the process's own Domain made by CreateProcessDomain with the
//   lessee's options, shared by every lessee asking with the same rail options
//   (ifname, loopbackWhenUnset, maxRails) and destroyed by the last release. A lease
//   taken before the plugin's first init keeps its own Domain until released; leases
//   taken after it share NCCL's.
// ProcessFabric starts no thread: Workers are created by the lessees from the Domain
// (and must be destroyed before the lease is released); NCCL's comm threads start
// in FabricRuntime::Start (the plugin's init).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/runtime/process_domain.h"

namespace railyard::runtime {

/// What a lessee asks for.
struct LeaseOptions {
  /// The rails of the process's own Domain when no NCCL device serves (see
  /// ProcessDomainOptions); maxRails also caps the rails of an NCCL device taken.
  ProcessDomainOptions domain;
  /// The peer host the lessee talks to (numeric IPv4, e.g. "127.0.0.1"), used to pick
  /// the NCCL device whose rail reaches it; empty or not numeric: device 0.
  std::string peerHost;
  /// The lessee talks to every rank of a job (GIN/RMA, CollNet), not to one peer. An
  /// NCCL device then serves only when it is NCCL's only device: with several (TCP mode
  /// makes one per interface), each holds only its own rails, and on a cabled ring one
  /// device reaches one neighbour, so the lessee gets a Domain of its own over every rail.
  bool everyRank = false;
};

/// A lease on the shared Domain; valid until ReleaseProcessFabric(lease).
struct FabricLease {
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  /// The NCCL device (FabricRuntime index) whose Domain this is; -1 for the process's
  /// own Domain.
  int ncclDevice = -1;
  uint64_t id = 0;  ///< 0 = no lease (a default-constructed or released one)
};

/// Counts for diagnostics and tests.
struct ProcessFabricStats {
  uint64_t ncclLeases = 0;   ///< live leases on NCCL devices' Domains
  uint64_t ownLeases = 0;    ///< live leases on the process's own Domains
  uint64_t ownDomains = 0;   ///< own Domains alive now
  uint64_t ownCreated = 0;   ///< own Domains created since the process started
};

/// Takes a lease as described in the file comment. Errors of CreateProcessDomain
/// (InvalidArgument for maxRails out of range, InvalidUsage for an ifname naming no
/// IPv4 interface, the transport's errors); `*out` is unchanged on error.
/// Thread-safe.
Status AcquireProcessFabric(const env::Config& config, const LeaseOptions& options, FabricLease* out);
/// Returns a lease (`*lease` is reset); the last lease on an own Domain destroys its
/// cache (deregistering what is left) and the Domain. A lease with id 0 or one already
/// returned is ignored. Thread-safe.
void ReleaseProcessFabric(FabricLease* lease);
/// A snapshot of the counts.
ProcessFabricStats GetProcessFabricStats();

/// The interface the kernel routes `peerHost` (numeric IPv4, or a name with an IPv4
/// address) through from this host, as its name ("eth1"); "" when the peer is this host
/// (127/8), cannot be resolved or routed, or the route's source is loopback. Sends nothing
/// (a datagram socket's connect). With no RAILYARD_SOCKET_IFNAME, a tier client's own
/// Domain takes its rail there instead of loopback (ProcessDomainOptions::loopbackWhenUnset).
std::string RoutedInterface(const std::string& peerHost);

/// The NCCL device (< the number of Domains, each given by its rails) whose rail
/// reaches numeric IPv4 `peerHost`: a rail whose address is the peer's, else a rail
/// whose local interface (in `interfaces`, with its prefix length) has the peer on its
/// subnet; 0 when none does or the peer is not numeric IPv4. Pure: exposed for tests.
size_t DeviceReaching(const std::vector<std::vector<fabric::RailInfo>>& deviceRails, const std::string& peerHost,
                      const std::vector<std::pair<std::string, int>>& interfaces);

}  // namespace railyard::runtime
