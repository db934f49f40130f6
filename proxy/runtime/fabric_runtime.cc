#include "proxy/runtime/fabric_runtime.h"

#include <algorithm>
#include <atomic>

#include "proxy/fabric/tcp/tcp_domain.h"

namespace railyard::runtime {

namespace {
std::atomic<FabricRuntime*> g_fabric{nullptr};
}  // namespace

FabricRuntime* Fabric() { return g_fabric.load(std::memory_order_acquire); }
void SetFabric(FabricRuntime* runtime) { g_fabric.store(runtime, std::memory_order_release); }

Status FabricRuntime::Create(const env::Config& config, const std::vector<topology::NetDevice>& devices,
                             std::unique_ptr<FabricRuntime>* out) {
  std::unique_ptr<FabricRuntime> rt(new FabricRuntime());
  for (const topology::NetDevice& d : devices) {
    if (d.family() != AF_INET) {
      return InvalidArgument("fabric runtime: device " + d.name + " (" + d.addrString + ") is not IPv4");
    }
    fabric::RailInfo rail;
    rail.device = d.name;
    rail.address = d.addrString;
    rail.speedMbps = static_cast<uint32_t>(d.SpeedOr(config.defaultSpeedMbps));
    fabric::tcp::TcpOptions o = fabric::tcp::TcpOptions::FromConfig(config, {rail});
    o.socketsPerRail = std::clamp(config.nsocks, 1, 16);
    Device dev;
    RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(o, &dev.domain));
    dev.cache = std::make_unique<fabric::RegistrationCache>(*dev.domain);
    dev.comms = std::make_unique<proxy::nccl::CommWorker>(dev.domain.get(), d.name);
    rt->devices_.push_back(std::move(dev));
  }
  *out = std::move(rt);
  return Status::Ok();
}

FabricRuntime::~FabricRuntime() {
  Stop();
  // Members go in reverse: CommWorkers, then caches, then Domains.
  for (Device& d : devices_) {
    d.comms.reset();
    d.cache.reset();
    d.domain.reset();
  }
}

Status FabricRuntime::Start() {
  for (Device& d : devices_) {
    if (Status s = d.comms->Start(); !s.ok()) {
      Stop();
      return s;
    }
  }
  return Status::Ok();
}

void FabricRuntime::Stop() {
  for (Device& d : devices_) d.comms->Stop();
}

}  // namespace railyard::runtime
