// NetState: the data of the process's NetRuntime (proxy/runtime/net_runtime.h), and
// the helpers its implementation files share. Internal to proxy/runtime: only the
// net_*.cc files include it; everything else goes through NetRuntime.
//
// What lives here (each part written by one file):
//   - start-up and shutdown, the comm registry: net_runtime.cc
//   - the transport choice (ChooseTransport, UsesFabricComms): net_transport.cc
//   - fabric mode (cabling agent, relays, the CableSetDomain): net_fabric_mode.cc
//   - the device list and what each device can do: net_devices.cc
//   - listen and connect (which comm, over which ports or routes): net_connect.cc
//   - memory registrations (MrCache + every fabric device's cache): net_registrations.cc
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/comm.h"
#include "proxy/fabric/relay/seat_forwarder.h"
#include "proxy/relay/relay_service.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/fabric_runtime.h"
#include "proxy/runtime/net_runtime.h"
#include "proxy/tcp/tcp_connector.h"
#include "proxy/verbs/ib_ports.h"
#include "proxy/verbs/verbs_comm.h"
#include "proxy/verbs/verbs_setup.h"
#include "topology/netdev.h"

namespace railyard::runtime {

/// A connect() in progress, kept in the handle's connect-state area between retries.
struct PendingConnect {
  proxy::Clock::time_point since = proxy::Clock::now();
  std::unique_ptr<proxy::TcpConnector> connector;  ///< NULL while waiting for a route
  std::unique_ptr<proxy::verbs::VerbsConnector> verbs;  ///< the verbs transport's connect
  uint32_t salt = 0;
};

/// Process-wide plugin state. Devices are discovered on the first init and kept for
/// the life of the process, so the name/pciPath strings handed out by
/// getProperties stay valid even across finalize/init cycles.
struct NetState {
  std::mutex mu;
  int refs = 0;  ///< live contexts
  /// refs > 0, readable without mu: test() checks it on every call (after the last
  /// finalize every comm, and with it every request, is freed).
  std::atomic<bool> initialised{false};
  bool discovered = false;
  const env::Config* config = nullptr;
  std::vector<topology::NetDevice> devices;
  std::string host;
  std::unordered_set<CommContext*> contexts;
  std::unordered_set<proxy::Comm*> comms;          ///< open send/recv comms
  std::unordered_set<proxy::ListenComm*> listens;  ///< open listen comms
  std::unordered_set<PendingConnect*> connects;    ///< connects in progress
  /// Fabric send comms whose hello the listener's Worker has not acknowledged yet:
  /// connect() returns them only then (or their error), kept in the handle's
  /// connect-state area between calls (net_connect.cc); finalize frees the rest.
  std::unordered_set<proxy::Comm*> pendingSends;
  // Router mode (RAILYARD_FABRIC): the rails as one device, routes, relays. Started
  // by the first init and stopped by the last finalize (their threads with them).
  bool fabricMode = false;
  std::vector<proxy::FabricRail> fabricRails;
  std::string fabricName;  ///< device name, e.g. "railyard[p0r0+p0r1+p1r0+p1r1]"
  int fabricSpeedMbps = 0; ///< sum of the speeds of the rails in fabricName
  int fabricNameRails = 0; ///< how many rails fabricName names (shared segments left out)
  std::deque<std::string> retiredNames;  ///< names handed out before (NCCL may keep the pointers)
  std::unique_ptr<proxy::Router> router;
  std::unique_ptr<proxy::RelayService> relay;
  /// The fabric relay (relayed fabric Endpoints), serving while `relay` holds the seat.
  std::unique_ptr<fabric::relay::ForwarderHost> forwarder;
  uint32_t connectSalt = 0;
  // Verbs transport (RAILYARD_TRANSPORT): NCCL devices are RDMA ports, or devices
  // fused from several by makeVDevice. Ports stay open for the process's life.
  bool verbsMode = false;
  bool fabricVerbs = false;  ///< fabric mode with RDMA ports: cabled peers over verbs
  std::unique_ptr<proxy::verbs::IbPorts> ib;
  struct VerbsDev {
    std::vector<int> ports;  ///< indices into ib
    std::string name;        ///< e.g. "mlx5_0" or "mlx5_0+mlx5_1" (fused)
  };
  std::deque<VerbsDev> verbsDevs;  ///< deque: names handed to NCCL stay put
  // The NCCL comms over the fabric (proxy/nccl/), chosen by UsesFabricComms: the
  // process's FabricRuntime (runtime::Fabric(); per device a Domain, its
  // RegistrationCache and CommWorker), created at the first init and never freed;
  // its threads run from the first init to the last finalize.
  bool fabricComms = false;
  runtime::FabricRuntime* fabric = nullptr;
  // Fabric mode over the fabric comms: the Router whose cabling graph the
  // CableSetDomain routes by (NULL from the last finalize to the next init). Its own
  // lock: the Domain reads it from inside init (g.mu held) and from connects.
  std::mutex graphMu;
  proxy::Router* graphRouter = nullptr;
};

namespace detail {

// ---- net_runtime.cc ----
/// The stages of StartThreads (net_runtime.cc), in start order: after each one, every
/// thread and service of the stages before it (and of it) runs.
enum class StartStage : int {
  kNone = 0,           ///< no fault
  kRdmaEvents = 1,     ///< the RDMA port event thread (verbs, fabric mode with verbs)
  kFabricRuntime = 2,  ///< the FabricRuntime's CommWorkers (TCP or verbs mode over the fabric comms)
  kFabric = 3,         ///< fabric mode: the cabling agent, relay and fabric relay (StartFabric)
  kFabricModeComms = 4,  ///< fabric mode over the fabric comms: the CableSetDomain's CommWorker
};
/// Test hook: makes StartThreads fail (SystemError naming the stage) right after
/// `stage` succeeded, as a real failure of the next stage would, so a test can check
/// that a failed init undoes what it started at every stage. kNone (the default)
/// turns it off. Process-wide; thread-safe.
void FailStartThreadsAfterForTesting(StartStage stage);

// ---- net_transport.cc ----
/// THE one place that chooses between the comms written once over the fabric and
/// the older per-transport comms (see its definition), and says so: one INFO line with
/// the choice and its reason (CommsChoiceReason), and a WARN where RAILYARD_COMMS=fabric
/// is not honoured. Called once per init (Discover). Requires the devices and the
/// transport choice.
bool UsesFabricComms(const NetState& g);
/// Opens the RDMA ports when RAILYARD_TRANSPORT asks for verbs (or auto finds some);
/// `fabric`: fabric mode has rails. Requires g.mu; sets g.verbsMode / g.fabricVerbs.
Status ChooseTransport(NetState& g, const env::Config& cfg, bool fabric);
/// Verbs mode over the fabric comms: the FabricRuntime with one verbs Domain per
/// NCCL device (g.verbsDevs). Requires g.mu and g.ib.
Status CreateVerbsRuntime(NetState& g, std::unique_ptr<runtime::FabricRuntime>* out);
/// The verbs device `vd` as the FabricRuntime names it (its ports as "device:port").
runtime::FabricRuntime::VerbsDevice VerbsRuntimeDevice(const NetState& g, const NetState::VerbsDev& vd);

// ---- net_fabric_mode.cc ----
/// Starts the cabling agent and the relay (fabric mode) and names the one device.
/// Requires g.mu.
Status StartFabric(NetState& g);
/// Fabric mode over the fabric comms, after StartFabric: the CableSetDomain's
/// FabricRuntime (first init) and its CommWorker started. Requires g.mu and g.router.
Status StartFabricModeComms(NetState& g);
/// Whether a fabric-mode connect that found no route yet may be tried again
/// (RAILYARD_TIMEOUT_MS not passed); else `why` names the time waited.
bool FabricModeRouteMayCome(const NetState& g, void* handle, Status& why);
/// Every open RDMA port (fabric mode with verbs). Requires init.
std::vector<int> AllPorts(const NetState& g);
/// Verbs settings for fabric mode over `ports`.
proxy::verbs::VerbsDeviceSetup FabricVerbsSetup(const NetState& g, std::vector<int> ports, int trafficClass);
/// The RDMA ports of the rails a planned connection uses when every socket goes
/// straight over a cable; empty when any goes through a relay or lacks an RDMA port.
std::vector<int> CablePorts(const NetState& g, const std::vector<proxy::SocketTarget>& targets);

// ---- net_devices.cc ----
/// NCCL devices of the mode: verbs devices, 1 in fabric mode, else the interfaces.
int DeviceCount(const NetState& g);
/// Settings of the older TCP comms on device `dev`.
proxy::TcpOptions OptionsFor(const NetState& g, int dev);
/// Settings of a connection on verbs device `dev`. Requires init.
proxy::verbs::VerbsDeviceSetup VerbsSetupFor(const NetState& g, int dev, int trafficClass);

}  // namespace detail
}  // namespace railyard::runtime
