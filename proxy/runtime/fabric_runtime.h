// FabricRuntime: the process's fabric state, owned in one place. Per NCCL device
// (plain TCP mode: one IPv4 interface = one rail) a fabric Domain, its
// RegistrationCache (DESIGN.md §2: regMr, the tier arenas, GIN/RMA windows and
// CollNet staging all register through it, so one range is registered once) and the
// CommWorker the NCCL comms of that device share. The Domains and caches live for
// the process (NCCL may deregister after its last finalize); the CommWorkers' helper
// threads start in Start() and stop in Stop(), nowhere else.
//
// Accessor for the other layers: railyard::runtime::Fabric() (NULL until the plugin's
// first init created it, or when this process's mode does not use the fabric).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/nccl/comm_worker.h"
#include "topology/netdev.h"

namespace railyard::runtime {

/// See file comment. Thread-safe after Create (the accessors return references to
/// objects that stay put).
class FabricRuntime {
 public:
  /// One TCP Domain per device in `devices` (each IPv4; its address the one rail;
  /// striping, timeout and sockets per rail from `config`), with its cache and
  /// CommWorker (not started). InvalidArgument for a device that is not IPv4;
  /// errors of CreateTcpDomain.
  static Status Create(const env::Config& config, const std::vector<topology::NetDevice>& devices,
                       std::unique_ptr<FabricRuntime>* out);
  ~FabricRuntime();

  /// Starts every CommWorker (its Worker and helper thread). On error none runs.
  Status Start();
  /// Stops them (every comm must be closed first). Idempotent.
  void Stop();

  /// Devices (= NCCL devices in plain TCP mode).
  size_t devices() const { return devices_.size(); }
  /// The Domain of device `dev` (< devices()).
  fabric::Domain& domain(size_t dev) { return *devices_[dev].domain; }
  /// The RegistrationCache of device `dev`.
  fabric::RegistrationCache& registrations(size_t dev) { return *devices_[dev].cache; }
  /// The CommWorker of device `dev` (the NCCL comms' Worker; use its Lock()).
  proxy::nccl::CommWorker& comms(size_t dev) { return *devices_[dev].comms; }

 private:
  struct Device {
    std::unique_ptr<fabric::Domain> domain;
    std::unique_ptr<fabric::RegistrationCache> cache;
    std::unique_ptr<proxy::nccl::CommWorker> comms;
  };
  FabricRuntime() = default;
  std::vector<Device> devices_;
};

/// The process's FabricRuntime, NULL when none was created (verbs or fabric mode,
/// RAILYARD_COMMS=legacy, or before the plugin's first init).
FabricRuntime* Fabric();
/// Installs the process's FabricRuntime (the plugin's init, once; it is never freed:
/// NCCL may call deregMr after exit handlers ran).
void SetFabric(FabricRuntime* runtime);

}  // namespace railyard::runtime
