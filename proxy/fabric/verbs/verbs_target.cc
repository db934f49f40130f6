#include "proxy/fabric/verbs/verbs_target.h"

#include <arpa/inet.h>

#include <atomic>
#include <cstring>

#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_endpoint.h"
#include "proxy/fabric/verbs/verbs_worker.h"

namespace railyard::fabric::verbs {

namespace {
constexpr size_t kBufBase = 64;  ///< the credit source word sits before the buffers
}

VerbsTarget::VerbsTarget(VerbsWorker* worker, proxy::Fd fd)
    : worker_(worker), boot_(std::move(fd)), since_(std::chrono::steady_clock::now()) {}

VerbsTarget::~VerbsTarget() {
  qps_.reset();
  if (region_ != nullptr) (void)worker_->domain().Deregister(region_);
}

void VerbsTarget::Failed(FabricErrc errc, int rail, std::string what) {
  if (state_ == 3) return;
  state_ = 3;
  ++worker_->counters().connectionsFailed;
  Event e;
  e.kind = EventKind::kError;
  e.op = OpType::kNone;
  e.peer = peer_.workerId;
  e.error.errc = errc;
  e.error.site.rank = worker_->domain().options().rank;
  char id[32];
  std::snprintf(id, sizeof id, "w=%016llx", static_cast<unsigned long long>(peer_.workerId));
  e.error.site.peer = peer_.workerId != 0 ? id : "an unidentified peer";
  if (rail >= 0) {
    e.error.site.rail = rail;
    e.error.site.device = worker_->domain().rails()[static_cast<size_t>(rail)].device;
    if (qps_ != nullptr) e.error.site.qp = qps_->qps()[static_cast<size_t>(rail)].qp->qp_num;
  }
  e.error.what = std::move(what);
  worker_->Emit(std::move(e));
}

bool VerbsTarget::PostRecv(uint32_t index) {
  const uint32_t bytes = static_cast<uint32_t>(kVerbsMaxRecordBytes);
  ibv_sge sge{reinterpret_cast<uint64_t>(mem_.data() + kBufBase + static_cast<size_t>(index) * bytes), bytes,
              region_->railLkeys[0]};
  ibv_recv_wr wr{};
  wr.wr_id = index;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_recv(qps_->qps()[0].qp, &wr, &bad);
  if (rc != 0) Failed(FabricErrc::kSystem, 0, "ibv_post_recv: " + proxy::ErrnoText(rc));
  return rc == 0;
}

bool VerbsTarget::Accept(const Handshake& h, std::string* why) {
  VerbsDomain& d = worker_->domain();
  const size_t n = h.qps.qps.size();
  if (h.qps.rails.size() != n || n > d.rails().size()) {
    *why = "the peer offers " + std::to_string(h.qps.rails.size()) + " rails and " + std::to_string(n) +
           " QPs; this worker has " + std::to_string(d.rails().size()) + " rails (one QP per shared rail)";
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (h.qps.qps[i].rail != i) {
      *why = "the peer's QP " + std::to_string(i) + " is on its rail " + std::to_string(h.qps.qps[i].rail);
      return false;
    }
  }
  credits_ = static_cast<uint32_t>(d.options().recordCredits);
  mem_.assign(kBufBase + static_cast<size_t>(credits_) * kVerbsMaxRecordBytes, 0);
  Status s = d.Register(mem_.data(), mem_.size(), kAccessLocal, MemoryKind::kHost, &region_);
  const std::vector<int> ports(d.railPorts().begin(), d.railPorts().begin() + static_cast<ptrdiff_t>(n));
  if (s.ok()) {
    s = proxy::verbs::QpBundle::Create(&d.ports(), ports, static_cast<int>(n), credits_, 64, &qps_, nullptr,
                                       worker_->ChannelsFor(ports));
  }
  if (s.ok()) {
    for (auto& q : qps_->qps()) {
      ibv_qp_attr a{};
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                          IBV_ACCESS_LOCAL_WRITE;
      const int rc = ibv_modify_qp(q.qp, &a, IBV_QP_ACCESS_FLAGS);
      if (rc != 0) s = SystemError("QP access flags: " + proxy::ErrnoText(rc));
    }
  }
  if (!s.ok()) {
    *why = s.message();
    return false;
  }
  for (uint32_t i = 0; i < credits_; ++i) {
    if (!PostRecv(i)) return false;
  }
  s = qps_->Connect(h.qps, d.linkAttrs(), h.qps.trafficClass, h.qps.serviceLevel, d.rdAtomic());
  if (!s.ok()) {
    *why = s.message();
    return false;
  }
  Handshake reply;
  reply.hello.role = VerbsHello::kRoleAccept;
  reply.hello.workerId = worker_->id();
  reply.hello.connection = h.hello.connection;
  reply.hello.recordCredits = credits_;
  reply.hello.recordBytes = static_cast<uint32_t>(kVerbsMaxRecordBytes);
  reply.qps = qps_->Describe();
  boot_.Queue(reply);
  return true;
}

bool VerbsTarget::StepHandshake() {
  bool done = false;
  Status s;
  if (state_ == 0) {
    Handshake h;
    s = boot_.Read(VerbsHello::kRoleConnect, 0, &h, &done);
    if (s.ok() && done) {
      peer_ = h.hello;
      std::string why;
      if (!Accept(h, &why)) {
        Failed(FabricErrc::kConnectFailed, -1, "refused a peer's connection: " + why);
        return false;
      }
      state_ = 1;
    }
  }
  if (s.ok() && state_ == 1) {
    s = boot_.Flush(&done);
    if (s.ok() && done) {
      state_ = 2;
      ++worker_->counters().peerConnections;
      (void)boot_.WatchLiveness(worker_->domain().options().timeoutMs);  // best effort: as the initiator's
      return true;
    }
  }
  if (!s.ok()) {
    Failed(s.code() == Code::kSystemError ? FabricErrc::kConnectFailed : FabricErrc::kMalformed, -1,
           "a peer's connection setup failed: " + s.message());
    return false;
  }
  const int timeout = worker_->domain().options().connectTimeoutMs;
  if (std::chrono::steady_clock::now() - since_ > std::chrono::milliseconds(timeout)) {
    Failed(FabricErrc::kTimeout, -1,
           "a peer's connection setup did not finish within " + std::to_string(timeout) + " ms (RAILYARD_TIMEOUT_MS)");
    return false;
  }
  return true;
}

void VerbsTarget::Poll() {
  ibv_wc wcs[32];
  for (size_t r = 0; r < qps_->ncqs() && state_ == 2; ++r) {
    const int n = ibv_poll_cq(qps_->cq(static_cast<int>(r)), 32, wcs);
    if (n > 0) lastCompletion_ = std::chrono::steady_clock::now();
    for (int i = 0; i < n && state_ == 2; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        Failed(ErrcOfCompletion(wc.status), static_cast<int>(r),
               std::string("a work completion of the peer's connection failed: ") + ibv_wc_status_str(wc.status) +
                   " (vendor error " + std::to_string(wc.vendor_err) + ")");
        return;
      }
      if (wc.opcode == IBV_WC_RDMA_WRITE) {  // our credit write
        creditInFlight_ = false;
        continue;
      }
      const uint32_t index = static_cast<uint32_t>(wc.wr_id);
      if (index >= credits_) continue;
      Event e;
      e.peer = peer_.workerId;
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        e.kind = EventKind::kImmediate;
        e.value = ntohl(wc.imm_data);
        // A Write of one work request: its byte_len is the whole Write (one of more
        // work requests ends in a size record instead, below).
        e.bytes = wc.byte_len;
      } else if (wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) != 0) {
        // A Write of several work requests (striped, chunked, WriteFinal): the SEND
        // WITH IMM after its chunks carries the whole Write's size (verbs_wire.h).
        const auto* p = reinterpret_cast<const uint8_t*>(mem_.data() + kBufBase +
                                                         static_cast<size_t>(index) * kVerbsMaxRecordBytes);
        WriteSizeRecord rec;
        if (Status s = WriteSizeRecord::Unpack({p, wc.byte_len}, kVerbsMaxOpBytes, &rec); !s.ok()) {
          Failed(FabricErrc::kMalformed, static_cast<int>(r), "the peer's Write with immediate: " + s.message());
          return;
        }
        e.kind = EventKind::kImmediate;
        e.value = ntohl(wc.imm_data);
        e.bytes = rec.bytes;
      } else if (wc.opcode == IBV_WC_RECV && wc.byte_len >= 1 && wc.byte_len <= kVerbsMaxRecordBytes) {
        e.kind = EventKind::kRecord;
        const char* p = mem_.data() + kBufBase + static_cast<size_t>(index) * kVerbsMaxRecordBytes;
        e.record.assign(p, p + wc.byte_len);
      } else {
        Failed(FabricErrc::kMalformed, static_cast<int>(r),
               "the peer sent a record of " + std::to_string(wc.byte_len) + " bytes (opcode " +
                   std::to_string(wc.opcode) + ")");
        return;
      }
      worker_->Emit(std::move(e));
      if (!PostRecv(index)) return;
      ++consumed_;
    }
  }
}

void VerbsTarget::ReturnCredits(bool probe) {
  if (creditInFlight_ || (consumed_ == reported_ && !probe) || state_ != 2) return;
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mem_.data())).store(consumed_, std::memory_order_release);
  ibv_sge sge{reinterpret_cast<uint64_t>(mem_.data()), 8, region_->railLkeys[0]};
  ibv_send_wr wr{};
  wr.wr_id = MakeWrId(0, WrKind::kCredit);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer_.creditAddr;
  wr.wr.rdma.rkey = peer_.creditRkey;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qps_->qps()[0].qp, &wr, &bad);
  if (rc != 0) {
    Failed(FabricErrc::kSystem, 0, "ibv_post_send(credits): " + proxy::ErrnoText(rc));
    return;
  }
  reported_ = consumed_;
  creditInFlight_ = true;
  creditSent_ = std::chrono::steady_clock::now();
}

bool VerbsTarget::Progress() {
  if (state_ == 3) return false;
  if (state_ < 2) return StepHandshake();
  Poll();
  ReturnCredits();
  if (state_ != 2) return false;
  bool closed = false, abandoned = false, lost = false, reset = false;
  Status s;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastWatch_ >= kWatchInterval && !bootLost_) {
    lastWatch_ = now;
    s = boot_.Watch(&closed, &abandoned, &lost, &reset);
  }
  const int timeoutMs = worker_->domain().options().timeoutMs;
  // A reset is the peer's keepalive giving up (see Watch): outvoted as our own is.
  if ((lost || reset) && !BootstrapChannel::LostMeansDead(lastCompletion_, now, timeoutMs)) {
    // Outvoted by a recent completion (see the Endpoint's Progress): keep serving.
    bootLost_ = true;
    lost = closed = false;
    char id[40];
    std::snprintf(id, sizeof id, "peer w=%016llx", static_cast<unsigned long long>(peer_.workerId));
    RY_WARN("%s", BootstrapChannel::StarvedText(id, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        now - lastCompletion_).count()).c_str());
  }
  if (lost) {
    if (worker_->counters().peerConnections > 0) --worker_->counters().peerConnections;
    Failed(FabricErrc::kTimeout, -1,
           BootstrapChannel::LostText(worker_->domain().options().timeoutMs));
    return false;
  }
  if (bootLost_) {
    // No longer watched by the socket: a credit write is the probe (see ReturnCredits).
    const auto quiet = std::chrono::milliseconds(timeoutMs);
    if (creditInFlight_ && now - creditSent_ > quiet) {
      if (worker_->counters().peerConnections > 0) --worker_->counters().peerConnections;
      Failed(FabricErrc::kTimeout, 0,
             BootstrapChannel::ProbeFailedText("a credit write", "had no answer for " + std::to_string(timeoutMs) +
                                                                     " ms (RAILYARD_TIMEOUT_MS)"));
      return false;
    }
    if (!creditInFlight_ && now - lastCompletion_ >= quiet / 2) ReturnCredits(true);
    if (state_ != 2) return false;
  }
  if (abandoned) {
    if (worker_->counters().peerConnections > 0) --worker_->counters().peerConnections;
    Failed(FabricErrc::kPeerClosed, -1, "the peer's Endpoint went away with ops under way (closed or destroyed)");
    return false;
  }
  if (closed) {
    // The peer's Endpoint went away (destroyed or its process died): nothing of
    // ours is under way, so this is not an error here.
    if (worker_->counters().peerConnections > 0) --worker_->counters().peerConnections;
    state_ = 3;
    return false;
  }
  if (!s.ok()) {
    if (worker_->counters().peerConnections > 0) --worker_->counters().peerConnections;
    Failed(FabricErrc::kMalformed, -1, s.message());
    return false;
  }
  return true;
}

}  // namespace railyard::fabric::verbs
