// Sending end of a verbs connection: CTS FIFO polling, tag matching, and the
// header + payload WRs of every part of a message (see verbs_layout.h).
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "env/log.h"
#include "proxy/verbs/verbs_comm.h"
#include "proxy/verbs/verbs_faults.h"

namespace railyard::proxy::verbs {

namespace {
/// Smallest part worth its own QP: smaller messages go whole on one QP.
constexpr uint64_t kMinPartBytes = 64 * 1024;
/// Parts are aligned to this (cache lines of the destination).
constexpr uint64_t kPartAlign = 128;
}  // namespace

VerbsSendComm::VerbsSendComm(VerbsLink link, std::unique_ptr<RegisteredBuffer> fifo,
                             std::unique_ptr<RegisteredBuffer> staging)
    : link_(std::move(link)), fifo_(std::move(fifo)), staging_(std::move(staging)) {
  ringNext_.assign(link_.qps->qps().size(), 0);
  for (SendReq& r : reqs_) r.owner = this;
  subscription_ = SubscribeFaults(link_, &poison_, &seqHint_);
}

VerbsSendComm::~VerbsSendComm() { Close(); }

void VerbsSendComm::Close() {
  if (closed_) return;
  closed_ = true;
  link_.qps->ib().Unsubscribe(subscription_);
  link_.qps.reset();  // destroys the QPs: nothing more is read from or written to user memory
  link_.control.Reset();
  fifo_.reset();
  staging_.reset();
}

Status VerbsSendComm::PollFifo() {
  auto* slots = static_cast<FifoSlot*>(fifo_->data());
  for (;;) {
    FifoSlot& f = slots[nextFifoSeq_ % RecvTable::kMaxRequests];
    const uint64_t want = nextFifoSeq_ + 1;
    if (std::atomic_ref<uint64_t>(f.stamp).load(std::memory_order_acquire) != want) return Status::Ok();
    if (std::atomic_ref<uint64_t>(f.stampEnd).load(std::memory_order_acquire) != want) return Status::Ok();
    FifoSlot& copy = cts_[nextFifoSeq_ % RecvTable::kMaxRequests];
    std::memcpy(static_cast<void*>(&copy), &f, sizeof f);
    if (Status s = CheckHeader(copy.rec.header, "clear-to-send record"); !s.ok()) {
      return RemoteError(s.message() + " " + FaultContext(link_, 0, nextFifoSeq_));
    }
    if (copy.rec.seq != nextFifoSeq_) {
      return RemoteError("clear-to-send slot carries seq " + std::to_string(copy.rec.seq) + ", expected " +
                         std::to_string(nextFifoSeq_) + " " + FaultContext(link_, 0, nextFifoSeq_));
    }
    if (Status s = matcher_.Push(copy.rec); !s.ok()) {
      return Status(s.code(), s.message() + " " + FaultContext(link_, 0, nextFifoSeq_));
    }
    ++nextFifoSeq_;
    lastProgress_ = Clock::now();
  }
}

Status VerbsSendComm::PollCompletions() {
  ibv_wc wcs[32];
  for (size_t r = 0; r < link_.qps->ncqs(); ++r) {
    for (;;) {
      const int n = ibv_poll_cq(link_.qps->cq(static_cast<int>(r)), 32, wcs);
      if (n < 0) return SystemError("ibv_poll_cq failed " + FaultContext(link_, 0, matcher_.NextSeq()));
      for (int i = 0; i < n; ++i) {
        auto* req = reinterpret_cast<SendReq*>(wcs[i].wr_id);
        const uint64_t seq = req != nullptr ? req->seq : matcher_.NextSeq();
        if (wcs[i].status != IBV_WC_SUCCESS) return CompletionError(link_, wcs[i], "RDMA write", seq);
        if (req != nullptr) ++req->partsDone;
        lastProgress_ = Clock::now();
      }
      if (n < 32) break;
    }
  }
  return Status::Ok();
}

Status VerbsSendComm::Progress() {
  if (poison_.IsSet()) return poison_.Get();
  Status s = PollCompletions();
  if (s.ok()) s = PollFifo();
  if (s.ok()) {
    bool eof = false;
    s = CheckControl(link_, &eof);
    if (s.ok() && eof) {
      s = SystemError("the receiver closed the connection " + FaultContext(link_, 0, matcher_.NextSeq()));
    }
  }
  if (!s.ok()) {
    poison_.Set(s);
    return poison_.Get();
  }
  return Status::Ok();
}

Status VerbsSendComm::Post(SendReq& req, const SendMatch& m, const void* data, MemoryRegion* mr) {
  std::vector<Qp>& qps = link_.qps->qps();
  const uint64_t size = req.size;
  const uint64_t nq = qps.size();
  uint64_t nparts = size == 0 ? 1 : std::min<uint64_t>(nq, (size + kMinPartBytes - 1) / kMinPartBytes);
  uint64_t partLen = size == 0 ? 0 : (size + nparts - 1) / nparts;
  partLen = (partLen + kPartAlign - 1) / kPartAlign * kPartAlign;
  if (size > 0) nparts = (size + partLen - 1) / partLen;
  if (size > 0 && (mr == nullptr || mr->hcaLkey.empty())) {
    return InvalidArgument("isend of " + std::to_string(size) + " bytes without a memory handle registered "
                           "for the verbs transport (call regMr first)");
  }
  const FifoSlot& cts = cts_[m.seq % RecvTable::kMaxRequests];
  auto* staging = static_cast<ChunkHeader*>(staging_->data());
  req.parts = static_cast<int>(nparts);
  req.partsDone = 0;
  for (uint64_t k = 0; k < nparts; ++k) {
    const size_t qi = (nextQp_ + k) % nq;
    Qp& q = qps[qi];
    const IbPort& port = link_.qps->ib().at(static_cast<size_t>(q.port));
    const uint64_t off = k * partLen;
    const uint64_t len = std::min(partLen, size - off);
    const uint32_t idx = ringNext_[qi]++ % kRingEntries;
    ChunkHeader& h = staging[qi * kRingEntries + idx];
    h = ChunkHeader{};
    h.header = MakeHeader(RecordKind::kChunk);
    h.seq = m.seq;
    h.slot = m.slot;
    h.len = static_cast<uint32_t>(len);
    h.addr = m.entry.addr + off;
    h.total = size;
    h.rkey = m.entry.rkey;

    std::vector<ibv_send_wr> wrs;
    std::vector<ibv_sge> sges;
    const uint64_t pieces = len == 0 ? 1 : (len + port.maxMsgBytes - 1) / port.maxMsgBytes;
    wrs.resize(1 + pieces);
    sges.resize(1 + pieces);
    // 1. the header, into ring[qi][idx] on the receiver
    ibv_send_wr& hw = wrs[0];
    hw = ibv_send_wr{};
    sges[0] = ibv_sge{reinterpret_cast<uint64_t>(&h), sizeof h, staging_->mr()->hcaLkey[static_cast<size_t>(q.port)]};
    hw.sg_list = &sges[0];
    hw.num_sge = 1;
    hw.opcode = IBV_WR_RDMA_WRITE;
    hw.send_flags = link_.options.useInline && q.maxInline >= sizeof h ? IBV_SEND_INLINE : 0;
    hw.wr.rdma.remote_addr = link_.remote.ringAddr + (qi * kRingEntries + idx) * sizeof(ChunkHeader);
    hw.wr.rdma.rkey = link_.remote.rails[static_cast<size_t>(q.remoteRail)].ringRkey;
    // 2. the payload, the last WR carrying the ring index as its immediate
    for (uint64_t p = 0; p < pieces; ++p) {
      ibv_send_wr& w = wrs[1 + p];
      w = ibv_send_wr{};
      const uint64_t pOff = off + p * port.maxMsgBytes;
      const uint64_t pLen = len == 0 ? 0 : std::min<uint64_t>(port.maxMsgBytes, off + len - pOff);
      if (pLen > 0) {
        sges[1 + p] = ibv_sge{reinterpret_cast<uint64_t>(data) + pOff, static_cast<uint32_t>(pLen),
                              mr->hcaLkey[static_cast<size_t>(q.port)]};
        w.sg_list = &sges[1 + p];
        w.num_sge = 1;
      }
      w.wr.rdma.remote_addr = m.entry.addr + pOff;
      w.wr.rdma.rkey = cts.hcaRkey[m.slot][q.remoteRail];
      if (p + 1 == pieces) {
        w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm_data = htonl(idx);
        w.send_flags = IBV_SEND_SIGNALED;
        // Tiny payloads go inline too (copied at post time, no lkey needed).
        if (link_.options.useInline && pLen > 0 && pLen <= q.maxInline) w.send_flags |= IBV_SEND_INLINE;
        w.wr_id = reinterpret_cast<uint64_t>(&req);
      } else {
        w.opcode = IBV_WR_RDMA_WRITE;
      }
    }
    for (size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(q.qp, wrs.data(), &bad); rc != 0) {
      return SystemError("ibv_post_send: " + ErrnoText(rc) + " " + FaultContext(link_, q.qp->qp_num, m.seq));
    }
  }
  nextQp_ = (nextQp_ + nparts) % nq;
  return Status::Ok();
}

Status VerbsSendComm::Isend(const void* data, size_t size, int tag, MemoryRegion* mr, Request** request) {
  *request = nullptr;
  NoteLocalRank(tag);
  RY_RETURN_IF_ERROR(Progress());
  SendMatch m;
  bool found = false;
  if (Status s = matcher_.Match(tag, size, &m, &found); !s.ok()) {
    return Status(s.code(), s.message() + " " + FaultContext(link_, 0, matcher_.NextSeq()));
  }
  if (!found) {
    const auto now = Clock::now();
    if (waitingSince_ == Clock::time_point{}) waitingSince_ = now;
    const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(
        now - std::max(waitingSince_, lastProgress_));
    if (idle.count() > link_.options.timeoutMs) {
      Status t = RemoteError("send (rank " + std::to_string(tag) + ") found no matching receive posted for " +
                             std::to_string(idle.count()) + " ms (RAILYARD_TIMEOUT_MS=" +
                             std::to_string(link_.options.timeoutMs) + ") " +
                             FaultContext(link_, 0, matcher_.NextSeq()));
      poison_.Set(t);
      return t;
    }
    return Status::Ok();
  }
  waitingSince_ = Clock::time_point{};
  SendReq* req = nullptr;
  for (SendReq& r : reqs_) {
    if (!r.used) {
      req = &r;
      break;
    }
  }
  if (req == nullptr) {
    return InternalError("more than " + std::to_string(RecvTable::kMaxRequests) +
                         " sends in flight on one comm (NCCL_NET_MAX_REQUESTS)");
  }
  req->used = true;
  req->seq = m.seq;
  req->slot = m.slot;
  req->tag = tag;
  req->size = size;
  req->since = Clock::now();
  seqHint_.store(m.seq, std::memory_order_relaxed);
  if (Status s = Post(*req, m, data, mr); !s.ok()) {
    req->used = false;
    if (s.code() != Code::kInvalidArgument) poison_.Set(s);
    return s;
  }
  *request = req;
  return Status::Ok();
}

Status VerbsSendComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  auto* req = static_cast<SendReq*>(request);
  if (!req->used) return InternalError("test of a send request that is not in flight");
  Status s = Progress();
  if (req->partsDone == req->parts) {
    *done = 1;
    if (sizes != nullptr) sizes[0] = static_cast<int>(req->size);
    req->used = false;
    return Status::Ok();
  }
  if (!s.ok()) return s;
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - std::max(req->since, lastProgress_));
  if (idle.count() > link_.options.timeoutMs) {
    Status t = RemoteError("send (rank " + std::to_string(req->tag) + ") made no progress for " +
                           std::to_string(idle.count()) + " ms (RAILYARD_TIMEOUT_MS=" +
                           std::to_string(link_.options.timeoutMs) + ") " +
                           FaultContext(link_, 0, req->seq));
    poison_.Set(t);
    return t;
  }
  return Status::Ok();
}

}  // namespace railyard::proxy::verbs
