// Sending end of a verbs connection: CTS FIFO polling, tag matching, and the
// header + payload WRs of every part of a message (see verbs_layout.h).
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>

#include "env/log.h"
#include "proxy/verbs/verbs_comm.h"
#include "proxy/verbs/verbs_faults.h"

namespace railyard::proxy::verbs {

namespace {
/// Smallest part worth its own QP: smaller messages go whole on one QP.
constexpr uint64_t kMinPartBytes = 64 * 1024;
/// Parts are aligned to this (cache lines of the destination).
constexpr uint64_t kPartAlign = 128;
/// wr_id low bits (SendReq is pointer-aligned): what a completion finishes.
constexpr uint64_t kWrLastOfPart = 0;  ///< the WRITE WITH IMM: a part of req is done
constexpr uint64_t kWrOther = 1;       ///< a header, payload piece or heartbeat
constexpr uint64_t kWrKindMask = 7;
}  // namespace

VerbsSendComm::VerbsSendComm(VerbsLink link, std::unique_ptr<RegisteredBuffer> fifo,
                             std::unique_ptr<RegisteredBuffer> staging)
    : link_(std::move(link)), fifo_(std::move(fifo)), staging_(std::move(staging)) {
  ringNext_.assign(link_.qps->qps().size(), 0);
  inflight_.assign(link_.qps->qps().size(), 0);
  beats_.assign(link_.qps->qps().size(), 0);
  queued_.resize(link_.qps->qps().size());
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

size_t VerbsSendComm::QpIndex(uint32_t qpn) const {
  const std::vector<Qp>& qps = link_.qps->qps();
  for (size_t i = 0; i < qps.size(); ++i) {
    if (qps[i].qp->qp_num == qpn) return i;
  }
  return qps.size();
}

Status VerbsSendComm::PollCompletions() {
  ibv_wc wcs[32];
  for (size_t r = 0; r < link_.qps->ncqs(); ++r) {
    for (;;) {
      const int n = ibv_poll_cq(link_.qps->cq(static_cast<int>(r)), 32, wcs);
      if (n < 0) return SystemError("ibv_poll_cq failed " + FaultContext(link_, 0, matcher_.NextSeq()));
      for (int i = 0; i < n; ++i) {
        const uint64_t kind = wcs[i].wr_id & kWrKindMask;
        auto* req = reinterpret_cast<SendReq*>(wcs[i].wr_id & ~kWrKindMask);
        const uint64_t seq = req != nullptr ? req->seq : matcher_.NextSeq();
        if (wcs[i].status != IBV_WC_SUCCESS) return CompletionError(link_, wcs[i], "RDMA write", seq);
        const size_t qi = QpIndex(wcs[i].qp_num);
        if (qi < inflight_.size() && inflight_[qi] > 0) --inflight_[qi];
        if (req != nullptr && kind == kWrLastOfPart) ++req->partsDone;
        lastProgress_ = Clock::now();
      }
      if (n < 32) break;
    }
  }
  for (size_t qi = 0; qi < queued_.size(); ++qi) RY_RETURN_IF_ERROR(Drain(qi));
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
    const Qp& q = qps[qi];
    const uint64_t off = k * partLen;
    Part part;
    part.req = &req;
    part.ringIndex = ringNext_[qi]++ % kRingEntries;
    part.local = reinterpret_cast<uint64_t>(data) + off;
    part.remote = m.entry.addr + off;
    part.len = std::min(partLen, size - off);
    part.lkey = size > 0 ? mr->hcaLkey[static_cast<size_t>(q.port)] : 0;
    part.rkey = cts.hcaRkey[m.slot][q.remoteRail];
    ChunkHeader& h = staging[qi * kRingEntries + part.ringIndex];
    h = ChunkHeader{};
    h.header = MakeHeader(RecordKind::kChunk);
    h.seq = m.seq;
    h.slot = m.slot;
    h.len = static_cast<uint32_t>(part.len);
    h.addr = part.remote;
    h.total = size;
    h.rkey = m.entry.rkey;
    queued_[qi].push_back(part);
    RY_RETURN_IF_ERROR(Drain(qi));
  }
  nextQp_ = (nextQp_ + nparts) % nq;
  return Status::Ok();
}

Status VerbsSendComm::Drain(size_t qi) {
  const Qp& q = link_.qps->qps()[qi];
  const uint64_t wrBytes = link_.qps->ib().at(static_cast<size_t>(q.port)).maxMsgBytes;
  while (!queued_[qi].empty()) {
    const Part& part = queued_[qi].front();
    const uint64_t need = 1 + 2 * (part.len == 0 ? 1 : (part.len + wrBytes - 1) / wrBytes);
    // A part bigger than the whole queue goes alone into an empty one.
    if (inflight_[qi] > 0 && inflight_[qi] + need > kMaxSendWr) return Status::Ok();
    RY_RETURN_IF_ERROR(PostPart(qi, part));
    inflight_[qi] += static_cast<uint32_t>(need);
    queued_[qi].pop_front();
  }
  return Status::Ok();
}

Status VerbsSendComm::PostPart(size_t qi, const Part& part) {
  const Qp& q = link_.qps->qps()[qi];
  const uint64_t wrBytes = link_.qps->ib().at(static_cast<size_t>(q.port)).maxMsgBytes;
  const ChunkHeader& h = static_cast<const ChunkHeader*>(staging_->data())[qi * kRingEntries + part.ringIndex];
  const uint64_t pieces = part.len == 0 ? 1 : (part.len + wrBytes - 1) / wrBytes;
  const uint64_t id = reinterpret_cast<uint64_t>(part.req);
  std::vector<ibv_send_wr> wrs(1 + 2 * pieces);
  std::vector<ibv_sge> sges(1 + 2 * pieces);
  const size_t nq = link_.qps->qps().size();
  auto* beatSrc = reinterpret_cast<uint64_t*>(static_cast<char*>(staging_->data()) +
                                              nq * kRingEntries * sizeof(ChunkHeader)) + qi * kHeartbeatSlots;
  const uint32_t stagingLkey = staging_->mr()->hcaLkey[static_cast<size_t>(q.port)];
  const uint32_t ringRkey = link_.remote.rails[static_cast<size_t>(q.remoteRail)].ringRkey;
  const bool inlineOn = link_.options.useInline;
  // 1. the header, into ring[qi][index] on the receiver
  sges[0] = ibv_sge{reinterpret_cast<uint64_t>(&h), sizeof h, stagingLkey};
  ibv_send_wr& hw = wrs[0];
  hw.wr_id = id | kWrOther;
  hw.sg_list = &sges[0];
  hw.num_sge = 1;
  hw.opcode = IBV_WR_RDMA_WRITE;
  hw.send_flags = IBV_SEND_SIGNALED | (inlineOn && q.maxInline >= sizeof h ? IBV_SEND_INLINE : 0);
  hw.wr.rdma.remote_addr = link_.remote.ringAddr + (qi * kRingEntries + part.ringIndex) * sizeof(ChunkHeader);
  hw.wr.rdma.rkey = ringRkey;
  // 2. the payload in WRs of at most wrBytes, each followed by this QP's heartbeat
  //    write; the last payload WR carries the ring index as its immediate
  for (uint64_t p = 0; p < pieces; ++p) {
    ibv_send_wr& w = wrs[1 + 2 * p];
    const uint64_t pOff = p * wrBytes;
    const uint64_t pLen = part.len == 0 ? 0 : std::min<uint64_t>(wrBytes, part.len - pOff);
    if (pLen > 0) {
      sges[1 + 2 * p] = ibv_sge{part.local + pOff, static_cast<uint32_t>(pLen), part.lkey};
      w.sg_list = &sges[1 + 2 * p];
      w.num_sge = 1;
    }
    w.wr.rdma.remote_addr = part.remote + pOff;
    w.wr.rdma.rkey = part.rkey;
    w.send_flags = IBV_SEND_SIGNALED;
    if (p + 1 == pieces) {
      w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      w.imm_data = htonl(part.ringIndex);
      w.wr_id = id | kWrLastOfPart;
      // Tiny payloads go inline too (copied at post time, no lkey needed).
      if (inlineOn && pLen > 0 && pLen <= q.maxInline) w.send_flags |= IBV_SEND_INLINE;
    } else {
      w.opcode = IBV_WR_RDMA_WRITE;
      w.wr_id = id | kWrOther;
    }
    uint64_t& beat = beatSrc[beats_[qi] % kHeartbeatSlots];
    beat = ++beats_[qi];
    ibv_send_wr& b = wrs[2 + 2 * p];
    sges[2 + 2 * p] = ibv_sge{reinterpret_cast<uint64_t>(&beat), sizeof beat, stagingLkey};
    b.wr_id = id | kWrOther;
    b.sg_list = &sges[2 + 2 * p];
    b.num_sge = 1;
    b.opcode = IBV_WR_RDMA_WRITE;
    b.send_flags = IBV_SEND_SIGNALED | (inlineOn && q.maxInline >= sizeof beat ? IBV_SEND_INLINE : 0);
    b.wr.rdma.remote_addr = link_.remote.ringAddr + nq * kRingEntries * sizeof(ChunkHeader) + qi * sizeof beat;
    b.wr.rdma.rkey = ringRkey;
  }
  for (size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(q.qp, wrs.data(), &bad); rc != 0) {
    return SystemError("ibv_post_send: " + ErrnoText(rc) + " " + FaultContext(link_, q.qp->qp_num, part.req->seq));
  }
  return Status::Ok();
}

Status VerbsSendComm::Isend(const void* data, size_t size, int tag, MemoryRegion* mr, Request** request) {
  *request = nullptr;
  NoteLocalRank(tag);
  if (link_.options.rank != nullptr) link_.options.rank->Note(tag);
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
    return InternalError("more than " + std::to_string(kRingEntries) +
                         " sends in flight on one comm (NCCL_NET_MAX_REQUESTS receives of up to " +
                         std::to_string(kMaxRecvs) + " buffers)");
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
