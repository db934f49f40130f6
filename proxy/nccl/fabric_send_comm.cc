#include "proxy/nccl/fabric_send_comm.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "env/log.h"

namespace railyard::proxy::nccl {

namespace {
/// Cookie bit of the hello and close notices (not a request).
constexpr uint64_t kControlCookie = 1ull << 38;
/// Cookie bit of an eager Write (low bits: its bounce slot; the request is done already).
constexpr uint64_t kBounceCookie = 1ull << 37;
}  // namespace

FabricSendComm::FabricSendComm(CommWorker* cw, size_t deviceIndex, int timeoutMs)
    : cw_(cw), dev_(deviceIndex), timeoutMs_(timeoutMs), fifo_(32) {
  free_.reserve(kMaxRequests);
  for (int i = kMaxRequests - 1; i >= 0; --i) {
    requests_[static_cast<size_t>(i)].owner = this;
    free_.push_back(i);
  }
}

namespace {

/// The mode whose Worker packs addresses opening with `magic` (their first 4 bytes).
std::string ModeOfAddress(const std::vector<uint8_t>& a) {
  const std::string magic = a.size() >= 4 ? std::string(a.begin(), a.begin() + 4) : std::string();
  if (magic == "RYHA") return "fabric mode (the cable set)";
  if (magic == "RYWA") return "the fabric's TCP transport, no fabric mode";
  if (magic == "RYVA") return "the fabric's verbs transport, no fabric mode";
  return "an unknown kind";
}

/// When the peer's address is another kind than this Worker's, the two processes chose
/// different modes (new-user trial: with RAILYARD_FABRIC=auto a host whose one port
/// carries the default route runs plain TCP, its peer fabric mode, and both errors only
/// said "not a ... address"): "; ..." saying so and what to set, else "".
std::string ModeMismatchHint(const std::vector<uint8_t>& mine, const std::vector<uint8_t>& theirs) {
  if (mine.size() < 4 || theirs.size() < 4 || std::equal(mine.begin(), mine.begin() + 4, theirs.begin())) return "";
  return "; the peer runs " + ModeOfAddress(theirs) + " and this process " + ModeOfAddress(mine) +
         ": `auto` settings resolve per host (RAILYARD_FABRIC=auto runs without fabric mode on a host with no fabric "
         "rail, e.g. one whose only port carries the default route; RAILYARD_TRANSPORT=auto runs verbs where an RDMA "
         "port is up, TCP elsewhere): set RAILYARD_FABRIC=on|off and RAILYARD_TRANSPORT=tcp|verbs explicitly, the "
         "same on every host (railyard-info's Mode line says which each host runs)";
}

/// When this process runs without fabric mode and the peer's host is unreachable from
/// here (no cable, no route): "; ..." saying that only fabric mode relays, else "" (new-user
/// trial: "Network is unreachable" and nothing about what would reach the peer).
std::string NoRelayHint(const std::vector<uint8_t>& mine, const std::string& error) {
  const bool plain = mine.size() >= 4 && (std::equal(mine.begin(), mine.begin() + 4, "RYWA") ||
                                          std::equal(mine.begin(), mine.begin() + 4, "RYVA"));
  const bool unreachable = error.find("Network is unreachable") != std::string::npos ||
                           error.find("No route to host") != std::string::npos;
  if (!plain || !unreachable) return "";
  return "; this process runs without fabric mode, where nothing relays: a host with no cable to this one is reached "
         "through the hosts between only with RAILYARD_FABRIC=on (and railyardd on every host)";
}

}  // namespace

Status FabricSendComm::Create(CommWorker* cw, size_t deviceIndex, const FabricHandle& to, const LocalIdentity& self,
                              int timeoutMs, std::shared_ptr<RankSource> rank,
                              std::unique_ptr<FabricSendComm>* out) {
  std::unique_ptr<FabricSendComm> c(new FabricSendComm(cw, deviceIndex, timeoutMs));
  c->rank_ = rank != nullptr ? std::move(rank) : std::make_shared<RankSource>();
  c->peer_.host = to.host;
  c->peer_.pid = to.pid;
  c->peer_.device = cw->device();
  std::memset(c->fifo_.data(), 0, c->fifo_.size() * sizeof(FabricCts));
  auto lock = cw->Lock();
  if (!cw->running()) return InvalidUsage("connect: the plugin's fabric worker is stopped (finalize ran)");
  RY_RETURN_IF_ERROR(cw->domain().Register(c->fifo_.data(), c->fifo_.size() * sizeof(FabricCts),
                                           fabric::kAccessLocal | fabric::kAccessRemoteWrite, fabric::MemoryKind::kHost,
                                           &c->fifoRegion_));
  if (Status s = cw->worker().Connect(to.address, &c->ep_); !s.ok()) {
    return InvalidUsage("connect to " + c->peer_.ToString() + ": the handle's worker address: " + s.message() +
                        ModeMismatchHint(cw->worker().Address(), to.address) +
                        NoRelayHint(cw->worker().Address(), s.message()));
  }
  c->peer_.address = c->ep_->PeerName();
  c->peerWorkers_.SetLimit(c->ep_->Routes());
  RY_RETURN_IF_ERROR(cw->AddClient(c.get(), &c->id_));
  c->registered_ = true;
  Hello h;
  h.listenId = to.listenId;
  h.sendCommId = c->id_;
  h.pid = self.pid;
  h.host = self.host;
  h.fifoKey = c->fifoRegion_->Key().Pack();
  h.address = cw->worker().Address();
  RY_RETURN_IF_ERROR(c->ep_->Send(EncodeHello(h), (uint64_t{c->id_} << kCookieCommShift) | kControlCookie));
  cw->DriveLocked();
  *out = std::move(c);
  return Status::Ok();
}

FabricSendComm::~FabricSendComm() { Close(); }

Status FabricSendComm::Established(bool* done) {
  *done = false;
  auto lock = cw_->Lock();
  cw_->DriveLocked();
  RY_RETURN_IF_ERROR(CheckEndpoint());
  *done = helloAcked_;
  return Status::Ok();
}

void FabricSendComm::Poisoned(const Status& s) {
  // A peer that goes away with nothing in flight is the normal end of a job: INFO.
  const bool inFlight = free_.size() < static_cast<size_t>(kMaxRequests) || waiting_;
  // Never heard from the receiver: the connection itself failed.
  const std::string what = std::string(peerWorkers_.size() == 0 ? "connect: send comm (" : "send comm (") + rank_->Text() + ") to ";
  // The message sequence the comm was at (the receive the next send matches), named
  // in every comm error: a fault heard as a broken connection carries no op's seq.
  poison_.Set(Status(s.code(), what + peer_.ToString() + ", message seq " + std::to_string(matcher_.NextSeq()) + ": " +
                                   s.message()),
              inFlight);
}

Status FabricSendComm::CheckEndpoint() {
  if (!poison_.IsSet() && ep_ != nullptr && !ep_->status().ok()) Poisoned(ep_->status());
  return poison_.Get();
}

Status FabricSendComm::Isend(const void*, size_t, int, MemoryRegion*, Request**) {
  return InternalError("fabric send comm: isend without a MemHandle (plugin routing bug)");
}

Status FabricSendComm::IsendFabric(const void* data, size_t size, int tag, const MemHandle* mh, Request** request) {
  *request = nullptr;
  auto lock = cw_->Lock();
  if (closed_) return InvalidUsage("isend on a closed comm");
  // A clear-to-send already taken in (by an earlier pass) matches without another
  // Progress pass: the data leaves one epoll_wait and one pass sooner.
  bool drove = false;
  if (matcher_.Pending() == 0) {
    cw_->DriveLocked();
    drove = true;
  }
  RY_RETURN_IF_ERROR(CheckEndpoint());
  const uint64_t addr = reinterpret_cast<uint64_t>(data);
  fabric::LocalSlice src;
  if (size > 0) {
    src.region = mh != nullptr ? mh->RegionFor(dev_, addr, size) : nullptr;
    if (src.region == nullptr) {
      return InvalidArgument("isend of " + std::to_string(size) + " bytes at " + std::to_string(addr) +
                             " outside its registration (regMr it first)");
    }
    src.offset = addr - src.region->base;
    src.bytes = size;
  } else {
    src.region = fifoRegion_;  // a 0-byte Write needs some local region
  }
  if (free_.empty()) return InternalError("more than " + std::to_string(kMaxRequests) + " sends in flight");
  SendMatch m;
  bool found = false;
  RY_RETURN_IF_ERROR(matcher_.Match(tag, size, &m, &found));
  if (!found && !drove) {
    // The pending receive has no buffer of this tag yet: take in what arrived.
    cw_->DriveLocked();
    RY_RETURN_IF_ERROR(CheckEndpoint());
    RY_RETURN_IF_ERROR(matcher_.Match(tag, size, &m, &found));
  }
  if (!found) {
    const auto now = Clock::now();
    if (!waiting_) {
      waiting_ = true;
      waitingSince_ = now;
    } else if (now - std::max(waitingSince_, created_) > std::chrono::milliseconds(timeoutMs_) &&
               matcher_.Pending() == 0 && peerWorkers_.size() == 0) {
      // Never heard from the receiver: the listener is gone or never accepted.
      Poisoned(RemoteError("no clear-to-send from the receiver within " + std::to_string(timeoutMs_) +
                           " ms of connecting (listener closed, or it never accepted)"));
      return poison_.Get();
    }
    return Status::Ok();
  }
  waiting_ = false;
  const int idx = free_.back();
  SendRequest& r = requests_[static_cast<size_t>(idx)];
  const uint32_t cell = static_cast<uint32_t>((m.seq % 32) * kMaxRecvs + m.slot);
  const uint32_t imm = (peerCommId_ << kImmCommShift) | cell;
  const int bounce = size > 0 && size <= kEagerBytes ? TakeBounce(data, size, &src) : -1;
  const uint64_t cookie = (uint64_t{id_} << kCookieCommShift) |
                          (bounce >= 0 ? kBounceCookie | static_cast<uint64_t>(bounce) : static_cast<uint64_t>(idx));
  // An eager Write's kDone only frees its bounce slot: it may come late, batched
  // (WriteLazy: no ack syscall per op), while half the slots are still free; below
  // that the Write asks for its ack now, and that ack's bound frees the earlier ones.
  const bool lazy = bounce >= 0 && bounceFree_.size() >= static_cast<size_t>(kEagerSlots / 2);
  const fabric::RemoteKey& key = keys_[m.seq % 32][m.slot];
  if (Status s = lazy ? ep_->WriteLazy(src, key, m.entry.addr, cookie, imm) : ep_->Write(src, key, m.entry.addr, cookie, imm);
      !s.ok()) {
    if (bounce >= 0) bounceFree_.push_back(bounce);
    return s;
  }
  free_.pop_back();
  r.inUse = true;
  r.done = bounce >= 0;  // eager: the data is in the bounce slot, NCCL's buffer is free
  r.size = size;
  r.error = Status::Ok();
  cw_->DriveLocked();  // the Write goes out now, not at the next call
  rank_->Note(tag);
  NoteLocalRank(tag);  // for the older comms' process-wide guess
  *request = &r;
  return Status::Ok();
}

Status FabricSendComm::Test(Request* request, int* done, int* sizes) {
  auto* r = static_cast<SendRequest*>(request);
  *done = 0;
  auto lock = cw_->Lock();
  if (!r->inUse) return InvalidUsage("test of a send request that is not in flight");
  if (!r->done) {
    cw_->DriveLocked();
    if (!r->done) {
      RY_RETURN_IF_ERROR(CheckEndpoint());
      return Status::Ok();
    }
  }
  if (!r->error.ok()) return r->error;
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(r->size);
  r->inUse = false;
  free_.push_back(static_cast<int>(r - requests_.data()));
  return Status::Ok();
}

int FabricSendComm::TakeBounce(const void* data, size_t size, fabric::LocalSlice* src) {
  if (bounce_.empty() && !bounceFailed_) {
    bounce_.resize(kEagerSlots * kEagerBytes);
    Status s = cw_->domain().Register(bounce_.data(), bounce_.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost,
                                      &bounceRegion_);
    if (!s.ok()) {
      RY_INFO(log::kNet, "send comm to %s: no eager slots (%s)", peer_.ToString().c_str(), s.message().c_str());
      bounce_.clear();
      bounceFailed_ = true;
      return -1;
    }
    for (int i = kEagerSlots - 1; i >= 0; --i) bounceFree_.push_back(i);
  }
  if (bounceFree_.empty()) return -1;
  const int slot = bounceFree_.back();
  bounceFree_.pop_back();
  const uint64_t offset = static_cast<uint64_t>(slot) * kEagerBytes;
  if (size > 0) std::memcpy(bounce_.data() + offset, data, size);  // a 0-byte send may carry NULL
  *src = fabric::LocalSlice{bounceRegion_, offset, size};
  return slot;
}

void FabricSendComm::OnCts(const fabric::Event& e) {
  const uint32_t idx = static_cast<uint32_t>(e.value & 0xff);
  if (idx >= 32 || e.bytes > sizeof(FabricCts)) {
    Poisoned(RemoteError("clear-to-send immediate 0x" + std::to_string(e.value) + " of " + std::to_string(e.bytes) +
                         " bytes names no FIFO slot"));
    return;
  }
  if (!peerWorkers_.Admit(e.peer)) {
    Poisoned(RemoteError("clear-to-send from another worker than the receiver's (" +
                         std::to_string(peerWorkers_.size()) + " of its " + std::to_string(peerWorkers_.limit()) +
                         " routes heard from already; in fabric mode, RAILYARD_FABRIC_TCP_RELAY must be the same "
                         "on every host)"));
    return;
  }
  FabricCts rec;
  std::memcpy(&rec, &fifo_[idx], sizeof rec);
  CtsRecord plain;
  std::array<fabric::RemoteKey, kMaxRecvs>& keys = keys_[idx];
  fabric::RemoteKey parsed[kMaxRecvs];
  Status s = DecodeCts(rec, e.bytes, &plain, parsed);
  if (s.ok() && rec.seq % 32 != idx) s = RemoteError("clear-to-send seq " + std::to_string(rec.seq) + " in FIFO slot " + std::to_string(idx));
  if (s.ok() && peerCommId_ != 0 && rec.recvCommId != peerCommId_) {
    s = RemoteError("clear-to-send names receive comm " + std::to_string(rec.recvCommId) + ", expected " +
                    std::to_string(peerCommId_));
  }
  if (s.ok() && (rec.recvCommId == 0 || rec.recvCommId > kMaxCommId)) s = RemoteError("clear-to-send names comm 0");
  if (s.ok()) s = matcher_.Push(plain);
  if (!s.ok()) {
    Poisoned(s);
    return;
  }
  peerCommId_ = rec.recvCommId;
  for (uint32_t i = 0; i < rec.n; ++i) keys[i] = std::move(parsed[i]);
}

void FabricSendComm::OnEvent(const fabric::Event& e) {
  using fabric::EventKind;
  if (e.kind == EventKind::kImmediate) return OnCts(e);
  if (e.kind == EventKind::kRecord) {
    peerClosed_ = true;
    Poisoned(RemoteError("the receiver closed the comm"));
    return;
  }
  if (e.op == fabric::OpType::kNone) {
    Poisoned(e.error.ToStatus());
    return;
  }
  if ((e.cookie & kControlCookie) != 0) {
    if (e.kind == EventKind::kError) Poisoned(e.error.ToStatus());
    if (e.kind == EventKind::kDone && !helloAcked_) {  // the hello (the first control record)
      helloAcked_ = true;
      // No rank yet: NCCL's tags name it from the first isend on.
      RY_INFO(log::kNet, "send comm connected to %s", peer_.ToString().c_str());
    }
    return;
  }
  if ((e.cookie & kBounceCookie) != 0) {
    // An eager send's Write: its request completed at isend; a failure fails the comm.
    bounceFree_.push_back(static_cast<int>(e.cookie & 0xff));
    if (e.kind == EventKind::kError) Poisoned(e.error.ToStatus());
    return;
  }
  const uint64_t idx = e.cookie & ((1ull << kCookieCommShift) - 1);
  if (idx >= requests_.size() || !requests_[idx].inUse) return;
  SendRequest& r = requests_[idx];
  r.done = true;
  if (e.kind == EventKind::kError) {
    r.error = Status(e.error.ToStatus().code(),
                     "send comm (" + rank_->Text() + ") to " + peer_.ToString() + ": " + e.error.ToString());
    Poisoned(e.error.ToStatus());
  }
}

void FabricSendComm::Close() {
  auto lock = cw_->Lock();
  if (closed_) return;
  closed_ = true;
  if (ep_ != nullptr && cw_->running()) {
    ep_->QuietPeerClose();  // the receiver may close at the same moment: its reset is no fault
    if (peerClosed_) {
      // The receiver closed first and is tearing down: a notice now would reach a socket
      // it may close unread (a reset, and a WARN here for the notice outstanding).
      RY_INFO(log::kNet, "send comm (%s) to %s: the receiver closed first; no close notice sent",
              rank_->Text().c_str(), peer_.ToString().c_str());
    } else if (ep_->status().ok() && peerCommId_ != 0) {
      // Tell the receiver (it may wait for data that will never come). Bounded: a
      // notice queued behind large Writes is dropped with the Endpoint, and the
      // receiver hears the broken connection instead. The receiver's own notice
      // arriving meanwhile (both closed at once) ends the wait: it is going away.
      (void)ep_->Send(EncodeClose({peerCommId_}), (uint64_t{id_} << kCookieCommShift) | kControlCookie);
      const auto until = Clock::now() + std::chrono::milliseconds(50);
      while (ep_->status().ok() && ep_->Outstanding() > 0 && !peerClosed_ && Clock::now() < until) cw_->DriveLocked();
    }
  }
  if (registered_) cw_->RemoveClient(id_);
  registered_ = false;
  ep_.reset();
  if (fifoRegion_ != nullptr) (void)cw_->domain().Deregister(fifoRegion_);
  fifoRegion_ = nullptr;
  if (bounceRegion_ != nullptr) (void)cw_->domain().Deregister(bounceRegion_);
  bounceRegion_ = nullptr;
}

}  // namespace railyard::proxy::nccl
