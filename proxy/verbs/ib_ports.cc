#include "proxy/verbs/ib_ports.h"

#include <pthread.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "env/log.h"
#include "proxy/verbs/hca_filter.h"
#include "topology/discovery.h"

namespace railyard::proxy::verbs {

namespace {

GidPolicy PolicyFrom(const env::Config& c) {
  GidPolicy p;
  p.forcedIndex = c.gidIndex;
  p.roceVersion = c.roceVersion;
  p.addrFamily = c.addrFamily;
  p.addrRange = c.addrRange;
  return p;
}

/// Opens one selected port. SystemError naming the device on failure.
Status OpenPort(const VerbsDevice& d, ibv_device** list, int n, int defaultSpeed, IbPort* p) {
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i) {
    if (d.device == ibv_get_device_name(list[i])) dev = list[i];
  }
  if (dev == nullptr) return SystemError("RDMA device " + d.device + " is in sysfs but not in ibv_get_device_list()");
  p->device = d.device;
  p->port = d.port;
  p->netdev = d.netdev;
  p->pciPath = d.rail != nullptr ? d.rail->pciPath : "";
  p->speedMbps = d.rail != nullptr && d.rail->speedMbps.value_or(0) > 0 ? *d.rail->speedMbps : defaultSpeed;
  p->SetGid(d.gid);
  if (d.rail != nullptr) {
    for (const topology::RailAddress& ra : d.rail->addresses) {
      if (ra.family != AF_INET) continue;
      p->ipv4.emplace_back(reinterpret_cast<const sockaddr_in*>(&ra.sockaddr)->sin_addr, ra.prefixLen);
    }
  }
  p->ctx = ibv_open_device(dev);
  if (p->ctx == nullptr) return SystemError("ibv_open_device(" + d.device + "): " + ErrnoText(errno));
  p->pd = ibv_alloc_pd(p->ctx);
  if (p->pd == nullptr) return SystemError("ibv_alloc_pd(" + d.device + "): " + ErrnoText(errno));
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(p->ctx, static_cast<uint8_t>(d.port), &pa); rc != 0) {
    return SystemError("ibv_query_port(" + p->Name() + "): " + ErrnoText(rc));
  }
  p->activeMtu = IbMtuFromEnum(pa.active_mtu).value_or(IbMtu::k1024);
  p->linkLayer = pa.link_layer;
  p->lid = pa.lid;
  if (pa.max_msg_sz > 0) p->maxMsgBytes = std::min<uint64_t>(pa.max_msg_sz, p->maxMsgBytes);
  // DMA-BUF probe, as NCCL 2.28.9 does (net_ib.cc ncclIbDmaBufSupport): a registration
  // of fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT when the kernel or provider lacks it.
  errno = 0;
  ibv_mr* probe = ibv_reg_dmabuf_mr(p->pd, 0, 0, 0, -1, 0);
  if (probe != nullptr) ibv_dereg_mr(probe);
  p->dmabuf = probe == nullptr && errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
  int flags = fcntl(p->ctx->async_fd, F_GETFL);
  fcntl(p->ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
  return Status::Ok();
}

}  // namespace

bool IbPort::OnSubnet(in_addr a) const {
  for (const auto& [mine, prefix] : ipv4) {
    const uint32_t mask = prefix <= 0 ? 0 : prefix >= 32 ? ~0u : ~0u << (32 - prefix);
    if ((ntohl(mine.s_addr) & mask) == (ntohl(a.s_addr) & mask)) return true;
  }
  return false;
}

GidChoice IbPort::Gid() const {
  std::lock_guard lock(mu_);
  return gid_;
}

void IbPort::SetGid(GidChoice g) {
  std::lock_guard lock(mu_);
  gid_ = std::move(g);
}

Status IbPorts::Open(const env::Config& config, std::unique_ptr<IbPorts>* out,
                     std::vector<std::string>* skipped) {
  std::unique_ptr<IbPorts> ports(new IbPorts());
  ports->config_ = config;
  topology::DiscoveryOptions o;
  o.includeDown = true;  // SelectVerbsDevices says why a down port is skipped
  o.disableHwloc = true;  // every rank runs this at init: sysfs has what the QPs need
  o.logRails = false;     // every port, unfiltered: SelectVerbsDevices logs what it keeps
  std::vector<topology::Rail> rails;
  RY_RETURN_IF_ERROR(topology::DiscoverRails(o, &rails, nullptr));
  const std::vector<VerbsDevice> devs =
      SelectVerbsDevices(rails, HcaFilter::Parse(config.hca), PolicyFrom(config), skipped);
  if (!devs.empty()) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return SystemError("ibv_get_device_list: " + ErrnoText(errno));
    for (const VerbsDevice& d : devs) {
      auto p = std::make_unique<IbPort>();
      p->index = static_cast<int>(ports->ports_.size());
      Status s = OpenPort(d, list, n, config.defaultSpeedMbps, p.get());
      ports->ports_.push_back(std::move(p));
      if (!s.ok()) {
        ibv_free_device_list(list);
        return s;
      }
      const IbPort& q = *ports->ports_.back();
      RY_INFO(log::kInit | log::kNet, "RDMA port %d: %s (%s) MTU %d %s, %s%s", q.index,
              q.Name().c_str(), q.netdev.c_str(), IbMtuBytes(q.activeMtu),
              q.linkLayer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "RoCE",
              q.Gid().reason.c_str(), q.dmabuf ? ", DMA-BUF" : "");
    }
    ibv_free_device_list(list);
  }
  ports->wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ports->wake_.valid()) return SystemError("eventfd: " + ErrnoText(errno));
  *out = std::move(ports);
  return Status::Ok();
}

Status IbPorts::StartEvents() {
  if (thread_.joinable() || ports_.empty()) return Status::Ok();
  uint64_t drain = 0;
  (void)!::read(wake_.get(), &drain, sizeof drain);
  try {
    thread_ = std::thread([this] { EventLoop(); });
  } catch (const std::system_error& e) {
    return SystemError(std::string("cannot start the verbs event thread: ") + e.what());
  }
  return Status::Ok();
}

void IbPorts::StopEvents() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

int IbPorts::FindActive(const std::string& netdev) const {
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i]->netdev == netdev && !ports_[i]->down.load()) return static_cast<int>(i);
  }
  return -1;
}

IbPorts::~IbPorts() {
  StopEvents();
  for (auto& p : ports_) {
    if (p->pd != nullptr) ibv_dealloc_pd(p->pd);
    if (p->ctx != nullptr) ibv_close_device(p->ctx);
  }
}

Status IbPorts::Register(MemoryRegion* region, int dmabufFd, uint64_t dmabufOffset) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  region->hcaMr.assign(ports_.size(), nullptr);
  region->hcaLkey.assign(ports_.size(), 0);
  region->hcaRkey.assign(ports_.size(), 0);
  for (size_t i = 0; i < ports_.size(); ++i) {
    IbPort& p = *ports_[i];
    void* addr = reinterpret_cast<void*>(region->base);
    ibv_mr* mr = dmabufFd >= 0
                     ? ibv_reg_dmabuf_mr(p.pd, dmabufOffset, region->len, region->base, dmabufFd, access)
                     : ibv_reg_mr(p.pd, addr, region->len, access);
    if (mr == nullptr) {
      const int err = errno;
      Deregister(region);
      return SystemError(std::string(dmabufFd >= 0 ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr") + " of " +
                         std::to_string(region->len) + " bytes on " + p.Name() + ": " + ErrnoText(err) +
                         (err == ENOMEM ? " (is the locked-memory limit, ulimit -l, too low?)" : ""));
    }
    region->hcaMr[i] = mr;
    region->hcaLkey[i] = mr->lkey;
    region->hcaRkey[i] = mr->rkey;
  }
  return Status::Ok();
}

void IbPorts::Deregister(MemoryRegion* region) {
  for (void*& m : region->hcaMr) {
    if (m != nullptr) ibv_dereg_mr(static_cast<ibv_mr*>(m));
    m = nullptr;
  }
  region->hcaMr.clear();
  region->hcaLkey.clear();
  region->hcaRkey.clear();
}

int IbPorts::Subscribe(FaultFn onFault) {
  std::lock_guard lock(subMu_);
  subs_[nextSub_] = std::move(onFault);
  return nextSub_++;
}

void IbPorts::Unsubscribe(int id) {
  std::lock_guard lock(subMu_);  // Notify holds it while calling, so no call is running after this
  subs_.erase(id);
}

void IbPorts::Notify(int port, uint32_t qpn, const std::string& why) {
  std::lock_guard lock(subMu_);
  for (auto& [id, fn] : subs_) fn(port, qpn, why);
}

void IbPorts::ReresolveGid(IbPort& p) {
  topology::DiscoveryOptions o;
  o.includeDown = true;
  o.disableHwloc = true;
  o.logRails = false;
  std::vector<topology::Rail> rails;
  if (!topology::DiscoverRails(o, &rails, nullptr).ok()) return;
  GidPolicy policy = PolicyFrom(config_);
  for (const topology::Rail& r : rails) {
    if (r.rdmaDevice != p.device || r.rdmaPort != p.port) continue;
    const GidChoice old = p.Gid();
    if (GidStillValid(old, r.gids)) {
      RY_INFO(log::kNet, "verbs %s: GID table changed, GID %d still valid", p.Name().c_str(), old.index);
      return;
    }
    GidChoice now = ChooseGid(r.gids, policy, nullptr);
    if (!now.ok()) {
      RY_WARN("verbs %s: GID %d is gone after a GID change and no GID is usable: %s; new "
              "connections on it will fail", p.Name().c_str(), old.index, now.error.c_str());
    } else {
      RY_WARN("verbs %s: GID %d is gone after a GID change; new connections use %s", p.Name().c_str(),
              old.index, now.reason.c_str());
    }
    p.SetGid(std::move(now));
    return;
  }
}

void IbPorts::EventLoop() {
  pthread_setname_np(pthread_self(), "ry-ib-events");  // ps -L, top -H, gdb name it
  std::vector<pollfd> fds;
  for (auto& p : ports_) fds.push_back({p->ctx->async_fd, POLLIN, 0});
  fds.push_back({wake_.get(), POLLIN, 0});
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds.back().revents != 0) return;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      IbPort& p = *ports_[i];
      ibv_async_event ev{};
      while (ibv_get_async_event(p.ctx, &ev) == 0) {
        const std::string what = std::string(AsyncEventName(ev.event_type)) + " on " + p.Name();
        switch (ev.event_type) {
          case IBV_EVENT_PORT_ERR:
          case IBV_EVENT_DEVICE_FATAL:
            if (ev.event_type == IBV_EVENT_DEVICE_FATAL ||
                ev.element.port_num == static_cast<int>(p.port)) {
              p.down.store(true);
              RY_WARN("verbs: %s: comms on this rail fail", what.c_str());
              Notify(p.index, 0, what);
            }
            break;
          case IBV_EVENT_PORT_ACTIVE:
            p.down.store(false);
            RY_INFO(log::kNet, "verbs: %s", what.c_str());
            break;
          case IBV_EVENT_GID_CHANGE:
            RY_INFO(log::kNet, "verbs: %s: re-resolving the GID", what.c_str());
            ReresolveGid(p);
            break;
          case IBV_EVENT_QP_FATAL:
          case IBV_EVENT_QP_REQ_ERR:
          case IBV_EVENT_QP_ACCESS_ERR:
          case IBV_EVENT_PATH_MIG_ERR:
          case IBV_EVENT_CQ_ERR: {
            const uint32_t qpn = ev.event_type == IBV_EVENT_CQ_ERR ? 0 : ev.element.qp->qp_num;
            RY_WARN("verbs: %s (QP %u)", what.c_str(), qpn);
            Notify(p.index, qpn, what + (qpn ? " (QP " + std::to_string(qpn) + ")" : ""));
            break;
          }
          default:
            RY_INFO(log::kNet, "verbs: %s", what.c_str());
        }
        ibv_ack_async_event(&ev);
      }
    }
  }
}

const char* AsyncEventName(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_CQ_ERR: return "IBV_EVENT_CQ_ERR";
    case IBV_EVENT_QP_FATAL: return "IBV_EVENT_QP_FATAL";
    case IBV_EVENT_QP_REQ_ERR: return "IBV_EVENT_QP_REQ_ERR";
    case IBV_EVENT_QP_ACCESS_ERR: return "IBV_EVENT_QP_ACCESS_ERR";
    case IBV_EVENT_COMM_EST: return "IBV_EVENT_COMM_EST";
    case IBV_EVENT_SQ_DRAINED: return "IBV_EVENT_SQ_DRAINED";
    case IBV_EVENT_PATH_MIG: return "IBV_EVENT_PATH_MIG";
    case IBV_EVENT_PATH_MIG_ERR: return "IBV_EVENT_PATH_MIG_ERR";
    case IBV_EVENT_DEVICE_FATAL: return "IBV_EVENT_DEVICE_FATAL";
    case IBV_EVENT_PORT_ACTIVE: return "IBV_EVENT_PORT_ACTIVE";
    case IBV_EVENT_PORT_ERR: return "IBV_EVENT_PORT_ERR";
    case IBV_EVENT_LID_CHANGE: return "IBV_EVENT_LID_CHANGE";
    case IBV_EVENT_PKEY_CHANGE: return "IBV_EVENT_PKEY_CHANGE";
    case IBV_EVENT_SM_CHANGE: return "IBV_EVENT_SM_CHANGE";
    case IBV_EVENT_SRQ_ERR: return "IBV_EVENT_SRQ_ERR";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "IBV_EVENT_SRQ_LIMIT_REACHED";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "IBV_EVENT_QP_LAST_WQE_REACHED";
    case IBV_EVENT_CLIENT_REREGISTER: return "IBV_EVENT_CLIENT_REREGISTER";
    case IBV_EVENT_GID_CHANGE: return "IBV_EVENT_GID_CHANGE";
    case IBV_EVENT_WQ_FATAL: return "IBV_EVENT_WQ_FATAL";
  }
  return "IBV_EVENT_(unknown)";
}

}  // namespace railyard::proxy::verbs
