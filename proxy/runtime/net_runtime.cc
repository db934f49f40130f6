// NetRuntime's life: the first Open discovers the devices and chooses the transport,
// every thread starts in StartThreads and stops in the last Close, and the registry
// of open contexts (one per communicator) decides which Open is first and which
// Close is last.
#include "proxy/runtime/net_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"
#include "proxy/mr_cache.h"
#include "proxy/routing/relay_hop_names.h"
#include "proxy/runtime/net_state.h"
#include "topology/cluster_key.h"
#include "topology/loopback_rail.h"

namespace railyard::runtime {

using namespace detail;

namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

/// How long a rank's finalize carries the fabric relay routes through its host
/// (at most RAILYARD_RELAY_DRAIN_MS), in ms.
constexpr int kFinalizeRelayDrainMs = 2000;

/// FailStartThreadsAfterForTesting's stage (a StartStage; 0 = no fault).
std::atomic<int> g_failAfterStage{0};

/// The test hook's fault after `reached` (Ok unless the hook names that stage).
Status InjectedFault(StartStage reached) {
  if (g_failAfterStage.load(std::memory_order_acquire) != static_cast<int>(reached)) return Status::Ok();
  return SystemError("init stopped by the test hook after start stage " +
                     std::to_string(static_cast<int>(reached)));
}

/// What fabric mode's StartFabric runs (each NULL when it did not start), taken out
/// of the state under g.mu so they can stop outside it.
struct FabricModeServices {
  std::unique_ptr<fabric::relay::ForwarderHost> forwarder;
  std::unique_ptr<proxy::RelayService> relay;
  std::unique_ptr<proxy::Router> router;
};

/// Moves the fabric-mode services out of the state (NULL there after). Requires g.mu.
FabricModeServices TakeFabricModeServices(NetState& g) {
  FabricModeServices s;
  s.forwarder = std::move(g.forwarder);
  s.relay = std::move(g.relay);
  s.router = std::move(g.router);
  return s;
}

/// Stops every thread StartThreads starts, whichever of its stages ran (each stop is
/// a no-op for what never started), and joins them: the FabricRuntime's CommWorkers,
/// the RDMA port events, then the fabric relay, the relay and the cabling agent (the
/// relays read the Router). `drainMs` >= 0: the fabric relay first carries the routes
/// through this host that long at most (a clean finalize); -1: they break at once (a
/// failed init). Every comm must be closed first. The caller holds g.mu or has taken
/// the services out under it.
void StopThreads(NetState& g, FabricModeServices s, int drainMs) {
  if (g.fabric != nullptr) g.fabric->Stop();  // after every fabric comm is closed
  if (g.ib != nullptr) g.ib->StopEvents();    // ports stay open: NCCL may still hold registrations
  if (s.router) proxy::SetAddressNamer(nullptr);
  {
    std::lock_guard lock(g.graphMu);
    g.graphRouter = nullptr;  // the fabric comms are stopped: nothing routes any more
  }
  if (s.forwarder && drainMs >= 0) {
    // Ranks relaying for each other end together: carry the routes through this
    // host a moment longer, until their sources close them (else each source's leg
    // breaks with its close notice outstanding: a WARN at every clean end), bounded.
    const size_t left = s.forwarder->Drain(drainMs);
    if (left > 0) RY_INFO(log::kNet, "finalize: %zu fabric relay routes still open; they break now", left);
  }
  s.forwarder.reset();  // stops the fabric relay's thread (it reads the relay's seat and the router)
  s.relay.reset();      // hands the relay seat to a process standing by; sockets it relays break
  s.router.reset();     // stops the cabling agent thread
}

/// Undoes what a failed Discover set (the RDMA ports ChooseTransport opened, the
/// mode), so the next init discovers afresh. No comm or registration exists yet (none
/// can before the first init succeeds). Requires g.mu.
void UndoDiscover(NetState& g) {
  if (g.ib != nullptr) proxy::GlobalMrCache().SetBackend(nullptr);
  g.ib.reset();
  g.verbsDevs.clear();
  g.verbsMode = false;
  g.fabricVerbs = false;
  g.fabricMode = false;
  g.fabricRails.clear();
  g.fabricComms = false;
  g.devices.clear();
  g.config = nullptr;
}

}  // namespace

void detail::FailStartThreadsAfterForTesting(StartStage stage) {
  g_failAfterStage.store(static_cast<int>(stage), std::memory_order_release);
}

NetRuntime::NetRuntime() : g_(*new NetState()) {}  // never destroyed, as the runtime

NetRuntime& NetRuntime::Process() {
  static NetRuntime* rt = new NetRuntime();  // never destroyed: NCCL may call in after exit handlers
  return *rt;
}

bool NetRuntime::Running() const { return g_.initialised.load(std::memory_order_acquire); }

bool NetRuntime::UsesFabricComms() {
  std::lock_guard lock(g_.mu);
  return g_.fabricComms;
}

bool NetRuntime::InFabricMode() {
  std::lock_guard lock(g_.mu);
  return g_.refs > 0 && g_.fabricMode;
}

Status NetRuntime::Discover() {
  NetState& g = g_;
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  // A set RAILYARD_CLUSTER_KEY_FILE that does not load stops init in every mode, as in
  // railyard-info and railyardd; only fabric mode used to load it (and then silently not).
  {
    std::shared_ptr<const topology::ClusterKey> key;
    RY_RETURN_IF_ERROR(topology::LoadClusterKey(cfg->clusterKeyFile, &key));
  }
  std::vector<topology::NetDevice> devs;
  Status s = topology::SelectSocketDevices(cfg->socketIfname, &devs);
  if (!s.ok() && s.code() == Code::kInvalidUsage && !cfg->socketIfname.empty()) {
    // Say which variable held the list: NCCL_SOCKET_IFNAME is read only while ours is unset.
    s = InvalidUsage(std::string(cfg->railIfname.empty() ? "NCCL_SOCKET_IFNAME" : "RAILYARD_SOCKET_IFNAME") +
                     "='" + cfg->socketIfname + "' is set: " + s.message());
  }
  RY_RETURN_IF_ERROR(s);
  if (devs.empty()) return SystemError("no network device is usable");
  std::vector<proxy::FabricRail> rails;
  if (cfg->fabric != "off") {
    // Rails follow RAILYARD_SOCKET_IFNAME only; NCCL_SOCKET_IFNAME is NCCL's bootstrap choice.
    std::string whyNone;
    RY_RETURN_IF_ERROR(proxy::SelectFabricRails(cfg->railIfname, cfg->defaultSpeedMbps, &rails, &whyNone,
                                                "RAILYARD_SOCKET_IFNAME",
                                                proxy::BootstrapIfname(cfg->railIfname, cfg->socketIfname)));
    if (rails.empty() && cfg->fabric == "on") {
      return InvalidUsage(topology::FabricOnWithoutRailText("RAILYARD_SOCKET_IFNAME", whyNone));
    }
    if (rails.empty()) {
      RY_INFO(log::kInit | log::kNet, "fabric mode off: no rail (%s)", whyNone.c_str());
    } else if (cfg->railIfname != cfg->socketIfname) {
      RY_INFO(log::kInit | log::kNet,
              "fabric: NCCL_SOCKET_IFNAME='%s' chooses NCCL's bootstrap network, not the rails "
              "(RAILYARD_SOCKET_IFNAME does)",
              cfg->socketIfname.c_str());
    }
  }
  RY_RETURN_IF_ERROR(ChooseTransport(g, *cfg, !rails.empty()));
  g.config = cfg;
  g.devices = std::move(devs);
  // RAILYARD_HOST_NAME names this host in every mode (errors, handles), not only in fabric mode.
  g.host = cfg->hostName.empty() ? HostName() : cfg->hostName;
  g.fabricMode = !rails.empty();
  g.fabricRails = std::move(rails);
  g.fabricComms = detail::UsesFabricComms(g);
  if (g.fabricComms && !g.fabricMode) {  // fabric mode: StartFabricModeComms
    std::unique_ptr<runtime::FabricRuntime> rt;
    RY_RETURN_IF_ERROR(g.verbsMode ? CreateVerbsRuntime(g, &rt) : runtime::FabricRuntime::Create(*cfg, g.devices, &rt));
    g.fabric = rt.release();  // never freed (see NetState)
    runtime::SetFabric(g.fabric);
  }
  g.discovered = true;
  for (size_t i = 0; i < g.devices.size(); ++i) {
    const auto& d = g.devices[i];
    RY_INFO(log::kInit | log::kNet, "Railyard device %zu: %s %s speed %d Mbps%s%s", i,
            d.name.c_str(), d.addrString.c_str(), d.SpeedOr(cfg->defaultSpeedMbps),
            d.pciPath.empty() ? "" : " pci ", d.pciPath.c_str());
  }
  return Status::Ok();
}

Status NetRuntime::StartThreads() {
  NetState& g = g_;
  if (g.ib != nullptr) {
    RY_RETURN_IF_ERROR(g.ib->StartEvents());
    RY_INFO(log::kInit | log::kNet, "Railyard verbs transport: %zu RDMA ports", g.ib->size());
    RY_RETURN_IF_ERROR(InjectedFault(StartStage::kRdmaEvents));
  }
  if (g.fabric != nullptr && !g.fabricMode) {
    RY_RETURN_IF_ERROR(g.fabric->Start());  // the comms' helper threads
    RY_RETURN_IF_ERROR(InjectedFault(StartStage::kFabricRuntime));
  }
  if (g.fabricMode) {
    RY_RETURN_IF_ERROR(StartFabric(g));
    RY_RETURN_IF_ERROR(InjectedFault(StartStage::kFabric));
    if (g.fabricComms) {
      RY_RETURN_IF_ERROR(StartFabricModeComms(g));
      RY_RETURN_IF_ERROR(InjectedFault(StartStage::kFabricModeComms));
    }
    // The count is of the rails the name lists; shared segments (a management bridge) are left out of both.
    const size_t left = g.fabricRails.size() - static_cast<size_t>(g.fabricNameRails);
    const std::string leftOut =
        left == 0 ? "" : " (" + std::to_string(left) + " shared segment" + (left == 1 ? "" : "s") + " left out)";
    RY_INFO(log::kInit | log::kNet, "Railyard fabric mode: one device %s over %d rails%s", g.fabricName.c_str(),
            g.fabricNameRails, leftOut.c_str());
  }
  return Status::Ok();
}

Status NetRuntime::Open(uint64_t commId, int trafficClass, CommContext** out) {
  NetState& g = g_;
  std::lock_guard lock(g.mu);
  // A failed init undoes what it did (NCCL may init again, finalize, or unload the
  // plugin): no thread of ours may outlive it, and the next init starts afresh.
  if (!g.discovered) {
    if (Status s = Discover(); !s.ok()) {
      UndoDiscover(g);
      return s;
    }
  }
  if (g.refs == 0) {
    if (Status s = StartThreads(); !s.ok()) {
      // No context is open, so no comm exists; stopped under g.mu so no other init
      // sees the services half gone.
      StopThreads(g, TakeFabricModeServices(g), -1);
      RY_INFO(log::kInit | log::kNet, "init failed; every thread it started is stopped: %s", s.message().c_str());
      return s;
    }
  }
  auto* c = new CommContext();
  c->commId = commId;
  c->trafficClass = trafficClass;
  g.contexts.insert(c);
  ++g.refs;
  g.initialised.store(true, std::memory_order_release);
  *out = c;
  return Status::Ok();
}

bool NetRuntime::Close(CommContext* ctx) {
  NetState& g = g_;
  std::vector<proxy::Comm*> comms;
  std::vector<proxy::ListenComm*> listens;
  std::vector<PendingConnect*> connects;
  FabricModeServices services;
  {
    std::lock_guard lock(g.mu);
    if (ctx == nullptr || g.contexts.erase(ctx) == 0) return false;
    delete ctx;
    if (--g.refs > 0) return true;
    g.initialised.store(false, std::memory_order_release);
    // Last context: stop every thread the plugin started before NCCL may dlclose us.
    comms.assign(g.comms.begin(), g.comms.end());
    comms.insert(comms.end(), g.pendingSends.begin(), g.pendingSends.end());
    g.pendingSends.clear();
    listens.assign(g.listens.begin(), g.listens.end());
    connects.assign(g.connects.begin(), g.connects.end());
    g.comms.clear();
    g.listens.clear();
    g.connects.clear();
    services = TakeFabricModeServices(g);
  }
  if (!comms.empty()) {
    RY_INFO(log::kNet, "finalize closes %zu comms still open", comms.size());
  }
  for (proxy::Comm* c : comms) {
    c->Close();
    delete c;
  }
  for (proxy::ListenComm* l : listens) delete l;
  for (PendingConnect* c : connects) delete c;
  const int drainMs = g.config != nullptr ? std::min(g.config->relayDrainMs, kFinalizeRelayDrainMs) : -1;
  StopThreads(g, std::move(services), drainMs);
  return true;
}

}  // namespace railyard::runtime
