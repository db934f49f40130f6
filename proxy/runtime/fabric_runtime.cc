#include "proxy/runtime/fabric_runtime.h"

#include <algorithm>
#include <atomic>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/verbs/ib_ports.h"

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
    auto dev = std::make_unique<Device>();
    RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(o, &dev->domain));
    dev->cache = std::make_unique<fabric::RegistrationCache>(*dev->domain);
    dev->comms = std::make_unique<proxy::nccl::CommWorker>(dev->domain.get(), d.name);
    size_t index = 0;
    std::lock_guard lock(rt->mu_);
    RY_RETURN_IF_ERROR(rt->Append(std::move(dev), &index));
  }
  *out = std::move(rt);
  return Status::Ok();
}

Status FabricRuntime::CreateOver(std::unique_ptr<fabric::Domain> domain, const std::string& name,
                                 std::unique_ptr<FabricRuntime>* out) {
  if (domain == nullptr) return InvalidArgument("fabric runtime: no domain for device " + name);
  std::unique_ptr<FabricRuntime> rt(new FabricRuntime());
  auto dev = std::make_unique<Device>();
  dev->domain = std::move(domain);
  dev->cache = std::make_unique<fabric::RegistrationCache>(*dev->domain);
  dev->comms = std::make_unique<proxy::nccl::CommWorker>(dev->domain.get(), name);
  size_t index = 0;
  {
    std::lock_guard lock(rt->mu_);
    RY_RETURN_IF_ERROR(rt->Append(std::move(dev), &index));
  }
  *out = std::move(rt);
  return Status::Ok();
}

Status FabricRuntime::CreateVerbs(const env::Config& config, const std::vector<VerbsDevice>& devices,
                                  const std::string& bootstrapAddress, std::unique_ptr<FabricRuntime>* out,
                                  std::shared_ptr<proxy::verbs::IbPorts> ports) {
  std::unique_ptr<FabricRuntime> rt(new FabricRuntime());
  rt->verbs_ = true;
  rt->config_ = config;
  rt->bootstrap_ = bootstrapAddress;
  rt->ports_ = std::move(ports);
  for (const VerbsDevice& d : devices) {
    size_t index = 0;
    RY_RETURN_IF_ERROR(rt->AddVerbsDevice(d, &index));
  }
  *out = std::move(rt);
  return Status::Ok();
}

Status FabricRuntime::AddVerbsDevice(const VerbsDevice& device, size_t* index) {
  if (!verbs_) return InvalidUsage("fabric runtime: verbs device " + device.name + " added to a TCP runtime");
  if (device.ports.empty()) return InvalidArgument("fabric runtime: verbs device " + device.name + " has no port");
  fabric::verbs::VerbsOptions o = fabric::verbs::VerbsOptions::FromConfig(config_);
  o.bootstrapAddress = bootstrap_;
  // The exact-name form of RAILYARD_HCA that selects this device's ports (messages).
  std::string exact = "=";
  for (size_t i = 0; i < device.ports.size(); ++i) exact += (i ? "," : "") + device.ports[i];
  std::lock_guard lock(mu_);
  if (ports_ == nullptr) {
    // Discovered and opened once for the runtime, never per device.
    std::unique_ptr<proxy::verbs::IbPorts> opened;
    if (Status s = proxy::verbs::IbPorts::Open(config_, &opened, nullptr); !s.ok()) {
      return Status(s.code(), "verbs device " + device.name + ": opening the RDMA ports: " + s.message());
    }
    ports_ = std::move(opened);
  }
  auto dev = std::make_unique<Device>();
  if (Status s = fabric::verbs::CreateVerbsDomainOn(o, ports_, device.ports, &dev->domain); !s.ok()) {
    return Status(s.code(), "verbs device " + device.name + ": " + s.message() + " (its ports: RAILYARD_HCA='" +
                                exact + "')");
  }
  dev->cache = std::make_unique<fabric::RegistrationCache>(*dev->domain);
  dev->comms = std::make_unique<proxy::nccl::CommWorker>(dev->domain.get(), device.name);
  if (running_) RY_RETURN_IF_ERROR(dev->comms->Start());
  return Append(std::move(dev), index);
}

std::shared_ptr<proxy::verbs::IbPorts> FabricRuntime::verbsPorts() {
  std::lock_guard lock(mu_);
  return ports_;
}

Status FabricRuntime::Append(std::unique_ptr<Device> d, size_t* index) {
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n >= kMaxDevices) {
    if (d->comms != nullptr) d->comms->Stop();
    return InvalidArgument("fabric runtime: more than " + std::to_string(kMaxDevices) + " devices");
  }
  devices_[n] = std::move(d);
  *index = n;
  count_.store(n + 1, std::memory_order_release);
  return Status::Ok();
}

FabricRuntime::~FabricRuntime() {
  Stop();
  // Members go in reverse: CommWorkers, then caches, then Domains.
  for (size_t i = 0; i < devices(); ++i) {
    devices_[i]->comms.reset();
    devices_[i]->cache.reset();
    devices_[i]->domain.reset();
  }
}

Status FabricRuntime::Start() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < devices(); ++i) {
    if (Status s = devices_[i]->comms->Start(); !s.ok()) {
      for (size_t j = 0; j < i; ++j) devices_[j]->comms->Stop();
      return s;
    }
  }
  running_ = true;
  return Status::Ok();
}

void FabricRuntime::Stop() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < devices(); ++i) devices_[i]->comms->Stop();
  running_ = false;
}

}  // namespace railyard::runtime
