#include "proxy/fabric/verbs/verbs_domain.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>

#include "proxy/fabric/random_id.h"
#include "proxy/fabric/verbs/verbs_worker.h"
#include "proxy/socket.h"
#include "proxy/verbs/gpu_support.h"

namespace railyard::fabric::verbs {

using proxy::verbs::IbPort;
using proxy::verbs::IbPorts;

VerbsOptions VerbsOptions::FromConfig(const env::Config& config) {
  VerbsOptions o;
  o.config = config;
  o.stripe = StripeOptions::FromConfig(config);
  o.timeoutMs = config.timeoutMs;
  o.connectTimeoutMs = config.timeoutMs;
  return o;
}

Status VerbsOptions::Validate() const {
  if (timeoutMs < 1) return InvalidArgument("verbs fabric timeout " + std::to_string(timeoutMs) + " ms");
  if (connectTimeoutMs < 1) {
    return InvalidArgument("verbs fabric connect timeout " + std::to_string(connectTimeoutMs) + " ms");
  }
  if (recordCredits < 4 || recordCredits > 4096) {
    return InvalidArgument("verbs fabric record credits " + std::to_string(recordCredits) + " (4..4096)");
  }
  if (!bootstrapAddress.empty()) {
    in_addr a{};
    if (inet_pton(AF_INET, bootstrapAddress.c_str(), &a) != 1) {
      return InvalidArgument("verbs fabric bootstrap address '" + bootstrapAddress + "' is not IPv4");
    }
  }
  AcceptSources sources;
  RY_RETURN_IF_ERROR(AcceptSources::Parse(acceptOnlyFrom, "verbs fabric", &sources));
  return stripe.Validate();
}

int IbvAccess(uint32_t access) {
  int f = 0;
  if (access & kAccessLocal) f |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  if (access & kAccessRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteAtomic) f |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
  return f;
}

Status CreateVerbsDomain(const VerbsOptions& options, std::unique_ptr<Domain>* out) {
  RY_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<IbPorts> ports;
  std::vector<std::string> skipped;
  RY_RETURN_IF_ERROR(IbPorts::Open(options.config, &ports, &skipped));
  if (ports->size() == 0) {
    std::string why = "no usable RDMA port on this host";
    if (!options.config.hca.empty()) why += " matching RAILYARD_HCA='" + options.config.hca + "'";
    for (const std::string& s : skipped) why += "; " + s;
    return InvalidUsage(why);
  }
  if (ports->size() > RemoteKey::kMaxRails) {
    return InvalidArgument("verbs fabric: " + std::to_string(ports->size()) + " RDMA ports, at most " +
                           std::to_string(RemoteKey::kMaxRails) + " (narrow RAILYARD_HCA)");
  }
  std::vector<int> rails;
  for (size_t i = 0; i < ports->size(); ++i) rails.push_back(static_cast<int>(i));
  *out = std::make_unique<VerbsDomain>(options, std::shared_ptr<IbPorts>(std::move(ports)), std::move(rails));
  return Status::Ok();
}

Status CreateVerbsDomainOn(const VerbsOptions& options, std::shared_ptr<IbPorts> ports,
                           const std::vector<std::string>& portNames, std::unique_ptr<Domain>* out) {
  RY_RETURN_IF_ERROR(options.Validate());
  if (ports == nullptr) return InvalidArgument("verbs fabric: no opened ports to build a Domain on");
  if (portNames.empty()) return InvalidArgument("verbs fabric: a Domain over no ports");
  if (portNames.size() > RemoteKey::kMaxRails) {
    return InvalidArgument("verbs fabric: " + std::to_string(portNames.size()) + " ports, at most " +
                           std::to_string(RemoteKey::kMaxRails));
  }
  std::vector<int> rails;
  for (const std::string& name : portNames) {
    int found = -1;
    for (size_t i = 0; i < ports->size() && found < 0; ++i) {
      if (ports->at(i).Name() == name) found = static_cast<int>(i);
    }
    if (found < 0) {
      std::string opened;
      for (size_t i = 0; i < ports->size(); ++i) opened += (i ? ", " : "") + ports->at(i).Name();
      return InvalidArgument("verbs fabric: port " + name + " is not among this process's opened RDMA ports (" +
                             (opened.empty() ? std::string("none") : opened) +
                             "); RAILYARD_HCA must select it and it must be ACTIVE");
    }
    if (std::find(rails.begin(), rails.end(), found) != rails.end()) {
      return InvalidArgument("verbs fabric: port " + name + " named twice");
    }
    rails.push_back(found);
  }
  *out = std::make_unique<VerbsDomain>(options, std::move(ports), std::move(rails));
  return Status::Ok();
}

VerbsDomain::VerbsDomain(VerbsOptions options, std::shared_ptr<IbPorts> ports, std::vector<int> railPorts)
    : options_(std::move(options)), ports_(std::move(ports)), railPorts_(std::move(railPorts)) {
  rdAtomic_ = 16;
  for (size_t i = 0; i < railPorts_.size(); ++i) {
    const IbPort& p = RailPort(i);
    RailInfo r;
    r.device = p.Name();
    if (!p.ipv4.empty()) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &p.ipv4[0].first, text, sizeof text);
      r.address = text;
    }
    r.speedMbps = static_cast<uint32_t>(std::max(p.speedMbps, 1));
    rails_.push_back(r);
    ibv_device_attr attr{};
    if (ibv_query_device(p.ctx, &attr) == 0) {
      rdAtomic_ = std::min({rdAtomic_, attr.max_qp_rd_atom, attr.max_qp_init_rd_atom});
    }
  }
  rdAtomic_ = std::max(rdAtomic_, 1);
  caps_.flags = kCapSend | kCapWrite | kCapWriteImm | kCapRead | kCapFetchAdd | kCapFence | kCapHostMemory |
                kCapMultiProcess;
  if (rails_.size() > 1) caps_.flags |= kCapStriping;
  // ibv_reg_mr takes CUDA pointers only with a GPUDirect peer-memory module loaded
  // (gpu_support.h). DMA-BUFs (RegisterDmaBuf) need every port to take them.
  if (proxy::verbs::GdrPeerMemory()) caps_.flags |= kCapDeviceMemory;
  bool dmabuf = !railPorts_.empty();
  for (size_t i = 0; i < railPorts_.size(); ++i) dmabuf = dmabuf && RailPort(i).dmabuf;
  if (dmabuf) caps_.flags |= kCapDmaBuf;
  caps_.maxRecordBytes = kVerbsMaxRecordBytes;
  caps_.maxOpBytes = kVerbsMaxOpBytes;
  caps_.maxOpsInFlight = kVerbsOpWindow;
  link_ = proxy::verbs::ResolveQpLinkAttrs(proxy::verbs::LinkConfigFrom(options_.config), -1);
}

VerbsDomain::~VerbsDomain() {
  std::lock_guard lock(mu_);
  for (auto& [ptr, r] : regions_) {
    for (void* mr : r->railMr) ibv_dereg_mr(static_cast<ibv_mr*>(mr));
  }
}

Status VerbsDomain::CheckRange(const char* what, void* addr, uint64_t bytes, uint32_t access) const {
  const std::string w = std::string("verbs fabric ") + what;
  if (addr == nullptr) return InvalidArgument(w + ": NULL address");
  if (bytes == 0) return InvalidArgument(w + ": 0 bytes");
  const uint64_t base = reinterpret_cast<uint64_t>(addr);
  if (base + bytes < base) return InvalidArgument(w + ": the range wraps");
  if (access == 0 || !ValidAccess(access)) {
    return InvalidArgument(w + ": access bits 0x" + std::to_string(access) + " (none or unknown)");
  }
  return Status::Ok();
}

void VerbsDomain::Keep(std::unique_ptr<Region> r, const Region** out) {
  std::lock_guard lock(mu_);
  for (;;) {
    const uint64_t key = SecretKey64();  // not derivable from any other key (random_id.h)
    bool used = false;
    for (auto& [p, other] : regions_) used = used || other->softwareKey == key;
    if (used) continue;
    r->softwareKey = key;
    break;
  }
  *out = r.get();
  regions_.emplace(r.get(), std::move(r));
}

Status VerbsDomain::Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) {
  RY_RETURN_IF_ERROR(CheckRange("register", addr, bytes, access));
  if (kind == MemoryKind::kDevice && !caps_.Has(kCapDeviceMemory)) {
    return InvalidUsage("verbs fabric register: device memory needs a GPUDirect peer-memory module "
                        "(nvidia_peermem), which this host does not have");
  }
  auto r = std::make_unique<Region>();
  r->base = reinterpret_cast<uint64_t>(addr);
  r->length = bytes;
  r->access = access;
  r->kind = kind;
  const int flags = IbvAccess(access);
  for (size_t i = 0; i < railPorts_.size(); ++i) {
    IbPort& p = RailPort(i);
    ibv_mr* mr = ibv_reg_mr(p.pd, addr, bytes, flags);
    if (mr == nullptr) {
      const int err = errno;
      for (void* m : r->railMr) ibv_dereg_mr(static_cast<ibv_mr*>(m));
      return SystemError("verbs fabric register: ibv_reg_mr(" + std::to_string(bytes) + " bytes, " +
                         AccessText(access) + ") on rail " + std::to_string(i) + " (" + p.Name() +
                         "): " + proxy::ErrnoText(err));
    }
    r->railMr.push_back(mr);
    r->railLkeys.push_back(mr->lkey);
    r->railRkeys.push_back(mr->rkey);
  }
  Keep(std::move(r), out);
  return Status::Ok();
}

Status VerbsDomain::RegisterDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access,
                                   MemoryKind kind, const Region** out) {
  if (fd < 0) return InvalidArgument("verbs fabric register of a DMA-BUF: fd " + std::to_string(fd));
  RY_RETURN_IF_ERROR(CheckRange("register of a DMA-BUF", addr, bytes, access));
  if (offset + bytes < offset) return InvalidArgument("verbs fabric register of a DMA-BUF: offset + bytes wraps");
  for (size_t i = 0; i < railPorts_.size(); ++i) {
    if (!RailPort(i).dmabuf) {
      return InvalidUsage("verbs fabric register of DMA-BUF fd " + std::to_string(fd) + ": rail " + std::to_string(i) +
                          " (" + RailPort(i).Name() + ") cannot register DMA-BUFs (its driver has no "
                          "ibv_reg_dmabuf_mr)");
    }
  }
  auto r = std::make_unique<Region>();
  r->base = reinterpret_cast<uint64_t>(addr);
  r->length = bytes;
  r->access = access;
  r->kind = kind;
  const int flags = IbvAccess(access);
  for (size_t i = 0; i < railPorts_.size(); ++i) {
    IbPort& p = RailPort(i);
    ibv_mr* mr = ibv_reg_dmabuf_mr(p.pd, offset, bytes, r->base, fd, flags);
    if (mr == nullptr) {
      const int err = errno;
      for (void* m : r->railMr) ibv_dereg_mr(static_cast<ibv_mr*>(m));
      return SystemError("verbs fabric register: ibv_reg_dmabuf_mr(fd " + std::to_string(fd) + ", offset " +
                         std::to_string(offset) + ", " + std::to_string(bytes) + " bytes, " + AccessText(access) +
                         ") on rail " + std::to_string(i) + " (" + p.Name() + "): " + proxy::ErrnoText(err));
    }
    r->railMr.push_back(mr);
    r->railLkeys.push_back(mr->lkey);
    r->railRkeys.push_back(mr->rkey);
  }
  Keep(std::move(r), out);
  return Status::Ok();
}

Status VerbsDomain::Deregister(const Region* region) {
  std::unique_ptr<Region> r;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(region);
    if (it == regions_.end()) return InvalidArgument("verbs fabric deregister: the region is not registered here");
    r = std::move(it->second);
    regions_.erase(it);
  }
  std::string errors;
  for (size_t i = 0; i < r->railMr.size(); ++i) {
    const int rc = ibv_dereg_mr(static_cast<ibv_mr*>(r->railMr[i]));
    if (rc != 0) errors += " rail " + std::to_string(i) + ": " + proxy::ErrnoText(rc);
  }
  if (!errors.empty()) return SystemError("verbs fabric deregister: ibv_dereg_mr failed on" + errors);
  return Status::Ok();
}

Status VerbsDomain::CreateWorker(std::unique_ptr<Worker>* out) { return VerbsWorker::Create(this, out); }

}  // namespace railyard::fabric::verbs
