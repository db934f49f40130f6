#include "proxy/fabric/verbs/verbs_endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>

#include "proxy/fabric/fail_outstanding.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_worker.h"

namespace railyard::fabric::verbs {

namespace {

/// Record staging / FetchAdd result slots per endpoint, each kVerbsMaxRecordBytes.
constexpr int kSlots = 64;
/// Offset of slot 0 in the scratch memory (the credit word comes first).
constexpr size_t kSlotBase = 64;
/// Send WRs kept free on every QP.
constexpr int kSqReserve = 8;
/// What an Endpoint's liveness probe is, in its errors.
constexpr const char* kProbeWhat = "a zero-byte RDMA Write";

uint64_t LoadCredit(const char* p) {
  return std::atomic_ref<const uint64_t>(*reinterpret_cast<const uint64_t*>(p)).load(std::memory_order_acquire);
}

}  // namespace

FabricErrc ErrcOfCompletion(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return FabricErrc::kRemoteAccess;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return FabricErrc::kTimeout;
    case IBV_WC_WR_FLUSH_ERR:
      return FabricErrc::kEndpointFailed;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_PROT_ERR:
      return FabricErrc::kLocalArgument;
    default:
      return FabricErrc::kSystem;
  }
}

VerbsEndpoint::VerbsEndpoint(VerbsWorker* worker, const VerbsAddress& peer, uint64_t connection)
    : worker_(worker),
      peer_(peer),
      connection_(connection),
      started_(Clock::now()),
      scheduler_({1}, 1),
      lastActivity_(Clock::now()) {}

Status VerbsEndpoint::Create(VerbsWorker* worker, const VerbsAddress& peer, uint64_t connection,
                             std::unique_ptr<VerbsEndpoint>* out) {
  std::unique_ptr<VerbsEndpoint> ep(new VerbsEndpoint(worker, peer, connection));
  VerbsDomain& d = worker->domain();
  ep->rails_ = std::min<int>(static_cast<int>(d.rails().size()), peer.rails);
  for (int r = 0; r < ep->rails_; ++r) ep->railSpeeds_.push_back(d.rails()[static_cast<size_t>(r)].speedMbps);
  const StripeOptions& stripe = d.options().stripe;
  ep->scheduler_ = StripeScheduler(ep->railSpeeds_, std::max(stripe.chunksInFlightPerRail, kMinWritesInFlightPerRail));
  ep->writeStripe_ = stripe;
  ep->writeStripe_.chunkBytes = std::max(stripe.chunkBytes, kMinWriteWrBytes);
  for (int r = 0; r < ep->rails_; ++r) {
    const uint64_t portMax = d.ports().at(static_cast<size_t>(d.railPorts()[static_cast<size_t>(r)])).maxMsgBytes;
    ep->writeStripe_.chunkBytes = std::min(ep->writeStripe_.chunkBytes, portMax);
  }
  ep->writeSeqs_.assign(static_cast<size_t>(ep->rails_), {});
  ep->readOut_.assign(static_cast<size_t>(ep->rails_), 0);
  ep->sqPosted_.assign(static_cast<size_t>(ep->rails_), 0);
  ep->scratchMem_.assign(kSlotBase + kSlots * kVerbsMaxRecordBytes, 0);
  RY_RETURN_IF_ERROR(d.Register(ep->scratchMem_.data(), ep->scratchMem_.size(), kAccessLocal | kAccessRemoteWrite,
                                MemoryKind::kHost, &ep->scratch_));
  for (int s = kSlots - 1; s >= 0; --s) ep->freeSlots_.push_back(s);
  const std::vector<int> ports(d.railPorts().begin(), d.railPorts().begin() + ep->rails_);
  RY_RETURN_IF_ERROR(proxy::verbs::QpBundle::Create(&d.ports(), ports, ep->rails_, 0, 64, &ep->qps_, nullptr,
                                                    worker->ChannelsFor(ports)));
  for (auto& q : ep->qps_->qps()) {
    ibv_qp_attr a{};
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                        IBV_ACCESS_LOCAL_WRITE;
    const int rc = ibv_modify_qp(q.qp, &a, IBV_QP_ACCESS_FLAGS);
    if (rc != 0) return SystemError("verbs fabric: QP access flags: " + proxy::ErrnoText(rc));
  }
  // A refused dial is dialed again until the setup deadline: nothing listens there yet
  // (the peer's Worker, or a relay host's Forwarder still opening its RDMA ports).
  RY_RETURN_IF_ERROR(ep->boot_.Connect(peer.ipv4, peer.port,
                                       ep->started_ + std::chrono::milliseconds(d.options().connectTimeoutMs)));
  *out = std::move(ep);
  return Status::Ok();
}

VerbsEndpoint::~VerbsEndpoint() {
  // Work under way: tell the target (its HCA saw the Writes, its CPU did not), as a
  // TCP target hears a connection closed mid-op.
  if (state_ == 3 && !failed_ && Outstanding() > 0) boot_.Abandon();
  if (qps_ != nullptr) {
    // Stop the HCA touching local memory before the QPs (and their buffers) go.
    for (auto& q : qps_->qps()) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      (void)ibv_modify_qp(q.qp, &a, IBV_QP_STATE);
    }
    qps_.reset();
  }
  if (scratch_ != nullptr) (void)worker_->domain().Deregister(scratch_);
  worker_->Detach(this);
}

FabricError VerbsEndpoint::Error(FabricErrc errc, int rail, int64_t seq, std::string what) const {
  FabricError e;
  e.errc = errc;
  e.site.rank = worker_->domain().options().rank;
  e.site.peer = peer_.Name();
  const int r = rail < 0 ? 0 : rail;
  if (r < rails_) {
    e.site.device = worker_->domain().rails()[static_cast<size_t>(r)].device;
    e.site.rail = r;
    if (qps_ != nullptr && static_cast<size_t>(r) < qps_->qps().size()) e.site.qp = qps_->qps()[static_cast<size_t>(r)].qp->qp_num;
  }
  e.site.qpName = "QP";
  e.site.seq = seq;
  e.what = std::move(what);
  return e;
}

Status VerbsEndpoint::CheckLocal(const LocalSlice& s, const char* what) const {
  if (s.region == nullptr) return InvalidArgument(std::string("verbs fabric ") + what + ": no local region");
  if ((s.region->access & kAccessLocal) == 0) {
    return InvalidArgument(std::string("verbs fabric ") + what + ": the local region lacks local access");
  }
  if (s.offset > s.region->length || s.bytes > s.region->length - s.offset) {
    return InvalidArgument(std::string("verbs fabric ") + what + ": local [" + std::to_string(s.offset) + ", +" +
                           std::to_string(s.bytes) + ") outside the local region of " +
                           std::to_string(s.region->length) + " bytes");
  }
  if (s.region->railLkeys.size() < static_cast<size_t>(rails_)) {
    return InvalidArgument(std::string("verbs fabric ") + what + ": the local region is not a verbs registration");
  }
  return Status::Ok();
}

Status VerbsEndpoint::Post(Op op) {
  if (failed_) return status_;
  if (Outstanding() == 0) lastActivity_ = Clock::now();
  op.seq = nextSeq_++;
  queue_.push_back({false, op.seq, 0});
  ops_.emplace(op.seq, std::move(op));
  Dispatch();
  return Status::Ok();
}

Status VerbsEndpoint::Send(std::span<const uint8_t> record, uint64_t cookie) {
  if (failed_) return status_;
  if (record.empty() || record.size() > kVerbsMaxRecordBytes) {
    return InvalidArgument("verbs fabric send: a record of " + std::to_string(record.size()) + " bytes (1.." +
                           std::to_string(kVerbsMaxRecordBytes) + ")");
  }
  Op op;
  op.type = OpType::kSend;
  op.cookie = cookie;
  op.record.assign(record.begin(), record.end());
  op.bytes = record.size();
  return Post(std::move(op));
}

Status VerbsEndpoint::Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                            std::optional<uint32_t> immediate) {
  return PostWrite(src, key, remoteAddr, cookie, immediate, src.bytes);
}

Status VerbsEndpoint::WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                                 uint32_t immediate, uint64_t opBytes) {
  if (failed_) return status_;
  if (opBytes < src.bytes || opBytes > kVerbsMaxOpBytes) {
    return InvalidArgument("verbs fabric WriteFinal: a whole Write of " + std::to_string(opBytes) +
                           " bytes for a last piece of " + std::to_string(src.bytes));
  }
  return PostWrite(src, key, remoteAddr, cookie, immediate, opBytes);
}

Status VerbsEndpoint::PostWrite(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                                std::optional<uint32_t> immediate, uint64_t reportBytes) {
  if (failed_) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(src, "write"));
  Op op;
  op.type = OpType::kWrite;
  op.cookie = cookie;
  op.local = src.region->base + src.offset;
  op.lkeys = src.region->railLkeys;
  op.bytes = src.bytes;
  op.remoteAddr = remoteAddr;
  op.rkeys = key.railRkeys;
  op.keyBase = key.base;
  op.keyLength = key.length;
  op.keyAccess = key.access;
  op.hasImm = immediate.has_value();
  op.imm = immediate.value_or(0);
  op.striped = IsStriped(src.bytes, rails_, writeStripe_);
  op.chunks = CutIntoChunks(src.bytes, op.striped ? rails_ : 1, writeStripe_);
  op.reportBytes = reportBytes;
  // One WRITE WITH IMM reports its own bytes; anything else needs the size record.
  op.sizeRecord = op.hasImm && (op.striped || op.chunks.size() != 1 || reportBytes != src.bytes);
  return Post(std::move(op));
}

Status VerbsEndpoint::Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) {
  if (failed_) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(dst, "read"));
  Op op;
  op.type = OpType::kRead;
  op.cookie = cookie;
  op.local = dst.region->base + dst.offset;
  op.lkeys = dst.region->railLkeys;
  op.bytes = dst.bytes;
  op.remoteAddr = remoteAddr;
  op.rkeys = key.railRkeys;
  op.keyBase = key.base;
  op.keyLength = key.length;
  op.keyAccess = key.access;
  // READ chunks are at most kMaxReadWrBytes: a READ's whole response is one burst
  // from the target's HCA, and under soft-RoCE 1 MiB bursts lose packets (the
  // requester then waits out the QP ACK timeout); see docs/benchmarks.md.
  StripeOptions stripe = worker_->domain().options().stripe;
  stripe.chunkBytes = std::min<uint64_t>(stripe.chunkBytes, kMaxReadWrBytes);
  op.striped = IsStriped(dst.bytes, rails_, stripe);
  op.chunks = CutIntoChunks(dst.bytes, op.striped ? rails_ : 1, stripe);
  return Post(std::move(op));
}

Status VerbsEndpoint::FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) {
  if (failed_) return status_;
  Op op;
  op.type = OpType::kFetchAdd;
  op.cookie = cookie;
  op.bytes = 8;
  op.remoteAddr = remoteAddr;
  op.rkeys = key.railRkeys;
  op.keyBase = key.base;
  op.keyLength = key.length;
  op.keyAccess = key.access;
  op.add = add;
  return Post(std::move(op));
}

Status VerbsEndpoint::Fence(uint64_t cookie) {
  if (failed_) return status_;
  if (Outstanding() == 0) lastActivity_ = Clock::now();
  queue_.push_back({true, nextSeq_, cookie});
  ++fences_;
  Dispatch();
  return Status::Ok();
}

uint64_t VerbsEndpoint::CreditsFree() const {
  const uint64_t consumed = LoadCredit(scratchMem_.data());
  const uint64_t limit = creditsGranted_ + consumed;
  return limit > creditsUsed_ ? limit - creditsUsed_ : 0;
}

bool VerbsEndpoint::OtherRailsQuiet(int rail, uint64_t seq) const {
  for (int r = 0; r < rails_; ++r) {
    if (r == rail) continue;
    // Not assumed sorted (a head's WRITE WITH IMM goes on rail 0 behind later Writes'
    // chunks); at most the rail's Write bound of entries.
    for (uint64_t s : writeSeqs_[static_cast<size_t>(r)]) {
      if (s <= seq) return false;
    }
  }
  return true;
}

bool VerbsEndpoint::PostWr(int rail, ibv_send_wr* wr, const Op& op) {
  if (sqPosted_[static_cast<size_t>(rail)] >= static_cast<int>(proxy::verbs::kMaxSendWr) - kSqReserve) return false;
  wr->send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qps_->qps()[static_cast<size_t>(rail)].qp, wr, &bad);
  if (rc != 0) {
    Fail(Error(FabricErrc::kSystem, rail, static_cast<int64_t>(op.seq),
               std::string("ibv_post_send(") + OpTypeName(op.type) + "): " + proxy::ErrnoText(rc)));
    return false;
  }
  ++sqPosted_[static_cast<size_t>(rail)];
  return true;
}

bool VerbsEndpoint::Advance(Op& op, bool head) {
  const int64_t seq = static_cast<int64_t>(op.seq);
  if (op.nextChunk == 0 && op.pendingWrs == 0 && !op.immPosted && op.type != OpType::kSend) {
    // The key the peer gave says what it grants; refuse what it does not before any
    // byte moves (the HCA checks again: a stale key still fails there).
    const uint32_t right = op.type == OpType::kWrite  ? kAccessRemoteWrite
                           : op.type == OpType::kRead ? kAccessRemoteRead
                                                      : kAccessRemoteAtomic;
    Region keyRegion;
    keyRegion.base = op.keyBase;
    keyRegion.length = op.keyLength;
    if (op.rkeys.size() < static_cast<size_t>(rails_)) {
      Fail(Error(FabricErrc::kBadKey, 0, seq,
                 "the remote key has " + std::to_string(op.rkeys.size()) + " rail rkeys, this endpoint uses " +
                     std::to_string(rails_) + " rails (not a verbs key of this peer)"));
      return false;
    }
    if ((op.keyAccess & right) == 0) {
      Fail(Error(FabricErrc::kAccessDenied, 0, seq,
                 std::string(OpTypeName(op.type)) + " into a region the peer registered for " +
                     AccessText(op.keyAccess)));
      return false;
    }
    if (!keyRegion.Contains(op.remoteAddr, op.bytes)) {
      Fail(Error(FabricErrc::kOutOfBounds, 0, seq,
                 std::string(OpTypeName(op.type)) + " of [0x" + std::to_string(op.remoteAddr) + ", +" +
                     std::to_string(op.bytes) + ") outside the peer's region [" + std::to_string(op.keyBase) +
                     ", +" + std::to_string(op.keyLength) + ")"));
      return false;
    }
    if (op.type == OpType::kFetchAdd && op.remoteAddr % 8 != 0) {
      Fail(Error(FabricErrc::kMisaligned, 0, seq,
                 "fetch-add target 0x" + std::to_string(op.remoteAddr) + " is not 8-byte aligned"));
      return false;
    }
  }
  switch (op.type) {
    case OpType::kWrite:
    case OpType::kRead: {
      const bool write = op.type == OpType::kWrite;
      while (op.nextChunk < op.chunks.size()) {
        const Chunk& c = op.chunks[op.nextChunk];
        const bool last = op.nextChunk + 1 == op.chunks.size();
        const bool withImm = write && op.hasImm && !op.sizeRecord && last;
        // Behind the queue's head only a Write's data chunks go (see Lookahead).
        if (!head && (!write || withImm)) return false;
        int rail = 0;
        if (op.striped) {
          rail = scheduler_.Pick();
        } else if (op.nextChunk > 0 || op.pendingWrs > 0) {
          rail = op.slot;  // the rail of the op's earlier chunks
          if (!scheduler_.HasRoom(rail)) rail = -1;
        } else {
          rail = write && op.hasImm ? 0 : scheduler_.Pick();
          if (rail >= 0 && !scheduler_.HasRoom(rail)) rail = -1;
        }
        if (rail < 0) return false;
        // Reads keep the configured bound (the Write bound is kMinWritesInFlightPerRail).
        if (!write && readOut_[static_cast<size_t>(rail)] >= worker_->domain().options().stripe.chunksInFlightPerRail) {
          return false;
        }
        // Reads see every earlier Write: those on other rails must have completed.
        if ((!write || withImm) && !OtherRailsQuiet(rail, op.seq)) return false;
        if (withImm && CreditsFree() == 0) return false;
        ibv_sge sge{};
        sge.addr = op.local + c.offset;
        sge.length = static_cast<uint32_t>(c.bytes);
        sge.lkey = op.lkeys[static_cast<size_t>(rail)];
        ibv_send_wr wr{};
        wr.wr_id = MakeWrId(op.seq, write ? WrKind::kWriteChunk : WrKind::kReadChunk);
        wr.sg_list = c.bytes > 0 ? &sge : nullptr;
        wr.num_sge = c.bytes > 0 ? 1 : 0;
        wr.opcode = !write ? IBV_WR_RDMA_READ : withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        if (withImm) wr.imm_data = htonl(op.imm);
        wr.wr.rdma.remote_addr = op.remoteAddr + c.offset;
        wr.wr.rdma.rkey = op.rkeys[static_cast<size_t>(rail)];
        if (!PostWr(rail, &wr, op)) return false;
        if (!op.striped) op.slot = rail;
        scheduler_.OnQueued(rail);
        if (write) {
          writeSeqs_[static_cast<size_t>(rail)].push_back(op.seq);
        } else {
          ++readOut_[static_cast<size_t>(rail)];
        }
        if (withImm) ++creditsUsed_;
        ++op.pendingWrs;
        ++op.nextChunk;
      }
      if (write && op.sizeRecord && !op.immPosted) {
        // The immediate goes on rail 0 once the chunks of this and every earlier Write
        // on the other rails have landed (RC order puts it after rail 0's own), as a
        // SEND WITH IMM whose 16 bytes name the whole Write: a WRITE WITH IMM would
        // report only its own bytes. Later Writes' chunks may be under way meanwhile.
        if (!head) return false;
        if (!OtherRailsQuiet(0, op.seq) || CreditsFree() == 0 || freeSlots_.empty()) return false;
        if (peerRecordBytes_ < WriteSizeRecord::kBytes) {
          Fail(Error(FabricErrc::kLocalArgument, 0, seq,
                     "a Write's size record of " + std::to_string(WriteSizeRecord::kBytes) +
                         " bytes, the peer's buffers hold " + std::to_string(peerRecordBytes_)));
          return false;
        }
        const int slot = freeSlots_.back();
        char* buf = scratchMem_.data() + kSlotBase + static_cast<size_t>(slot) * kVerbsMaxRecordBytes;
        const std::vector<uint8_t> rec = WriteSizeRecord{op.reportBytes}.Pack();
        std::memcpy(buf, rec.data(), rec.size());
        ibv_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(rec.size()), scratch_->railLkeys[0]};
        ibv_send_wr wr{};
        wr.wr_id = MakeWrId(op.seq, WrKind::kWriteImm);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.imm_data = htonl(op.imm);
        if (!PostWr(0, &wr, op)) return false;
        freeSlots_.pop_back();
        op.recordSlot = slot;
        ++creditsUsed_;
        ++op.pendingWrs;
        op.immPosted = true;
      }
      return true;
    }
    case OpType::kFetchAdd: {
      if (!head || !OtherRailsQuiet(0, op.seq) || freeSlots_.empty()) return false;
      const int slot = freeSlots_.back();
      char* word = scratchMem_.data() + kSlotBase + static_cast<size_t>(slot) * kVerbsMaxRecordBytes;
      std::memset(word, 0, 8);
      ibv_sge sge{reinterpret_cast<uint64_t>(word), 8, scratch_->railLkeys[0]};
      ibv_send_wr wr{};
      wr.wr_id = MakeWrId(op.seq, WrKind::kAtomic);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic.remote_addr = op.remoteAddr;
      wr.wr.atomic.rkey = op.rkeys[0];
      wr.wr.atomic.compare_add = op.add;
      if (!PostWr(0, &wr, op)) return false;
      freeSlots_.pop_back();
      op.slot = slot;
      ++op.pendingWrs;
      return true;
    }
    case OpType::kSend: {
      if (!head || !OtherRailsQuiet(0, op.seq) || CreditsFree() == 0 || freeSlots_.empty()) return false;
      if (op.record.size() > peerRecordBytes_) {
        Fail(Error(FabricErrc::kLocalArgument, 0, static_cast<int64_t>(op.seq),
                   "a record of " + std::to_string(op.record.size()) + " bytes, the peer's buffers hold " +
                       std::to_string(peerRecordBytes_)));
        return false;
      }
      const int slot = freeSlots_.back();
      char* buf = scratchMem_.data() + kSlotBase + static_cast<size_t>(slot) * kVerbsMaxRecordBytes;
      std::memcpy(buf, op.record.data(), op.record.size());
      ibv_sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(op.record.size()), scratch_->railLkeys[0]};
      ibv_send_wr wr{};
      wr.wr_id = MakeWrId(op.seq, WrKind::kSend);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND;
      if (!PostWr(0, &wr, op)) return false;
      freeSlots_.pop_back();
      op.slot = slot;
      ++creditsUsed_;
      ++op.pendingWrs;
      return true;
    }
    default:
      return true;
  }
}

void VerbsEndpoint::Dispatch() {
  if (state_ != 3) return;
  while (!failed_ && !queue_.empty()) {
    const QueueItem item = queue_.front();
    if (item.fence) {
      if (!ops_.empty() && ops_.begin()->first < item.seq) return;
      queue_.pop_front();
      --fences_;
      Event e;
      e.kind = EventKind::kDone;
      e.op = OpType::kFence;
      e.cookie = item.cookie;
      worker_->Emit(std::move(e));
      continue;
    }
    auto it = ops_.find(item.seq);
    if (it == ops_.end()) {
      queue_.pop_front();
      continue;
    }
    if (!Advance(it->second, true)) break;
    queue_.pop_front();
    if (it->second.pendingWrs == 0) Complete(it, 0);  // nothing to post (cannot happen: every op has a WR)
  }
  Lookahead();
}

bool VerbsEndpoint::DataPosted(const Op& op) {
  return op.nextChunk == op.chunks.size() || (op.nextChunk + 1 == op.chunks.size() && op.hasImm && !op.sizeRecord);
}

void VerbsEndpoint::Lookahead() {
  if (failed_ || queue_.size() < 2 || queue_.front().fence) return;
  auto head = ops_.find(queue_.front().seq);
  // Only behind a head whose every data chunk is posted (what it waits for is its
  // immediate or size record): chunks then go out in op order on every rail.
  if (head == ops_.end() || head->second.type != OpType::kWrite || !DataPosted(head->second)) return;
  for (size_t i = 1, looked = 0; i < queue_.size() && looked < kLookaheadOps; ++i) {
    const QueueItem& item = queue_[i];
    if (item.fence) return;
    auto it = ops_.find(item.seq);
    if (it == ops_.end()) continue;
    Op& op = it->second;
    if (op.type != OpType::kWrite) return;
    ++looked;
    // A Write that fails its checks or its post fails the Endpoint (Fail clears ops_).
    if (!Advance(op, false) && failed_) return;
    // On only once every data chunk of this Write is posted (what is left is its
    // immediate); a Write still waiting for room keeps the ones behind it waiting.
    if (!DataPosted(op)) return;
  }
}

void VerbsEndpoint::Complete(std::map<uint64_t, Op>::iterator it, uint64_t value) {
  Event e;
  e.kind = EventKind::kDone;
  e.op = it->second.type;
  e.cookie = it->second.cookie;
  e.value = value;
  ops_.erase(it);
  worker_->Emit(std::move(e));
}

void VerbsEndpoint::OnCompletion(int rail, const ibv_wc& wc) {
  lastActivity_ = Clock::now();
  lastCompletion_ = lastActivity_;
  --sqPosted_[static_cast<size_t>(rail)];
  const uint64_t seq = wc.wr_id >> 8;
  const auto kind = static_cast<WrKind>(wc.wr_id & 0xff);
  if (failed_) return;
  if (kind == WrKind::kProbe) {
    probing_ = false;
    if (wc.status != IBV_WC_SUCCESS) {
      Fail(Error(ErrcOfCompletion(wc.status), rail, OldestSeq(),
                 BootstrapChannel::ProbeFailedText(kProbeWhat, std::string("failed at the HCA: ") +
                                                                   ibv_wc_status_str(wc.status) + " (vendor error " +
                                                                   std::to_string(wc.vendor_err) + ")")));
    }
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    auto it = ops_.find(seq);
    const char* what = it == ops_.end() ? "work request" : OpTypeName(it->second.type);
    Fail(Error(ErrcOfCompletion(wc.status), rail, static_cast<int64_t>(seq),
               std::string(what) + " failed at the HCA: " + ibv_wc_status_str(wc.status) + " (vendor error " +
                   std::to_string(wc.vendor_err) + ")"));
    return;
  }
  // The rail's accounting first, whatever became of the op.
  if (kind == WrKind::kWriteChunk) {
    // A send queue completes in posting order: this is the rail's oldest Write chunk.
    std::deque<uint64_t>& q = writeSeqs_[static_cast<size_t>(rail)];
    assert(!q.empty() && q.front() == seq);
    if (!q.empty()) q.pop_front();
    scheduler_.OnWritten(rail);
  } else if (kind == WrKind::kReadChunk) {
    if (readOut_[static_cast<size_t>(rail)] > 0) --readOut_[static_cast<size_t>(rail)];
    scheduler_.OnWritten(rail);
  }
  auto it = ops_.find(seq);
  if (it == ops_.end()) return;
  Op& op = it->second;
  --op.pendingWrs;
  const bool posted = op.nextChunk == op.chunks.size() && (!op.sizeRecord || op.immPosted);
  if (op.pendingWrs > 0 || !posted) return;
  uint64_t value = 0;
  if (op.type == OpType::kFetchAdd || op.type == OpType::kSend) {
    if (op.type == OpType::kFetchAdd) {
      std::memcpy(&value, scratchMem_.data() + kSlotBase + static_cast<size_t>(op.slot) * kVerbsMaxRecordBytes, 8);
    }
    freeSlots_.push_back(op.slot);
  }
  if (op.recordSlot >= 0) freeSlots_.push_back(op.recordSlot);
  Complete(it, value);
}

void VerbsEndpoint::Probe(Clock::time_point now) {
  const int timeoutMs = worker_->domain().options().timeoutMs;
  if (probing_) {
    if (now - probeSent_ > std::chrono::milliseconds(timeoutMs)) {
      Fail(Error(FabricErrc::kTimeout, 0, OldestSeq(),
                 BootstrapChannel::ProbeFailedText(
                     kProbeWhat, "had no answer for " + std::to_string(timeoutMs) + " ms (RAILYARD_TIMEOUT_MS)")));
    }
    return;
  }
  if (Outstanding() > 0 || now - lastCompletion_ < std::chrono::milliseconds(timeoutMs / 2)) return;
  if (sqPosted_[0] >= static_cast<int>(proxy::verbs::kMaxSendWr) - kSqReserve) return;
  ibv_send_wr wr{};
  wr.wr_id = MakeWrId(0, WrKind::kProbe);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qps_->qps()[0].qp, &wr, &bad);
  if (rc != 0) {
    Fail(Error(FabricErrc::kSystem, 0, OldestSeq(), "ibv_post_send(liveness probe): " + proxy::ErrnoText(rc)));
    return;
  }
  ++sqPosted_[0];
  probing_ = true;
  probeSent_ = now;
}

void VerbsEndpoint::Fail(FabricError e) {
  if (failed_) return;
  failed_ = true;
  status_ = e.ToStatus();
  if (qps_ != nullptr) {
    for (auto& q : qps_->qps()) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      (void)ibv_modify_qp(q.qp, &a, IBV_QP_STATE);
    }
  }
  std::vector<OutstandingOp> lost;
  for (const auto& [seq, op] : ops_) lost.push_back({op.type, op.cookie, static_cast<int64_t>(seq)});
  for (const QueueItem& q : queue_) {
    if (q.fence) lost.push_back({OpType::kFence, q.cookie, -1});
  }
  // A QP in error flushes every later work request: the others fail ENDPOINT_FAILED.
  FailOutstanding(e, lost, OthersRule::kEndpointFailed, [&](Event ev) { worker_->Emit(std::move(ev)); });
  ops_.clear();
  queue_.clear();
  fences_ = 0;
}

void VerbsEndpoint::StepHandshake() {
  Status s;
  bool done = false;
  if (state_ == 0) {
    s = boot_.Connected(&done);
    if (s.ok() && done) {
      Handshake h;
      h.hello.role = VerbsHello::kRoleConnect;
      h.hello.workerId = worker_->id();
      h.hello.connection = connection_;
      h.hello.creditAddr = reinterpret_cast<uint64_t>(scratchMem_.data());
      h.hello.creditRkey = scratch_->railRkeys[0];
      h.qps = qps_->Describe();
      h.qps.trafficClass = worker_->domain().linkAttrs().trafficClass;
      h.qps.serviceLevel = worker_->domain().linkAttrs().serviceLevel;
      boot_.Queue(h);
      state_ = 1;
    }
  }
  if (s.ok() && state_ == 1) {
    s = boot_.Flush(&done);
    if (s.ok() && done) state_ = 2;
  }
  if (s.ok() && state_ == 2) {
    Handshake reply;
    s = boot_.Read(VerbsHello::kRoleAccept, rails_, &reply, &done);
    if (s.ok() && done) {
      if (reply.hello.connection != connection_) {
        s = InvalidArgument("the peer answered connection " + std::to_string(reply.hello.connection) + ", not " +
                            std::to_string(connection_));
      } else {
        const auto& a = worker_->domain().linkAttrs();
        s = qps_->Connect(reply.qps, a, a.trafficClass, a.serviceLevel, worker_->domain().rdAtomic());
      }
      if (s.ok()) {
        creditsGranted_ = reply.hello.recordCredits;
        peerRecordBytes_ = reply.hello.recordBytes;
        state_ = 3;
        lastActivity_ = Clock::now();
        if (Status ws = boot_.WatchLiveness(worker_->domain().options().timeoutMs); !ws.ok()) {
          RY_INFO(log::kNet, "verbs endpoint to %s: %s (a cut cable shows only with ops under way)",
                  peer_.Name().c_str(), ws.message().c_str());
        }
        Dispatch();
        return;
      }
    }
  }
  if (!s.ok()) {
    Fail(Error(FabricErrc::kConnectFailed, 0, ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first),
               "connection setup with the peer failed: " + s.message()));
    return;
  }
  const int timeout = worker_->domain().options().connectTimeoutMs;
  if (Clock::now() - started_ > std::chrono::milliseconds(timeout)) {
    Fail(Error(FabricErrc::kTimeout, 0, ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first),
               "connection setup did not finish within " + std::to_string(timeout) + " ms (RAILYARD_TIMEOUT_MS)"));
  }
}

void VerbsEndpoint::Poll() {
  ibv_wc wcs[32];
  for (int r = 0; r < rails_ && !failed_; ++r) {
    for (int round = 0; round < 4; ++round) {
      const int n = ibv_poll_cq(qps_->cq(r), 32, wcs);
      if (n < 0) {
        Fail(Error(FabricErrc::kSystem, r, -1, "ibv_poll_cq failed"));
        return;
      }
      for (int i = 0; i < n; ++i) OnCompletion(r, wcs[i]);
      if (n < 32) break;
    }
  }
}

int VerbsEndpoint::BusyRail() const {
  for (int r = 0; r < rails_; ++r) {
    if (sqPosted_[static_cast<size_t>(r)] > 0) return r;
  }
  return 0;
}

int64_t VerbsEndpoint::OldestSeq() const { return ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first); }

bool VerbsEndpoint::Idle() const {
  if (failed_) return true;
  if (state_ < 3) return false;  // the handshake runs on a non-blocking socket: keep polling
  if (queue_.empty()) return true;
  // Queued ops wait for room that a completion frees; with nothing outstanding they
  // may wait for credits (an RDMA Write into this side's word, no completion here).
  return std::any_of(sqPosted_.begin(), sqPosted_.end(), [](int n) { return n > 0; });
}

void VerbsEndpoint::Progress() {
  if (failed_) {
    if (qps_ != nullptr) Poll();  // drain flushed completions
    return;
  }
  if (state_ < 3) {
    StepHandshake();
    return;
  }
  Poll();
  if (failed_) return;
  bool closed = false;
  Status s;
  const Clock::time_point now = Clock::now();
  if (now - lastWatch_ >= kWatchInterval) {
    lastWatch_ = now;
    // A rail whose port went down (IBV_EVENT_PORT_ERR / DEVICE_FATAL, set by the
    // plugin's event thread) completes nothing more: fail now, not after the timeout.
    for (int r = 0; r < rails_; ++r) {
      const proxy::verbs::IbPort& port = worker_->domain().RailPort(static_cast<size_t>(r));
      if (!port.down.load(std::memory_order_relaxed)) continue;
      Fail(Error(FabricErrc::kSystem, r, ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first),
                 "the rail's RDMA port " + port.Name() + " went down (port error or device fatal event)"));
      return;
    }
    bool lost = false, reset = false;
    if (!bootLost_) s = boot_.Watch(&closed, nullptr, &lost, &reset);
    const int timeoutMs = worker_->domain().options().timeoutMs;
    const bool recent = !BootstrapChannel::LostMeansDead(lastCompletion_, now, timeoutMs);
    if (lost && !recent) {
      // The peer's host stopped answering the bootstrap connection's keepalive probes:
      // a cut cable or a dead host, heard even with nothing under way (a receive that
      // waits for data, a send that waits for its clear-to-send).
      Fail(Error(FabricErrc::kTimeout, BusyRail(), OldestSeq(), BootstrapChannel::LostText(timeoutMs)));
      return;
    }
    // Outvoted by a recent completion: our keepalive, or the peer's (a reset, see Watch;
    // else a reset is the close it always was). The socket is gone, the QPs are not.
    if ((lost || reset) && recent) {
      bootLost_ = true;
      closed = false;
      RY_WARN("%s", BootstrapChannel::StarvedText(peer_.Name(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                     now - lastCompletion_).count()).c_str());
    }
  }
  if (!s.ok() || closed) {
    Fail(Error(FabricErrc::kPeerClosed, 0, ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first),
               closed ? "the peer closed its bootstrap connection (process exited or was killed)" : s.message()));
    return;
  }
  Dispatch();
  if (bootLost_ && !failed_) Probe(Clock::now());
  const int timeout = worker_->domain().options().timeoutMs;
  if (!failed_ && Outstanding() > 0 && Clock::now() - lastActivity_ > std::chrono::milliseconds(timeout)) {
    Fail(Error(FabricErrc::kTimeout, BusyRail(), OldestSeq(),
               "no completion for " + std::to_string(timeout) +
                   " ms (RAILYARD_TIMEOUT_MS): the peer's HCA or process stopped answering"));
  }
}

}  // namespace railyard::fabric::verbs
