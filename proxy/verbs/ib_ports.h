// The RDMA device ports the verbs transport uses: opened once per process, with
// one protection domain each, the hardware half of the MR cache, and a thread that
// watches every device's async events (port down, device fatal, GID change).
#pragma once

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/mr_cache.h"
#include "proxy/socket.h"
#include "proxy/verbs/gid_select.h"
#include "proxy/verbs/link_params.h"

namespace railyard::proxy::verbs {

/// One opened device port (a rail of the verbs transport).
struct IbPort {
  int index = 0;            ///< position in IbPorts, = index into MemoryRegion::hca*
  std::string device;       ///< RDMA device name, e.g. "mlx5_0", "rxe_h0r0"
  int port = 1;             ///< 1-based port number
  std::string netdev;       ///< the port's netdev (the rail), e.g. "enp1s0f0np0"
  std::string pciPath;      ///< sysfs PCI path of the netdev ("" when not PCI)
  int speedMbps = 0;        ///< netdev speed (Mbps; the configured default when unknown)
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  IbMtu activeMtu = IbMtu::k1024;  ///< ibv_port_attr::active_mtu at open time
  uint8_t linkLayer = IBV_LINK_LAYER_ETHERNET;
  uint16_t lid = 0;
  uint64_t maxMsgBytes = 4u << 20;  ///< bytes per payload WR: 4 MiB, or ibv_port_attr::max_msg_sz if smaller
  bool dmabuf = false;     ///< ibv_reg_dmabuf_mr is available (probed at open)
  std::atomic<bool> down{false};  ///< set by a port-error / device-fatal async event
  /// The rail's IPv4 addresses with their prefix lengths (fabric mode matches a peer's
  /// rail to the local port on the same point-to-point subnet).
  std::vector<std::pair<in_addr, int>> ipv4;

  /// True when IPv4 address `a` (network order) is inside one of this rail's subnets.
  bool OnSubnet(in_addr a) const;

  /// "device:port" for messages.
  std::string Name() const { return device + ":" + std::to_string(port); }
  /// The GID QPs on this port use now (re-resolved after IBV_EVENT_GID_CHANGE).
  GidChoice Gid() const;
  /// Replaces the GID choice (the event thread, after a GID change).
  void SetGid(GidChoice g);

 private:
  mutable std::mutex mu_;
  GidChoice gid_;
};

/// Every port the verbs transport uses. Thread-safe after Open.
class IbPorts final : public MrBackend {
 public:
  /// Discovers rails (sysfs + hwloc), keeps the RDMA ports that RAILYARD_HCA selects
  /// and that are ACTIVE with a usable GID (proxy/verbs/hca_filter.h) and opens each
  /// one (ibv_open_device, ibv_alloc_pd, ibv_query_port). Ports stay open for the
  /// life of the process (registrations NCCL holds refer to them).
  /// Zero ports is not an error (*out holds an empty set); `skipped` (may be NULL)
  /// gets one line per port left out, with the reason. SystemError when a selected
  /// device cannot be opened.
  static Status Open(const env::Config& config, std::unique_ptr<IbPorts>* out,
                     std::vector<std::string>* skipped);
  ~IbPorts() override;

  /// Starts the async event thread (port down, device fatal, GID change, QP errors).
  /// SystemError when the thread cannot start. No-op when running or with no ports.
  Status StartEvents();
  /// Stops the event thread (plugin finalize: NCCL may unload the library next).
  void StopEvents();

  size_t size() const { return ports_.size(); }
  IbPort& at(size_t i) { return *ports_[i]; }
  const IbPort& at(size_t i) const { return *ports_[i]; }
  /// The index of the port whose netdev is `netdev` (e.g. "enp1s0f0np0", the rail's
  /// interface) and that is not down now; -1 when there is none. Fabric mode maps its
  /// rails (netdevs) to RDMA ports with it.
  int FindActive(const std::string& netdev) const;

  /// MrBackend: registers the region on every port's PD (LOCAL_WRITE, REMOTE_WRITE,
  /// REMOTE_READ; ibv_reg_dmabuf_mr for a DMA-BUF). SystemError naming the device and
  /// errno; registrations already made are undone.
  Status Register(MemoryRegion* region, int dmabufFd, uint64_t dmabufOffset) override;
  void Deregister(MemoryRegion* region) override;

  /// A fault the event thread reports: port index, the QP it concerns (0 = every QP
  /// of the port: port down, device fatal) and what happened.
  using FaultFn = std::function<void(int port, uint32_t qpn, const std::string& why)>;
  /// Calls `onFault` from the event thread for every port-down, device-fatal and
  /// QP-error event. Returns an id for Unsubscribe.
  int Subscribe(FaultFn onFault);
  /// Stops calls to a subscriber; when it returns, no call is running.
  void Unsubscribe(int id);

 private:
  IbPorts() = default;
  void EventLoop();
  void Notify(int port, uint32_t qpn, const std::string& why);
  void ReresolveGid(IbPort& p);

  env::Config config_;
  std::vector<std::unique_ptr<IbPort>> ports_;
  Fd wake_;  ///< eventfd that stops the event thread
  std::thread thread_;
  std::mutex subMu_;
  std::map<int, FaultFn> subs_;
  int nextSub_ = 1;
};

/// "IBV_EVENT_PORT_ERR" style name of an async event type.
const char* AsyncEventName(ibv_event_type type);

}  // namespace railyard::proxy::verbs
