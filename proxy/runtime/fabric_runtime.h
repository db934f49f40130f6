// FabricRuntime: the process's fabric state, owned in one place. Per NCCL device
// (plain TCP mode: one IPv4 interface = one rail; verbs mode: one RDMA port, or the
// ports of a device fused by makeVDevice = several rails striped) a fabric Domain, its
// RegistrationCache (DESIGN.md §2: regMr, the tier arenas, GIN/RMA windows and
// CollNet staging all register through it, so one range is registered once) and the
// CommWorker the NCCL comms of that device share. The Domains and caches live for
// the process (NCCL may deregister after its last finalize); the CommWorkers' helper
// threads start in Start() and stop in Stop(), nowhere else.
//
// Accessor for the other layers: railyard::runtime::Fabric() (NULL until the plugin's
// first init created it, or when this process's mode does not use the fabric).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/nccl/comm_worker.h"
#include "topology/netdev.h"

namespace railyard::proxy::verbs {
class IbPorts;
}

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
  /// One NCCL verbs device: its name (messages) and its RDMA ports, each "device:port"
  /// as IbPort::Name() gives it (one port, or the ports makeVDevice fused).
  struct VerbsDevice {
    std::string name;
    std::vector<std::string> ports;
  };
  /// Verbs mode: one verbs Domain per device in `devices` (fabric/verbs; on exactly
  /// that device's ports, the rest of the RDMA settings from `config`), with its cache
  /// and CommWorker (not started). The Workers' bootstrap listeners bind
  /// `bootstrapAddress` (IPv4; empty: the first port's address). Every Domain is built
  /// on `ports`, the RDMA ports this process opened once (the plugin's; discovery
  /// takes seconds under emulation, and the Domains share the ibv contexts and PDs);
  /// NULL: the runtime opens them itself once, at the first device (IbPorts::Open with
  /// `config`'s RAILYARD_HCA). Errors of AddVerbsDevice; nothing is kept on error.
  static Status CreateVerbs(const env::Config& config, const std::vector<VerbsDevice>& devices,
                            const std::string& bootstrapAddress, std::unique_ptr<FabricRuntime>* out,
                            std::shared_ptr<proxy::verbs::IbPorts> ports = nullptr);
  /// One device over a Domain made elsewhere (fabric mode: the process's
  /// CableSetDomain, every rail of the host as one NCCL device named `name`), with its
  /// cache and CommWorker (not started). InvalidArgument for a NULL domain.
  static Status CreateOver(std::unique_ptr<fabric::Domain> domain, const std::string& name,
                           std::unique_ptr<FabricRuntime>* out);
  /// Adds one verbs device (makeVDevice) as device devices() (its index in *index);
  /// its CommWorker starts at once when the runtime runs. InvalidArgument for no
  /// ports, more than kMaxDevices devices or a port that is not among the opened ones
  /// (RAILYARD_HCA must select it); errors of IbPorts::Open (the first device, when
  /// CreateVerbs got no ports), CreateVerbsDomainOn and CommWorker::Start. Only for
  /// a runtime made by CreateVerbs. Thread-safe against the accessors.
  Status AddVerbsDevice(const VerbsDevice& device, size_t* index);
  ~FabricRuntime();

  /// Starts every CommWorker (its Worker and helper thread). On error none runs.
  Status Start();
  /// Stops them (every comm must be closed first). Idempotent.
  void Stop();

  /// Most devices a runtime holds (NCCL's own limit is 32 physical + virtual ones).
  static constexpr size_t kMaxDevices = 128;
  /// Devices (= NCCL devices in plain TCP and in verbs mode).
  size_t devices() const { return count_.load(std::memory_order_acquire); }
  /// The Domain of device `dev` (< devices()).
  fabric::Domain& domain(size_t dev) { return *devices_[dev]->domain; }
  /// The RegistrationCache of device `dev`.
  fabric::RegistrationCache& registrations(size_t dev) { return *devices_[dev]->cache; }
  /// The CommWorker of device `dev` (the NCCL comms' Worker; use its Lock()).
  proxy::nccl::CommWorker& comms(size_t dev) { return *devices_[dev]->comms; }
  /// Verbs mode: the opened RDMA ports every verbs Domain of this runtime is built on
  /// (NULL in TCP mode, or before the first verbs device when none were given).
  std::shared_ptr<proxy::verbs::IbPorts> verbsPorts();

 private:
  struct Device {
    std::unique_ptr<fabric::Domain> domain;
    std::unique_ptr<fabric::RegistrationCache> cache;
    std::unique_ptr<proxy::nccl::CommWorker> comms;
  };
  FabricRuntime() = default;
  /// Appends `d` (devices() grows by one once it is in place). Requires mu_.
  Status Append(std::unique_ptr<Device> d, size_t* index);

  std::mutex mu_;  ///< serialises Append, Start and Stop
  bool running_ = false;
  // Fixed slots: readers index them without a lock while AddVerbsDevice appends.
  std::array<std::unique_ptr<Device>, kMaxDevices> devices_;
  std::atomic<size_t> count_{0};
  // Verbs mode only: what AddVerbsDevice builds Domains from.
  bool verbs_ = false;
  env::Config config_;
  std::string bootstrap_;
  std::shared_ptr<proxy::verbs::IbPorts> ports_;  ///< guarded by mu_ while AddVerbsDevice runs
};

/// The process's FabricRuntime, NULL when none was created (fabric mode,
/// RAILYARD_COMMS=legacy, or before the plugin's first init).
FabricRuntime* Fabric();
/// Installs the process's FabricRuntime (the plugin's init, once; it is never freed:
/// NCCL may call deregMr after exit handlers ran).
void SetFabric(FabricRuntime* runtime);

}  // namespace railyard::runtime
