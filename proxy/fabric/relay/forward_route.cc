#include "proxy/fabric/relay/forward_route.h"

#include <algorithm>
#include <cstring>

#include "proxy/fabric/relay/relay_cookie.h"

namespace railyard::fabric::relay {
namespace {

/// The cause a failed Endpoint's sticky Status names (FabricError::ToStatus writes
/// "fabric <NAME>: ..."), so a refused post passes the cause on; kEndpointFailed
/// when the message names none.
FabricErrc CauseOf(const Status& s) {
  const std::string& m = s.message();
  if (m.rfind("fabric ", 0) != 0) return FabricErrc::kEndpointFailed;
  const size_t colon = m.find(':', 7);
  const std::string name = m.substr(7, colon == std::string::npos ? std::string::npos : colon - 7);
  for (uint32_t v = 1; v <= static_cast<uint32_t>(FabricErrc::kVersion); ++v) {
    if (name == FabricErrcName(static_cast<FabricErrc>(v))) return static_cast<FabricErrc>(v);
  }
  return FabricErrc::kEndpointFailed;
}

}  // namespace

ForwardRoute::ForwardRoute(Setup setup) : s_(std::move(setup)) { lastActivity_ = std::chrono::steady_clock::now(); }

ForwardRoute::~ForwardRoute() {
  // The legs first: once they are gone nothing reads or writes the rings.
  down_.reset();
  back_.reset();
}

Status ForwardRoute::Init(std::unique_ptr<Endpoint> back, std::unique_ptr<Endpoint> down) {
  const uint64_t sb = s_.options->slotBytes;
  if (s_.up == s_.down) {
    RY_RETURN_IF_ERROR(up_.Init(s_.slots, sb, {s_.up}, {kAccessLocal | kAccessRemoteWrite}));
    RY_RETURN_IF_ERROR(staging_.Init(s_.returnSlots, sb, {s_.up}, {kAccessLocal}));
  } else {
    RY_RETURN_IF_ERROR(up_.Init(s_.slots, sb, {s_.up, s_.down}, {kAccessLocal | kAccessRemoteWrite, kAccessLocal}));
    RY_RETURN_IF_ERROR(staging_.Init(s_.returnSlots, sb, {s_.up, s_.down}, {kAccessLocal, kAccessLocal}));
  }
  slots_.assign(s_.slots, UpSlot{});
  stage_.assign(s_.returnSlots, Staging{});
  back_ = std::move(back);
  down_ = std::move(down);
  // A leg's peer closing is no fault of this relay's: a down leg's loss goes back to
  // the source as a named Error record (the source's comm WARNs if it lost work), a
  // back leg's means the source went away (a comm closing, a rank ending). INFO here.
  back_->QuietPeerClose();
  down_->QuietPeerClose();
  return Status::Ok();
}

void ForwardRoute::SendOpenOk(uint64_t nonce) {
  Control c;
  c.kind = ControlKind::kOpenOk;
  c.route = s_.clientRoute;
  c.a = s_.id;
  c.b = s_.slots;
  const std::vector<uint8_t> key = up_.region(UpRegion())->Key().Pack();
  const uint16_t kb = static_cast<uint16_t>(key.size());
  c.body.resize(2);
  std::memcpy(c.body.data(), &kb, 2);
  c.body.insert(c.body.end(), key.begin(), key.end());
  c.body.resize(c.body.size() + 8);
  std::memcpy(c.body.data() + 2 + kb, &nonce, 8);
  const std::string name = down_->PeerName();
  c.body.insert(c.body.end(), name.begin(), name.end());
  SendBack(c);
}

void ForwardRoute::SendBack(const Control& c) {
  if (abandoned_ || !back_) return;
  const std::vector<uint8_t> bytes = EncodeControl(c);
  if (!back_->Send(bytes, MakeLegCookie(s_.id, LegTag::kControl, 0)).ok()) Abandon("the leg back to the source failed");
}

void ForwardRoute::Error(FabricErrc errc, uint64_t opSeq, const std::string& what, const ErrorSite* site) {
  if (failed_) return;
  failed_ = true;
  FabricError err;
  err.errc = errc;
  if (site != nullptr) err.site = *site;
  if (site == nullptr) err.site.seq = static_cast<int64_t>(opSeq);
  err.what = what;
  why_ = err.ToString();
  SendBack(MakeErrorControl(s_.clientRoute, opSeq, err));
  errorSent_ = !abandoned_;  // SendBack abandons the route when the record cannot go out
}

void ForwardRoute::Abandon(const std::string& why) {
  if (abandoned_) return;
  abandoned_ = true;
  failed_ = true;
  if (why_.empty()) why_ = why;
}

bool ForwardRoute::Finished() const {
  if (closed_ || abandoned_) return true;
  return failed_ && (!back_ || back_->Outstanding() == 0 || !back_->status().ok());
}

void ForwardRoute::OnSlot(uint32_t slot) {
  if (failed_) return;
  lastActivity_ = std::chrono::steady_clock::now();
  if (slot >= slots_.size() || slots_[slot].arrived || slots_[slot].busy) {
    Error(FabricErrc::kMalformed, 0, "an up slot immediate that is not due (slot " + std::to_string(slot) + ")");
    return;
  }
  slots_[slot].arrived = true;
}

void ForwardRoute::OnControl(const Control& c) {
  if (failed_) return;
  lastActivity_ = std::chrono::steady_clock::now();
  if (c.kind == ControlKind::kClose) {
    closed_ = true;
    return;
  }
  if (c.kind == ControlKind::kReturnCredit && c.a >= returnCredit_ && c.a <= stagingSeq_) {
    returnCredit_ = c.a;
    return;
  }
  Error(FabricErrc::kMalformed, 0, "a control record from the source that is not due (kind " +
                                       std::to_string(static_cast<int>(c.kind)) + ")");
}

bool ForwardRoute::Take(uint32_t idx) {
  const uint8_t* slot = up_.Slot(idx);
  SlotView v;
  Status st = DecodeSlotHeader(slot, up_.slotBytes(), processNext_, &v);
  if (!st.ok()) {
    Error(FabricErrc::kMalformed, 0, st.message());
    return false;
  }
  const SlotHeader& h = v.header;
  UpSlot& u = slots_[idx];
  u = UpSlot{};
  u.busy = true;
  u.opSeq = h.opSeq;
  const uint64_t cookie = MakeLegCookie(s_.id, LegTag::kDown, idx);
  const uint64_t payloadOff = up_.Offset(idx) + kSlotPayloadOffset;
  if (!CheckWriteStream(v)) return false;
  switch (static_cast<SlotKind>(h.kind)) {
    case SlotKind::kWrite: {
      const LocalSlice chunk{up_.region(DownRegion()), payloadOff, h.payloadBytes};
      if ((h.flags & kSlotHasImm) != 0 && h.value > 0) {
        // The last chunk of a Write of several: the target's immediate names the whole Write.
        st = down_->WriteFinal(chunk, v.key, h.addr, cookie, h.imm, h.opBytes);
      } else {
        std::optional<uint32_t> imm;
        if ((h.flags & kSlotHasImm) != 0) imm = h.imm;
        st = down_->Write(chunk, v.key, h.addr, cookie, imm);
      }
      bytesForwarded_ += h.payloadBytes;
      break;
    }
    case SlotKind::kRecord:
      st = down_->Send(std::span<const uint8_t>(slot + kSlotPayloadOffset, h.payloadBytes), cookie);
      break;
    case SlotKind::kFetchAdd:
      u.fetchAdd = true;
      st = down_->FetchAdd(v.key, h.addr, h.value, cookie);
      break;
    case SlotKind::kRead:
      if (h.opBytes == 0) {  // checked at the target all the same; nothing comes back
        st = down_->Read({staging_.region(DownRegion()), 0, 0}, v.key, h.addr, cookie);
        break;
      }
      reading_ = true;
      readIdx_ = idx;
      readKey_ = v.key;
      readAddr_ = h.addr;
      readBytes_ = h.opBytes;
      readOffset_ = 0;
      readOpSeq_ = h.opSeq;
      break;
    case SlotKind::kReadData:
      Error(FabricErrc::kMalformed, h.opSeq, "read data sent towards the target");
      return false;
  }
  if (!st.ok()) {
    Error(CauseOf(st), h.opSeq, "at the relay, the leg to " + NextHopName() + " refused the op: " + st.message());
    return false;
  }
  ++processNext_;
  if (reading_) PostReadChunks();
  return !failed_;
}

bool ForwardRoute::CheckWriteStream(const SlotView& v) {
  const SlotHeader& h = v.header;
  if (static_cast<SlotKind>(h.kind) != SlotKind::kWrite) {
    if (inWrite_) {
      Error(FabricErrc::kMalformed, h.opSeq, "a slot of another op inside the chunks of write op " + std::to_string(write_.opSeq));
      return false;
    }
    run_ = WriteRun{};
    return true;
  }
  if (inWrite_) {
    if (h.opSeq != write_.opSeq || h.opBytes != write_.bytes || h.value != write_.next || h.addr != write_.nextAddr ||
        !(v.key == write_.key)) {
      Error(FabricErrc::kMalformed, h.opSeq,
            "a write chunk that disagrees with its write (op " + std::to_string(h.opSeq) + ", offset " +
                std::to_string(h.value) + " of " + std::to_string(h.opBytes) + " bytes, where op " +
                std::to_string(write_.opSeq) + " offset " + std::to_string(write_.next) + " of " +
                std::to_string(write_.bytes) + " was due)");
      return false;
    }
  } else if (h.value > 0) {
    // A WriteFinal from an upstream relay: its first `value` bytes must be the Writes
    // this route carried just before it, to the same key, ending where it starts.
    if (!run_.valid || !(v.key == run_.key) || h.addr != run_.end || run_.bytes < h.value) {
      Error(FabricErrc::kMalformed, h.opSeq,
            "a write naming " + std::to_string(h.value) + " bytes before it (of " + std::to_string(h.opBytes) +
                ") that this route did not carry just before");
      return false;
    }
  }
  const bool contiguous = run_.valid && v.key == run_.key && h.addr == run_.end;
  run_.bytes = (contiguous ? run_.bytes : 0) + h.payloadBytes;
  run_.end = h.addr + h.payloadBytes;
  if (!contiguous) run_.key = v.key;
  run_.valid = true;
  inWrite_ = (h.flags & kSlotLast) == 0;
  if (inWrite_) {
    write_.opSeq = h.opSeq;
    write_.bytes = h.opBytes;
    write_.next = h.value + h.payloadBytes;
    write_.nextAddr = h.addr + h.payloadBytes;
    write_.key = v.key;
  }
  return true;
}

void ForwardRoute::PostReadChunks() {
  const uint64_t payload = s_.options->PayloadBytes();
  while (reading_ && !failed_) {
    if (stagingSeq_ - returnCredit_ >= stage_.size()) return;  // the source's return slots are full
    const uint32_t j = static_cast<uint32_t>(stagingSeq_ % stage_.size());
    if (stage_[j].state != 0) return;  // its last write-back is still under way
    const uint64_t chunk = std::min(payload, readBytes_ - readOffset_);
    stage_[j] = Staging{1, readIdx_, stagingSeq_, readOpSeq_, readOffset_, chunk, readBytes_};
    Status st = down_->Read({staging_.region(DownRegion()), staging_.Offset(j) + kSlotPayloadOffset, chunk}, readKey_,
                            readAddr_ + readOffset_, MakeLegCookie(s_.id, LegTag::kDownRead, j));
    if (!st.ok()) {
      Error(CauseOf(st), readOpSeq_, "at the relay, the leg to " + NextHopName() + " refused a read: " + st.message());
      return;
    }
    ++slots_[readIdx_].pending;
    ++stagingSeq_;
    readOffset_ += chunk;
    if (readOffset_ == readBytes_) {
      reading_ = false;
      slots_[readIdx_].readAllPosted = true;
    }
  }
}

void ForwardRoute::OnLegEvent(const Event& e) {
  if (failed_) return;
  lastActivity_ = std::chrono::steady_clock::now();
  const uint32_t idx = CookieIndex(e.cookie);
  const LegTag tag = CookieTag(e.cookie);
  if (e.kind == EventKind::kError) {
    if (tag == LegTag::kBack || tag == LegTag::kControl) {
      Abandon("the leg back to the source failed: " + e.error.ToString());
      return;
    }
    const uint64_t opSeq = tag == LegTag::kDown && idx < slots_.size() ? slots_[idx].opSeq
                           : idx < stage_.size()                      ? stage_[idx].opSeq
                                                                      : 0;
    // The next hop's named error, passed through (its site names the hop's device, rail
    // and sequence). An op that failed only because an earlier one did names the
    // earlier one's cause, which the leg's sticky status carries.
    FabricErrc errc = e.error.errc;
    std::string text = e.error.ToString();
    if (errc == FabricErrc::kEndpointFailed && down_ && !down_->status().ok()) {
      errc = CauseOf(down_->status());
      text = down_->status().message();
    }
    Error(errc, opSeq, "at the relay, the leg to " + NextHopName() + " failed: " + text);
    return;
  }
  switch (tag) {
    case LegTag::kDown:
      if (idx >= slots_.size() || !slots_[idx].busy) return;
      if (slots_[idx].fetchAdd) {
        Control c;
        c.kind = ControlKind::kFetchAddResult;
        c.route = s_.clientRoute;
        c.a = slots_[idx].opSeq;
        c.b = e.value;
        SendBack(c);
      }
      slots_[idx].done = true;
      break;
    case LegTag::kDownRead: {
      if (idx >= stage_.size() || stage_[idx].state != 1) return;
      Staging& st = stage_[idx];
      SlotHeader h;
      h.kind = static_cast<uint8_t>(SlotKind::kReadData);
      h.flags = st.offset + st.bytes == st.total ? kSlotLast : 0;
      h.payloadBytes = static_cast<uint32_t>(st.bytes);
      h.slotSeq = st.seq;
      h.opSeq = st.opSeq;
      h.opBytes = st.total;
      h.value = st.offset;
      Status s = EncodeSlotHeader(h, {}, staging_.Slot(idx));
      if (s.ok()) {
        s = back_->Write({staging_.region(UpRegion()), staging_.Offset(idx), kSlotPayloadOffset + st.bytes}, s_.returnKey,
                         s_.returnKey.base + staging_.Offset(idx), MakeLegCookie(s_.id, LegTag::kBack, idx),
                         MakeSlotImmediate(s_.clientRoute, idx));
      }
      if (!s.ok()) {
        Abandon("the leg back to the source refused read data: " + s.message());
        return;
      }
      st.state = 2;
      bytesForwarded_ += st.bytes;
      break;
    }
    case LegTag::kBack: {
      if (idx >= stage_.size() || stage_[idx].state != 2) return;
      UpSlot& u = slots_[stage_[idx].upIdx];
      stage_[idx].state = 0;
      if (--u.pending == 0 && u.readAllPosted) u.done = true;
      break;
    }
    default:
      break;
  }
}

void ForwardRoute::Pump() {
  if (failed_ || closed_) return;
  while (!failed_) {
    if (reading_) {
      PostReadChunks();
      if (reading_) break;
    }
    const uint32_t idx = static_cast<uint32_t>(processNext_ % slots_.size());
    if (!slots_[idx].arrived || slots_[idx].busy) break;
    if (!Take(idx)) return;
  }
  while (released_ < processNext_ && slots_[released_ % slots_.size()].done) {
    slots_[released_ % slots_.size()] = UpSlot{};
    ++released_;
  }
  if (released_ > credited_ && !failed_) {
    Control c;
    c.kind = ControlKind::kCredit;
    c.route = s_.clientRoute;
    c.a = released_;
    credited_ = released_;
    SendBack(c);
  }
}

}  // namespace railyard::fabric::relay
