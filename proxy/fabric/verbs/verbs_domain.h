// The fabric's verbs transport (RoCE v2 / InfiniBand RC): a Domain whose rails are
// the RDMA ports RAILYARD_HCA selects (proxy/verbs/ib_ports.h: GID selection, MTU,
// link parameters as the NCCL comms use them). A Region is one MR per rail's PD;
// one-sided operations are the HCA's own (RDMA WRITE, WRITE WITH IMM, READ, ATOMIC
// FETCH_AND_ADD), so the target's CPU takes no part in them and the HCA, not
// software, checks rkey, bounds and rights (one generic REMOTE_ACCESS error).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/accept_sources.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/stripe_scheduler.h"
#include "proxy/verbs/ib_ports.h"
#include "proxy/verbs/link_params.h"

namespace railyard::fabric::verbs {

/// Options of a verbs Domain.
struct VerbsOptions {
  /// The configuration the ports are opened with: RAILYARD_HCA, the GID policy
  /// (RAILYARD_GID_INDEX, RAILYARD_ROCE_VERSION, RAILYARD_IB_ADDR_FAMILY), TC/SL,
  /// RAILYARD_IB_TIMEOUT / RETRY_CNT, RAILYARD_DEFAULT_SPEED_MBPS.
  env::Config config;
  /// Striping (RAILYARD_STRIPE_*).
  StripeOptions stripe;
  /// An Endpoint with work outstanding and no completion for this long fails with
  /// TIMEOUT (RAILYARD_TIMEOUT_MS).
  int timeoutMs = 30000;
  /// A connection setup (bootstrap connect, hello and QP records both ways, QPs to
  /// RTS) not done in this long fails with TIMEOUT (RAILYARD_TIMEOUT_MS by default).
  int connectTimeoutMs = 30000;
  /// This process's rank, named in errors (-1: unknown).
  int rank = -1;
  /// IPv4 address the Worker's bootstrap TCP listener binds (QP records are exchanged
  /// over it). Empty: the first IPv4 address of rail 0, else 127.0.0.1.
  std::string bootstrapAddress;
  /// Port the bootstrap listener binds (host order; SO_REUSEADDR): 0 (default) takes
  /// an ephemeral one; a fixed one is for a relay host's Forwarder ports
  /// (RAILYARD_FABRIC_RELAY_VERBS_PORT), where sources derive the address from the
  /// cabling graph. Only one Worker of such a Domain can listen there.
  uint16_t bootstrapPort = 0;
  /// The IPv4 addresses (dotted) bootstrap connections may come from; empty (the
  /// default) = any. Any other source is closed at accept, before a byte is read
  /// (AcceptSources). A relay's Forwarder verbs ports set their neighbours' ends of
  /// the cable, as its TCP ports do (TcpOptions::acceptOnlyFrom).
  std::vector<std::string> acceptOnlyFrom;
  /// Receive buffers a target posts per connection for records and immediates (the
  /// initiator's credits): 4..4096.
  int recordCredits = 64;

  /// Everything from `config` (RAILYARD_TIMEOUT_MS, RAILYARD_STRIPE_*, the port and
  /// link variables).
  static VerbsOptions FromConfig(const env::Config& config);
  /// InvalidArgument naming the first bad field.
  Status Validate() const;
};

/// Largest Send record, bytes (one receive buffer).
inline constexpr size_t kVerbsMaxRecordBytes = 4096;
/// Largest Write/Read (the HCA's limit is per WR; ops are cut into chunks).
inline constexpr uint64_t kVerbsMaxOpBytes = 1ull << 40;
/// Ops one Endpoint keeps posted to the HCA; more wait in its queue.
inline constexpr int kVerbsOpWindow = 256;

/// Creates a verbs Domain: opens the selected ports (ibv_open_device, ibv_alloc_pd).
/// InvalidUsage when this host has no usable RDMA port ("not available here": the
/// message lists the ports left out and why); SystemError when a device cannot be
/// opened; InvalidArgument for bad options.
Status CreateVerbsDomain(const VerbsOptions& options, std::unique_ptr<Domain>* out);
/// Creates a verbs Domain over ports this process has already opened (no discovery,
/// no ibv_open_device: the plugin opens its ports once, IbPorts::Open takes seconds
/// under emulation, and every NCCL device's Domain shares those contexts and PDs).
/// Rail i is the port of `ports` named portNames[i] (IbPort::Name(), "device:port");
/// options.config's port selection (RAILYARD_HCA) is not used. InvalidArgument for
/// no names, a duplicate, more than RemoteKey::kMaxRails, or a name not among
/// `ports` (the message lists those opened); bad options as CreateVerbsDomain.
/// `ports` stays alive as long as the Domain (shared).
Status CreateVerbsDomainOn(const VerbsOptions& options, std::shared_ptr<proxy::verbs::IbPorts> ports,
                           const std::vector<std::string>& portNames, std::unique_ptr<Domain>* out);

/// The verbs Domain (exposed for its Workers and Endpoints).
class VerbsDomain : public Domain {
 public:
  /// Rails: ports->at(railPorts[i]) for each i (indices into `ports`, checked by
  /// the factories).
  VerbsDomain(VerbsOptions options, std::shared_ptr<proxy::verbs::IbPorts> ports, std::vector<int> railPorts);
  ~VerbsDomain() override;

  const char* TransportName() const override { return "verbs"; }
  const Capabilities& capabilities() const override { return caps_; }
  const std::vector<RailInfo>& rails() const override { return rails_; }
  /// One ibv_reg_mr per rail's PD (access: see IbvAccess). SystemError naming the
  /// device and errno when the HCA refuses (nothing stays registered then).
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) override;
  /// ibv_dereg_mr on every rail: once it returns the HCA refuses every remote access
  /// to the region (the initiator sees REMOTE_ACCESS).
  Status Deregister(const Region* region) override;
  /// One ibv_reg_dmabuf_mr(pd, offset, bytes, iova = addr, fd) per rail's PD. Needs
  /// kCapDmaBuf (every port probed DMA-BUF capable at open, IbPort::dmabuf), else
  /// InvalidUsage naming the first port that cannot; device memory needs no
  /// peer-memory module on this path. SystemError naming the rail and errno when
  /// the driver refuses the fd (not a DMA-BUF, too short); nothing stays registered.
  Status RegisterDmaBuf(void* addr, uint64_t bytes, int fd, uint64_t offset, uint32_t access, MemoryKind kind,
                        const Region** out) override;
  Status CreateWorker(std::unique_ptr<Worker>* out) override;

  const VerbsOptions& options() const { return options_; }
  /// The opened ports the rails are on (possibly shared with other Domains: index
  /// them through railPorts(), never by rail number).
  proxy::verbs::IbPorts& ports() { return *ports_; }
  /// Index in ports() of each rail's port (rails().size() entries), as QpBundle takes them.
  const std::vector<int>& railPorts() const { return railPorts_; }
  /// The port of rail `rail` (< rails().size()).
  proxy::verbs::IbPort& RailPort(size_t rail) { return ports_->at(static_cast<size_t>(railPorts_[rail])); }
  const proxy::verbs::QpLinkAttrs& linkAttrs() const { return link_; }
  /// Outstanding RDMA READ / atomic requests per QP (min of 16 and every device's limits).
  int rdAtomic() const { return rdAtomic_; }

 private:
  VerbsOptions options_;
  std::shared_ptr<proxy::verbs::IbPorts> ports_;
  std::vector<int> railPorts_;
  std::vector<RailInfo> rails_;
  Capabilities caps_;
  proxy::verbs::QpLinkAttrs link_;
  int rdAtomic_ = 1;
  /// Checks of Register and RegisterDmaBuf (`what` opens messages). Requires nothing.
  Status CheckRange(const char* what, void* addr, uint64_t bytes, uint32_t access) const;
  /// Gives `r` a fresh software key and keeps it; *out = r. Requires the MRs made.
  void Keep(std::unique_ptr<Region> r, const Region** out);
  mutable std::mutex mu_;
  std::map<const Region*, std::unique_ptr<Region>> regions_;
};

/// IBV_ACCESS_* flags for fabric Access flags: local -> LOCAL_WRITE, remote read ->
/// REMOTE_READ, remote write -> REMOTE_WRITE, remote atomic -> REMOTE_ATOMIC; LOCAL_WRITE
/// is added with REMOTE_WRITE and REMOTE_ATOMIC because ibv_reg_mr(3) requires it.
int IbvAccess(uint32_t access);

}  // namespace railyard::fabric::verbs
