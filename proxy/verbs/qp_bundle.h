// The queue pairs and completion queues of one end of a verbs connection, spread
// over the rails the comm's device covers, and their INIT → RTR → RTS transitions.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/verbs/ib_ports.h"
#include "proxy/verbs/link_params.h"
#include "proxy/verbs/qp_record.h"

namespace railyard::proxy::verbs {

/// One RC QP of a connection.
struct Qp {
  ibv_qp* qp = nullptr;
  int port = 0;          ///< index into IbPorts of the local rail
  int localRail = 0;     ///< index into this bundle's rails
  int remoteRail = 0;    ///< index into the peer's QpSet rails
  uint32_t psn = 0;      ///< our initial PSN
  uint32_t maxInline = 0;  ///< inline bytes the device granted (0 = none)
  std::string remoteRailName;  ///< "dev:port" of the peer's rail (for errors)
};

/// QPs and CQs of one connection end. Not thread-safe: the comm's caller thread owns it.
class QpBundle {
 public:
  /// Creates `nqps` RC QPs in INIT, QP i on rail `ports[i % ports.size()]` (indices
  /// into `ib`), with one CQ per rail. `recvWrs` receive WRs per QP are allowed (the
  /// receiver side posts them). `inlineBytes` > 0 asks for that much inline data
  /// (the device may grant less; Qp::maxInline says). SystemError naming the device.
  /// `qpRails` (optional, nqps entries) puts QP i on rail ports[qpRails[i]] instead.
  /// `channels` (optional, one per entry of `ports`, each of that port's device
  /// context or null): the completion channel each rail's CQ reports to, so a thread
  /// can sleep until a completion (ArmCqs, ibv_req_notify_cq(3)).
  static Status Create(IbPorts* ib, const std::vector<int>& ports, int nqps, uint32_t recvWrs,
                       uint32_t inlineBytes, std::unique_ptr<QpBundle>* out,
                       const std::vector<int>* qpRails = nullptr,
                       const std::vector<ibv_comp_channel*>* channels = nullptr);
  ~QpBundle();

  /// This end's QP record set (rails with GIDs, MTUs; QPs with numbers and PSNs).
  /// `fifo*`/`ring*` fill the sender/receiver areas; rkeys per rail come from `region`.
  QpSet Describe() const;

  /// Moves every QP to RTR then RTS against `remote` (already validated by
  /// DecodeQpSet with this bundle's QP count). Path MTU is the min of both ends'
  /// (NegotiateMtu, mismatches logged). `attrs` holds timeout/retry; tc/sl are the
  /// connector's (sent in its record). `rdAtomic` is the number of RDMA READ /
  /// atomic requests each QP may have outstanding, both as initiator
  /// (max_rd_atomic) and as responder (max_dest_rd_atomic); the NCCL comms use 1,
  /// the fabric's Reads more (at most the device's max_qp_rd_atom).
  /// SystemError naming QP, device and errno.
  Status Connect(const QpSet& remote, const QpLinkAttrs& attrs, uint8_t tc, uint8_t sl, int rdAtomic = 1);

  std::vector<Qp>& qps() { return qps_; }
  const std::vector<int>& ports() const { return ports_; }
  /// The CQ of local rail `r`.
  ibv_cq* cq(int r) const { return cqs_[static_cast<size_t>(r)]; }
  size_t ncqs() const { return cqs_.size(); }
  /// Asks every CQ made with a completion channel to report its next completion
  /// there (ibv_req_notify_cq, any completion). False when one could not be armed
  /// (the caller must not sleep on the channel then) or a CQ has no channel.
  bool ArmCqs() const;
  IbPorts& ib() const { return *ib_; }
  /// Local rails joined with '+', e.g. "rxe_h0r0:1+rxe_h0r1:1".
  std::string RailsText() const;

 private:
  QpBundle() = default;
  IbPorts* ib_ = nullptr;
  std::vector<int> ports_;
  std::vector<ibv_cq*> cqs_;
  bool channelled_ = false;  ///< every CQ reports to a completion channel
  std::vector<Qp> qps_;
};

}  // namespace railyard::proxy::verbs
