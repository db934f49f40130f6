// GinComm's data operations: Put, PutSignal, Get, Flush, Test, Progress. Every
// argument is checked before anything is posted (nothing is written on bad input).
#include "proxy/gin/gin_comm.h"

namespace railyard::gin {
namespace {

std::string Num(uint64_t v) { return std::to_string(v); }

}  // namespace

Status GinComm::FindWindowLocked(uint64_t handle, const char* role, const Window** out) const {
  auto it = windows_.find(handle);
  if (it == windows_.end()) {
    return InvalidArgument("GIN rank " + std::to_string(rank_) + ": unknown " + role + " handle " +
                           Num(handle) + " (not a live window of this comm)");
  }
  *out = &it->second;
  return Status::Ok();
}

Request* GinComm::NewRequestLocked(RequestKind kind, uint32_t peer) {
  auto* r = new Request;
  r->kind = kind;
  r->peer = peer;
  r->seq = ++peerSeq_[peer];
  r->number = ++nextRequest_;
  r->posted = std::chrono::steady_clock::now();
  live_.insert(r);
  if (kind != RequestKind::kFlush) outstandingNumbers_.insert(r->number);
  return r;
}

void GinComm::PostOpLocked(Request* req, fabric::OpType type, uint64_t cookie) {
  ops_[cookie] = OpInfo{req, type, req->peer};
  ++req->pendingOps;
  if (type == fabric::OpType::kRead || type == fabric::OpType::kFetchAdd) ++unorderedOutstanding_[req->peer];
}

Status GinComm::Put(uint64_t srcOff, uint64_t srcHandle, uint64_t size, uint64_t dstOff, uint64_t dstHandle,
                    uint32_t peer, Request** out) {
  return PutSignal(srcOff, srcHandle, size, dstOff, dstHandle, peer, 0, 0, 0, 0, false, out);
}

Status GinComm::PutSignal(uint64_t srcOff, uint64_t srcHandle, uint64_t size, uint64_t dstOff,
                          uint64_t dstHandle, uint32_t peer, uint64_t signalOff, uint64_t signalHandle,
                          uint64_t value, uint32_t op, bool strong, Request** out) {
  const bool withSignal = op != 0;
  const char* call = withSignal ? "iputSignal" : "iput";
  if (out == nullptr) return InvalidArgument(std::string("GIN ") + call + ": request out-pointer is NULL");
  *out = nullptr;
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  if (peer >= uint32_t(nranks_)) {
    return InvalidArgument("GIN " + std::string(call) + " on rank " + std::to_string(rank_) + ": peer rank " +
                           Num(peer) + " outside 0.." + std::to_string(nranks_ - 1));
  }
  const Window* src = nullptr;
  const Window* dst = nullptr;
  if (size > 0) {
    RY_RETURN_IF_ERROR(FindWindowLocked(srcHandle, "source", &src));
    RY_RETURN_IF_ERROR(FindWindowLocked(dstHandle, "destination", &dst));
    if (!src->LocalContains(srcOff, size)) {
      return InvalidArgument(Where(peer) + ": " + call + " source [" + Num(srcOff) + ", +" + Num(size) +
                             ") outside the " + Num(src->bytes) + "-byte window " + Num(srcHandle));
    }
    if (!dst->RemoteContains(peer, dstOff, size)) {
      return InvalidArgument(Where(peer) + ": " + call + " destination [" + Num(dstOff) + ", +" + Num(size) +
                             ") outside peer's " + Num(dst->keys[peer].length) + "-byte window " +
                             Num(dstHandle));
    }
  }
  const Window* sig = nullptr;
  if (withSignal) {
    if (op != kSignalOpInc && op != kSignalOpAdd) {
      return InvalidArgument(Where(peer) + ": iputSignal with unknown signal op " + std::to_string(op));
    }
    RY_RETURN_IF_ERROR(FindWindowLocked(signalHandle, "signal", &sig));
    if (signalOff % 8 != 0 || !sig->RemoteContains(peer, signalOff, 8)) {
      return InvalidArgument(Where(peer) + ": iputSignal signal offset " + Num(signalOff) +
                             (signalOff % 8 ? " is not 8-byte aligned" : " outside peer's " +
                                                  Num(sig->keys[peer].length) + "-byte window ") +
                             (signalOff % 8 ? "" : Num(signalHandle)));
    }
  }
  fabric::Endpoint& ep = *endpoints_[peer];
  Request* req = NewRequestLocked(withSignal ? RequestKind::kPutSignal : RequestKind::kPut, peer);
  Status s = Status::Ok();
  if (size > 0) {
    const fabric::LocalSlice slice{src->region, src->localBase - src->region->base + srcOff, size};
    const uint64_t cookie = NextCookieLocked();
    s = ep.Write(slice, dst->keys[peer], dst->keys[peer].base + dstOff, cookie);
    if (s.ok()) PostOpLocked(req, fabric::OpType::kWrite, cookie);
  }
  if (s.ok() && withSignal) {
    if ((strong || sig->forceSo()) && unorderedOutstanding_[peer] > 0) {
      const uint64_t cookie = NextCookieLocked();
      s = ep.Fence(cookie);
      if (s.ok()) PostOpLocked(req, fabric::OpType::kFence, cookie);
    }
    if (s.ok()) {
      const uint64_t cookie = NextCookieLocked();
      const uint64_t add = op == kSignalOpInc ? 1 : value;
      s = ep.FetchAdd(sig->keys[peer], sig->keys[peer].base + signalOff, add, cookie);
      if (s.ok()) PostOpLocked(req, fabric::OpType::kFetchAdd, cookie);
    }
  }
  if (!s.ok()) {
    // The Endpoint has failed (sticky): the request stays live and fails in test.
    (void)PoisonLocked(Status(s.code(), Where(peer) + ": " + call + " seq " + Num(req->seq) + ": " + s.message()));
  }
  if (req->pendingOps == 0) outstandingNumbers_.erase(req->number);
  *out = req;
  return Status::Ok();
}

Status GinComm::Get(uint64_t remoteOff, uint64_t remoteHandle, uint64_t size, uint64_t localOff,
                    uint64_t localHandle, uint32_t peer, Request** out) {
  if (out == nullptr) return InvalidArgument("GIN iget: request out-pointer is NULL");
  *out = nullptr;
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  if (peer >= uint32_t(nranks_)) {
    return InvalidArgument("GIN iget on rank " + std::to_string(rank_) + ": peer rank " + Num(peer) +
                           " outside 0.." + std::to_string(nranks_ - 1));
  }
  const Window* remote = nullptr;
  const Window* local = nullptr;
  if (size > 0) {
    RY_RETURN_IF_ERROR(FindWindowLocked(remoteHandle, "remote", &remote));
    RY_RETURN_IF_ERROR(FindWindowLocked(localHandle, "local", &local));
    if (!remote->RemoteContains(peer, remoteOff, size)) {
      return InvalidArgument(Where(peer) + ": iget source [" + Num(remoteOff) + ", +" + Num(size) +
                             ") outside peer's " + Num(remote->keys[peer].length) + "-byte window " +
                             Num(remoteHandle));
    }
    if (!local->LocalContains(localOff, size)) {
      return InvalidArgument(Where(peer) + ": iget destination [" + Num(localOff) + ", +" + Num(size) +
                             ") outside the " + Num(local->bytes) + "-byte window " + Num(localHandle));
    }
  }
  Request* req = NewRequestLocked(RequestKind::kGet, peer);
  if (size > 0) {
    const fabric::LocalSlice slice{local->region, local->localBase - local->region->base + localOff, size};
    const uint64_t cookie = NextCookieLocked();
    Status s = endpoints_[peer]->Read(slice, remote->keys[peer], remote->keys[peer].base + remoteOff, cookie);
    if (s.ok()) {
      PostOpLocked(req, fabric::OpType::kRead, cookie);
    } else {
      (void)PoisonLocked(Status(s.code(), Where(peer) + ": iget seq " + Num(req->seq) + ": " + s.message()));
    }
  }
  if (req->pendingOps == 0) outstandingNumbers_.erase(req->number);
  *out = req;
  return Status::Ok();
}

Status GinComm::Flush(uint32_t peer, Request** out) {
  if (out == nullptr) return InvalidArgument("GIN iflush: request out-pointer is NULL");
  *out = nullptr;
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  if (peer >= uint32_t(nranks_)) {
    return InvalidArgument("GIN iflush on rank " + std::to_string(rank_) + ": rank " + Num(peer) +
                           " outside 0.." + std::to_string(nranks_ - 1));
  }
  Request* req = NewRequestLocked(RequestKind::kFlush, peer);
  req->flushUntil = req->number;
  *out = req;
  return Status::Ok();
}

Status GinComm::Test(Request* request, bool* done) {
  if (done == nullptr) return InvalidArgument("GIN test: done out-pointer is NULL");
  *done = false;
  std::lock_guard lock(mu_);
  if (request == nullptr || live_.count(request) == 0 || request->magic != Request::kMagic) {
    return InvalidArgument("GIN test on rank " + std::to_string(rank_) + ": unknown request");
  }
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  PumpLocked();
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  bool complete = request->pendingOps == 0;
  if (request->kind == RequestKind::kFlush) {
    complete = outstandingNumbers_.empty() || *outstandingNumbers_.begin() >= request->flushUntil;
  }
  if (!complete) {
    const auto age = std::chrono::steady_clock::now() - request->posted;
    if (age > std::chrono::milliseconds(options_.timeoutMs)) {
      return PoisonLocked(SystemError(
          Where(request->peer) + " rails " + RailsText() + ": " + RequestKindName(request->kind) + " seq " +
          Num(request->seq) + " not complete after " + std::to_string(options_.timeoutMs) +
          " ms (RAILYARD_TIMEOUT_MS); the comm is poisoned"));
    }
    return Status::Ok();
  }
  *done = true;
  live_.erase(request);
  request->magic = 0;
  delete request;
  return Status::Ok();
}

Status GinComm::Progress() {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(CheckUsableLocked());
  PumpLocked();
  return poison_;
}

}  // namespace railyard::gin
