#include "proxy/verbs/qp_bundle.h"

#include <cstring>
#include <random>

#include "env/log.h"
#include "proxy/verbs/verbs_layout.h"

namespace railyard::proxy::verbs {

Status QpBundle::Create(IbPorts* ib, const std::vector<int>& ports, int nqps, uint32_t recvWrs,
                        uint32_t inlineBytes, std::unique_ptr<QpBundle>* out,
                        const std::vector<int>* qpRails, const std::vector<ibv_comp_channel*>* channels) {
  if (channels != nullptr && channels->size() != ports.size()) {
    return InternalError("a verbs connection's completion channels do not match its rails");
  }
  if (ports.empty() || ports.size() > static_cast<size_t>(kMaxConnRails)) {
    return InternalError("a verbs connection needs 1.." + std::to_string(kMaxConnRails) + " rails, got " +
                         std::to_string(ports.size()));
  }
  std::unique_ptr<QpBundle> b(new QpBundle());
  b->ib_ = ib;
  b->ports_ = ports;
  b->channelled_ = channels != nullptr;
  const int perRail = (nqps + static_cast<int>(ports.size()) - 1) / static_cast<int>(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) {
    IbPort& p = ib->at(static_cast<size_t>(ports[i]));
    const int cqe = perRail * static_cast<int>(kMaxSendWr + recvWrs) + 64;
    ibv_comp_channel* channel = channels != nullptr ? (*channels)[i] : nullptr;
    b->channelled_ = b->channelled_ && channel != nullptr;
    ibv_cq* cq = ibv_create_cq(p.ctx, cqe, nullptr, channel, 0);
    if (cq == nullptr) return SystemError("ibv_create_cq(" + std::to_string(cqe) + ") on " + p.Name() + ": " + ErrnoText(errno));
    b->cqs_.push_back(cq);
  }
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < nqps; ++i) {
    Qp q;
    q.localRail = qpRails != nullptr ? (*qpRails)[static_cast<size_t>(i)] : i % static_cast<int>(ports.size());
    q.port = ports[static_cast<size_t>(q.localRail)];
    IbPort& p = ib->at(static_cast<size_t>(q.port));
    ibv_qp_init_attr ia{};
    ia.send_cq = b->cqs_[static_cast<size_t>(q.localRail)];
    ia.recv_cq = ia.send_cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = kMaxSendWr;
    ia.cap.max_recv_wr = recvWrs > 0 ? recvWrs : 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = inlineBytes;
    ia.sq_sig_all = 0;
    q.qp = ibv_create_qp(p.pd, &ia);
    if (q.qp == nullptr && inlineBytes > 0) {
      ia.cap.max_inline_data = 0;  // the device grants no inline data: use registered buffers
      q.qp = ibv_create_qp(p.pd, &ia);
    }
    if (q.qp == nullptr) return SystemError("ibv_create_qp on " + p.Name() + ": " + ErrnoText(errno));
    q.maxInline = ia.cap.max_inline_data;
    q.psn = rng() & 0xffffff;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(p.port);
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
    const int rc = ibv_modify_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    b->qps_.push_back(q);
    if (rc != 0) return SystemError("QP " + std::to_string(q.qp->qp_num) + " on " + p.Name() + " to INIT: " + ErrnoText(rc));
  }
  *out = std::move(b);
  return Status::Ok();
}

bool QpBundle::ArmCqs() const {
  if (!channelled_) return false;
  for (ibv_cq* cq : cqs_) {
    if (ibv_req_notify_cq(cq, 0) != 0) return false;
  }
  return true;
}

QpBundle::~QpBundle() {
  for (Qp& q : qps_) {
    if (q.qp != nullptr) ibv_destroy_qp(q.qp);
  }
  for (ibv_cq* cq : cqs_) ibv_destroy_cq(cq);
}

QpSet QpBundle::Describe() const {
  QpSet s;
  for (int port : ports_) {
    const IbPort& p = ib_->at(static_cast<size_t>(port));
    QpRailWire r{};
    const GidChoice g = p.Gid();
    std::memcpy(r.gid, g.gid.raw.data(), sizeof r.gid);
    r.lid = p.lid;
    r.mtu = static_cast<uint8_t>(p.activeMtu);
    r.linkLayer = p.linkLayer;
    r.port = static_cast<uint8_t>(p.port);
    std::strncpy(r.device, p.device.c_str(), sizeof r.device - 1);
    s.rails.push_back(r);
  }
  for (const Qp& q : qps_) {
    QpWire w{};
    w.qpn = q.qp->qp_num;
    w.psn = q.psn;
    w.rail = static_cast<uint8_t>(q.localRail);
    s.qps.push_back(w);
  }
  return s;
}

Status QpBundle::Connect(const QpSet& remote, const QpLinkAttrs& attrs, uint8_t tc, uint8_t sl, int rdAtomic) {
  for (size_t i = 0; i < qps_.size(); ++i) {
    Qp& q = qps_[i];
    const IbPort& p = ib_->at(static_cast<size_t>(q.port));
    const QpWire& rq = remote.qps[i];
    const QpRailWire& rr = remote.rails[rq.rail];
    q.remoteRail = rq.rail;
    q.remoteRailName = RailName(rr);
    const MtuNegotiation mtu = NegotiateMtu(p.activeMtu, *IbMtuFromEnum(rr.mtu));
    if (mtu.mismatch && i == 0) {
      RY_INFO(log::kNet, "verbs %s ↔ %s: %s", p.Name().c_str(), q.remoteRailName.c_str(), mtu.message.c_str());
    }
    const GidChoice g = p.Gid();
    if (!g.ok()) return SystemError("no usable GID on " + p.Name() + ": " + g.error);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(mtu.mtu);
    a.dest_qp_num = rq.qpn;
    a.rq_psn = rq.psn;
    a.max_dest_rd_atomic = static_cast<uint8_t>(rdAtomic);
    a.min_rnr_timer = attrs.minRnrTimer;
    a.ah_attr.port_num = static_cast<uint8_t>(p.port);
    a.ah_attr.sl = sl;
    if (p.linkLayer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, rr.gid, sizeof rr.gid);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(g.index);
      a.ah_attr.grh.hop_limit = attrs.hopLimit;
      a.ah_attr.grh.traffic_class = tc;
    } else {
      a.ah_attr.dlid = rr.lid;
    }
    int rc = ibv_modify_qp(q.qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
      return SystemError("QP " + std::to_string(q.qp->qp_num) + " on " + p.Name() + " to RTR (peer QP " +
                         std::to_string(rq.qpn) + " on " + q.remoteRailName + "): " + ErrnoText(rc) +
                         " (no route between these rails?)");
    }
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = attrs.timeout;
    s.retry_cnt = attrs.retryCnt;
    // The protocol never needs RNR retries (verbs_layout.h: a receive WR is posted
    // for every immediate that can arrive). 0 makes a violation fail at once with
    // IBV_WC_RNR_RETRY_EXC_ERR instead of hiding as a stall, so the tests prove it.
    s.rnr_retry = 0;
    (void)attrs.rnrRetry;
    s.sq_psn = q.psn;
    s.max_rd_atomic = static_cast<uint8_t>(rdAtomic);
    rc = ibv_modify_qp(q.qp, &s,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
      return SystemError("QP " + std::to_string(q.qp->qp_num) + " on " + p.Name() + " to RTS: " + ErrnoText(rc));
    }
  }
  return Status::Ok();
}

std::string QpBundle::RailsText() const {
  std::string out;
  for (int port : ports_) out += (out.empty() ? "" : "+") + ib_->at(static_cast<size_t>(port)).Name();
  return out;
}

}  // namespace railyard::proxy::verbs
