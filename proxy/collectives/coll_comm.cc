#include "proxy/collectives/coll_comm.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "env/log.h"
#include "proxy/collectives/coll_wire.h"
#include "proxy/collectives/reduce.h"

namespace railyard::collectives {
namespace {
using Clock = std::chrono::steady_clock;

// A data Write's cookie: bit 63 set | stream (6 bits) | op serial (17 bits) | item (40 bits).
constexpr uint64_t kDataCookie = 1ull << 63;
constexpr int kStreamShift = 57;
constexpr int kSerialShift = 40;
constexpr uint64_t kFlatMask = (1ull << kSerialShift) - 1;
constexpr uint64_t kSerialMask = (1ull << (kStreamShift - kSerialShift)) - 1;

uint64_t DataCookie(int stream, uint64_t serial, uint64_t flat) {
  return kDataCookie | (static_cast<uint64_t>(stream) << kStreamShift) |
         ((serial & kSerialMask) << kSerialShift) | (flat & kFlatMask);
}

uint8_t* AllocAligned(uint64_t bytes) {
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  return static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
}
}  // namespace

Status CollOptions::Validate() const {
  if (chunkBytes < 4096 || chunkBytes > (64ull << 20) || chunkBytes % 8 != 0) {
    return InvalidArgument("collnet chunk bytes " + std::to_string(chunkBytes) +
                           " outside [4 KiB, 64 MiB] or not a multiple of 8");
  }
  if (slots < 2 || slots > 1024) {
    return InvalidArgument("collnet slots " + std::to_string(slots) + " outside [2, 1024]");
  }
  if (timeoutMs <= 0) return InvalidArgument("collnet timeout must be > 0 ms");
  return Status::Ok();
}

/// One stream: this rank sends to `right` and receives from `left` (either -1 at a
/// chain's end); `remoteRecv` / `remoteSend` tag the immediates (PeersOf).
struct CollComm::Stream {
  int right = -1, left = -1;
  int remoteRecv = 0, remoteSend = 0;
  uint64_t sent = 0;        ///< data chunks posted to right since connect (next seq)
  uint64_t credited = 0;    ///< chunks right has consumed (it has room up to credited + slots)
  uint64_t consumed = 0;    ///< chunks from left processed (next seq expected)
  uint64_t creditSent = 0;  ///< `consumed` as last reported to left
  std::vector<int64_t> slotSeq;  ///< per slot: the seq that landed there, -1 when empty
};

/// The running op, its plan and its progress per stream.
struct CollComm::Active {
  CollRequest req;
  CollOp op;
  Status error;
  bool begun = false;
  bool acquiredRecv = false;
  const fabric::Region* recvRegion = nullptr;
  Plan plan;
  bool planned = false;       ///< PlanOp ran: algorithm, plan, sizes
  Algorithm algorithm = Algorithm::kRing;
  uint64_t workBytes = 0;     ///< the accumulator's bytes (64-byte multiple)
  uint64_t bufferBytes = 0;   ///< the whole work buffer this op takes from the pool
  WorkBuffer workBuf;         ///< from the pool, held from Begin until the op finishes (mem != NULL)
  uint8_t* work = nullptr;    ///< Buf::kWork (AccumType elements), inside workBuf
  uint8_t* gather = nullptr;  ///< Buf::kGather, inside workBuf
  uint8_t* scratch = nullptr; ///< one-shot's second accumulator
  size_t tb = 0, ab = 0, gb = 0;
  uint64_t rbase = 0;         ///< result index of global element 0 is -rbase (reducescatter)
  int avgDivisor = 1;
  struct Progress {
    uint32_t sendI = 0, recvI = 0;
    std::vector<uint8_t> recvDone;
    uint64_t posted = 0, completed = 0;
  };
  std::vector<Progress> st;
  bool Finished() const {
    for (size_t s = 0; s < st.size(); ++s) {
      const auto& p = st[s];
      if (p.sendI < plan.streams[s].send.size() || p.recvI < plan.streams[s].recv.size() ||
          p.completed != p.posted) {
        return false;
      }
    }
    return true;
  }
};

CollComm::CollComm(fabric::Worker& worker, fabric::RegistrationCache& cache, int rank, int nranks,
                   CollOptions options)
    : worker_(worker), cache_(cache), rank_(rank), nranks_(nranks), options_(options), workPool_(cache) {
  lastProgress_ = Clock::now();
}

CollComm::~CollComm() {
  for (auto& a : queue_) {
    if (a->acquiredRecv && a->recvRegion) (void)cache_.Release(a->recvRegion);
  }
  endpoints_.clear();  // before the regions their ops may name (workPool_ frees its own after)
  // Staging whose deregistration failed may still take a peer's Write: kept until exit.
  if (staging_ != nullptr && !cache_.Release(staging_).ok()) {
    RY_WARN("%s: the staging buffer's deregistration failed; it stays allocated until the process exits",
            Where().c_str());
    return;
  }
  std::free(stagingMem_);
}

std::string CollComm::Where() const {
  return "collnet rank " + std::to_string(rank_) + "/" + std::to_string(nranks_);
}

Status CollComm::Connect(fabric::Worker& worker, fabric::RegistrationCache& cache, int rank,
                         int nranks, const std::vector<std::vector<uint8_t>>& addresses,
                         const CollOptions& options, std::unique_ptr<CollComm>* out) {
  if (nranks < 1 || nranks > 1024 || rank < 0 || rank >= nranks) {
    return InvalidArgument("collnet connect: rank " + std::to_string(rank) + " of " +
                           std::to_string(nranks) + " ranks");
  }
  if (addresses.size() != static_cast<size_t>(nranks)) {
    return InvalidArgument("collnet connect: " + std::to_string(addresses.size()) +
                           " addresses for " + std::to_string(nranks) + " ranks");
  }
  RY_RETURN_IF_ERROR(options.Validate());
  RY_RETURN_IF_ERROR(options.topology.Validate(nranks));
  const StreamPeers peers = PeersOf(options.topology, nranks, rank);
  if (peers.size() > kMaxStreams) {
    return InvalidArgument("collnet connect: a mesh of " + std::to_string(nranks) + " ranks needs " +
                           std::to_string(peers.size()) + " streams, more than " + std::to_string(kMaxStreams));
  }
  std::unique_ptr<CollComm> c(new CollComm(worker, cache, rank, nranks, options));
  const uint64_t stagingBytes = std::max<uint64_t>(peers.size(), 1) * options.slots * options.chunkBytes;
  c->stagingMem_ = AllocAligned(stagingBytes);
  if (!c->stagingMem_) return SystemError(c->Where() + ": cannot allocate the staging buffer");
  std::memset(c->stagingMem_, 0, stagingBytes);
  RY_RETURN_IF_ERROR(cache.Acquire(c->stagingMem_, stagingBytes,
                                   fabric::kAccessLocal | fabric::kAccessRemoteWrite,
                                   fabric::MemoryKind::kHost, &c->staging_));
  for (size_t i = 0; nranks > 1 && i < peers.size(); ++i) {
    auto s = std::make_unique<Stream>();
    s->right = peers.sendPeer[i];
    s->left = peers.recvPeer[i];
    s->remoteRecv = peers.remoteRecv[i];
    s->remoteSend = peers.remoteSend[i];
    s->slotSeq.assign(options.slots, -1);
    c->streams_.push_back(std::move(s));
  }
  if (nranks > 1) RY_RETURN_IF_ERROR(c->ConnectNeighbours(addresses));
  *out = std::move(c);
  return Status::Ok();
}

Status CollComm::ConnectNeighbours(const std::vector<std::vector<uint8_t>>& addresses) {
  std::vector<int> neighbours;
  for (const auto& st : streams_) {
    if (st->right >= 0) neighbours.push_back(st->right);
    if (st->left >= 0) neighbours.push_back(st->left);
  }
  std::sort(neighbours.begin(), neighbours.end());
  neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
  ConnectRecord mine;
  mine.rank = static_cast<uint32_t>(rank_);
  mine.nranks = static_cast<uint32_t>(nranks_);
  mine.chunkBytes = options_.chunkBytes;
  mine.slots = options_.slots;
  mine.smallBytes = options_.smallBytes;
  mine.staging = staging_->Key();
  mine.shape = static_cast<uint16_t>(options_.topology.shape);
  const std::vector<uint8_t> record = mine.Pack();
  for (int peer : neighbours) {
    std::unique_ptr<fabric::Endpoint> ep;
    Status s = worker_.Connect(addresses[static_cast<size_t>(peer)], &ep);
    if (!s.ok()) return Status(s.code(), Where() + ": connect to rank " + std::to_string(peer) + ": " + s.message());
    RY_RETURN_IF_ERROR(ep->Send(record, 0));
    // A peer's close is this comm's to report: as a named error (RankOf) on the next
    // call, which the CollNet edge WARNs. At the endpoint it is INFO, else a clean end
    // where a neighbour closed first, with a credit Write still out to it, printed a
    // PEER_CLOSED WARN into the result table (new-user trial: 3 runs in 10).
    ep->QuietPeerClose();
    endpoints_[peer] = std::move(ep);
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeoutMs);
  while (stagingKeys_.size() < neighbours.size()) {
    events_.clear();
    worker_.Progress(&events_);
    for (fabric::Event& ev : events_) {
      if (ev.kind == fabric::EventKind::kRecord) {
        ConnectRecord r;
        Status s = ConnectRecord::Unpack(ev.record, &r);
        if (!s.ok()) return RemoteError(Where() + ": " + s.message());
        const bool neighbour = std::find(neighbours.begin(), neighbours.end(),
                                         static_cast<int>(r.rank)) != neighbours.end();
        if (!neighbour || r.nranks != mine.nranks || r.chunkBytes != mine.chunkBytes ||
            r.slots != mine.slots || r.shape != mine.shape || r.smallBytes != mine.smallBytes) {
          return RemoteError(Where() + ": connect record from rank " + std::to_string(r.rank) +
                             " (nranks " + std::to_string(r.nranks) + ", chunk " +
                             std::to_string(r.chunkBytes) + ", slots " + std::to_string(r.slots) +
                             ", shape " + ShapeName(static_cast<Shape>(r.shape)) + ", one-shot up to " +
                             std::to_string(r.smallBytes) + " bytes) does not match this comm (nranks " +
                             std::to_string(nranks_) + ", chunk " + std::to_string(mine.chunkBytes) + ", slots " +
                             std::to_string(mine.slots) + ", shape " + ShapeName(options_.topology.shape) +
                             ", one-shot up to " + std::to_string(mine.smallBytes) +
                             " bytes; RAILYARD_COLLNET_CHUNK_BYTES, RAILYARD_COLLNET_SLOTS, RAILYARD_COLLNET_SHAPE and RAILYARD_COLLNET_SMALL_BYTES must be the same on every rank)");
        }
        const uint64_t need = static_cast<uint64_t>(streams_.size()) * mine.slots * mine.chunkBytes;
        if (r.staging.length < need) {
          return RemoteError(Where() + ": rank " + std::to_string(r.rank) + "'s staging is " +
                             std::to_string(r.staging.length) + " bytes, less than " + std::to_string(need));
        }
        stagingKeys_[static_cast<int>(r.rank)] = r.staging;
      } else if (ev.kind == fabric::EventKind::kError) {
        return ev.error.ToStatus();
      } else if (ev.kind == fabric::EventKind::kImmediate) {
        pending_.push_back(std::move(ev));  // a fast neighbour's first chunk: keep it
      }
    }
    if (Clock::now() > deadline) {
      std::string missing;
      for (int p : neighbours) {
        if (!stagingKeys_.count(p)) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      return SystemError(Where() + ": no connect record from rank " + missing + " within " +
                         std::to_string(options_.timeoutMs) + " ms");
    }
  }
  return Status::Ok();
}

fabric::Endpoint* CollComm::EndpointTo(int peerRank) {
  auto it = endpoints_.find(peerRank);
  return it == endpoints_.end() ? nullptr : it->second.get();
}

Status CollComm::Post(CollOp op, CollRequest** out, bool progress) {
  if (!failed_.ok()) return failed_;
  if (op.blockElems.size() != static_cast<size_t>(nranks_)) {
    return InvalidArgument(Where() + ": " + CollKindName(op.kind) + " with " +
                           std::to_string(op.blockElems.size()) + " blocks for " + std::to_string(nranks_) + " ranks");
  }
  if (!ValidDataType(static_cast<int>(op.type)) || !ValidRedOp(static_cast<int>(op.op))) {
    return InvalidArgument(Where() + ": unsupported datatype or reduction op");
  }
  if (op.kind == CollKind::kAllGather && op.type != DataType::kUint8) {
    return InvalidArgument(Where() + ": allgather runs on bytes (kUint8)");
  }
  const uint64_t total = op.TotalElems();
  const uint64_t mine = op.blockElems[static_cast<size_t>(rank_)];
  const uint64_t sendElems = op.kind == CollKind::kAllGather ? mine : total;
  const uint64_t recvElems = op.kind == CollKind::kReduceScatter ? mine : total;
  if ((sendElems && !op.send) || (recvElems && !op.recv)) {
    return InvalidArgument(Where() + ": " + CollKindName(op.kind) + " with a NULL buffer");
  }
  auto a = std::make_unique<Active>();
  a->req.serial = nextSerial_++;
  a->req.bytes = recvElems * TypeBytes(op.type);
  a->op = std::move(op);
  *out = &a->req;
  queue_.push_back(std::move(a));
  return progress ? Progress() : Status::Ok();
}

bool CollComm::Busy() const {
  return std::any_of(queue_.begin(), queue_.end(), [](const auto& a) { return !a->req.done && a->error.ok(); });
}

Status CollComm::Test(CollRequest* req, bool* done, uint64_t* bytes, bool progress) {
  *done = false;
  Status s = progress ? Progress() : failed_;
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const auto& a) { return &a->req == req; });
  if (it == queue_.end()) return InvalidArgument(Where() + ": test of an unknown request");
  Active* a = it->get();
  if (!s.ok() || !a->error.ok()) {
    Status e = !a->error.ok() ? a->error : s;
    if (a->acquiredRecv && a->recvRegion) (void)cache_.Release(a->recvRegion);
    queue_.erase(it);
    return e;
  }
  if (!a->req.done) return Status::Ok();
  *done = true;
  if (bytes) *bytes = a->req.bytes;
  queue_.erase(it);
  return Status::Ok();
}

uint8_t* CollComm::Ptr(Active* a, Buf buf, uint64_t first) const {
  switch (buf) {
    case Buf::kWork: return a->work + first * a->ab;
    case Buf::kGather: return a->gather + first * a->gb;
    case Buf::kResult: return static_cast<uint8_t*>(a->op.recv) + (first - a->rbase) * a->tb;
  }
  return nullptr;
}

fabric::LocalSlice CollComm::Slice(Active* a, Buf buf, uint64_t first, uint64_t elems) const {
  const fabric::Region* region = buf == Buf::kResult ? a->recvRegion : a->workBuf.region;
  const size_t eb = buf == Buf::kWork ? a->ab : buf == Buf::kGather ? a->gb : a->tb;
  return {region, reinterpret_cast<uint64_t>(Ptr(a, buf, first)) - region->base, elems * eb};
}

void CollComm::PlanOp(Active* a) const {
  const CollOp& op = a->op;
  a->planned = true;
  a->tb = TypeBytes(op.type);
  a->ab = TypeBytes(AccumType(op.type));
  a->avgDivisor = op.op == RedOp::kAvg ? nranks_ : 1;
  a->algorithm = nranks_ == 1 ? Algorithm::kRing : ChooseAlgorithm(op, options_.topology.shape, options_.smallBytes);
  if (nranks_ > 1) {
    a->plan = BuildPlan(op, a->algorithm, options_.topology, rank_,
                        ChunkElemsFor(op, a->algorithm, options_.chunkBytes / a->ab));
  }
  a->gb = a->plan.gatherAccum ? a->ab : a->tb;
  // One buffer: the accumulator (twice for one-shot), then the gather buffer.
  const bool reduces = op.kind != CollKind::kAllGather;
  a->workBytes = reduces ? (op.TotalElems() * a->ab + 63) / 64 * 64 : 0;
  const uint64_t scratchBytes = a->plan.oneShotFinish ? a->workBytes : 0;
  a->bufferBytes = std::max<uint64_t>(a->workBytes + scratchBytes + a->plan.gatherElems * a->gb, 8);
}

Status CollComm::Begin(Active* a) {
  CollOp& op = a->op;
  a->begun = true;  // PlanOp ran (Progress plans before it checks the in-flight cap)
  const uint64_t total = op.TotalElems();
  const uint64_t myFirst = op.BlockOffset(rank_);
  const uint64_t mine = op.blockElems[static_cast<size_t>(rank_)];
  a->rbase = op.kind == CollKind::kReduceScatter ? myFirst : 0;
  const uint64_t recvBytes = (op.kind == CollKind::kReduceScatter ? mine : total) * a->tb;
  if (recvBytes) {
    if (op.recvRegion) {
      // Held for the op (the caller's deregMr cannot pull it from under a running op);
      // a handle that is no registration of this cache is refused before it is read.
      Status held = cache_.Retain(op.recvRegion);
      if (!held.ok()) return InvalidArgument(Where() + ": the receive buffer's handle: " + held.message());
      a->recvRegion = op.recvRegion;
      a->acquiredRecv = true;
      if (!op.recvRegion->Contains(reinterpret_cast<uint64_t>(op.recv), recvBytes)) {
        return InvalidArgument(Where() + ": the receive buffer is not inside its registration");
      }
    } else {
      RY_RETURN_IF_ERROR(cache_.Acquire(op.recv, recvBytes, fabric::kAccessLocal, fabric::MemoryKind::kHost,
                                        &a->recvRegion));
      a->acquiredRecv = true;
    }
  }
  lastAlgorithm_ = a->algorithm;
  {
    Status s = workPool_.Take(a->bufferBytes, &a->workBuf);
    if (!s.ok()) return Status(s.code(), Where() + ": " + s.message());
  }
  uint8_t* mem = a->workBuf.mem;
  a->work = mem;
  a->scratch = mem + a->workBytes;
  a->gather = mem + a->workBytes + (a->plan.oneShotFinish ? a->workBytes : 0);
  uint8_t* recv = static_cast<uint8_t*>(op.recv);
  const uint8_t* send = static_cast<const uint8_t*>(op.send);
  if (op.kind == CollKind::kAllGather) {
    if (mine && recv + myFirst * a->tb != send) std::memmove(recv + myFirst * a->tb, send, mine * a->tb);
  } else if (a->plan.oneShotFinish) {
    if (total) std::memcpy(a->gather + static_cast<uint64_t>(rank_) * total * a->tb, send, total * a->tb);
  } else if (total) {
    ToAccum(op.type, a->work, send, total);
  }
  if (nranks_ == 1) {  // nothing to move: the result is this rank's input
    if (op.kind != CollKind::kAllGather && total) FromAccum(op.type, recv, a->work, total, 1);
    return Status::Ok();
  }
  a->st.assign(a->plan.streams.size(), {});
  for (size_t s = 0; s < a->st.size(); ++s) a->st[s].recvDone.assign(a->plan.streams[s].recv.size(), 0);
  return Status::Ok();
}

void CollComm::FinishOneShot(Active* a) {
  const CollOp& op = a->op;
  const uint64_t total = op.TotalElems();
  if (!total) return;
  const DataType accum = AccumType(op.type);
  // Every rank reduces the n inputs in rank order: the same bits everywhere.
  ToAccum(op.type, a->work, a->gather, total);
  for (int p = 1; p < nranks_; ++p) {
    ToAccum(op.type, a->scratch, a->gather + static_cast<uint64_t>(p) * total * a->tb, total);
    ReduceInPlace(accum, op.op, a->work, a->scratch, total);
  }
  FromAccum(op.type, op.recv, a->work, total, a->avgDivisor);
}

bool CollComm::Advance(Active* a, int s, bool mayReceive, bool maySend) {
  if (static_cast<size_t>(s) >= a->st.size()) return false;
  auto& st = a->st[static_cast<size_t>(s)];
  const StreamPlan& sp = a->plan.streams[static_cast<size_t>(s)];
  Stream& sm = *streams_[static_cast<size_t>(s)];
  const CollOp& op = a->op;
  const DataType accum = AccumType(op.type);
  bool moved = false;
  auto ready = [&](const Ref& r) {
    return !r.valid() || a->st[static_cast<size_t>(r.stream)].recvDone[r.index] != 0;
  };

  // Receive side: process landed chunks in stream order (an earlier op's first).
  while (mayReceive && st.recvI < sp.recv.size()) {
    const RecvItem& it = sp.recv[st.recvI];
    const uint64_t seq = sm.consumed;
    const size_t slot = seq % options_.slots;
    if (sm.slotSeq[slot] != static_cast<int64_t>(seq)) break;
    if (!ready(it.after)) break;
    const uint8_t* chunk = stagingMem_ + (static_cast<uint64_t>(s) * options_.slots + slot) * options_.chunkBytes;
    uint8_t* dst = Ptr(a, it.buf, it.first);
    if (it.reduce) {
      ReduceInPlace(accum, op.op, dst, chunk, it.elems);
    } else {
      const size_t eb = it.buf == Buf::kWork ? a->ab : it.buf == Buf::kGather ? a->gb : a->tb;
      std::memcpy(dst, chunk, it.elems * eb);
    }
    if (it.finalize) FromAccum(op.type, Ptr(a, Buf::kResult, it.first), dst, it.elems, a->avgDivisor);
    st.recvDone[st.recvI] = 1;
    sm.slotSeq[slot] = -1;
    ++sm.consumed;
    ++st.recvI;
    moved = true;
  }

  // Send side: post every chunk whose input is ready, while the right has room.
  if (!maySend || st.sendI >= sp.send.size()) return moved;
  fabric::Endpoint* ep = EndpointTo(sm.right);
  const fabric::RemoteKey& key = stagingKeys_[sm.right];
  while (st.sendI < sp.send.size()) {
    const SendItem& it = sp.send[st.sendI];
    if (sm.sent >= sm.credited + options_.slots) break;
    if (!ready(it.after)) break;
    const uint64_t seq = sm.sent;
    const uint64_t remote =
        key.base + (static_cast<uint64_t>(sm.remoteRecv) * options_.slots + seq % options_.slots) * options_.chunkBytes;
    Status w = ep->Write(Slice(a, it.buf, it.first, it.elems), key, remote, DataCookie(s, a->req.serial, st.sendI),
                         PackImm(ImmKind::kData, sm.remoteRecv, seq));
    if (!w.ok()) {
      Fail(Status(w.code(), Where() + ": " + CollKindName(op.kind) + " (" + AlgorithmName(a->plan.algorithm) +
                                ") write to rank " + std::to_string(sm.right) + ": " + w.message()),
           ep->status().ok() ? -1 : sm.right);
      return moved;
    }
    ++sm.sent;
    ++st.posted;
    ++st.sendI;
    moved = true;
  }
  return moved;
}

void CollComm::OnEvent(fabric::Event& ev) {
  switch (ev.kind) {
    case fabric::EventKind::kImmediate: {
      const uint32_t imm = static_cast<uint32_t>(ev.value);
      const int d = ImmStream(imm);
      if (ImmKindOf(imm) != ImmKind::kAbort && static_cast<size_t>(d) >= streams_.size()) {
        Fail(RemoteError(Where() + ": an immediate names stream " + std::to_string(d) + " of " +
                         std::to_string(streams_.size())));
        return;
      }
      Stream& sm = *streams_[ImmKindOf(imm) == ImmKind::kAbort ? 0 : static_cast<size_t>(d)];
      switch (ImmKindOf(imm)) {
        case ImmKind::kData: {
          const uint64_t seq = WidenSeq(imm, sm.consumed);
          const size_t slot = seq % options_.slots;
          if (seq >= sm.consumed + options_.slots || sm.slotSeq[slot] >= 0) {
            Fail(RemoteError(Where() + ": rank " + std::to_string(sm.left) + " wrote chunk " +
                             std::to_string(seq) + " of stream " + std::to_string(d) +
                             " outside its credit window (consumed " + std::to_string(sm.consumed) + ")"));
            return;
          }
          sm.slotSeq[slot] = static_cast<int64_t>(seq);
          return;
        }
        case ImmKind::kCredit: {
          const uint64_t c = WidenSeq(imm, sm.credited);
          if (c > sm.sent) {
            Fail(RemoteError(Where() + ": rank " + std::to_string(sm.right) + " returned credit for " +
                             std::to_string(c) + " chunks of stream " + std::to_string(d) +
                             ", only " + std::to_string(sm.sent) + " were sent"));
            return;
          }
          sm.credited = c;
          return;
        }
        case ImmKind::kAbort: {
          const int origin = AbortOrigin(imm & kImmSeqMask);
          const int lost = AbortLost(imm & kImmSeqMask);
          // The rank it lost is the likelier culprit (a killed process, a cut cable):
          // named, so the survivors of a kill -9 name the dead rank (new-user trial).
          Fail(RemoteError(Where() + ": the collective was aborted: rank " + std::to_string(origin) +
                           (lost >= 0 ? " lost its connection to rank " + std::to_string(lost) : " failed") +
                           " (told by a peer)"),
               lost, origin);
          return;
        }
        default:
          Fail(RemoteError(Where() + ": unknown immediate 0x" + std::to_string(imm)));
          return;
      }
    }
    case fabric::EventKind::kDone:
      if (ev.cookie & kDataCookie) {
        const uint64_t serial = (ev.cookie >> kSerialShift) & kSerialMask;
        auto it = std::find_if(queue_.begin(), queue_.end(), [&](const auto& x) {
          return x->begun && (x->req.serial & kSerialMask) == serial;
        });
        if (it == queue_.end()) return;
        Active* a = it->get();
        const size_t d = static_cast<size_t>((ev.cookie >> kStreamShift) & (kMaxStreams - 1));
        if (d < a->st.size() && a->st[d].completed < a->st[d].posted) ++a->st[d].completed;
      }
      return;
    case fabric::EventKind::kError: {
      // Named by rank as well as by worker (new-user trial: after a kill -9 the error
      // named only this rank and the dead peer's worker address).
      const int peer = RankOf(ev.error);
      Fail(Status(Code::kSystemError, Where() + (peer >= 0 ? ": with rank " + std::to_string(peer) : std::string()) +
                                          ": " + ev.error.ToString()),
           peer);
      return;
    }
    case fabric::EventKind::kRecord:
      return;  // connect records are done with; nothing else is sent as a record
  }
}

int CollComm::RankOf(const fabric::FabricError& e) const {
  // Peers are named "w=<worker id> <address>"; a connection accepted from the peer says
  // "w=<id> connection N arriving from <host>": the worker id is what both share.
  auto worker = [](const std::string& name) { return name.substr(0, name.find(' ')); };
  const std::string id = worker(e.site.peer);
  int failed = -1, nFailed = 0;
  for (const auto& [rank, ep] : endpoints_) {
    if (id.size() > 2 && worker(ep->PeerName()) == id) return rank;
    if (!ep->status().ok()) {
      failed = rank;
      ++nFailed;
    }
  }
  return nFailed == 1 ? failed : -1;
}

void CollComm::SendCredits() {
  for (auto& smp : streams_) {
    Stream& sm = *smp;
    if (sm.consumed == sm.creditSent || sm.left < 0) continue;
    fabric::Endpoint* ep = EndpointTo(sm.left);
    if (!ep) continue;
    Status s = ep->Write({staging_, 0, 0}, stagingKeys_[sm.left], stagingKeys_[sm.left].base, 0,
                         PackImm(ImmKind::kCredit, sm.remoteSend, sm.consumed));
    if (!s.ok()) {
      Fail(Status(s.code(), Where() + ": credit to rank " + std::to_string(sm.left) + ": " + s.message()),
           ep->status().ok() ? -1 : sm.left);
      return;
    }
    sm.creditSent = sm.consumed;
  }
}

void CollComm::Fail(Status s, int lost, int origin) {
  if (!failed_.ok()) return;
  failed_ = std::move(s);
  for (auto& a : queue_) {
    if (a->error.ok()) a->error = failed_;
  }
  // Tell every peer (best effort: the endpoint to a dead peer refuses).
  const uint32_t word = PackAbort(origin >= 0 ? origin : rank_, lost);
  for (auto& [peer, ep] : endpoints_) {
    if (!ep->status().ok() || !stagingKeys_.count(peer)) continue;
    (void)ep->Write({staging_, 0, 0}, stagingKeys_[peer], stagingKeys_[peer].base, 0,
                    PackImm(ImmKind::kAbort, 0, word));
  }
}

Status CollComm::Progress() {
  if (!failed_.ok()) {
    // Keep the Worker moving so the abort notices reach the neighbours.
    events_.clear();
    worker_.Progress(&events_);
    return failed_;
  }
  events_.clear();
  if (!pending_.empty()) events_.swap(pending_);
  const size_t got = worker_.Progress(&events_);
  bool moved = got > 0;
  for (fabric::Event& ev : events_) OnEvent(ev);
  // Ops begin in post order, up to kMaxOpsInFlight at once; on every stream an op
  // receives and sends only after the ops before it are through with that stream
  // (sequence numbers and staging slots are the stream's, shared by its ops).
  // Finished ops wait in the queue for Test.
  std::array<bool, kMaxStreams> mayReceive, maySend;  // no allocation per poll
  mayReceive.fill(true);
  maySend.fill(true);
  int inFlight = 0;
  uint64_t inFlightBytes = 0;
  for (auto& entry : queue_) {
    if (!failed_.ok()) break;
    Active* a = entry.get();
    if (a->req.done) continue;
    if (!a->begun) {
      if (inFlight >= kMaxOpsInFlight) break;
      if (!a->planned) PlanOp(a);
      if (inFlight > 0 && inFlightBytes + workPool_.TakeSize(a->bufferBytes) > kOverlapWorkBytes) break;
      Status s = Begin(a);
      if (!s.ok()) {
        // The peers would wait for this op forever: a local error fails the comm
        // (they learn it from the abort).
        Fail(s);
        break;
      }
      moved = true;
    }
    ++inFlight;
    inFlightBytes += a->workBuf.bytes;  // what it holds (a pooled buffer may be larger than asked)
    for (size_t d = 0; d < a->st.size(); ++d) {
      moved |= Advance(a, static_cast<int>(d), mayReceive[d], maySend[d]);
      const StreamPlan& sp = a->plan.streams[d];
      if (a->st[d].recvI < sp.recv.size()) mayReceive[d] = false;
      if (a->st[d].sendI < sp.send.size()) maySend[d] = false;
    }
    if (!failed_.ok() || !a->Finished()) continue;
    if (a->plan.oneShotFinish) FinishOneShot(a);
    a->req.done = true;
    --inFlight;
    inFlightBytes -= a->workBuf.bytes;
    if (a->workBuf.mem) {
      workPool_.Give(a->workBuf);
      workPool_.TrimIdle(kOverlapWorkBytes);
      a->workBuf = {};
    }
    if (a->acquiredRecv && a->recvRegion) {
      (void)cache_.Release(a->recvRegion);
      a->acquiredRecv = false;
    }
  }
  if (failed_.ok()) SendCredits();
  const uint64_t landed = worker_.stats().bytesLanded;  // a large chunk is still arriving
  moved |= landed != lastLanded_;
  lastLanded_ = landed;
  lastMoved_ = moved;
  const auto now = Clock::now();
  const auto running = std::find_if(queue_.begin(), queue_.end(), [](const auto& x) { return !x->req.done; });
  const bool busy = running != queue_.end();
  if (moved || !busy) {
    lastProgress_ = now;
  } else if (now - lastProgress_ > kStalledCheck && now - lastEndpointCheck_ > kStalledCheck) {
    // Stalled: a neighbour's endpoint may have failed with none of this comm's ops on it
    // (the neighbour killed while this rank waits for its credit or its chunk: no error
    // event comes). Checked now, not at the timeout (chain kill test: the far end waited
    // RAILYARD_TIMEOUT_MS). Not every poll: status() copies its message.
    lastEndpointCheck_ = now;
    for (auto& [peer, ep] : endpoints_) {
      if (Status es = ep->status(); !es.ok()) {
        Fail(Status(es.code(), Where() + ": with rank " + std::to_string(peer) + ": " + es.message()), peer);
        return failed_;
      }
    }
  }
  if (failed_.ok() && busy && !moved && now - lastProgress_ > std::chrono::milliseconds(options_.timeoutMs)) {
    Active* a = running->get();
    std::string at;
    for (size_t d = 0; d < a->st.size(); ++d) {
      const auto& p = a->st[d];
      if (p.recvI < a->plan.streams[d].recv.size()) {
        at += " stream " + std::to_string(d) + ": chunk " + std::to_string(p.recvI) + " of " +
              std::to_string(a->plan.streams[d].recv.size()) + " from rank " + std::to_string(streams_[d]->left) + ";";
      } else if (p.completed != p.posted || p.sendI < a->plan.streams[d].send.size()) {
        at += " stream " + std::to_string(d) + ": sending chunk " + std::to_string(p.sendI) + " to rank " +
              std::to_string(streams_[d]->right) + ";";
      }
    }
    Fail(SystemError(Where() + ": " + CollKindName(a->op.kind) + " (" + AlgorithmName(a->plan.algorithm) +
                     ") made no progress for " +
                     std::to_string(options_.timeoutMs) + " ms (TIMEOUT), waiting at" + at));
  }
  return failed_;
}

}  // namespace railyard::collectives
