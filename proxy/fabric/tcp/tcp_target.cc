#include "proxy/fabric/tcp/tcp_target.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "env/log.h"

namespace railyard::fabric::tcp {
namespace {

std::string TargetHexId(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint32_t RightFor(FrameType t) {
  switch (t) {
    case FrameType::kWrite: return kAccessRemoteWrite;
    case FrameType::kReadReq: return kAccessRemoteRead;
    case FrameType::kFetchAdd: return kAccessRemoteAtomic;
    default: return 0;
  }
}

}  // namespace

TcpTarget::TcpTarget(TcpWorker* worker, uint64_t peerWorker, uint64_t connection, int sockets, uint32_t source,
                     uint64_t namedAs)
    : worker_(worker),
      peer_(peerWorker),
      connection_(connection),
      count_(sockets),
      sockets_(static_cast<size_t>(sockets)),
      rails_(static_cast<size_t>(sockets), -1),
      unpolled_(static_cast<size_t>(sockets), false),
      eof_(static_cast<size_t>(sockets), false),
      slots_(static_cast<size_t>(kOpWindow)) {
  peerName_ = "w=" + TargetHexId(namedAs != 0 ? namedAs : peerWorker) + " connection " + std::to_string(connection);
  lastActivity_ = created_ = Clock::now();
  source_ = source;
}

FabricError TcpTarget::Error(FabricErrc errc, int socket, int64_t seq, std::string what) const {
  FabricError e;
  e.errc = errc;
  e.site.rank = worker_->options().rank;
  e.site.peer = peerName_;
  if (socket >= 0 && static_cast<size_t>(socket) < rails_.size() && rails_[static_cast<size_t>(socket)] >= 0) {
    const int rail = rails_[static_cast<size_t>(socket)];
    e.site.rail = rail;
    e.site.device = worker_->options().rails[static_cast<size_t>(rail)].device;
    e.site.qp = socket;
    e.site.qpName = "socket";
  }
  e.site.seq = seq;
  e.what = std::move(what);
  return e;
}

FabricError TcpTarget::AddSocket(proxy::Fd fd, int index, int rail, int count, bool relayed) {
  if (count != count_ || index < 0 || index >= count_ || sockets_[static_cast<size_t>(index)]) {
    return Error(FabricErrc::kMalformed, -1, -1,
                 "hello for socket " + std::to_string(index) + " of " + std::to_string(count) +
                     " does not fit a connection of " + std::to_string(count_) + " sockets (or repeats one)");
  }
  if (!arrivalNamed_) {
    // Whom the sockets arrive from: the origin, or the last relay of a relayed route,
    // the host an operator looks at when this connection breaks (new-user trial: the
    // receiving rank named the relay of its own route back, not the one that died).
    // A relayed hello says so, and so does the name: the host named is then a relay,
    // and the origin (w=...) or any relay before it may be the one that failed.
    sockaddr_in from{};
    socklen_t len = sizeof from;
    if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&from), &len) == 0 && from.sin_family == AF_INET) {
      char ip[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
      const auto& nameOf = worker_->options().nameAddress;
      const std::string host = nameOf ? nameOf(ip) : std::string();
      peerName_ += " arriving from " + (host.empty() ? std::string(ip) : host + " (" + ip + ")");
      if (relayed) peerName_ += ", the last relay of its route (spliced through relays from the origin)";
      arrivalNamed_ = true;
    }
  }
  worker_->Watch(fd.get());
  unpolled_[static_cast<size_t>(index)] = true;
  sockets_[static_cast<size_t>(index)] =
      std::make_unique<FrameSocket>(std::move(fd), index, Direction::kToTarget, false);
  rails_[static_cast<size_t>(index)] = rail;
  return {};
}

bool TcpTarget::Busy() const { return used_ > 0; }

void TcpTarget::QueueOn(int socket, OutFrame f) {
  // A socket the peer closed takes nothing more. An ack or nack goes on another open
  // socket of the connection (the initiator takes them on any); anything else is
  // dropped (the peer is gone from that socket), so no frame waits on a closed socket.
  if (!eof_[static_cast<size_t>(socket)]) {
    sockets_[static_cast<size_t>(socket)]->Queue(std::move(f));
    return;
  }
  const FrameType t = f.header.frameType();
  if (t != FrameType::kAck && t != FrameType::kNack) return;
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (sockets_[i] && !eof_[i]) {
      sockets_[i]->Queue(std::move(f));
      return;
    }
  }
}

bool TcpTarget::Quiet() const {
  if (dead_) return true;
  if (deferred_ > 0) return false;
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (sockets_[i] && !eof_[i] && sockets_[i]->QueuedFrames() > 0) return false;
  }
  return true;
}

void TcpTarget::Fail(FabricError e, bool always, bool warnIdle) {
  if (dead_) return;
  dead_ = true;
  ++worker_->counters().connectionsFailed;
  const bool busy = Busy() && !refusing_;
  if (always || busy) {
    const bool warn = busy || warnIdle;
    if (warn && worker_->MayWarnOfPeer(TcpWorker::PeerWarn::kFailure)) {
      RY_WARN("%s", e.ToString().c_str());
    } else {  // over the Worker's WARN budget, or nothing of that peer's was under way
      RY_INFO(log::kNet, "%s%s", e.ToString().c_str(), warn ? "" : " (no op of that peer was under way here)");
    }
    Event ev;
    ev.kind = EventKind::kError;
    ev.peer = peer_;
    ev.error = std::move(e);
    worker_->Emit(std::move(ev));
  }
  for (auto& s : sockets_) {
    if (s) s->Close();
  }
}

void TcpTarget::QueueAck(int socket, uint64_t seq, uint64_t value) {
  OutFrame f;
  f.header = MakeHeader(FrameType::kAck);
  f.header.seq = seq;
  f.header.value = value;
  f.header.offset = frontier_;
  deferred_ = 0;  // the bound covers every lazy Write passed so far (all below frontier_)
  QueueOn(socket, std::move(f));
}

void TcpTarget::QueueBound() {
  OutFrame f;
  f.header = MakeHeader(FrameType::kAck);
  f.header.flags = kFlagBoundOnly;
  f.header.offset = frontier_;
  deferred_ = 0;
  QueueOn(deferredSocket_, std::move(f));
}

FabricError TcpTarget::Refuse(int socket, uint64_t seq, FabricErrc errc, const std::string& why) {
  FabricError e = Error(errc, socket, static_cast<int64_t>(seq), "refused: " + why);
  if (worker_->MayWarnOfPeer(TcpWorker::PeerWarn::kRefusal)) {
    RY_WARN("%s", e.ToString().c_str());
  } else {
    RY_INFO(log::kNet, "%s", e.ToString().c_str());  // over the Worker's WARN budget
  }
  ++worker_->counters().framesRefused;
  OutFrame f;
  f.header = MakeHeader(FrameType::kNack);
  f.header.seq = seq;
  f.header.value = static_cast<uint64_t>(errc);
  std::string text = why.substr(0, kMaxNackText);
  f.owned.assign(text.begin(), text.end());
  f.header.payloadBytes = static_cast<uint32_t>(f.owned.size());
  QueueOn(socket, std::move(f));
  refusing_ = true;
  Event ev;
  ev.kind = EventKind::kError;
  ev.peer = peer_;
  ev.error = std::move(e);
  worker_->Emit(std::move(ev));
  return {};
}

FabricError TcpTarget::OnHeader(int socket, const FrameHeader& h, Sink* sink) {
  if (refusing_) return {};  // nothing of a refused connection lands (payloads are dropped)
  const FrameType t = h.frameType();
  const int64_t seq = static_cast<int64_t>(h.seq);
  if (t == FrameType::kHello) return Error(FabricErrc::kMalformed, socket, seq, "a second hello");
  if (h.seq < frontier_ || h.seq - frontier_ >= static_cast<uint64_t>(kOpWindow)) {
    return Error(FabricErrc::kMalformed, socket, seq,
                 "sequence outside the window [" + std::to_string(frontier_) + ", +" + std::to_string(kOpWindow) +
                     ") (" + DescribeFrame(h) + ")");
  }
  Slot& s = slots_[h.seq % static_cast<uint64_t>(kOpWindow)];
  if (!s.used) {
    s = Slot{};
    s.used = true;
    ++used_;
    s.seq = h.seq;
    s.type = t;
    s.addr = h.addr;
    s.bytes = h.opBytes;
    s.key = h.key;
    s.flags = h.flags;
    s.imm = h.imm;
    s.add = h.value;
    s.claims = ByteClaims(h.opBytes);
    if (t != FrameType::kRecord) {
      if (t == FrameType::kFetchAdd && h.addr % 8 != 0) {
        return Refuse(socket, h.seq, FabricErrc::kMisaligned, "fetch-add at an address that is not 8-byte aligned");
      }
      std::string why;
      const FabricErrc errc = worker_->domain().regions().Resolve(h.key, h.addr, h.opBytes, RightFor(t), &s.pin, &why);
      if (errc != FabricErrc::kNone) return Refuse(socket, h.seq, errc, why);
    }
  } else if (s.type != t || s.addr != h.addr || s.bytes != h.opBytes || s.key != h.key || s.flags != h.flags ||
             s.imm != h.imm || (t != FrameType::kWrite && t != FrameType::kReadReq) ||
             (t == FrameType::kWrite && s.add != h.value)) {
    return Error(FabricErrc::kMalformed, socket, seq, "chunk disagrees with its op (" + DescribeFrame(h) + ")");
  }
  s.lastSocket = socket;
  const uint64_t len = t == FrameType::kReadReq ? h.value : (t == FrameType::kFetchAdd ? 8 : h.payloadBytes);
  if (len == 0 && h.opBytes != 0) {
    // Only a 0-byte op has an empty chunk (CutIntoChunks); more of them claim nothing
    // and would be kept without bound (hostile-peer probe: empty Read chunks queued 24 B
    // each, past the claim cap, for as long as the flood went on).
    return Error(FabricErrc::kMalformed, socket, seq, "an empty chunk of a " + std::to_string(h.opBytes) +
                                                          "-byte op (" + DescribeFrame(h) + ")");
  }
  if (len > 0 && claims_ >= kMaxClaimsPerConnection) {
    return Error(FabricErrc::kMalformed, socket, seq,
                 "more than " + std::to_string(kMaxClaimsPerConnection) + " chunks under way on one connection");
  }
  const size_t before = s.claims.claims();
  const auto r = s.claims.Claim(h.offset, len);
  claims_ += s.claims.claims() - before;
  if (r != ByteClaims::Result::kOk) {
    return Error(FabricErrc::kMalformed, socket, seq,
                 std::string("chunk ") + ByteClaims::ResultName(r) + " (" + DescribeFrame(h) + ")");
  }
  switch (t) {
    case FrameType::kWrite:
      sink->dst = reinterpret_cast<char*>(s.addr + h.offset);
      sink->pin = s.pin;
      break;
    case FrameType::kRecord:
      sink->buffer = &s.record;
      break;
    case FrameType::kReadReq:
      s.reads.push_back({socket, h.offset, h.value});
      break;
    default:
      break;
  }
  return {};
}

FabricError TcpTarget::OnPayload(int socket, const FrameHeader& h, bool intact) {
  if (refusing_) return {};
  Slot& s = slots_[h.seq % static_cast<uint64_t>(kOpWindow)];
  switch (h.frameType()) {
    case FrameType::kWrite:
      if (!intact) {
        return Refuse(socket, h.seq, FabricErrc::kDeregistered, "the region was deregistered while the write landed");
      }
      s.claims.Land(h.payloadBytes);
      worker_->counters().bytesLanded += h.payloadBytes;
      if (s.claims.Complete() && !s.complete) {
        s.complete = true;
        if ((s.flags & kFlagLazyAck) == 0) QueueAck(socket, h.seq, 0);  // lazy: a later bound covers it
      }
      break;
    case FrameType::kRecord:
    case FrameType::kFetchAdd:
      s.claims.Land(s.bytes);
      s.complete = true;
      break;
    default:
      break;
  }
  return Advance();
}

FabricError TcpTarget::OnWritten(int socket, const OutFrame& f, bool intact) {
  if (f.header.frameType() != FrameType::kReadData) return {};
  if (!intact) {
    if (refusing_) return {};
    return Refuse(socket, f.header.seq, FabricErrc::kDeregistered, "the region was deregistered while it was read");
  }
  worker_->counters().bytesServed += f.header.payloadBytes;
  return {};
}

FabricError TcpTarget::Advance() {
  while (!refusing_) {
    Slot& s = slots_[frontier_ % static_cast<uint64_t>(kOpWindow)];
    if (!s.used || s.seq != frontier_) return {};
    switch (s.type) {
      case FrameType::kWrite:
        if (!s.complete) return {};
        if (s.flags & kFlagImmediate) {
          Event ev;
          ev.kind = EventKind::kImmediate;
          ev.op = OpType::kWrite;
          ev.value = s.imm;
          ev.bytes = (s.flags & kFlagReportBytes) ? s.add : s.bytes;  // WriteFinal: the whole Write
          ev.peer = peer_;
          worker_->Emit(std::move(ev));
        }
        break;
      case FrameType::kRecord: {
        if (!s.complete) return {};
        Event ev;
        ev.kind = EventKind::kRecord;
        ev.op = OpType::kSend;
        ev.peer = peer_;
        ev.record = std::move(s.record);
        worker_->Emit(std::move(ev));
        QueueAck(s.lastSocket, s.seq, 0);
        break;
      }
      case FrameType::kFetchAdd: {
        if (!s.complete) return {};
        uint64_t old = 0;
        const bool live = s.pin->WithLive([&] {
          std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(s.addr));
          old = word.fetch_add(s.add, std::memory_order_acq_rel);
        });
        if (!live) {
          return Refuse(s.lastSocket, s.seq, FabricErrc::kDeregistered, "the region was deregistered before the fetch-add");
        }
        QueueAck(s.lastSocket, s.seq, old);
        break;
      }
      case FrameType::kReadReq: {
        for (const PendingRead& r : s.reads) {
          if (r.bytes == 0) continue;
          OutFrame f;
          f.header = MakeHeader(FrameType::kReadData);
          f.header.seq = s.seq;
          f.header.offset = r.offset;
          f.header.payloadBytes = static_cast<uint32_t>(r.bytes);
          f.payload = reinterpret_cast<const char*>(s.addr + r.offset);
          f.pin = s.pin;
          QueueOn(r.socket, std::move(f));
        }
        s.reads.clear();
        if (!s.claims.FullyClaimed()) return {};
        QueueAck(s.lastSocket, s.seq, 0);
        break;
      }
      default:
        return {};
    }
    const bool lazy = s.type == FrameType::kWrite && (s.flags & kFlagLazyAck) != 0;
    const int socket = s.lastSocket;
    claims_ -= s.claims.claims();
    s = Slot{};
    --used_;
    ++frontier_;
    if (lazy) {
      if (deferred_++ == 0) deferredSince_ = Clock::now();
      deferredSocket_ = socket;
      if (deferred_ >= kMaxDeferredAcks) QueueBound();
    }
  }
  return {};
}

void TcpTarget::Progress() {
  if (dead_) return;
  if (deferred_ > 0 && !refusing_ && Clock::now() - deferredSince_ >= std::chrono::microseconds(kDeferredAckMicros)) {
    QueueBound();  // goes out in this pass's pump
  }
  bool moved = false;
  for (size_t i = 0; i < sockets_.size(); ++i) {
    auto& s = sockets_[i];
    if (!s || eof_[i]) continue;
    FrameSocket::PumpResult r;
    // A socket added since this pass's readiness poll is read anyway: its bytes may
    // have come before another socket's close (CI: a relay cut both legs while the
    // first was still in the accept queue, and the target died silently).
    // Nor is it read while its answers pile up unread (FrameSocket::kMaxQueuedFrames):
    // the peer's requests then wait in its own socket buffers.
    const bool readable = (unpolled_[i] || worker_->Readable(s->fd())) && !s->OutputFull();
    unpolled_[i] = false;
    FabricError e = s->Pump(*this, worker_->options().pumpBytes, &r, readable);
    if (!e.ok()) {
      if (e.site.peer.empty()) e = Error(e.errc, s->index(), e.site.seq, e.what);
      // A reset is a close that left our acks unread (a rank that ended first): the
      // event goes out either way (a comm waiting on that peer names it, kill-relay's
      // seq), the WARN only when it cut an op here short.
      const bool reset = e.errc == FabricErrc::kPeerClosed;
      Fail(std::move(e), !refusing_, !reset);
      return;
    }
    if (r.closed) {
      // A peer that stops sending on a socket while frames wait to go to it (a read's
      // data, acks it does not read) is done with the connection: it ends now, before
      // those frames could hold it (and the Worker awake) for ever (review). An error
      // event only when an op was under way, as for any close.
      if (s->QueuedFrames() > 0) {
        Fail(Error(FabricErrc::kPeerClosed, s->index(), -1,
                   "the peer closed the connection with frames still to send it"),
             false, false);
        return;
      }
      // Decided below, once every socket has had its turn. Closed here too: an EOF
      // stays readable, and a socket left watched would keep the Worker from sleeping.
      eof_[i] = true;
      s->Close();
      continue;
    }
    moved = moved || r.bytesIn > 0 || r.bytesOut > 0;
  }
  // The initiator closing in order: an error only when it left work half done. One
  // socket's close alone decides nothing while another may still bring an op's bytes
  // (sockets are separate streams, through relays of their own; CI once saw a relay's
  // close of one leg outrun the other leg's half Write, and the target die silently):
  // idle is said only once every socket has arrived and closed.
  size_t closed = 0;
  int firstClosed = -1;
  for (size_t i = 0; i < eof_.size(); ++i) {
    if (!eof_[i]) continue;
    ++closed;
    if (firstClosed < 0) firstClosed = static_cast<int>(i);
  }
  if (closed > 0 && (Busy() || closed == static_cast<size_t>(count_))) {
    Fail(Error(FabricErrc::kPeerClosed, firstClosed, -1, "the peer closed the connection with ops under way"), false);
    return;
  }
  const auto now = Clock::now();
  const auto timeout = std::chrono::milliseconds(worker_->options().timeoutMs);
  const int arrived = static_cast<int>(std::count_if(sockets_.begin(), sockets_.end(), [](auto& s) { return s != nullptr; }));
  if (arrived < count_ && now - created_ > timeout) {
    // Every socket that came closed in order, nothing under way: the peer left before
    // the rest arrived (a connect it gave up). Dropped quietly, as any idle close.
    bool allLeft = closed > 0;
    for (size_t i = 0; i < sockets_.size() && allLeft; ++i) allLeft = sockets_[i] == nullptr || eof_[i];
    if (allLeft && !Busy()) {
      Fail(Error(FabricErrc::kPeerClosed, firstClosed, -1, "the peer closed the connection before all its sockets arrived"),
           false, false);
      return;
    }
    Fail(Error(FabricErrc::kConnectFailed, -1, -1,
               "only " + std::to_string(arrived) + " of " + std::to_string(count_) + " sockets arrived in " +
                   std::to_string(worker_->options().timeoutMs) + " ms (RAILYARD_TIMEOUT_MS)"));
    return;
  }
  // Frames waiting to go to a peer that has stopped reading them, counted only when
  // nothing moved past the timeout (not on every pass).
  const auto unreadFrames = [this] {
    size_t n = 0;
    for (const auto& s : sockets_) n += s ? s->QueuedFrames() : 0;
    return n;
  };
  size_t unread = 0;
  if (moved) {
    lastActivity_ = now;
  } else if (!Busy() && now - lastActivity_ > timeout && (unread = unreadFrames()) > 0) {
    // Nothing under way here, but the answers to what the peer asked (read data, acks)
    // wait and it reads none of them: with no op to keep, the connection goes
    // (hostile-peer probe: its Read requests never read held the connection for ever).
    Fail(Error(FabricErrc::kTimeout, -1, static_cast<int64_t>(frontier_),
               "the peer read none of the " + std::to_string(unread) + " frames queued to it (read data, acks) for " +
                   std::to_string(worker_->options().timeoutMs) + " ms (RAILYARD_TIMEOUT_MS)"),
         true, true);
  } else if (Busy() && now - lastActivity_ > timeout) {
    // Name the socket (so its rail) the peer stopped on: the first one caught
    // mid-frame, else the only one there is (trial: a SIGSTOPped relay's TIMEOUT named
    // no rail); with several and none mid-frame, none is named.
    int stalled = -1;
    bool midFrame = false;
    for (size_t i = 0; i < sockets_.size() && !midFrame; ++i) {
      if (sockets_[i] == nullptr) continue;
      midFrame = sockets_[i]->MidFrame();
      if (midFrame || (arrived == 1 && stalled < 0)) stalled = static_cast<int>(i);
    }
    // Several sockets, none mid-frame: the text names each socket's rail (any of them
    // may be the one the next frame was to come by).
    std::string idle;
    if (stalled < 0) {
      for (size_t i = 0; i < sockets_.size(); ++i) {
        if (sockets_[i] == nullptr || i >= rails_.size() || rails_[i] < 0) continue;
        const int rail = rails_[i];
        idle += std::string(idle.empty() ? "" : ", ") + "socket " + std::to_string(i) + " on rail " +
                std::to_string(rail) + " (" + worker_->options().rails[static_cast<size_t>(rail)].device + ")";
      }
    }
    Fail(Error(FabricErrc::kTimeout, stalled, static_cast<int64_t>(frontier_),
               "no progress for " + std::to_string(worker_->options().timeoutMs) +
                   " ms (RAILYARD_TIMEOUT_MS) with ops under way" +
                   (midFrame ? " (a frame stopped half-received on this socket)" : "") +
                   (idle.empty() ? "" : " (every socket idle between frames: " + idle + ")")));
  }
}

}  // namespace railyard::fabric::tcp
