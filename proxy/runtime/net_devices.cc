// The device list of the process's NetRuntime: which NCCL device is which interface,
// RDMA port (or ports fused by makeVDevice) or fabric, the settings its connections
// take, and what every route of a device can do with memory (RouteFacts).
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"
#include "proxy/runtime/net_state.h"
#include "proxy/verbs/gpu_support.h"

namespace railyard::runtime {

namespace detail {

int DeviceCount(const NetState& g) {
  if (g.verbsMode) return static_cast<int>(g.verbsDevs.size());
  return g.fabricMode ? 1 : static_cast<int>(g.devices.size());
}

proxy::TcpOptions OptionsFor(const NetState& g, int dev) {
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

proxy::verbs::VerbsDeviceSetup VerbsSetupFor(const NetState& g, int dev, int trafficClass) {
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

/// The process's facts: host memory always; with RDMA ports in verbs mode, CUDA
/// memory when a GPUDirect peer-memory module is loaded, and DMA-BUF when every port
/// and the CUDA driver support it. Fabric mode with RDMA ports still relays some peers
/// over TCP, so it claims nothing beyond host memory (proxy/verbs/gpu_support.h).
RouteFacts HostFacts(const NetState& g) {
  RouteFacts f;
  f.everyRouteRdma = g.verbsMode && g.ib != nullptr && g.ib->size() > 0;
  if (!f.everyRouteRdma) return f;
  f.gdrPeerMemory = proxy::verbs::GdrPeerMemory();
  f.portsDmaBuf = true;
  for (size_t i = 0; i < g.ib->size(); ++i) f.portsDmaBuf &= g.ib->at(i).dmabuf;
  f.cudaDmaBuf = proxy::verbs::CudaDmaBuf();
  return f;
}

/// Verbs mode over the fabric comms: the facts of device `dev` from its verbs Domain,
/// i.e. from exactly the ports its connections use (every route of a verbs device is
/// RDMA): CUDA with a peer-memory module (kCapDeviceMemory), DMA-BUF (with CUDA) when
/// every port of the device registers DMA-BUFs (kCapDmaBuf) and the CUDA driver
/// exports them. Requires g.fabric and dev < its devices().
RouteFacts VerbsFabricFacts(const NetState& g, int dev) {
  const fabric::Capabilities& c = g.fabric->domain(static_cast<size_t>(dev)).capabilities();
  RouteFacts f;
  f.everyRouteRdma = true;
  f.gdrPeerMemory = c.Has(fabric::kCapDeviceMemory);
  f.portsDmaBuf = c.Has(fabric::kCapDmaBuf);
  f.cudaDmaBuf = f.portsDmaBuf && proxy::verbs::CudaDmaBuf();
  return f;
}

}  // namespace detail

using namespace detail;

Status NetRuntime::CheckDevice(int dev) {
  NetState& g = g_;
  std::lock_guard lock(g.mu);
  if (g.refs == 0) return InvalidUsage("the plugin is not initialised (call init first)");
  if (dev < 0 || dev >= detail::DeviceCount(g)) {
    return InvalidArgument("device " + std::to_string(dev) + " does not exist (" +
                           std::to_string(detail::DeviceCount(g)) + " devices)");
  }
  return Status::Ok();
}

Status NetRuntime::DeviceCount(int* ndev) {
  NetState& g = g_;
  std::lock_guard lock(g.mu);
  if (g.refs == 0) return InvalidUsage("devices() before init");
  *ndev = detail::DeviceCount(g);
  return Status::Ok();
}

Status NetRuntime::Device(int dev, DeviceInfo* out) {
  RY_RETURN_IF_ERROR(CheckDevice(dev));
  NetState& g = g_;
  DeviceInfo d;
  if (g.verbsMode) {
    std::lock_guard lock(g.mu);
    const NetState::VerbsDev& vd = g.verbsDevs[static_cast<size_t>(dev)];
    const proxy::verbs::IbPort& p = g.ib->at(static_cast<size_t>(vd.ports[0]));
    d.name = vd.name.c_str();
    d.pciPath = p.pciPath.empty() ? nullptr : p.pciPath.c_str();
    for (int port : vd.ports) d.speedMbps += g.ib->at(static_cast<size_t>(port)).speedMbps;
    d.port = p.port;
    if (vd.ports.size() > 1) d.fusedFrom = vd.ports;
  } else if (g.fabricMode) {
    // One virtual device over every rail: NCCL sees a fabric that reaches all hosts.
    std::lock_guard lock(g.mu);
    d.name = g.fabricName.c_str();
    d.speedMbps = g.fabricSpeedMbps;
  } else {
    const topology::NetDevice& nd = g.devices[static_cast<size_t>(dev)];
    d.name = nd.name.c_str();
    d.pciPath = nd.pciPath.empty() ? nullptr : nd.pciPath.c_str();
    d.speedMbps = nd.SpeedOr(g.config->defaultSpeedMbps);
  }
  d.routes = g.verbsMode && g.fabricComms ? VerbsFabricFacts(g, dev) : HostFacts(g);
  *out = std::move(d);
  return Status::Ok();
}

RouteFacts NetRuntime::HostRouteFacts() { return HostFacts(g_); }

Status NetRuntime::AddVirtualDevice(int ndevs, const int* devs, int* out) {
  NetState& g = g_;
  if (!g.verbsMode || devs == nullptr || out == nullptr) {
    // NIC fusion over TCP is not implemented; NCCL logs this and keeps the physical
    // devices (§2.5 "makeVDevice").
    return InvalidUsage("makeVDevice of " + std::to_string(ndevs) +
                        " devices: NIC fusion is not supported by the TCP transport");
  }
  // NIC fusion: one NCCL device whose connections stripe over the ports given.
  std::lock_guard lock(g.mu);
  if (ndevs < 1 || ndevs > proxy::verbs::kMaxConnRails) {
    return InvalidArgument("makeVDevice of " + std::to_string(ndevs) + " devices (1.." +
                           std::to_string(proxy::verbs::kMaxConnRails) + ")");
  }
  NetState::VerbsDev vd;
  for (int i = 0; i < ndevs; ++i) {
    const int p = devs[i];
    if (p < 0 || static_cast<size_t>(p) >= g.ib->size()) {
      return InvalidArgument("makeVDevice: device " + std::to_string(p) + " is not a physical device (0.." +
                             std::to_string(g.ib->size() - 1) + ")");
    }
    vd.ports.push_back(p);
    vd.name += (i ? "+" : "") + g.ib->at(static_cast<size_t>(p)).device;
  }
  if (g.fabric != nullptr) {
    // The fabric comms: the fused device gets its own verbs Domain over these ports.
    size_t index = 0;
    RY_RETURN_IF_ERROR(g.fabric->AddVerbsDevice(VerbsRuntimeDevice(g, vd), &index));
    if (index != g.verbsDevs.size()) {
      return InternalError("makeVDevice: fabric device " + std::to_string(index) + " for NCCL device " +
                           std::to_string(g.verbsDevs.size()));
    }
  }
  g.verbsDevs.push_back(std::move(vd));
  *out = static_cast<int>(g.verbsDevs.size()) - 1;
  RY_INFO(log::kNet, "makeVDevice: device %d = %s", *out, g.verbsDevs.back().name.c_str());
  return Status::Ok();
}

}  // namespace railyard::runtime
