// Receiving end of a verbs connection: CTS records written into the sender's
// FIFO, receive WRs for the immediates, and the check of every completion-ring
// header against the posted buffer (see verbs_layout.h).
#include <arpa/inet.h>

#include <atomic>
#include <cstring>

#include "env/log.h"
#include "proxy/verbs/verbs_comm.h"
#include "proxy/verbs/verbs_faults.h"

namespace railyard::proxy::verbs {

namespace {
/// wr_id of the receiver's CTS writes (receive WRs carry their QP index, < kMaxConnQps).
constexpr uint64_t kCtsWrId = ~0ull;
/// How long data may still land after the control socket closed before a pending
/// receive counts as lost (as the TCP transport's EOF grace).
constexpr int kEofGraceMs = 200;
}  // namespace

VerbsRecvComm::VerbsRecvComm(VerbsLink link, std::unique_ptr<RegisteredBuffer> rings,
                             std::unique_ptr<RegisteredBuffer> staging)
    : link_(std::move(link)), rings_(std::move(rings)), staging_(std::move(staging)),
      table_(this, &GlobalMrCache()) {
  subscription_ = SubscribeFaults(link_, &poison_, &seqHint_);
}

VerbsRecvComm::~VerbsRecvComm() { Close(); }

void VerbsRecvComm::Close() {
  if (closed_) return;
  closed_ = true;
  link_.qps->ib().Unsubscribe(subscription_);
  flushQps_.reset();
  flushWord_.reset();
  link_.qps.reset();
  link_.control.Reset();
  rings_.reset();
  staging_.reset();
}

Status VerbsRecvComm::PostRecv(size_t qi) {
  ibv_recv_wr wr{};
  wr.wr_id = qi;
  wr.num_sge = 0;  // WRITE WITH IMM places no data through the receive WR
  ibv_recv_wr* bad = nullptr;
  ibv_qp* qp = link_.qps->qps()[qi].qp;
  if (int rc = ibv_post_recv(qp, &wr, &bad); rc != 0) {
    return SystemError("ibv_post_recv: " + ErrnoText(rc) + " " + FaultContext(link_, qp->qp_num, table_.NextSeq()));
  }
  return Status::Ok();
}

Status VerbsRecvComm::OnImmediate(size_t qi, uint32_t index) {
  const auto* rings = static_cast<const ChunkHeader*>(rings_->data());
  ChunkHeader h;
  std::memcpy(&h, &rings[qi * kRingEntries + index % kRingEntries], sizeof h);
  const uint32_t qpn = link_.qps->qps()[qi].qp->qp_num;
  if (Status s = CheckHeader(h.header, "completion record"); !s.ok() ||
      h.header.kind != static_cast<uint16_t>(RecordKind::kChunk)) {
    return RemoteError("bad completion record in ring entry " + std::to_string(index) + ": " +
                       (s.ok() ? "kind " + std::to_string(h.header.kind) : s.message()) + " " +
                       FaultContext(link_, qpn, table_.NextSeq()));
  }
  // RC order: header and payload are in place when the immediate arrives, so the
  // chunk is claimed and landed at once (the HCA kept the writes inside rkey).
  if (Status s = table_.ClaimLanded(h); !s.ok()) {
    return Status(s.code(), s.message() + " " + FaultContext(link_, qpn, h.seq));
  }
  return PostRecv(qi);
}

Status VerbsRecvComm::Progress() {
  if (poison_.IsSet()) return poison_.Get();
  Status s;
  ibv_wc wcs[32];
  for (size_t r = 0; r < link_.qps->ncqs() && s.ok(); ++r) {
    for (;;) {
      const int n = ibv_poll_cq(link_.qps->cq(static_cast<int>(r)), 32, wcs);
      if (n < 0) {
        s = SystemError("ibv_poll_cq failed " + FaultContext(link_, 0, table_.NextSeq()));
        break;
      }
      for (int i = 0; i < n && s.ok(); ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          s = CompletionError(link_, wc, wc.wr_id == kCtsWrId ? "clear-to-send write" : "receive", seqHint_.load());
        } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          s = OnImmediate(wc.wr_id, ntohl(wc.imm_data));
          lastProgress_ = Clock::now();
        }
      }
      if (n < 32 || !s.ok()) break;
    }
  }
  if (s.ok()) {
    const size_t nq = link_.qps->qps().size();
    auto* words = reinterpret_cast<uint64_t*>(static_cast<char*>(rings_->data()) + nq * kRingEntries * sizeof(ChunkHeader));
    uint64_t beat = 0;
    for (size_t q = 0; q < nq; ++q) beat += std::atomic_ref<uint64_t>(words[q]).load(std::memory_order_acquire);
    if (beat != heartbeatSeen_) {
      heartbeatSeen_ = beat;
      lastProgress_ = Clock::now();
    }
    bool eof = false;
    s = CheckControl(link_, &eof);
    if (s.ok() && eof && eofAt_ == Clock::time_point{}) eofAt_ = Clock::now();
  }
  if (!s.ok()) {
    poison_.Set(s);
    return poison_.Get();
  }
  return Status::Ok();
}

Status VerbsRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags, MemoryRegion** mrs,
                            Request** request) {
  *request = nullptr;
  RY_RETURN_IF_ERROR(Progress());
  for (int i = 0; i < n && mrs != nullptr; ++i) {
    if (mrs[i] != nullptr && mrs[i]->hcaRkey.empty()) {
      return InvalidArgument("irecv buffer " + std::to_string(i) +
                             " was registered before the verbs transport started (no RDMA keys)");
    }
  }
  RecvTable::Entry* e = nullptr;
  CtsRecord cts;
  RY_RETURN_IF_ERROR(table_.Post(n, data, sizes, tags, mrs, &e, &cts));
  seqHint_.store(cts.seq, std::memory_order_relaxed);
  const uint64_t slotIndex = cts.seq % RecvTable::kMaxRequests;
  auto* slot = static_cast<FifoSlot*>(staging_->data()) + slotIndex;
  std::memset(static_cast<void*>(slot), 0, sizeof *slot);
  slot->stamp = cts.seq + 1;
  slot->rec = cts;
  const std::vector<int>& ports = link_.qps->ports();
  for (int i = 0; i < n; ++i) {
    for (size_t r = 0; r < ports.size(); ++r) slot->hcaRkey[i][r] = mrs[i]->hcaRkey[static_cast<size_t>(ports[r])];
  }
  slot->stampEnd = slot->stamp;
  Qp& q = link_.qps->qps()[0];
  ibv_sge sge{reinterpret_cast<uint64_t>(slot), sizeof *slot, staging_->mr()->hcaLkey[static_cast<size_t>(q.port)]};
  ibv_send_wr wr{};
  wr.wr_id = kCtsWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED |
                  (link_.options.useInline && q.maxInline >= sizeof *slot ? IBV_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = link_.remote.fifoAddr + slotIndex * sizeof(FifoSlot);
  wr.wr.rdma.rkey = link_.remote.rails[static_cast<size_t>(q.remoteRail)].fifoRkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(q.qp, &wr, &bad); rc != 0) {
    Status s = SystemError("ibv_post_send of a clear-to-send record: " + ErrnoText(rc) + " " +
                           FaultContext(link_, q.qp->qp_num, cts.seq));
    RecvTable::Release(*e);
    poison_.Set(s);
    return s;
  }
  *request = e;
  return Status::Ok();
}

Status VerbsRecvComm::Iflush(int n, void** data, const int* sizes, MemoryRegion** mrs, Request** request) {
  *request = nullptr;
  if (poison_.IsSet()) return poison_.Get();
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0 && mrs != nullptr && mrs[i] != nullptr) last = i;
  }
  // ptrType NCCL_PTR_HOST = 1 (nccl-net-abi.md); host memory needs no flush.
  if (last < 0 || mrs[last]->ptrType == 1 || mrs[last]->hcaLkey.empty()) return Status::Ok();
  if (flushQps_ == nullptr) {
    const std::vector<int>& ports = link_.qps->ports();
    RY_RETURN_IF_ERROR(QpBundle::Create(&link_.qps->ib(), ports, static_cast<int>(ports.size()), 0, 0, &flushQps_));
    RY_RETURN_IF_ERROR(flushQps_->Connect(flushQps_->Describe(), ResolveQpLinkAttrs(LinkConfig{}, -1), 0, 0));
    RY_RETURN_IF_ERROR(RegisteredBuffer::Create(64, &flushWord_));
  }
  FlushReq* req = nullptr;
  for (FlushReq& f : flushes_) {
    if (!f.used) {
      req = &f;
      break;
    }
  }
  if (req == nullptr) return InternalError("more than " + std::to_string(flushes_.size()) + " flushes in flight");
  req->owner = this;
  req->pending = 0;
  for (Qp& q : flushQps_->qps()) {
    const size_t port = static_cast<size_t>(q.port);
    ibv_sge sge{reinterpret_cast<uint64_t>(flushWord_->data()), 1, flushWord_->mr()->hcaLkey[port]};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<uint64_t>(req);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data[last]);
    wr.wr.rdma.rkey = mrs[last]->hcaRkey[port];
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(q.qp, &wr, &bad); rc != 0) {
      Status s = SystemError("ibv_post_send of a flush READ: " + ErrnoText(rc) + " " +
                             FaultContext(link_, q.qp->qp_num, table_.NextSeq()));
      poison_.Set(s);
      return s;
    }
    ++req->pending;
  }
  req->used = true;
  *request = req;
  return Status::Ok();
}

Status VerbsRecvComm::PollFlushes() {
  if (flushQps_ == nullptr) return Status::Ok();
  ibv_wc wcs[16];
  for (size_t r = 0; r < flushQps_->ncqs(); ++r) {
    const int n = ibv_poll_cq(flushQps_->cq(static_cast<int>(r)), 16, wcs);
    if (n < 0) return SystemError("ibv_poll_cq of the flush QPs failed " + FaultContext(link_, 0, table_.NextSeq()));
    for (int i = 0; i < n; ++i) {
      if (wcs[i].status != IBV_WC_SUCCESS) return CompletionError(link_, wcs[i], "flush READ", table_.NextSeq());
      --reinterpret_cast<FlushReq*>(wcs[i].wr_id)->pending;
    }
  }
  return Status::Ok();
}

Status VerbsRecvComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  const auto at = reinterpret_cast<uintptr_t>(request);
  if (at >= reinterpret_cast<uintptr_t>(flushes_.data()) &&
      at < reinterpret_cast<uintptr_t>(flushes_.data() + flushes_.size())) {
    auto* f = static_cast<FlushReq*>(request);
    if (!f->used) return InternalError("test of a flush request that is not in flight");
    if (Status s = PollFlushes(); !s.ok()) {
      poison_.Set(s);
      return poison_.Get();
    }
    if (f->pending == 0) {
      f->used = false;
      *done = 1;
    }
    return Status::Ok();
  }
  auto* e = static_cast<RecvTable::Entry*>(request);
  if (e->seq.load(std::memory_order_acquire) == RecvTable::kFree) {
    return InternalError("test of a receive request that is not in flight");
  }
  Status s = Progress();
  if (RecvTable::Done(*e)) {
    *done = 1;
    if (sizes != nullptr) {
      for (int i = 0; i < e->n; ++i) sizes[i] = static_cast<int>(e->total[i].load(std::memory_order_acquire));
    }
    RecvTable::Release(*e);
    return Status::Ok();
  }
  if (!s.ok()) return s;
  if (eofAt_ != Clock::time_point{} &&
      Clock::now() - eofAt_ > std::chrono::milliseconds(kEofGraceMs)) {
    Status lost = SystemError("the sender closed the connection while " + table_.DescribeOldest(RankFor(link_.options.rank.get())) +
                              " was pending " + FaultContext(link_, 0, e->seq.load()));
    poison_.Set(lost);
    return lost;
  }
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - std::max(e->posted, lastProgress_));
  if (idle.count() > link_.options.timeoutMs) {
    std::string tags;
    for (int i = 0; i < e->n; ++i) tags += (i ? "," : "") + std::to_string(e->tag[i]);
    Status t = RemoteError("receive (from rank " + tags + ") made no progress for " + std::to_string(idle.count()) +
                           " ms (RAILYARD_TIMEOUT_MS=" + std::to_string(link_.options.timeoutMs) + ") " +
                           FaultContext(link_, 0, e->seq.load()));
    poison_.Set(t);
    return t;
  }
  return Status::Ok();
}

}  // namespace railyard::proxy::verbs
