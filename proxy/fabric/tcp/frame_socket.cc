#include "proxy/fabric/tcp/frame_socket.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "proxy/wire.h"

namespace railyard::fabric::tcp {
namespace {

constexpr uint64_t kMaxSyscallBytes = 4ull << 20;
constexpr size_t kScratchBytes = 64 * 1024;
const char kZeros[kScratchBytes] = {};

FabricError SocketError(int err, const char* what) {
  FabricError e;
  e.errc = (err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ECONNABORTED || err == ETIMEDOUT)
               ? FabricErrc::kPeerClosed
               : FabricErrc::kSystem;
  e.what = std::string(what) + ": " + proxy::ErrnoText(err);
  return e;
}

}  // namespace

FrameSocket::FrameSocket(proxy::Fd fd, int index, Direction incoming, bool connecting)
    : fd_(std::move(fd)), index_(index), incoming_(incoming), connecting_(connecting) {}

FabricError FrameSocket::Open(const DialPlan& plan, int index, Direction incoming,
                              std::unique_ptr<FrameSocket>* out) {
  std::unique_ptr<FrameSocket> s(new FrameSocket(proxy::Fd(), index, incoming, true));
  s->dialer_.emplace(plan);
  FabricError e = s->dialer_->Start(&s->fd_);
  if (!e.ok()) return e;
  *out = std::move(s);
  return {};
}

uint64_t FrameSocket::UnackedBytes() const {
  int n = 0;
  if (!fd_.valid() || ::ioctl(fd_.get(), SIOCOUTQ, &n) != 0 || n < 0) return 0;
  return static_cast<uint64_t>(n);
}

FabricError FrameSocket::Pump(FrameHandler& handler, uint64_t budget, PumpResult* result, bool readable) {
  if (connecting_ && Redialing()) {
    if (!dialer_->Due()) return {};
    FabricError e = dialer_->Start(&fd_);
    if (!e.ok()) return e;
    if (!fd_.valid()) return {};  // refused again at once: waiting for the next dial
    result->dialed = true;
  }
  if (!fd_.valid()) return {FabricErrc::kPeerClosed, {}, "socket already closed"};
  if (connecting_) {
    pollfd p{fd_.get(), POLLOUT, 0};
    const int n = ::poll(&p, 1, 0);
    if (n < 0 && errno != EINTR) return SocketError(errno, "poll during connect");
    if (n <= 0) return {};
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      if (!dialer_) {
        FabricError e = SocketError(err, "connect");
        e.errc = FabricErrc::kConnectFailed;
        return e;
      }
      FabricError e = dialer_->Failed(err);
      if (!e.ok()) return e;
      fd_.Reset();  // refused: dialed again once the backoff passed
      return {};
    }
    connecting_ = false;
    if (dialer_ && !dialer_->plan().preamble.empty()) {
      // A few dozen bytes on a socket that has sent nothing: the send buffer takes them whole.
      const std::vector<uint8_t>& pre = dialer_->plan().preamble;
      ssize_t went;
      do {
        went = ::send(fd_.get(), pre.data(), pre.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      } while (went < 0 && errno == EINTR);
      if (went < 0) return SocketError(errno, ("send the relay record to " + dialer_->plan().via).c_str());
      if (static_cast<size_t>(went) != pre.size()) {
        return {FabricErrc::kSystem, {}, "send the relay record to " + dialer_->plan().via + ": only " +
                                            std::to_string(went) + " of " + std::to_string(pre.size()) + " bytes went"};
      }
    }
  }
  FabricError e = PumpOut(handler, budget, result);
  if (!e.ok()) return RefusalBehind(handler, std::move(e), result);
  if (!readable) return e;
  const size_t queued = out_.size();
  e = PumpIn(handler, budget, result);
  // What the received frames queued (acks, read data) goes out in this pass, not
  // the next: a round trip costs one Progress less.
  if (e.ok() && out_.size() > queued) e = PumpOut(handler, budget, result);
  return e;
}

FabricError FrameSocket::RefusalBehind(FrameHandler& handler, FabricError sendFailed, PumpResult* result) {
  const bool relayed = dialer_ && !dialer_->plan().preamble.empty();
  if (!relayed || framed_ || sendFailed.errc != FabricErrc::kPeerClosed || !fd_.valid()) return sendFailed;
  // A relay that refuses writes its reason and closes; a frame sent after the
  // preamble can meet the close (EPIPE, ECONNRESET) before the reason is read.
  // The reason is still in the receive queue: what the peer sent is read before
  // the reset is reported.
  FabricError refused = PumpIn(handler, sizeof(proxy::RejectRecord), result);
  return refused.errc == FabricErrc::kConnectFailed ? refused : sendFailed;
}

FabricError FrameSocket::PumpOut(FrameHandler& handler, uint64_t budget, PumpResult* result) {
  uint64_t moved = 0;
  while (!out_.empty() && moved < budget) {
    OutFrame& f = out_.front();
    if (f.pin && outSent_ == 0 && !f.pin->Alive()) {
      // Its Region went away before a byte of it left: the frame is dropped.
      OutFrame dropped = std::move(f);
      out_.pop_front();
      FabricError e = handler.OnWritten(index_, dropped, false);
      if (!e.ok()) return e;
      continue;
    }
    const uint64_t total = sizeof(FrameHeader) + f.header.payloadBytes;
    iovec iov[2];
    int n = 0;
    if (outSent_ < sizeof(FrameHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&f.header) + outSent_, sizeof(FrameHeader) - outSent_};
    }
    const uint64_t payloadSent = outSent_ > sizeof(FrameHeader) ? outSent_ - sizeof(FrameHeader) : 0;
    const uint64_t payloadLeft = f.header.payloadBytes - payloadSent;
    const char* src = f.payload != nullptr ? f.payload : reinterpret_cast<const char*>(f.owned.data());
    ssize_t sent = -1;
    int err = 0;
    auto send = [&](const char* from, uint64_t cap) {
      int m = n;
      if (payloadLeft > 0) {
        iov[m++] = {const_cast<char*>(from), static_cast<size_t>(std::min({payloadLeft, cap, budget - moved}))};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(m);
      do {
        sent = ::sendmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      } while (sent < 0 && errno == EINTR);
      err = sent < 0 ? errno : 0;
    };
    if (payloadLeft > 0 && outDead_) {
      send(kZeros, kScratchBytes);
    } else if (payloadLeft > 0 && f.pin) {
      if (!f.pin->WithLive([&] { send(src + payloadSent, kMaxSyscallBytes); })) {
        outDead_ = true;
        continue;  // the rest goes out as zeros
      }
    } else {
      send(src + payloadSent, kMaxSyscallBytes);
    }
    if (sent < 0) {
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      return SocketError(err, "send");
    }
    outSent_ += static_cast<uint64_t>(sent);
    moved += static_cast<uint64_t>(sent);
    result->bytesOut += static_cast<uint64_t>(sent);
    if (outSent_ == total) {
      OutFrame done = std::move(f);
      const bool intact = !outDead_;
      out_.pop_front();
      outSent_ = 0;
      outDead_ = false;
      FabricError e = handler.OnWritten(index_, done, intact);
      if (!e.ok()) return e;
    }
  }
  return {};
}

FabricError FrameSocket::HeaderArrived(FrameHandler& handler) {
  inGot_ = 0;
  Status s = DecodeFrameHeader(inHeader_, incoming_, &inFrame_);
  if (!s.ok() && dialer_ && !dialer_->plan().preamble.empty()) {
    // Through a relay, a record of the relay's own protocol instead of a frame is its
    // refusal (proxy/wire.h RejectRecord: header, then the reason; the first bytes of it
    // are in this header's room, the rest follows in the same send: taken when it has
    // arrived, so the reason is not cut at the frame header's size).
    proxy::RecordHeader h;
    std::memcpy(&h, inHeader_, sizeof h);
    if (h.magic == proxy::kMagic && h.kind == static_cast<uint16_t>(proxy::RecordKind::kReject)) {
      proxy::RejectRecord r{};
      static_assert(sizeof r > sizeof inHeader_);
      std::memcpy(&r, inHeader_, sizeof inHeader_);
      auto* rest = reinterpret_cast<char*>(&r) + sizeof inHeader_;
      const size_t want = sizeof r - sizeof inHeader_;
      size_t got = std::min(want, inBufLen_ - inBufPos_);  // the read-ahead first
      std::memcpy(rest, inBuf_.data() + inBufPos_, got);
      inBufPos_ += got;
      while (got < want) {
        const ssize_t n = ::recv(fd_.get(), rest + got, want - got, MSG_DONTWAIT);
        if (n <= 0) break;  // what has arrived is all there is to say
        got += static_cast<size_t>(n);
      }
      r.reason[sizeof r.reason - 1] = '\0';
      std::string reason(r.reason, std::strlen(r.reason));
      return {FabricErrc::kConnectFailed, {}, "the relay " + dialer_->plan().via + " refused the socket: " + reason};
    }
  }
  if (!s.ok()) {
    return {s.code() == Code::kInvalidUsage ? FabricErrc::kVersion : FabricErrc::kMalformed, {}, s.message()};
  }
  framed_ = true;
  inSink_ = Sink{};
  inDone_ = 0;
  inIntact_ = true;
  FabricError e = handler.OnHeader(index_, inFrame_, &inSink_);
  if (!e.ok()) return e;
  if (inFrame_.payloadBytes == 0) return handler.OnPayload(index_, inFrame_, true);
  if (inSink_.buffer != nullptr) inSink_.buffer->resize(inFrame_.payloadBytes);
  inPayload_ = true;
  return {};
}

void FrameSocket::DeliverBuffered(const uint8_t* from, uint64_t n) {
  if (inSink_.dst != nullptr && inIntact_) {
    if (inSink_.pin) {
      // Same rule as a recv() into the Region: only while it is registered.
      if (!inSink_.pin->WithLive([&] { std::memcpy(inSink_.dst + inDone_, from, n); })) inIntact_ = false;
    } else {
      std::memcpy(inSink_.dst + inDone_, from, n);
    }
  } else if (inSink_.buffer != nullptr) {
    std::memcpy(inSink_.buffer->data() + inDone_, from, n);
  }  // else: drained and dropped
  inDone_ += n;
}

FabricError FrameSocket::PayloadDone(FrameHandler& handler) {
  inPayload_ = false;
  inSink_ = Sink{};
  return handler.OnPayload(index_, inFrame_, inIntact_);
}

FabricError FrameSocket::PumpIn(FrameHandler& handler, uint64_t budget, PumpResult* result) {
  uint64_t moved = 0;
  bool drained = false;  // a recv() came back short: nothing more is queued right now
  while (fd_.valid()) {
    // Read-ahead bytes first, frame by frame.
    if (inBufPos_ < inBufLen_) {
      const size_t avail = inBufLen_ - inBufPos_;
      FabricError e;
      if (!inPayload_) {
        const size_t take = std::min(avail, sizeof inHeader_ - inGot_);
        std::memcpy(inHeader_ + inGot_, inBuf_.data() + inBufPos_, take);
        inGot_ += take;
        inBufPos_ += take;
        if (inGot_ == sizeof inHeader_) e = HeaderArrived(handler);
      } else {
        const uint64_t take = std::min<uint64_t>(avail, inFrame_.payloadBytes - inDone_);
        DeliverBuffered(inBuf_.data() + inBufPos_, take);
        inBufPos_ += static_cast<size_t>(take);
        if (inDone_ == inFrame_.payloadBytes) e = PayloadDone(handler);
      }
      if (!e.ok()) return e;
      continue;
    }
    inBufPos_ = inBufLen_ = 0;
    if (drained || moved >= budget) break;
    ssize_t got = -1;
    int err = 0;
    uint64_t asked = 0;
    auto recv = [&](void* into, uint64_t bytes) {
      asked = bytes;
      do {
        got = ::recv(fd_.get(), into, static_cast<size_t>(bytes), MSG_DONTWAIT);
      } while (got < 0 && errno == EINTR);
      err = got < 0 ? errno : 0;
    };
    const uint64_t left = inPayload_ ? inFrame_.payloadBytes - inDone_ : 0;
    const bool readAhead = !inPayload_ || left < kReadAhead;
    if (readAhead) {
      // A header (and what follows it), or the short rest of a payload (and the next header).
      if (inBuf_.empty()) inBuf_.resize(kReadAhead + sizeof(FrameHeader));
      recv(inBuf_.data(), inBuf_.size());
    } else {
      const uint64_t cap = std::min({left, kMaxSyscallBytes, budget - moved});
      if (inSink_.dst != nullptr && inIntact_) {
        if (inSink_.pin) {
          if (!inSink_.pin->WithLive([&] { recv(inSink_.dst + inDone_, cap); })) {
            inIntact_ = false;  // deregistered: drain the rest
            continue;
          }
        } else {
          recv(inSink_.dst + inDone_, cap);
        }
      } else if (inSink_.buffer != nullptr) {
        recv(inSink_.buffer->data() + inDone_, cap);
      } else {
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        recv(scratch_.data(), std::min<uint64_t>(cap, scratch_.size()));
      }
    }
    if (got < 0) {
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      return SocketError(err, "receive");
    }
    if (got == 0) {
      if (MidFrame()) {
        return {FabricErrc::kPeerClosed, {}, "connection closed in the middle of a frame"};
      }
      result->closed = true;
      return {};
    }
    moved += static_cast<uint64_t>(got);
    result->bytesIn += static_cast<uint64_t>(got);
    if (static_cast<uint64_t>(got) < asked) drained = true;
    if (readAhead) {
      inBufLen_ = static_cast<size_t>(got);
      continue;
    }
    inDone_ += static_cast<uint64_t>(got);
    if (inDone_ == inFrame_.payloadBytes) {
      FabricError e = PayloadDone(handler);
      if (!e.ok()) return e;
    }
  }
  return {};
}

}  // namespace railyard::fabric::tcp
