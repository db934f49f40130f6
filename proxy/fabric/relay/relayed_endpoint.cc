#include "proxy/fabric/relay/relayed_endpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "proxy/fabric/fail_outstanding.h"
#include "proxy/fabric/relay/relay_cookie.h"

namespace railyard::fabric::relay {
namespace {

uint64_t RandomNonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
}

/// Largest record a route carries: the transport's, and what a slot holds.
uint64_t MaxRecord(const RelayClient& c) {
  return std::min<uint64_t>(const_cast<RelayClient&>(c).domain().capabilities().maxRecordBytes,
                            c.options().PayloadBytes());
}

}  // namespace

bool InlineChunk(const Region& local, uint64_t chunk, uint64_t maxInline) {
  return local.kind == MemoryKind::kHost && chunk <= maxInline;
}

namespace {

std::string ToHex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

RelayedEndpoint::RelayedEndpoint(RelayClient* client, uint32_t routeId, std::vector<uint8_t> target)
    : client_(client), routeId_(routeId), target_(std::move(target)) {
  peerName_ = "(relayed, route opening)";
  Heard();
}

Status RelayedEndpoint::Init(std::span<const uint8_t> relay) {
  const RelayOptions& o = client_->options();
  Domain& d = client_->domain();
  headers_ = std::make_shared<SlotRing>();
  const uint64_t headerSlot = (kSlotPayloadOffset + MaxRecord(*client_) + 63) / 64 * 64;
  RY_RETURN_IF_ERROR(headers_->Init(o.slots, headerSlot, {&d}, {kAccessLocal}));
  returns_ = std::make_shared<SlotRing>();
  RY_RETURN_IF_ERROR(returns_->Init(o.returnSlots, o.slotBytes, {&d}, {kAccessLocal | kAccessRemoteWrite}));
  returnDone_.assign(o.returnSlots, 0);
  RY_RETURN_IF_ERROR(d.CreateWorker(&worker_));
  RY_RETURN_IF_ERROR(worker_->Connect(relay, &leg_));
  relayLabel_ = client_->RelayLabel(relay, target_);
  relayLabel_ = relayLabel_.empty() ? "relay " + leg_->PeerName() : relayLabel_;
  peerName_ = "(relayed) via " + relayLabel_;
  nonce_ = RandomNonce();
  RouteOpen open;
  open.slots = o.slots;
  open.slotBytes = o.slotBytes;
  open.returnSlots = o.returnSlots;
  open.source = worker_->Address();
  open.target = target_;
  open.returnKey = returns_->region(0)->Key().Pack();
  open.nonce = nonce_;
  std::vector<uint8_t> body = EncodeRouteOpen(open);
  if (o.clusterKey) {
    topology::ClusterMac mac{};
    if (!o.clusterKey->Mac("railyard.fabric.relay.open", body.data(), body.size() - kOpenMacBytes, &mac)) {
      return SystemError("relay open: the cluster key MAC failed");
    }
    std::memcpy(body.data() + body.size() - kOpenMacBytes, mac.data(), kOpenMacBytes);
  }
  Control c;
  c.kind = ControlKind::kOpen;
  c.route = routeId_;
  c.body = std::move(body);
  SendControl(c);
  return Status::Ok();
}

RelayedEndpoint::~RelayedEndpoint() {
  // A route closed with nothing outstanding tells the relay and keeps its rings
  // until the record is out; with ops under way the leg goes now (no byte of the
  // caller's memory is read after this returns) and the relay learns from its own
  // failing legs.
  std::shared_ptr<void> leftovers;
  Endpoint* leg = nullptr;
  Worker* worker = nullptr;
  if (state_ == State::kOpen && ops_.empty() && leg_ && leg_->status().ok()) {
    Control c;
    c.kind = ControlKind::kClose;
    c.route = relayRoute_;
    leg_->QuietPeerClose();  // the relay may end (its rank finished) before the Close is acked
    SendControl(c);
    struct Keep {  // members go in reverse order: the leg before its Worker, then the rings
      std::shared_ptr<SlotRing> headers, returns;
      std::unique_ptr<Worker> worker;
      std::unique_ptr<Endpoint> leg;
    };
    auto keep = std::make_shared<Keep>();
    leg = leg_.get();
    worker = worker_.get();
    keep->worker = std::move(worker_);
    keep->leg = std::move(leg_);
    keep->headers = std::move(headers_);
    keep->returns = std::move(returns_);
    leftovers = keep;
  }
  leg_.reset();
  worker_.reset();
  client_->Detach(routeId_, std::move(leftovers), worker, leg, client_->options().timeoutMs);
}

Status RelayedEndpoint::CheckLocal(const LocalSlice& s, const char* what) const {
  if (s.region == nullptr || (s.region->access & kAccessLocal) == 0) {
    return InvalidArgument(std::string(what) + ": the local region is missing or lacks local access");
  }
  if (s.offset > s.region->length || s.bytes > s.region->length - s.offset) {
    return InvalidArgument(std::string(what) + ": local range outside its region");
  }
  return Status::Ok();
}

Status RelayedEndpoint::Post(Op op) {
  if (ops_.empty()) Heard();
  op.opSeq = nextOpSeq_++;
  ops_.push_back(std::move(op));
  Pump(nullptr);
  return Status::Ok();
}

Status RelayedEndpoint::Send(std::span<const uint8_t> record, uint64_t cookie) {
  if (!status_.ok()) return status_;
  const uint64_t max = MaxRecord(*client_);
  if (record.empty() || record.size() > max) {
    return InvalidArgument("fabric Send of " + std::to_string(record.size()) + " bytes (1.." + std::to_string(max) +
                           ") on a relayed route");
  }
  Op op;
  op.type = OpType::kSend;
  op.cookie = cookie;
  op.record.assign(record.begin(), record.end());
  return Post(std::move(op));
}

Status RelayedEndpoint::Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                              std::optional<uint32_t> immediate) {
  if (!status_.ok()) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
  Op op;
  op.type = OpType::kWrite;
  op.cookie = cookie;
  op.local = src;
  op.bytes = src.bytes;
  op.key = key.Pack();
  op.keyBase = key.base;
  op.keyLength = key.length;
  op.addr = remoteAddr;
  op.hasImm = immediate.has_value();
  op.imm = immediate.value_or(0);
  return Post(std::move(op));
}

Status RelayedEndpoint::WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                                   uint32_t immediate, uint64_t opBytes) {
  if (!status_.ok()) return status_;
  if (opBytes < src.bytes || remoteAddr < opBytes - src.bytes) {
    return InvalidArgument("fabric WriteFinal: a whole Write of " + std::to_string(opBytes) + " bytes for a last piece of " +
                           std::to_string(src.bytes) + " at 0x" + ToHex(remoteAddr));
  }
  RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
  Op op;
  op.type = OpType::kWrite;
  op.cookie = cookie;
  op.local = src;
  op.bytes = src.bytes;
  op.prior = opBytes - src.bytes;
  op.key = key.Pack();
  op.keyBase = key.base;
  op.keyLength = key.length;
  op.addr = remoteAddr;
  op.hasImm = true;
  op.imm = immediate;
  return Post(std::move(op));
}

Status RelayedEndpoint::Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) {
  if (!status_.ok()) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(dst, "fabric Read"));
  Op op;
  op.type = OpType::kRead;
  op.cookie = cookie;
  op.local = dst;
  op.bytes = dst.bytes;
  op.key = key.Pack();
  op.addr = remoteAddr;
  return Post(std::move(op));
}

Status RelayedEndpoint::FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) {
  if (!status_.ok()) return status_;
  Op op;
  op.type = OpType::kFetchAdd;
  op.cookie = cookie;
  op.key = key.Pack();
  op.addr = remoteAddr;
  op.add = add;
  return Post(std::move(op));
}

Status RelayedEndpoint::Fence(uint64_t cookie) {
  if (!status_.ok()) return status_;
  Op op;
  op.type = OpType::kFence;
  op.cookie = cookie;
  op.allEmitted = true;
  return Post(std::move(op));
}

void RelayedEndpoint::SendControl(const Control& c) {
  if (!leg_) return;
  const std::vector<uint8_t> bytes = EncodeControl(c);
  Status s = leg_->Send(bytes, MakeLegCookie(routeId_, LegTag::kControl, 0));
  if (!s.ok() && state_ != State::kFailed) {
    Fail(FabricErrc::kEndpointFailed, -1, "the leg to the relay failed: " + s.message());
  }
}

bool RelayedEndpoint::EmitChunk(Op& op) {
  const uint64_t seq = nextSlotSeq_;
  const uint32_t idx = static_cast<uint32_t>(seq % upSlots_);
  const uint64_t slotBase = upKey_.base + static_cast<uint64_t>(idx) * client_->options().slotBytes;
  uint8_t* hdr = headers_->Slot(idx);
  SlotHeader h;
  h.slotSeq = seq;
  h.opSeq = op.opSeq;
  h.addr = op.addr;
  uint64_t headerBytes = sizeof(SlotHeader) + op.key.size();
  std::span<const uint8_t> key = op.key;
  Status s;
  if (op.type == OpType::kWrite && op.emitted == 0) {
    const bool inside = op.addr >= op.keyBase && op.bytes <= op.keyLength && op.addr - op.keyBase <= op.keyLength - op.bytes;
    if (!inside) {
      Fail(FabricErrc::kOutOfBounds, static_cast<int64_t>(op.opSeq),
           "a relayed Write of " + std::to_string(op.bytes) + " bytes at 0x" + ToHex(op.addr) +
               " is outside the target region its key names (checked before any chunk left)");
      return false;
    }
  }
  switch (op.type) {
    case OpType::kWrite: {
      const uint64_t chunk = std::min(client_->options().PayloadBytes(), op.bytes - op.emitted);
      h.kind = static_cast<uint8_t>(SlotKind::kWrite);
      h.payloadBytes = static_cast<uint32_t>(chunk);
      h.addr = op.addr + op.emitted;
      h.opBytes = op.prior + op.bytes;  // the whole Write (WriteFinal: with the bytes Written before)
      h.value = op.prior + op.emitted;
      const bool last = op.emitted + chunk == op.bytes;
      if (last) h.flags = kSlotLast | (op.hasImm ? kSlotHasImm : 0);
      h.imm = op.imm;
      if (chunk > 0 && InlineChunk(*op.local.region, chunk, std::min(MaxRecord(*client_), kMaxInlineChunkBytes))) {
        // Small (a clear-to-send, an eager message): copied behind the header, the
        // slot goes as one Write (one frame and one ack on the leg, not two of each).
        std::memcpy(hdr + kSlotPayloadOffset, op.local.data() + op.emitted, chunk);
        headerBytes = kSlotPayloadOffset + chunk;
      } else if (chunk > 0) {
        // A Write of its own. Not WriteLazy: measured 5x slower at 64 KiB relayed
        // (docs/benchmarks.md, fperf section; the cause is not pinned down yet).
        s = leg_->Write({op.local.region, op.local.offset + op.emitted, chunk}, upKey_, slotBase + kSlotPayloadOffset,
                        MakeLegCookie(routeId_, LegTag::kPayload, idx));
      }
      op.emitted += chunk;
      op.allEmitted = last;
      break;
    }
    case OpType::kSend:
      h.kind = static_cast<uint8_t>(SlotKind::kRecord);
      h.flags = kSlotLast;
      h.payloadBytes = static_cast<uint32_t>(op.record.size());
      key = {};
      std::memcpy(hdr + kSlotPayloadOffset, op.record.data(), op.record.size());
      headerBytes = kSlotPayloadOffset + op.record.size();
      op.allEmitted = true;
      break;
    case OpType::kRead:
      h.kind = static_cast<uint8_t>(SlotKind::kRead);
      h.flags = kSlotLast;
      h.opBytes = op.bytes;
      op.allEmitted = true;
      break;
    case OpType::kFetchAdd:
      h.kind = static_cast<uint8_t>(SlotKind::kFetchAdd);
      h.flags = kSlotLast;
      h.value = op.add;
      op.allEmitted = true;
      break;
    default:
      return false;
  }
  if (s.ok()) s = EncodeSlotHeader(h, key, hdr);
  if (s.ok()) {
    s = leg_->Write({headers_->region(0), headers_->Offset(idx), headerBytes}, upKey_, slotBase,
                    MakeLegCookie(routeId_, LegTag::kHeader, idx), MakeSlotImmediate(relayRoute_, idx));
  }
  if (!s.ok()) {
    Fail(FabricErrc::kEndpointFailed, static_cast<int64_t>(op.opSeq), "the leg to the relay failed: " + s.message());
    return false;
  }
  op.lastSlot = seq;
  ++nextSlotSeq_;
  return true;
}

bool RelayedEndpoint::Complete(const Op& op) const {
  if (!op.allEmitted || released_ <= op.lastSlot) return false;
  if (op.type == OpType::kRead) return op.copied == op.bytes;
  if (op.type == OpType::kFetchAdd) return op.haveValue;
  return true;
}

RelayedEndpoint::Op* RelayedEndpoint::FindEmitted(uint64_t opSeq, OpType type) {
  for (size_t i = 0; i < emitIdx_ && i < ops_.size(); ++i) {
    if (ops_[i].opSeq == opSeq) return ops_[i].type == type ? &ops_[i] : nullptr;
  }
  return nullptr;
}

void RelayedEndpoint::Pump(std::vector<Event>* out) {
  if (state_ == State::kOpen) {
    bool moved = true;
    while (moved && state_ == State::kOpen) {
      moved = false;
      while (!ops_.empty() && emitIdx_ > 0 && ops_.front().type != OpType::kFence && Complete(ops_.front())) {
        Event e;
        e.op = ops_.front().type;
        e.cookie = ops_.front().cookie;
        e.value = ops_.front().value;
        events_.push_back(std::move(e));
        ops_.pop_front();
        --emitIdx_;
        moved = true;
      }
      if (!ops_.empty() && emitIdx_ == 0 && ops_.front().type == OpType::kFence) {
        Event e;
        e.op = OpType::kFence;
        e.cookie = ops_.front().cookie;
        events_.push_back(std::move(e));
        ops_.pop_front();
        moved = true;
        continue;
      }
      while (state_ == State::kOpen && emitIdx_ < ops_.size() && ops_[emitIdx_].type != OpType::kFence &&
             nextSlotSeq_ - released_ < upSlots_) {
        if (!EmitChunk(ops_[emitIdx_])) break;
        if (ops_[emitIdx_].allEmitted) ++emitIdx_;
        moved = true;
      }
    }
    if (state_ == State::kOpen && returnConsumed_ > returnCredited_) {
      Control c;
      c.kind = ControlKind::kReturnCredit;
      c.route = relayRoute_;
      c.a = returnConsumed_;
      returnCredited_ = returnConsumed_;
      SendControl(c);
    }
  }
  // The leg's own failure is sticky in its status even when no leg op was outstanding
  // to carry an error event (e.g. every Write landed and only credits were awaited).
  if (state_ != State::kFailed && leg_ != nullptr && !leg_->status().ok()) {
    Fail(FabricErrc::kPeerClosed, ops_.empty() ? -1 : static_cast<int64_t>(ops_.front().opSeq),
         "the leg to the relay failed: " + leg_->status().message());
  }
  if (state_ != State::kFailed && (state_ == State::kOpening || !ops_.empty())) {
    const auto quiet = std::chrono::steady_clock::now() - lastHeard_;
    const int64_t limit = 2 * static_cast<int64_t>(client_->options().timeoutMs);
    if (quiet > std::chrono::milliseconds(limit)) {
      Fail(FabricErrc::kTimeout, ops_.empty() ? -1 : static_cast<int64_t>(ops_.front().opSeq),
           std::string("nothing heard from the relay for ") + std::to_string(limit) + " ms (2 x RAILYARD_TIMEOUT_MS) " +
               (state_ == State::kOpening ? "while opening the route" : "with ops outstanding"));
    }
  }
  if (out != nullptr) {
    std::move(events_.begin(), events_.end(), std::back_inserter(*out));
    events_.clear();
  }
}

void RelayedEndpoint::Progress(std::vector<Event>* out) {
  if (worker_) {
    scratch_.clear();
    worker_->Progress(&scratch_);
    for (const Event& e : scratch_) Dispatch(e);
  }
  Pump(out);
}

bool RelayedEndpoint::Quiet() const {
  // Ops outstanding do not keep it awake: after a Pump, every one of them waits for
  // input (a leg completion, a credit or result record from the relay), which makes
  // the leg Worker's descriptor readable. Every sleeper on it is bounded (the
  // Forwarder host's poll, the comms helper's kMaxQuietWait), so the timeout check
  // still runs. A relay host's Forwarder carrying routes on through a further relay
  // spun while they had ops, taking the CPU its ranks needed (docs/benchmarks.md).
  if (state_ == State::kOpening || !events_.empty() || returnCredited_ != returnConsumed_) return false;
  return worker_ == nullptr || worker_->Quiet();
}

void RelayedEndpoint::Dispatch(const Event& e) {
  switch (e.kind) {
    case EventKind::kDone:
    case EventKind::kError:
      if (e.op == OpType::kNone) {
        OnRelayLost(e.peer, e.error);  // a connection into this Worker failed
      } else if (CookieRoute(e.cookie) == routeId_) {
        OnLegEvent(e);
      }
      return;
    case EventKind::kRecord: {
      Control c;
      if (!DecodeControl(e.record, &c).ok() || c.route != routeId_) {
        if (state_ != State::kFailed) Fail(FabricErrc::kMalformed, -1, "a record that is not this route's relay control");
        return;
      }
      OnControl(c, e.peer);
      return;
    }
    case EventKind::kImmediate:
      if (ImmediateRoute(static_cast<uint32_t>(e.value)) != routeId_) {
        if (state_ != State::kFailed) Fail(FabricErrc::kMalformed, -1, "an immediate that is not this route's");
        return;
      }
      OnReturnSlot(ImmediateSlot(static_cast<uint32_t>(e.value)), e.peer);
      return;
  }
}

void RelayedEndpoint::OnLegEvent(const Event& e) {
  if (e.kind != EventKind::kError || state_ == State::kFailed) {
    if (e.kind == EventKind::kDone) Heard();
    return;
  }
  Fail(e.error.errc == FabricErrc::kEndpointFailed ? FabricErrc::kPeerClosed : e.error.errc,
       ops_.empty() ? -1 : static_cast<int64_t>(ops_.front().opSeq),
       "the leg to the relay failed: " + e.error.ToString(), &e.error.site);
}

void RelayedEndpoint::OnRelayLost(uint64_t relayWorker, const FabricError& err) {
  if (state_ == State::kFailed || relayWorker != relayWorker_ || relayWorker_ == 0) return;
  Fail(FabricErrc::kPeerClosed, ops_.empty() ? -1 : static_cast<int64_t>(ops_.front().opSeq),
       "the relay closed its connection back to this host: " + err.ToString(), &err.site);
}

void RelayedEndpoint::OnControl(const Control& c, uint64_t peer) {
  if (state_ == State::kFailed) return;
  if (relayWorker_ != 0 && peer != relayWorker_) {
    Fail(FabricErrc::kMalformed, -1, "a relay control record came from another worker");
    return;
  }
  Heard();
  switch (c.kind) {
    case ControlKind::kOpenOk: {
      if (state_ != State::kOpening) break;
      // body: u16 key bytes, packed up-ring key, u64 nonce, then the next hop's peer name.
      uint16_t kb = 0;
      uint64_t nonce = 0;
      if (c.body.size() < 2) return Fail(FabricErrc::kMalformed, -1, "relay open answer too short");
      std::memcpy(&kb, c.body.data(), 2);
      if (c.body.size() < 2u + kb + 8u) return Fail(FabricErrc::kMalformed, -1, "relay open answer too short");
      Status s = RemoteKey::Unpack(std::span<const uint8_t>(c.body.data() + 2, kb), &upKey_);
      std::memcpy(&nonce, c.body.data() + 2 + kb, 8);
      const uint64_t need = c.b * client_->options().slotBytes;
      if (!s.ok() || nonce != nonce_ || c.a < 1 || c.a > kMaxRouteId || c.b < 1 || c.b > client_->options().slots ||
          upKey_.length < need) {
        return Fail(FabricErrc::kMalformed, -1,
                    "relay open answer refused: " + (s.ok() ? std::string("nonce, route or slots wrong") : s.message()));
      }
      relayWorker_ = peer;
      relayRoute_ = static_cast<uint32_t>(c.a);
      upSlots_ = static_cast<uint32_t>(c.b);
      std::string name(c.body.begin() + 2 + kb + 8, c.body.end());
      for (char& ch : name) {
        if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
      }
      if (name.size() > 256) name.resize(256);
      peerName_ = name + " via " + relayLabel_;
      state_ = State::kOpen;
      break;
    }
    case ControlKind::kCredit:
      if (state_ != State::kOpen || c.a < released_ || c.a > nextSlotSeq_) {
        return Fail(FabricErrc::kMalformed, -1, "relay credit " + std::to_string(c.a) + " outside [" +
                                                    std::to_string(released_) + ", " + std::to_string(nextSlotSeq_) + "]");
      }
      released_ = c.a;
      break;
    case ControlKind::kFetchAddResult: {
      Op* op = FindEmitted(c.a, OpType::kFetchAdd);
      if (op == nullptr || op->haveValue) return Fail(FabricErrc::kMalformed, -1, "relay fetch-add result for no such op");
      op->value = c.b;
      op->haveValue = true;
      break;
    }
    case ControlKind::kError: {
      std::string text(c.body.begin(), c.body.end());
      Fail(FabricErrcFromWire(c.b), static_cast<int64_t>(c.a), "the relay reported: " + text);
      break;
    }
    default:
      Fail(FabricErrc::kMalformed, -1, "unexpected relay control record kind " + std::to_string(static_cast<int>(c.kind)));
  }
}

void RelayedEndpoint::OnReturnSlot(uint32_t slot, uint64_t peer) {
  if (state_ != State::kOpen) return;
  const uint32_t m = static_cast<uint32_t>(returnDone_.size());
  if (peer != relayWorker_ || slot >= m || returnDone_[slot] != 0) {
    return Fail(FabricErrc::kMalformed, -1, "a return slot immediate that is not due (slot " + std::to_string(slot) + ")");
  }
  Heard();
  const uint64_t seq = returnConsumed_ + (slot + m - returnConsumed_ % m) % m;
  SlotView v;
  Status s = DecodeSlotHeader(returns_->Slot(slot), returns_->slotBytes(), seq, &v);
  if (s.ok() && v.header.kind != static_cast<uint8_t>(SlotKind::kReadData)) s = InvalidArgument("not read data");
  Op* op = s.ok() ? FindEmitted(v.header.opSeq, OpType::kRead) : nullptr;
  if (op == nullptr || v.header.opBytes != op->bytes || op->copied + v.header.payloadBytes > op->bytes) {
    return Fail(FabricErrc::kMalformed, -1, "relay read data refused: " + (s.ok() ? std::string("no such read") : s.message()));
  }
  std::memcpy(op->local.data() + v.header.value, returns_->Slot(slot) + kSlotPayloadOffset, v.header.payloadBytes);
  op->copied += v.header.payloadBytes;
  returnDone_[slot] = 1;
  while (returnDone_[returnConsumed_ % m] != 0) {
    returnDone_[returnConsumed_ % m] = 0;
    ++returnConsumed_;
  }
}

void RelayedEndpoint::Fail(FabricErrc errc, int64_t seq, const std::string& what, const ErrorSite* legSite) {
  if (state_ == State::kFailed) return;
  state_ = State::kFailed;
  FabricError err;
  err.errc = errc;
  err.site.rank = client_->options().rank;
  err.site.peer = peerName_;
  const auto& rails = client_->domain().rails();
  err.site.device = rails.empty() ? "" : rails[0].device;
  err.site.rail = 0;
  if (legSite != nullptr) {
    if (!legSite->device.empty()) err.site.device = legSite->device;
    if (legSite->rail >= 0) err.site.rail = legSite->rail;
    err.site.qp = legSite->qp;
    err.site.qpName = legSite->qpName;
  }
  err.site.seq = seq;
  err.what = what;
  status_ = err.ToStatus();
  std::vector<OutstandingOp> lost;
  lost.reserve(ops_.size());
  for (const Op& op : ops_) lost.push_back({op.type, op.cookie, static_cast<int64_t>(op.opSeq)});
  FailOutstanding(err, lost, OthersRule::kKeepCauseUnlessRefusal, [&](Event e) { events_.push_back(std::move(e)); });
  ops_.clear();
  emitIdx_ = 0;
}

}  // namespace railyard::fabric::relay
