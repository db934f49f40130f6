// The one implementation of the NCCL net API (v11 shape) over Railyard's proxy
// layer. Calling rules: ../shared/docs/nccl-net-abi.md §2.5 and §2.6.
#include "plugin/net.h"
#include "plugin/ptr_support.h"

#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "env/config.h"
#include "env/log.h"
#include "proxy/comm.h"
#include "proxy/fabric/relay/seat_forwarder.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/nccl/comm_worker.h"
#include "proxy/nccl/fabric_listen_comm.h"
#include "proxy/nccl/fabric_recv_comm.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/runtime/fabric_runtime.h"
#include "proxy/handle.h"
#include "proxy/mr_cache.h"
#include "proxy/routing/router.h"
#include "proxy/relay/relay_service.h"
#include "proxy/routing/relay_hop_names.h"
#include "topology/cluster_key.h"
#include "proxy/tcp/tcp_connector.h"
#include "proxy/tcp/tcp_listen_comm.h"
#include "proxy/verbs/gpu_support.h"
#include "proxy/verbs/ib_ports.h"
#include "proxy/verbs/verbs_comm.h"
#include "proxy/verbs/verbs_setup.h"
#include "topology/cluster_key.h"
#include "topology/graph_json.h"
#include "topology/netdev.h"
#include "topology/utf8_name.h"

namespace railyard::plugin {

namespace {

using proxy::Comm;
using proxy::ListenComm;
using proxy::MemoryRegion;
using proxy::RecvComm;
using proxy::Request;
using proxy::SendComm;

/// Per-communicator context handed back by v11 init (§1.4: init runs once per comm).
struct Context {
  uint64_t commId = 0;
  int trafficClass = -1;  ///< NCCL_NET_TRAFFIC_CLASS_UNDEF when unset
  /// This process's rank in the communicator, named in its comms' errors.
  std::shared_ptr<proxy::RankSource> rank = std::make_shared<proxy::RankSource>();
};

/// The RankSource of an init context; a fresh one when `ctx` is NULL (the v8..v10
/// adapters pass none: the comms then learn the rank from their own sends).
std::shared_ptr<proxy::RankSource> RankOf(void* ctx) {
  return ctx != nullptr ? static_cast<Context*>(ctx)->rank : std::make_shared<proxy::RankSource>();
}

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
struct Global {
  std::mutex mu;
  int refs = 0;  ///< live contexts
  /// refs > 0, readable without mu: test() checks it on every call (after the last
  /// finalize every comm, and with it every request, is freed).
  std::atomic<bool> initialised{false};
  bool discovered = false;
  const env::Config* config = nullptr;
  std::vector<topology::NetDevice> devices;
  std::string host;
  std::unordered_set<Context*> contexts;
  std::unordered_set<Comm*> comms;                 ///< open send/recv comms
  std::unordered_set<ListenComm*> listens;         ///< open listen comms
  std::unordered_set<PendingConnect*> connects;   ///< connects in progress
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

Global& G() {
  static Global* g = new Global();  // never destroyed: NCCL may call in after exit handlers
  return *g;
}

/// THE one place that chooses between the comms written once over the fabric
/// (proxy/nccl/) and the older per-transport comms (proxy/tcp, proxy/verbs): the
/// fabric comms serve plain TCP mode on IPv4 devices, and verbs mode (over the
/// fabric's verbs transport, one verbs Domain per NCCL device) only with
/// RAILYARD_COMMS=fabric until they pass the conformance suite in the soft-RoCE
/// lane; fabric mode (RAILYARD_FABRIC, relays) keeps the older comms until relayed
/// Endpoints land; so do IPv6 devices in TCP mode (the fabric's TCP transport binds
/// IPv4 rails). RAILYARD_COMMS=legacy keeps the older comms everywhere. Requires the
/// devices and the transport choice.
bool UsesFabricComms(const Global& g) {
  if (g.verbsMode) return g.config->comms != "legacy";
  // Fabric mode over TCP rails: the comms over the CableSetDomain (relays through the
  // Forwarder) with RAILYARD_COMMS=fabric; rails with RDMA ports keep the older comms.
  if (g.fabricMode) return g.config->comms == "fabric" && g.ib == nullptr;
  if (g.config->comms == "legacy" || g.verbsMode || g.fabricMode || g.ib != nullptr) return false;
  for (const topology::NetDevice& d : g.devices) {
    if (d.family() != AF_INET) return false;
  }
  return !g.devices.empty();
}

proxy::nccl::LocalIdentity Self() {
  return {G().host, static_cast<uint32_t>(::getpid())};
}

/// The MemHandle NCCL passes back, or NULL when `mhandle` is not one of ours.
proxy::nccl::MemHandle* AsHandle(void* mhandle) {
  auto* h = static_cast<proxy::nccl::MemHandle*>(mhandle);
  return h != nullptr && h->magic == proxy::nccl::MemHandle::kMagic ? h : nullptr;
}

/// The MrCache registration of an mhandle (for the older comms), NULL if none.
MemoryRegion* Legacy(void* mhandle) {
  proxy::nccl::MemHandle* h = AsHandle(mhandle);
  return h != nullptr ? h->legacy : nullptr;
}

/// Access of an NCCL buffer's fabric Region: the peer's data Writes land in it; device
/// memory is also read by this host's own HCA (the iflush READ through the loopback
/// Endpoint, FabricRecvComm::IflushFabric).
uint32_t FabricAccessOf(fabric::MemoryKind kind) {
  uint32_t a = fabric::kAccessLocal | fabric::kAccessRemoteWrite;
  if (kind == fabric::MemoryKind::kDevice) a |= fabric::kAccessRemoteRead;
  return a;
}

/// Wraps a MrCache registration into a MemHandle, registering [data, data + size)
/// (at least 1 byte, memory of `kind`) in every fabric Domain too. Deregisters
/// everything on error.
Status MakeHandle(MemoryRegion* legacy, void* data, size_t size, void** mhandle,
                  fabric::MemoryKind kind = fabric::MemoryKind::kHost) {
  Global& g = G();
  auto h = std::make_unique<proxy::nccl::MemHandle>();
  h->legacy = legacy;
  const size_t ndev = g.fabric != nullptr ? g.fabric->devices() : 0;
  h->devices.resize(ndev);
  for (size_t i = 0; i < ndev && data != nullptr; ++i) {
    Status s = g.fabric->registrations(i).Acquire(data, std::max<size_t>(size, 1),
                                                  FabricAccessOf(kind), kind, &h->devices[i].region);
    if (!s.ok()) {
      for (size_t j = 0; j < i; ++j) (void)g.fabric->registrations(j).Release(h->devices[j].region);
      (void)proxy::GlobalMrCache().Deregister(legacy);
      return s;
    }
    h->devices[i].packedKey = h->devices[i].region->Key().Pack();
  }
  *mhandle = h.release();
  return Status::Ok();
}

ncclResult_t Fail(const Status& s, const char* call) {
  RY_WARN("%s: %s", call, s.message().c_str());
  return static_cast<ncclResult_t>(s.ncclResult());
}

proxy::TcpOptions OptionsFor(int dev) {
  Global& g = G();
  proxy::TcpOptions o;
  o.nsocks = g.config->nsocks;
  o.nthreads = g.config->nthreads;
  o.chunkBytes = g.config->chunkBytes;
  o.timeoutMs = g.config->timeoutMs;
  o.acceptTimeoutMs = g.config->acceptTimeoutMs;
  o.maxPendingSockets = g.config->acceptMaxPending;
  o.device = g.fabricMode ? g.fabricName : g.devices[static_cast<size_t>(dev)].name;
  return o;
}

int DeviceCount(const Global& g) {
  if (g.verbsMode) return static_cast<int>(g.verbsDevs.size());
  return g.fabricMode ? 1 : static_cast<int>(g.devices.size());
}

/// Settings of a connection on verbs device `dev`. Requires init.
proxy::verbs::VerbsDeviceSetup VerbsSetupFor(int dev, int trafficClass) {
  Global& g = G();
  proxy::verbs::VerbsDeviceSetup v;
  v.ib = g.ib.get();
  v.ports = g.verbsDevs[static_cast<size_t>(dev)].ports;
  v.link = proxy::verbs::LinkConfigFrom(*g.config);
  v.initTrafficClass = trafficClass;
  v.options.timeoutMs = g.config->timeoutMs;
  v.options.useInline = g.config->ibUseInline != 0;
  v.options.device = g.verbsDevs[static_cast<size_t>(dev)].name;
  return v;
}

/// What getProperties reports as ptrSupport: host memory always; with RDMA ports,
/// CUDA memory when a GPUDirect peer-memory module is loaded, and DMA-BUF (with CUDA)
/// when the ports and the CUDA driver both support it. Nothing is claimed that this
/// host cannot do (proxy/verbs/gpu_support.h).
int PtrSupport(const Global& g) {
  RouteFacts f;
  // Fabric mode with RDMA ports still relays some peers over TCP (plugin/ptr_support.h).
  f.everyRouteRdma = g.verbsMode && g.ib != nullptr && g.ib->size() > 0;
  if (!f.everyRouteRdma) return PtrSupportFor(f);
  f.gdrPeerMemory = proxy::verbs::GdrPeerMemory();
  f.portsDmaBuf = true;
  for (size_t i = 0; i < g.ib->size(); ++i) f.portsDmaBuf &= g.ib->at(i).dmabuf;
  f.cudaDmaBuf = proxy::verbs::CudaDmaBuf();
  return PtrSupportFor(f);
}

/// Verbs mode over the fabric comms: ptrSupport of device `dev` from its verbs
/// Domain, i.e. from exactly the ports its connections use (every route of a verbs
/// device is RDMA): CUDA with a peer-memory module (kCapDeviceMemory), DMA-BUF (with
/// CUDA) when every port of the device registers DMA-BUFs (kCapDmaBuf) and the CUDA
/// driver exports them. Requires g.fabric and dev < its devices().
int VerbsFabricPtrSupport(Global& g, int dev) {
  const fabric::Capabilities& c = g.fabric->domain(static_cast<size_t>(dev)).capabilities();
  RouteFacts f;
  f.everyRouteRdma = true;
  f.gdrPeerMemory = c.Has(fabric::kCapDeviceMemory);
  f.portsDmaBuf = c.Has(fabric::kCapDmaBuf);
  f.cudaDmaBuf = f.portsDmaBuf && proxy::verbs::CudaDmaBuf();
  return PtrSupportFor(f);
}

/// The verbs device `vd` as the FabricRuntime names it (its ports as "device:port").
runtime::FabricRuntime::VerbsDevice VerbsRuntimeDevice(const Global& g, const Global::VerbsDev& vd) {
  runtime::FabricRuntime::VerbsDevice d;
  d.name = vd.name;
  for (int p : vd.ports) d.ports.push_back(g.ib->at(static_cast<size_t>(p)).Name());
  return d;
}

/// Verbs mode over the fabric comms: the FabricRuntime with one verbs Domain per
/// NCCL device (g.verbsDevs). Its Workers' bootstrap listeners bind the first
/// RAILYARD_SOCKET_IFNAME interface when it is IPv4 (where the older verbs comms
/// put their control sockets), else the first port's address. The Domains are
/// built on the ports init opened (g.ib), never rediscovered per device (seconds each
/// under emulation). Requires g.mu and g.ib.
Status CreateVerbsRuntime(Global& g, std::unique_ptr<runtime::FabricRuntime>* out) {
  std::vector<runtime::FabricRuntime::VerbsDevice> devs;
  for (const Global::VerbsDev& vd : g.verbsDevs) devs.push_back(VerbsRuntimeDevice(g, vd));
  std::string bootstrap;
  if (!g.devices.empty() && g.devices[0].family() == AF_INET) bootstrap = g.devices[0].addrString;
  // Non-owning: g.ib stays open for the life of the process (NCCL may still hold
  // registrations after finalize), longer than the runtime, which is never freed.
  std::shared_ptr<proxy::verbs::IbPorts> ports(std::shared_ptr<void>(), g.ib.get());
  return runtime::FabricRuntime::CreateVerbs(*g.config, devs, bootstrap, out, std::move(ports));
}

/// regMrDmaBuf of a real DMA-BUF (fd >= 0) in verbs mode over the fabric comms: the
/// buffer registered through every device's RegistrationCache (AcquireDmaBuf:
/// ibv_reg_dmabuf_mr on each port), plus a software MrCache entry for RecvTable's
/// checks. `type` NCCL_PTR_CUDA is device memory, NCCL_PTR_HOST host memory (a
/// udmabuf). InvalidArgument for a NULL address or 0 bytes; InvalidUsage when a
/// device's ports cannot register DMA-BUFs; nothing stays registered on error.
Status RegDmaBufVerbsFabric(void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  Global& g = G();
  if (data == nullptr || size == 0) {
    return InvalidArgument("regMrDmaBuf of fd " + std::to_string(fd) + " with " +
                           (data == nullptr ? "a NULL address" : "0 bytes"));
  }
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    return InvalidArgument("regMrDmaBuf of pointer type " + std::to_string(type) + " (NCCL_PTR_HOST or NCCL_PTR_CUDA)");
  }
  const fabric::MemoryKind kind = type == NCCL_PTR_CUDA ? fabric::MemoryKind::kDevice : fabric::MemoryKind::kHost;
  MemoryRegion* legacy = nullptr;
  RY_RETURN_IF_ERROR(proxy::GlobalMrCache().Register(data, size, type, &legacy));
  auto h = std::make_unique<proxy::nccl::MemHandle>();
  h->legacy = legacy;
  const size_t ndev = g.fabric->devices();
  h->devices.resize(ndev);
  for (size_t i = 0; i < ndev; ++i) {
    Status s = g.fabric->registrations(i).AcquireDmaBuf(data, size, fd, offset, FabricAccessOf(kind), kind,
                                                        &h->devices[i].region);
    if (!s.ok()) {
      for (size_t j = 0; j < i; ++j) (void)g.fabric->registrations(j).Release(h->devices[j].region);
      (void)proxy::GlobalMrCache().Deregister(legacy);
      return s;
    }
    h->devices[i].packedKey = h->devices[i].region->Key().Pack();
  }
  *mhandle = h.release();
  return Status::Ok();
}

/// Every open RDMA port (fabric mode with verbs). Requires init.
std::vector<int> AllPorts() {
  std::vector<int> ports;
  for (size_t i = 0; i < G().ib->size(); ++i) ports.push_back(static_cast<int>(i));
  return ports;
}

/// Verbs settings for fabric mode over `ports`.
proxy::verbs::VerbsDeviceSetup FabricVerbsSetup(std::vector<int> ports, int trafficClass) {
  Global& g = G();
  proxy::verbs::VerbsDeviceSetup v;
  v.ib = g.ib.get();
  v.ports = std::move(ports);
  v.link = proxy::verbs::LinkConfigFrom(*g.config);
  v.initTrafficClass = trafficClass;
  v.options.timeoutMs = g.config->timeoutMs;
  v.options.useInline = g.config->ibUseInline != 0;
  v.options.device = g.fabricName;
  v.fabric = true;
  return v;
}

/// The RDMA ports of the rails a planned connection uses when every socket goes
/// straight over a cable (no relay); empty when any goes through a relay or a rail
/// has no RDMA port (the connection then runs over TCP).
std::vector<int> CablePorts(const std::vector<proxy::SocketTarget>& targets) {
  Global& g = G();
  std::vector<int> ports;
  for (const proxy::SocketTarget& t : targets) {
    if (!t.prefix.empty()) return {};
    int found = -1;
    for (size_t i = 0; i < g.ib->size(); ++i) {
      if (g.ib->at(i).netdev == t.rail && !g.ib->at(i).down.load()) found = static_cast<int>(i);
    }
    if (found < 0) return {};
    if (std::find(ports.begin(), ports.end(), found) == ports.end()) ports.push_back(found);
  }
  return ports;
}

/// Opens the RDMA ports when RAILYARD_TRANSPORT asks for verbs (or auto finds some
/// and fabric mode is off). Requires g.mu; sets g.verbsMode.
Status ChooseTransport(Global& g, const env::Config& cfg, bool fabric) {
  if (cfg.transport == "tcp") return Status::Ok();
  std::vector<std::string> skipped;
  Status s = proxy::verbs::IbPorts::Open(cfg, &g.ib, &skipped);
  if (s.ok() && g.ib->size() == 0) {
    std::string why;
    for (const auto& k : skipped) why += "; " + k;
    s = SystemError("no usable RDMA port" + (why.empty() ? std::string(" (no RDMA device)") : why));
  }
  if (!s.ok()) {
    g.ib.reset();
    if (cfg.transport == "verbs") {
      return Status(s.code(), "RAILYARD_TRANSPORT=verbs: " + s.message() +
                                  " (use RAILYARD_TRANSPORT=auto or tcp on hosts without RDMA, or run "
                                  "the soft-RoCE lane: tests/lanes/rxe/README.md)");
    }
    RY_INFO(log::kInit | log::kNet, "Railyard uses TCP: %s", s.message().c_str());
    return Status::Ok();
  }
  // The older comms register in the MR cache's hardware backend; the fabric comms
  // of verbs mode register through their Domains (the MR cache stays software).
  if (fabric || cfg.comms == "legacy") proxy::GlobalMrCache().SetBackend(g.ib.get());
  if (fabric) {
    // Switchless: peers on a cable get verbs QPs on that cable's ports; peers
    // further away go through relays over TCP. NCCL still sees one device.
    g.fabricVerbs = true;
    return Status::Ok();
  }
  g.verbsMode = true;
  for (size_t i = 0; i < g.ib->size(); ++i) {
    g.verbsDevs.push_back({{static_cast<int>(i)}, g.ib->at(i).device});
  }
  return Status::Ok();
}

/// Checks that init happened and `dev` names a device. InvalidUsage otherwise.
Status CheckDevice(int dev) {
  Global& g = G();
  std::lock_guard lock(g.mu);
  if (g.refs == 0) return InvalidUsage("the plugin is not initialised (call init first)");
  if (dev < 0 || dev >= DeviceCount(g)) {
    return InvalidArgument("device " + std::to_string(dev) + " does not exist (" +
                           std::to_string(DeviceCount(g)) + " devices)");
  }
  return Status::Ok();
}

/// Fabric mode over the fabric comms: the cabling graph of the Router running now
/// (an empty graph between the last finalize and the next init).
topology::ClusterGraph FabricModeGraph() {
  Global& g = G();
  std::lock_guard lock(g.graphMu);
  return g.graphRouter != nullptr ? g.graphRouter->Agent().Graph() : topology::ClusterGraph();
}

/// Fabric mode over the fabric comms, after StartFabric: creates (first init) the
/// FabricRuntime with one device, the host's CableSetDomain over every rail (routes
/// from the Router's cabling graph, relays through the hosts' Forwarders at
/// RAILYARD_FABRIC_RELAY_PORT), and starts its CommWorker, whose Worker gets a TCP
/// Worker per cable the graph knows now. Requires g.mu and g.router.
Status StartFabricModeComms(Global& g) {
  {
    std::lock_guard lock(g.graphMu);
    g.graphRouter = g.router.get();
  }
  if (g.fabric == nullptr) {
    std::vector<fabric::RailInfo> rails;
    for (const proxy::FabricRail& r : g.fabricRails) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &r.addr, text, sizeof text);
      rails.push_back({r.ifname, text, static_cast<uint32_t>(std::max(0, r.speedMbps))});
    }
    std::shared_ptr<const topology::ClusterKey> key;
    RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &key));
    runtime::CableSetOptions o = runtime::CableSetOptions::FromConfig(*g.config, g.router->HostId(), &FabricModeGraph,
                                                                      std::move(rails), std::move(key));
    o.multiRoute = true;  // the NCCL comms take a peer's ops over every route (proxy/nccl/peer_workers.h)
    std::unique_ptr<runtime::CableSetDomain> domain;
    RY_RETURN_IF_ERROR(runtime::CableSetDomain::Create(std::move(o), &domain));
    std::unique_ptr<runtime::FabricRuntime> rt;
    RY_RETURN_IF_ERROR(runtime::FabricRuntime::CreateOver(std::move(domain), g.fabricName, &rt));
    g.fabric = rt.release();  // never freed (see Global)
    runtime::SetFabric(g.fabric);
  }
  RY_INFO(log::kInit | log::kNet, "fabric mode over the fabric comms (RAILYARD_COMMS=fabric): cable set, "
          "relays through the Forwarders at port %d", g.config->fabricRelayPort);
  return g.fabric->Start();
}

/// Fabric mode over the fabric comms: whether a connect that found no route
/// (`why`: the cabling graph has no path to the listener's host yet) should be
/// tried again, i.e. RAILYARD_TIMEOUT_MS has not passed since the first try on this
/// handle (kept in the handle's connect-state area, as the older comms keep theirs).
/// False for every other error, and once the time is up (the error then names it).
bool FabricModeRouteMayCome(void* handle, Status& why) {
  const std::string& m = why.message();
  const bool noRouteYet = m.find("reachable") != std::string::npos || m.find("no route from") != std::string::npos ||
                          m.find("no rail of the peer") != std::string::npos;
  if (why.code() != Code::kInvalidUsage || !noRouteYet) return false;
  auto* wire = static_cast<proxy::nccl::FabricHandleWire*>(handle);
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(proxy::Clock::now().time_since_epoch()).count());
  if (wire->stageMagic != proxy::kStageMagic) {
    wire->stageMagic = proxy::kStageMagic;
    wire->stageState = now;
  }
  const uint64_t waited = now - wire->stageState;
  if (waited <= static_cast<uint64_t>(G().config->timeoutMs)) return true;
  why = Status(why.code(), why.message() + " (no route after " + std::to_string(waited) +
                               " ms: the host is not cabled to this host or any host that can relay)");
  return false;
}

/// Starts the cabling agent and the relay (fabric mode). Requires g.mu.
Status StartFabric(Global& g) {
  proxy::RouterOptions fo;
  bool truncated = false;
  RY_RETURN_IF_ERROR(topology::CheckLocalName(g.config->hostName.empty() ? g.host : g.config->hostName,
                                              g.config->hostName.empty() ? "the system host name" : "RAILYARD_HOST_NAME",
                                              &fo.hostName, &truncated));
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &fo.agent.key));
  fo.agent.port = static_cast<uint16_t>(g.config->discoveryPort);
  fo.agent.intervalMs = g.config->discoveryIntervalMs;
  fo.agent.deadIntervalMs = g.config->discoveryDeadMs;
  fo.relayPort = static_cast<uint16_t>(g.config->relayPort);
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(g.config->clusterKeyFile, &fo.clusterKey));  // relay records' MAC
  RY_RETURN_IF_ERROR(proxy::Router::Start(g.fabricRails, fo, &g.router));
  // Errors on relayed sockets name the relay that carried them.
  proxy::SetAddressNamer([r = g.router.get()](const in_addr& a) { return r->HostNameOfAddress(a); });
  proxy::RelayOptions ro;
  ro.port = fo.relayPort;
  ro.bufferBytes = g.config->relayBufferBytes;
  ro.role = proxy::RelaySeat::Role::kRank;  // relays only while no railyardd (or other rank) does
  ro.drainMs = 0;                           // finalize does not wait for other jobs' sockets
  ro.idleMs = g.config->relayIdleMs;
  ro.maxPerPeer = g.config->relayMaxPerPeer;
  if (Status s = proxy::RelayService::Start(g.router.get(), ro, &g.relay); !s.ok()) {
    // Another user's process holds the port, or the seat could not be reached.
    RY_INFO(log::kInit | log::kNet, "fabric: not relaying in this process: %s", s.message().c_str());
  }
  if (g.relay != nullptr) {
    // The fabric relay's thread: serves relayed fabric Endpoints while this process holds the seat.
    if (Status s = fabric::relay::StartSeatForwarder(*g.router, *g.relay, *g.config, -1, &g.forwarder); !s.ok()) {
      RY_INFO(log::kInit | log::kNet, "fabric: no fabric relay in this process: %s", s.message().c_str());
    }
  }
  // Let the agent hear its neighbours first (a few hello periods, woken by every
  // change), so the device NCCL sees leaves out shared segments such as a
  // management bridge, and the first connections find their routes at once.
  const topology::CablingAgent& agent = g.router->Agent();
  for (int i = 0; i < 10 && !agent.Settled(); ++i) {
    agent.WaitFor([](const topology::ClusterGraph&, uint64_t) { return false; }, fo.agent.intervalMs);
  }
  const auto shared = agent.SharedSegments();
  std::string name = "railyard[";
  int speed = 0, n = 0;
  for (const auto& r : g.fabricRails) {
    if (std::find(shared.begin(), shared.end(), r.ifname) != shared.end()) continue;
    name += (n++ ? "+" : "") + r.ifname;
    speed += r.speedMbps;
  }
  name += "]";
  if (!g.fabricName.empty()) g.retiredNames.push_back(std::move(g.fabricName));
  g.fabricName = name;
  g.fabricSpeedMbps = speed;
  g.fabricNameRails = n;
  return Status::Ok();
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

}  // namespace

ncclResult_t Init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                  ncclDebugLogger_t logFunction, ncclProfilerCallback_t /*profFunction*/) {
  if (ctx != nullptr) *ctx = nullptr;
  if (logFunction != nullptr) {
    log::SetNcclLogger(reinterpret_cast<log::NcclLogger>(logFunction));
  }
  Global& g = G();
  std::lock_guard lock(g.mu);
  if (!g.discovered) {
    const env::Config* cfg = nullptr;
    Status s = env::Load(&cfg);
    if (!s.ok()) return Fail(s, "init");
    // A set RAILYARD_CLUSTER_KEY_FILE that does not load stops init in every mode, as in
    // railyard-info and railyardd; only fabric mode used to load it (and then silently not).
    {
      std::shared_ptr<const topology::ClusterKey> key;
      s = topology::LoadClusterKey(cfg->clusterKeyFile, &key);
      if (!s.ok()) return Fail(s, "init");
    }
    std::vector<topology::NetDevice> devs;
    s = topology::SelectSocketDevices(cfg->socketIfname, &devs);
    if (!s.ok() && s.code() == Code::kInvalidUsage && !cfg->socketIfname.empty()) {
      // Say which variable held the list: NCCL_SOCKET_IFNAME is read only while ours is unset.
      s = InvalidUsage(std::string(cfg->railIfname.empty() ? "NCCL_SOCKET_IFNAME" : "RAILYARD_SOCKET_IFNAME") +
                       "='" + cfg->socketIfname + "' chose the socket interfaces: " + s.message());
    }
    if (!s.ok()) return Fail(s, "init");
    if (devs.empty()) return Fail(SystemError("no network device is usable"), "init");
    std::vector<proxy::FabricRail> rails;
    if (cfg->fabric != "off") {
      // Rails follow RAILYARD_SOCKET_IFNAME only; NCCL_SOCKET_IFNAME is NCCL's bootstrap choice.
      std::string whyNone;
      s = proxy::SelectFabricRails(cfg->railIfname, cfg->defaultSpeedMbps, &rails, &whyNone,
                                   "RAILYARD_SOCKET_IFNAME",
                                   proxy::BootstrapIfname(cfg->railIfname, cfg->socketIfname));
      if (!s.ok()) return Fail(s, "init");
      if (rails.empty() && cfg->fabric == "on") {
        return Fail(InvalidUsage("RAILYARD_FABRIC=on but no interface qualifies as a rail (IPv4, not "
                                 "loopback, no default route; RAILYARD_SOCKET_IFNAME chooses): " +
                                 whyNone),
                    "init");
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
    if (Status t = ChooseTransport(g, *cfg, !rails.empty()); !t.ok()) return Fail(t, "init");
    g.config = cfg;
    g.devices = std::move(devs);
    // RAILYARD_HOST_NAME names this host in every mode (errors, handles), not only in fabric mode.
    g.host = cfg->hostName.empty() ? HostName() : cfg->hostName;
    g.fabricMode = !rails.empty();
    g.fabricRails = std::move(rails);
    g.fabricComms = UsesFabricComms(g);
    if (g.fabricComms && !g.fabricMode) {  // fabric mode: StartFabricModeComms
      std::unique_ptr<runtime::FabricRuntime> rt;
      Status f = g.verbsMode ? CreateVerbsRuntime(g, &rt) : runtime::FabricRuntime::Create(*cfg, g.devices, &rt);
      if (!f.ok()) return Fail(f, "init");
      g.fabric = rt.release();  // never freed (see Global)
      runtime::SetFabric(g.fabric);
    }
    g.discovered = true;
    for (size_t i = 0; i < g.devices.size(); ++i) {
      const auto& d = g.devices[i];
      RY_INFO(log::kInit | log::kNet, "Railyard device %zu: %s %s speed %d Mbps%s%s", i,
              d.name.c_str(), d.addrString.c_str(), d.SpeedOr(cfg->defaultSpeedMbps),
              d.pciPath.empty() ? "" : " pci ", d.pciPath.c_str());
    }
  }
  if (g.ib != nullptr && g.refs == 0) {
    if (Status s = g.ib->StartEvents(); !s.ok()) return Fail(s, "init");
    RY_INFO(log::kInit | log::kNet, "Railyard verbs transport: %zu RDMA ports", g.ib->size());
  }
  if (g.fabric != nullptr && g.refs == 0 && !g.fabricMode) {
    if (Status s = g.fabric->Start(); !s.ok()) return Fail(s, "init");  // the comms' helper threads
  }
  if (g.fabricMode && g.refs == 0) {
    if (Status s = StartFabric(g); !s.ok()) return Fail(s, "init");
    if (g.fabricComms) {
      if (Status s = StartFabricModeComms(g); !s.ok()) return Fail(s, "init");
    }
    // The count is of the rails the name lists; shared segments (a management bridge) are left out of both.
    const size_t left = g.fabricRails.size() - static_cast<size_t>(g.fabricNameRails);
    const std::string leftOut =
        left == 0 ? "" : " (" + std::to_string(left) + " shared segment" + (left == 1 ? "" : "s") + " left out)";
    RY_INFO(log::kInit | log::kNet, "Railyard fabric mode: one device %s over %d rails%s", g.fabricName.c_str(),
            g.fabricNameRails, leftOut.c_str());
  }
  auto* c = new Context();
  c->commId = commId;
  c->trafficClass = config != nullptr ? config->trafficClass : -1;
  g.contexts.insert(c);
  ++g.refs;
  g.initialised.store(true, std::memory_order_release);
  if (ctx != nullptr) *ctx = c;
  return ncclSuccess;
}

ncclResult_t Devices(int* ndev) {
  Global& g = G();
  std::lock_guard lock(g.mu);
  if (ndev == nullptr) return ncclInvalidArgument;
  if (g.refs == 0) return Fail(InvalidUsage("devices() before init"), "devices");
  *ndev = DeviceCount(g);
  return ncclSuccess;
}

ncclResult_t GetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (props == nullptr) return ncclInvalidArgument;
  if (Status s = CheckDevice(dev); !s.ok()) return Fail(s, "getProperties");
  Global& g = G();
  std::memset(props, 0, sizeof *props);
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  if (g.verbsMode) {
    std::lock_guard lock(g.mu);
    const Global::VerbsDev& vd = g.verbsDevs[static_cast<size_t>(dev)];
    const proxy::verbs::IbPort& p = g.ib->at(static_cast<size_t>(vd.ports[0]));
    props->name = const_cast<char*>(vd.name.c_str());
    props->pciPath = p.pciPath.empty() ? nullptr : const_cast<char*>(p.pciPath.c_str());
    props->speed = 0;
    for (int port : vd.ports) props->speed += g.ib->at(static_cast<size_t>(port)).speedMbps;
    props->port = p.port;
    if (vd.ports.size() > 1) {
      props->vProps.ndevs = static_cast<int>(vd.ports.size());
      for (size_t i = 0; i < vd.ports.size(); ++i) props->vProps.devs[i] = vd.ports[i];
    }
  } else if (g.fabricMode) {
    // One virtual device over every rail: NCCL sees a fabric that reaches all hosts.
    std::lock_guard lock(g.mu);
    props->name = const_cast<char*>(g.fabricName.c_str());
    props->pciPath = nullptr;
    props->speed = g.fabricSpeedMbps;
  } else {
    const topology::NetDevice& d = g.devices[static_cast<size_t>(dev)];
    props->name = const_cast<char*>(d.name.c_str());
    props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
    props->speed = d.SpeedOr(g.config->defaultSpeedMbps);
  }
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = g.verbsMode && g.fabricComms ? VerbsFabricPtrSupport(g, dev) : PtrSupport(g);
  props->regIsGlobal = 1;  // registrations live in the process-wide MR cache
  props->forceFlush = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = proxy::kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->maxP2pBytes = MAX_NET_SIZE;  // test() reports int sizes; NCCL sends ≤ 1 GiB anyway
  props->maxCollBytes = MAX_COLLNET_SIZE;
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return ncclInvalidArgument;
  *listenComm = nullptr;
  if (Status s = CheckDevice(dev); !s.ok()) return Fail(s, "listen");
  Global& g = G();
  if (g.fabricComms) {
    std::unique_ptr<proxy::nccl::FabricListenComm> fl;
    Status s = proxy::nccl::FabricListenComm::Create(&g.fabric->comms(static_cast<size_t>(dev)),
                                                     static_cast<size_t>(dev), Self(), &proxy::GlobalMrCache(), RankOf(ctx),
                                                     &fl, handle);
    if (!s.ok()) return Fail(s, "listen");
    std::lock_guard lock(g.mu);
    g.listens.insert(fl.get());
    *listenComm = fl.release();
    return ncclSuccess;
  }
  std::unique_ptr<proxy::TcpListenComm> l;
  std::unique_ptr<ListenComm> verbsListen;
  proxy::ListenAddress addr;
  if (g.verbsMode) {
    // Control sockets on the first RAILYARD_SOCKET_IFNAME interface; data over RDMA.
    const topology::NetDevice& d = g.devices[0];
    const socklen_t len = d.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::unique_ptr<proxy::verbs::VerbsListenComm> vl;
    Status s = proxy::verbs::VerbsListenComm::Create(d.addr, len, VerbsSetupFor(dev, -1), OptionsFor(0),
                                                     g.host, &vl, &addr);
    if (!s.ok()) return Fail(s, "listen");
    proxy::EncodeHandle(addr, handle);
    std::lock_guard lock(g.mu);
    g.listens.insert(vl.get());
    *listenComm = vl.release();
    return ncclSuccess;
  }
  if (g.fabricMode) {
    // Any rail (or a relay on loopback, or a local rank) may arrive: listen on all.
    sockaddr_storage any{};
    auto* a = reinterpret_cast<sockaddr_in*>(&any);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    Status s;
    if (g.fabricVerbs) {
      // Cabled peers arrive for a verbs handshake, relayed ones with TCP sockets.
      std::unique_ptr<proxy::verbs::VerbsListenComm> vl;
      s = proxy::verbs::VerbsListenComm::Create(any, sizeof(sockaddr_in), FabricVerbsSetup(AllPorts(), -1),
                                                OptionsFor(dev), g.router->HostName(), &vl, &addr);
      verbsListen = std::move(vl);
    } else {
      s = proxy::TcpListenComm::Create(any, sizeof(sockaddr_in), OptionsFor(dev),
                                       g.router->HostName(), &proxy::GlobalMrCache(), &l, &addr);
    }
    if (!s.ok()) return Fail(s, "listen");
    addr.hostId = g.router->HostId();
    for (const auto& r : g.fabricRails) addr.rails.push_back(r.addr);
    if (!g.fabricRails.empty()) {
      reinterpret_cast<sockaddr_in*>(&addr.addr)->sin_addr = g.fabricRails[0].addr;
    }
  } else {
    const topology::NetDevice& d = g.devices[static_cast<size_t>(dev)];
    const socklen_t len = d.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    Status s = proxy::TcpListenComm::Create(d.addr, len, OptionsFor(dev), g.host,
                                            &proxy::GlobalMrCache(), &l, &addr);
    if (!s.ok()) return Fail(s, "listen");
  }
  proxy::EncodeHandle(addr, handle);
  std::unique_ptr<ListenComm> listen = verbsListen != nullptr ? std::move(verbsListen) : std::move(l);
  std::lock_guard lock(g.mu);
  g.listens.insert(listen.get());
  *listenComm = listen.release();
  return ncclSuccess;
}

ncclResult_t Connect(void* ctx, int dev, void* handle, void** sendComm) {
  if (handle == nullptr || sendComm == nullptr) return ncclInvalidArgument;
  *sendComm = nullptr;
  if (Status s = CheckDevice(dev); !s.ok()) return Fail(s, "connect");
  Global& g = G();
  if (g.fabricComms) {
    // Validated on every call, before anything is trusted; the comm comes back at
    // once (the hello and the Endpoint's setup finish in the background).
    proxy::nccl::FabricHandle to;
    if (Status s = proxy::nccl::DecodeFabricHandle(handle, &to); !s.ok()) return Fail(s, "connect");
    std::unique_ptr<proxy::nccl::FabricSendComm> comm;
    Status s = proxy::nccl::FabricSendComm::Create(&g.fabric->comms(static_cast<size_t>(dev)),
                                                   static_cast<size_t>(dev), to, Self(), g.config->timeoutMs, RankOf(ctx),
                                                   &comm);
    if (!s.ok() && g.fabricMode && FabricModeRouteMayCome(handle, s)) return ncclSuccess;  // NCCL calls again
    if (!s.ok()) return Fail(s, "connect");
    std::lock_guard lock(g.mu);
    g.comms.insert(comm.get());
    *sendComm = comm.release();
    return ncclSuccess;
  }
  // Validate the handle on every call: a garbage or foreign handle fails here,
  // before its connect-state bytes are trusted.
  proxy::ListenAddress to;
  if (Status s = proxy::DecodeHandle(handle, &to); !s.ok()) return Fail(s, "connect");
  auto* wire = static_cast<proxy::HandleWire*>(handle);
  PendingConnect* pc = nullptr;
  {
    std::lock_guard lock(g.mu);
    if (wire->stageMagic == proxy::kStageMagic) {
      auto* p = reinterpret_cast<PendingConnect*>(wire->stageState);
      if (g.connects.count(p) != 0) pc = p;
    }
    if (pc == nullptr) {
      pc = new PendingConnect();
      pc->salt = g.connectSalt++;
      g.connects.insert(pc);
      wire->stageMagic = proxy::kStageMagic;
      wire->stageState = reinterpret_cast<uint64_t>(pc);
    }
  }
  auto finish = [&](SendComm* comm) {
    std::lock_guard lock(g.mu);
    g.connects.erase(pc);
    delete pc;
    wire->stageMagic = 0;
    wire->stageState = 0;
    if (comm != nullptr) g.comms.insert(comm);
  };
  proxy::TcpOptions options = OptionsFor(g.verbsMode ? 0 : dev);
  Status s;
  if (g.verbsMode) {
    if (pc->verbs == nullptr) {
      const int tc = ctx != nullptr ? static_cast<Context*>(ctx)->trafficClass : -1;
      s = proxy::verbs::VerbsConnector::Start(to, VerbsSetupFor(dev, tc), options, g.host, &pc->verbs);
    }
    SendComm* comm = nullptr;
    if (s.ok()) s = pc->verbs->Progress(&comm);
    if (!s.ok() || comm != nullptr) finish(comm);
    if (!s.ok()) return Fail(s, "connect");
    *sendComm = comm;
    return ncclSuccess;
  }
  if (to.verbsRails != 0 && to.hostId == 0) {
    finish(nullptr);
    return Fail(InvalidUsage("transport mismatch: " + to.ToString() + " listens with the verbs transport and "
                             "this process uses TCP (set RAILYARD_TRANSPORT the same on every host)"),
                "connect");
  }
  if (pc->connector == nullptr && pc->verbs == nullptr) {
    if (to.hostId != 0 && g.fabricMode) {
      // Router: plan each socket over the cabling (direct rails or relays).
      std::vector<proxy::SocketTarget> targets;
      bool ready = false;
      const uint16_t port = ntohs(reinterpret_cast<const sockaddr_in*>(&to.addr)->sin_port);
      s = g.router->PlanConnection(to.hostId, port, options.nsocks, pc->salt, &targets, &ready);
      if (s.ok() && !ready) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(proxy::Clock::now() - pc->since);
        if (waited.count() <= options.timeoutMs) return ncclSuccess;  // the cabling graph may still be converging
        s = SystemError("no route to host " + to.host + " (" + topology::HostIdText(to.hostId) +
                        ") after " + std::to_string(waited.count()) +
                        " ms: it is not cabled to this host or any host that can relay");
      }
      std::vector<int> ports;
      if (s.ok() && g.fabricVerbs && to.verbsRails > 0) ports = CablePorts(targets);
      if (s.ok() && !ports.empty()) {
        // A neighbour: verbs QPs on the cable's ports; the control socket on the cable.
        const int tc = ctx != nullptr ? static_cast<Context*>(ctx)->trafficClass : -1;
        s = proxy::verbs::VerbsConnector::Start(to, FabricVerbsSetup(ports, tc), options, g.router->HostName(),
                                                targets[0], &pc->verbs);
      } else if (s.ok()) {
        s = proxy::TcpConnector::Start(to, std::move(targets), options, g.router->HostName(),
                                       &pc->connector);
      }
    } else {
      s = proxy::TcpConnector::Start(to, options, g.host, &pc->connector);
    }
  }
  SendComm* comm = nullptr;
  if (s.ok()) s = pc->verbs != nullptr ? pc->verbs->Progress(&comm) : pc->connector->Progress(&comm);
  if (!s.ok() || comm != nullptr) finish(comm);
  if (!s.ok()) return Fail(s, "connect");
  *sendComm = comm;
  return ncclSuccess;
}

ncclResult_t Accept(void* listenComm, void** recvComm) {
  if (listenComm == nullptr || recvComm == nullptr) return ncclInvalidArgument;
  *recvComm = nullptr;
  RecvComm* comm = nullptr;
  Status s = static_cast<ListenComm*>(listenComm)->Accept(&comm);
  if (!s.ok()) return Fail(s, "accept");
  if (comm != nullptr) {
    Global& g = G();
    std::lock_guard lock(g.mu);
    g.comms.insert(comm);
  }
  *recvComm = comm;
  return ncclSuccess;
}

ncclResult_t RegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST && !(type == NCCL_PTR_CUDA && (PtrSupport(G()) & NCCL_PTR_CUDA) != 0)) {
    return Fail(InvalidUsage("regMr of pointer type " + std::to_string(type) +
                             ": Railyard supports host memory here (ptrSupport HOST); GPU memory "
                             "needs regMrDmaBuf on the verbs transport"),
                "regMr");
  }
  MemoryRegion* r = nullptr;
  Status s = proxy::GlobalMrCache().Register(data, size, type, &r);
  if (s.ok()) {
    s = MakeHandle(r, data, size, mhandle, type == NCCL_PTR_CUDA ? fabric::MemoryKind::kDevice : fabric::MemoryKind::kHost);
  }
  if (!s.ok()) return Fail(s, "regMr");
  return ncclSuccess;
}

ncclResult_t RegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                         void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) return ncclInvalidArgument;
  *mhandle = nullptr;
  // NCCL passes fd -1 for memory that is not a DMA-BUF: a plain registration, in
  // every mode (RegMr checks the pointer type against ptrSupport).
  if (fd < 0) return RegMr(comm, data, size, type, mhandle);
  Global& g = G();
  if (g.ib == nullptr) {
    return Fail(InvalidUsage("regMrDmaBuf of a DMA-BUF (fd " + std::to_string(fd) + ", pointer type " +
                             std::to_string(type) + "): this process runs the TCP transport, which cannot read "
                             "device memory (ptrSupport is NCCL_PTR_HOST); use RAILYARD_TRANSPORT=verbs on "
                             "hosts with RDMA ports"),
                "regMrDmaBuf");
  }
  if (g.verbsMode && g.fabricComms) {
    Status s = RegDmaBufVerbsFabric(data, size, type, offset, fd, mhandle);
    return s.ok() ? ncclSuccess : Fail(s, "regMrDmaBuf");
  }
  auto* c = static_cast<Comm*>(comm);
  if (dynamic_cast<proxy::verbs::VerbsSendComm*>(c) == nullptr &&
      dynamic_cast<proxy::verbs::VerbsRecvComm*>(c) == nullptr) {
    return Fail(InvalidUsage("regMrDmaBuf of a DMA-BUF (fd " + std::to_string(fd) + ") on a comm whose route goes "
                             "over TCP (a relayed peer in fabric mode), which cannot read device memory; only "
                             "comms to cabled peers over RDMA take DMA-BUFs"),
                "regMrDmaBuf");
  }
  MemoryRegion* r = nullptr;
  Status s = proxy::GlobalMrCache().RegisterDmaBuf(data, size, type, fd, offset, &r);
  if (s.ok()) s = MakeHandle(r, nullptr, size, mhandle);  // device memory: no TCP fabric Region
  if (!s.ok()) return Fail(s, "regMrDmaBuf");
  return ncclSuccess;
}

ncclResult_t DeregMr(void* /*comm*/, void* mhandle) {
  proxy::nccl::MemHandle* h = AsHandle(mhandle);
  if (h == nullptr) return Fail(InvalidArgument("deregMr of a handle regMr did not return"), "deregMr");
  Global& g = G();
  Status s = proxy::GlobalMrCache().Deregister(h->legacy);
  if (!s.ok()) return Fail(s, "deregMr");  // a double deregMr: the handle is not touched further
  for (size_t i = 0; i < h->devices.size(); ++i) {
    if (h->devices[i].region != nullptr) (void)g.fabric->registrations(i).Release(h->devices[i].region);
  }
  h->magic = 0;
  delete h;
  return ncclSuccess;
}

ncclResult_t Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                   void* /*phandle*/, void** request) {
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (sendComm == nullptr) return Fail(InvalidArgument("isend on a NULL comm"), "isend");
  Request* r = nullptr;
  auto* comm = static_cast<SendComm*>(static_cast<Comm*>(sendComm));
  Status s;
  if (auto* f = dynamic_cast<proxy::nccl::FabricSendComm*>(comm)) {
    s = f->IsendFabric(data, size, tag, AsHandle(mhandle), &r);
  } else {
    s = comm->Isend(data, size, tag, Legacy(mhandle), &r);
  }
  if (!s.ok()) return Fail(s, "isend");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                   void** /*phandles*/, void** request) {
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;  // always overwrite: it may hold NCCL_NET_OPTIONAL_RECV_COMPLETION
  if (recvComm == nullptr || data == nullptr || sizes == nullptr || tags == nullptr) {
    return Fail(InvalidArgument("irecv with a NULL comm or array"), "irecv");
  }
  Request* r = nullptr;
  auto* comm = static_cast<RecvComm*>(static_cast<Comm*>(recvComm));
  Status s;
  if (auto* f = dynamic_cast<proxy::nccl::FabricRecvComm*>(comm)) {
    s = f->IrecvFabric(n, data, sizes, tags, reinterpret_cast<proxy::nccl::MemHandle* const*>(mhandles), &r);
  } else {
    MemoryRegion* legacy[proxy::kMaxRecvs] = {};
    for (int i = 0; i < n && i < proxy::kMaxRecvs && mhandles != nullptr; ++i) legacy[i] = Legacy(mhandles[i]);
    s = comm->Irecv(n, data, sizes, tags, mhandles != nullptr ? legacy : nullptr, &r);
  }
  if (!s.ok()) return Fail(s, "irecv");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  // A NULL request tells NCCL no flush was needed (§2.5 "iflush"): host memory, and
  // the TCP transport (the CPU wrote the data). The verbs transport flushes GPU memory.
  if (request == nullptr) return ncclInvalidArgument;
  *request = nullptr;
  if (recvComm == nullptr || n <= 0 || data == nullptr || sizes == nullptr) return ncclSuccess;
  Request* r = nullptr;
  if (auto* f = dynamic_cast<proxy::nccl::FabricRecvComm*>(static_cast<Comm*>(recvComm))) {
    // The fabric comms: a READ of device memory through the device's loopback Endpoint.
    Status s = f->IflushFabric(n, data, sizes, reinterpret_cast<proxy::nccl::MemHandle* const*>(mhandles), &r);
    if (!s.ok()) return Fail(s, "iflush");
    *request = r;
    return ncclSuccess;
  }
  MemoryRegion* legacy[proxy::kMaxRecvs] = {};
  for (int i = 0; i < n && i < proxy::kMaxRecvs && mhandles != nullptr; ++i) legacy[i] = Legacy(mhandles[i]);
  Status s = static_cast<RecvComm*>(static_cast<Comm*>(recvComm))
                 ->Iflush(n, data, sizes, mhandles != nullptr ? legacy : nullptr, &r);
  if (!s.ok()) return Fail(s, "iflush");
  *request = r;
  return ncclSuccess;
}

ncclResult_t Test(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) return ncclInvalidArgument;
  *done = 0;
  if (!G().initialised.load(std::memory_order_acquire)) {
    // The last finalize closed every comm; the request went with its comm, so it
    // must not be read (misuse, but it fails cleanly instead of reading freed memory).
    return Fail(InvalidUsage("test() after finalize: the request's comm was closed by finalize"), "test");
  }
  auto* r = static_cast<Request*>(request);
  Status s = r->owner->Test(r, done, sizes);
  return s.ok() ? ncclSuccess : static_cast<ncclResult_t>(s.ncclResult());
}

namespace {
ncclResult_t CloseComm(void* comm) {
  if (comm == nullptr) return ncclSuccess;
  auto* c = static_cast<Comm*>(comm);
  Global& g = G();
  {
    std::lock_guard lock(g.mu);
    if (g.comms.erase(c) == 0) {
      return Fail(InvalidArgument("close of a comm that is not open"), "close");
    }
  }
  c->Close();
  delete c;
  return ncclSuccess;
}
}  // namespace

ncclResult_t CloseSend(void* sendComm) { return CloseComm(sendComm); }
ncclResult_t CloseRecv(void* recvComm) { return CloseComm(recvComm); }

ncclResult_t CloseListen(void* listenComm) {
  if (listenComm == nullptr) return ncclSuccess;
  auto* l = static_cast<ListenComm*>(listenComm);
  Global& g = G();
  {
    std::lock_guard lock(g.mu);
    if (g.listens.erase(l) == 0) {
      return Fail(InvalidArgument("closeListen of a listen comm that is not open"), "closeListen");
    }
  }
  delete l;
  return ncclSuccess;
}

ncclResult_t MakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  Global& g = G();
  if (g.verbsMode && d != nullptr && props != nullptr) {
    // NIC fusion: one NCCL device whose connections stripe over the ports given.
    std::lock_guard lock(g.mu);
    if (props->ndevs < 1 || props->ndevs > proxy::verbs::kMaxConnRails) {
      return Fail(InvalidArgument("makeVDevice of " + std::to_string(props->ndevs) + " devices (1.." +
                                  std::to_string(proxy::verbs::kMaxConnRails) + ")"), "makeVDevice");
    }
    Global::VerbsDev vd;
    for (int i = 0; i < props->ndevs; ++i) {
      const int p = props->devs[i];
      if (p < 0 || static_cast<size_t>(p) >= g.ib->size()) {
        return Fail(InvalidArgument("makeVDevice: device " + std::to_string(p) + " is not a physical device (0.." +
                                    std::to_string(g.ib->size() - 1) + ")"), "makeVDevice");
      }
      vd.ports.push_back(p);
      vd.name += (i ? "+" : "") + g.ib->at(static_cast<size_t>(p)).device;
    }
    if (g.fabric != nullptr) {
      // The fabric comms: the fused device gets its own verbs Domain over these ports.
      size_t index = 0;
      if (Status s = g.fabric->AddVerbsDevice(VerbsRuntimeDevice(g, vd), &index); !s.ok()) {
        return Fail(s, "makeVDevice");
      }
      if (index != g.verbsDevs.size()) {
        return Fail(InternalError("makeVDevice: fabric device " + std::to_string(index) + " for NCCL device " +
                                  std::to_string(g.verbsDevs.size())), "makeVDevice");
      }
    }
    g.verbsDevs.push_back(std::move(vd));
    *d = static_cast<int>(g.verbsDevs.size()) - 1;
    RY_INFO(log::kNet, "makeVDevice: device %d = %s", *d, g.verbsDevs.back().name.c_str());
    return ncclSuccess;
  }
  // NIC fusion over TCP is not implemented; NCCL logs this and keeps the physical
  // devices (§2.5 "makeVDevice").
  return Fail(InvalidUsage("makeVDevice of " + std::to_string(props ? props->ndevs : 0) +
                           " devices: NIC fusion is not supported by the TCP transport"),
              "makeVDevice");
}

/// How long a rank's finalize carries the fabric relay routes through its host
/// (at most RAILYARD_RELAY_DRAIN_MS), in ms.
constexpr int kFinalizeRelayDrainMs = 2000;

ncclResult_t Finalize(void* ctx) {
  Global& g = G();
  std::vector<Comm*> comms;
  std::vector<ListenComm*> listens;
  std::vector<PendingConnect*> connects;
  std::unique_ptr<proxy::RelayService> relay;
  std::unique_ptr<proxy::Router> router;
  std::unique_ptr<fabric::relay::ForwarderHost> forwarder;
  {
    std::lock_guard lock(g.mu);
    auto* c = static_cast<Context*>(ctx);
    if (c == nullptr || g.contexts.erase(c) == 0) {
      return ncclSuccess;  // NCCL finalizes after a failed init too (§1.4)
    }
    delete c;
    if (--g.refs > 0) return ncclSuccess;
    g.initialised.store(false, std::memory_order_release);
    // Last context: stop every thread the plugin started before NCCL may dlclose us.
    comms.assign(g.comms.begin(), g.comms.end());
    listens.assign(g.listens.begin(), g.listens.end());
    connects.assign(g.connects.begin(), g.connects.end());
    g.comms.clear();
    g.listens.clear();
    g.connects.clear();
    forwarder = std::move(g.forwarder);
    relay = std::move(g.relay);
    router = std::move(g.router);
  }
  if (!comms.empty()) {
    RY_INFO(log::kNet, "finalize closes %zu comms still open", comms.size());
  }
  for (Comm* c : comms) {
    c->Close();
    delete c;
  }
  for (ListenComm* l : listens) delete l;
  for (PendingConnect* c : connects) delete c;
  if (g.fabric != nullptr) g.fabric->Stop();  // after every fabric comm is closed
  if (g.ib != nullptr) g.ib->StopEvents();  // ports stay open: NCCL may still hold registrations
  if (router) proxy::SetAddressNamer(nullptr);
  {
    std::lock_guard lock(g.graphMu);
    g.graphRouter = nullptr;  // the fabric comms are stopped: nothing routes any more
  }
  if (forwarder && g.config != nullptr) {
    // Ranks relaying for each other end together: carry the routes through this
    // host a moment longer, until their sources close them (else each source's leg
    // breaks with its close notice outstanding: a WARN at every clean end), bounded.
    const size_t left = forwarder->Drain(std::min(g.config->relayDrainMs, kFinalizeRelayDrainMs));
    if (left > 0) RY_INFO(log::kNet, "finalize: %zu fabric relay routes still open; they break now", left);
  }
  forwarder.reset();  // stops the fabric relay's thread (it reads the relay's seat and the router)
  relay.reset();   // hands the relay seat to a process standing by; sockets it relays break
  router.reset();  // stops the cabling agent thread
  return ncclSuccess;
}

ncclResult_t SetNetAttr(void* /*ctx*/, ncclNetAttr_v11_t* /*netAttr*/) {
  return ncclSuccess;  // a hint (§2.5 "setNetAttr"); the TCP transport has no use for it
}

}  // namespace railyard::plugin
