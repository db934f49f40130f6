#include "proxy/fabric/tcp/tcp_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "env/log.h"

namespace railyard::fabric::tcp {
namespace {

std::string HexId(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<uint32_t> Speeds(const WorkerAddress& peer, const std::vector<RailInfo>& local) {
  std::vector<uint32_t> s;
  const size_t n = std::min(peer.rails.size(), local.size());
  for (size_t i = 0; i < n; ++i) s.push_back(std::min(local[i].speedMbps, peer.rails[i].speedMbps));
  return s;
}

}  // namespace

TcpEndpoint::TcpEndpoint(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection)
    : worker_(worker),
      peer_(peer),
      connection_(connection),
      scheduler_(Speeds(peer, worker->options().rails), worker->options().stripe.chunksInFlightPerRail) {
  peerName_ = "w=" + HexId(peer.workerId) + " " + RailAddressText(peer.rails[0]);
  lastActivity_ = Clock::now();
}

Status TcpEndpoint::Create(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection,
                           std::unique_ptr<TcpEndpoint>* out) {
  std::unique_ptr<TcpEndpoint> ep(new TcpEndpoint(worker, peer, connection));
  const auto& local = worker->options().rails;
  const int rails = static_cast<int>(std::min(local.size(), peer.rails.size()));
  const int perRail = worker->options().socketsPerRail;
  const int total = rails * perRail;
  ep->railSockets_.resize(static_cast<size_t>(rails));
  for (int r = 0; r < rails; ++r) {
    const std::string where = "fabric connect on rail " + std::to_string(r) + " (" + local[r].device + " " +
                              local[r].address + ") to " + RailAddressText(peer.rails[r]);
    for (int s = 0; s < perRail; ++s) {
      proxy::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) return SystemError(where + ": socket: " + proxy::ErrnoText(errno));
      (void)proxy::TuneTcpSocket(fd.get(), 0);
      sockaddr_in me{};
      me.sin_family = AF_INET;
      inet_pton(AF_INET, local[r].address.c_str(), &me.sin_addr);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) {
        return SystemError(where + ": bind: " + proxy::ErrnoText(errno));
      }
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr.s_addr = peer.rails[r].ipv4;
      to.sin_port = htons(peer.rails[r].port);
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
        return SystemError(where + ": connect: " + proxy::ErrnoText(errno));
      }
      const int index = static_cast<int>(ep->sockets_.size());
      auto sock = std::make_unique<FrameSocket>(std::move(fd), index, Direction::kToInitiator, true);
      OutFrame hello;
      hello.header = MakeHeader(FrameType::kHello);
      hello.header.addr = worker->id();
      hello.header.seq = connection;
      hello.header.offset = static_cast<uint64_t>(index);
      hello.header.opBytes = static_cast<uint64_t>(total);
      hello.header.value = static_cast<uint64_t>(r);
      sock->Queue(std::move(hello));
      worker->Watch(sock->fd());
      ep->sockets_.push_back(std::move(sock));
      ep->socketRail_.push_back(r);
      ep->railSockets_[static_cast<size_t>(r)].push_back(index);
    }
  }
  *out = std::move(ep);
  return Status::Ok();
}

TcpEndpoint::~TcpEndpoint() { worker_->Detach(this); }

FabricError TcpEndpoint::Error(FabricErrc errc, int socket, int64_t seq, std::string what) const {
  FabricError e;
  e.errc = errc;
  e.site.rank = worker_->options().rank;
  e.site.peer = peerName_;
  if (socket >= 0 && static_cast<size_t>(socket) < socketRail_.size()) {
    const int rail = socketRail_[static_cast<size_t>(socket)];
    e.site.rail = rail;
    e.site.device = worker_->options().rails[static_cast<size_t>(rail)].device;
    const auto& rs = railSockets_[static_cast<size_t>(rail)];
    e.site.qp = std::find(rs.begin(), rs.end(), socket) - rs.begin();
    e.site.qpName = "socket";
  }
  e.site.seq = seq;
  e.what = std::move(what);
  return e;
}

Status TcpEndpoint::CheckLocal(const LocalSlice& s, const char* what) const {
  if (s.region == nullptr) return InvalidArgument(std::string(what) + " without a local region");
  if ((s.region->access & kAccessLocal) == 0) {
    return InvalidArgument(std::string(what) + ": the local region was not registered with local access");
  }
  if (s.offset > s.region->length || s.bytes > s.region->length - s.offset) {
    return InvalidArgument(std::string(what) + ": local [+" + std::to_string(s.offset) + ", " +
                           std::to_string(s.bytes) + " bytes) is outside its region of " +
                           std::to_string(s.region->length) + " bytes");
  }
  if (s.bytes > kMaxOpBytes) return InvalidArgument(std::string(what) + " above the largest op (1 TiB)");
  return Status::Ok();
}

Status TcpEndpoint::Post(Op op) {
  if (failed_) return status_;
  if (ops_.empty() && fences_ == 0) lastActivity_ = Clock::now();
  op.seq = nextSeq_++;
  const int rails = scheduler_.rails();
  if (op.type == OpType::kWrite || op.type == OpType::kRead) {
    op.chunks = CutIntoChunks(op.bytes, rails, worker_->options().stripe);
    op.striped = IsStriped(op.bytes, rails, worker_->options().stripe);
  } else {
    op.chunks = {Chunk{0, op.bytes}};
  }
  if (op.type == OpType::kRead) op.claims = ByteClaims(op.bytes);
  const uint64_t seq = op.seq;
  ops_.emplace(seq, std::move(op));
  queue_.push_back(QueueItem{false, seq, 0});
  Dispatch();
  return Status::Ok();
}

Status TcpEndpoint::Send(std::span<const uint8_t> record, uint64_t cookie) {
  if (failed_) return status_;
  if (record.empty() || record.size() > kMaxRecordBytes) {
    return InvalidArgument("fabric Send of " + std::to_string(record.size()) + " bytes (1.." +
                           std::to_string(kMaxRecordBytes) + ")");
  }
  Op op;
  op.type = OpType::kSend;
  op.cookie = cookie;
  op.bytes = record.size();
  op.record.assign(record.begin(), record.end());
  return Post(std::move(op));
}

Status TcpEndpoint::Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                          std::optional<uint32_t> immediate) {
  if (failed_) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
  Op op;
  op.type = OpType::kWrite;
  op.cookie = cookie;
  op.local = src.data();
  op.bytes = src.bytes;
  op.remoteAddr = remoteAddr;
  op.key = key.softwareKey;
  op.hasImm = immediate.has_value();
  op.imm = immediate.value_or(0);
  return Post(std::move(op));
}

Status TcpEndpoint::WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                               uint32_t immediate, uint64_t opBytes) {
  if (failed_) return status_;
  if (opBytes < src.bytes || opBytes > kMaxOpBytes) {
    return InvalidArgument("fabric WriteFinal: a whole Write of " + std::to_string(opBytes) + " bytes for a last piece of " +
                           std::to_string(src.bytes));
  }
  RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
  Op op;
  op.type = OpType::kWrite;
  op.cookie = cookie;
  op.local = src.data();
  op.bytes = src.bytes;
  op.remoteAddr = remoteAddr;
  op.key = key.softwareKey;
  op.hasImm = true;
  op.imm = immediate;
  op.reportBytes = opBytes;
  return Post(std::move(op));
}

Status TcpEndpoint::Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) {
  if (failed_) return status_;
  RY_RETURN_IF_ERROR(CheckLocal(dst, "fabric Read"));
  Op op;
  op.type = OpType::kRead;
  op.cookie = cookie;
  op.local = dst.data();
  op.bytes = dst.bytes;
  op.remoteAddr = remoteAddr;
  op.key = key.softwareKey;
  return Post(std::move(op));
}

Status TcpEndpoint::FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) {
  if (failed_) return status_;
  Op op;
  op.type = OpType::kFetchAdd;
  op.cookie = cookie;
  op.bytes = 8;
  op.remoteAddr = remoteAddr;
  op.key = key.softwareKey;
  op.add = add;
  return Post(std::move(op));
}

Status TcpEndpoint::Fence(uint64_t cookie) {
  if (failed_) return status_;
  if (ops_.empty() && fences_ == 0) lastActivity_ = Clock::now();
  ++fences_;
  queue_.push_back(QueueItem{true, nextSeq_, cookie});
  Dispatch();
  return Status::Ok();
}

bool TcpEndpoint::QueueChunks(Op& op) {
  while (op.nextChunk < op.chunks.size()) {
    int rail;
    if (op.striped) {
      rail = scheduler_.Pick();
    } else if (op.rail >= 0) {
      rail = scheduler_.HasRoom(op.rail) ? op.rail : -1;
    } else {
      rail = op.rail = scheduler_.Pick();
    }
    if (rail < 0) return false;
    // The least loaded socket of the rail.
    int best = -1;
    for (int s : railSockets_[static_cast<size_t>(rail)]) {
      if (best < 0 || sockets_[static_cast<size_t>(s)]->QueuedFrames() < sockets_[static_cast<size_t>(best)]->QueuedFrames()) {
        best = s;
      }
    }
    const Chunk c = op.chunks[op.nextChunk];
    OutFrame f;
    f.rail = rail;
    switch (op.type) {
      case OpType::kWrite:
        f.header = MakeHeader(FrameType::kWrite);
        f.header.payloadBytes = static_cast<uint32_t>(c.bytes);
        f.payload = op.local + c.offset;
        if (op.hasImm) {
          f.header.flags = kFlagImmediate;
          f.header.imm = op.imm;
        }
        if (op.reportBytes > 0) {
          f.header.flags |= kFlagReportBytes;
          f.header.value = op.reportBytes;
        }
        break;
      case OpType::kRead:
        f.header = MakeHeader(FrameType::kReadReq);
        f.header.value = c.bytes;
        break;
      case OpType::kFetchAdd:
        f.header = MakeHeader(FrameType::kFetchAdd);
        f.header.value = op.add;
        break;
      case OpType::kSend:
        f.header = MakeHeader(FrameType::kRecord);
        f.header.payloadBytes = static_cast<uint32_t>(op.record.size());
        f.owned = std::move(op.record);
        break;
      default:
        break;
    }
    f.header.seq = op.seq;
    f.header.addr = op.remoteAddr;
    f.header.opBytes = op.bytes;
    f.header.offset = c.offset;
    f.header.key = op.key;
    scheduler_.OnQueued(rail);
    sockets_[static_cast<size_t>(best)]->Queue(std::move(f));
    ++op.nextChunk;
  }
  return true;
}

void TcpEndpoint::Dispatch() {
  while (!queue_.empty() && !failed_) {
    QueueItem& item = queue_.front();
    const uint64_t lowest = ops_.empty() ? nextSeq_ : ops_.begin()->first;
    if (item.fence) {
      if (lowest < item.seq) return;  // ops before the fence still outstanding
      Event e;
      e.kind = EventKind::kDone;
      e.op = OpType::kFence;
      e.cookie = item.cookie;
      worker_->Emit(std::move(e));
      --fences_;
      queue_.pop_front();
      continue;
    }
    auto it = ops_.find(item.seq);
    if (it == ops_.end()) {  // cannot happen: ops leave ops_ only after being queued
      queue_.pop_front();
      continue;
    }
    if (item.seq - lowest >= static_cast<uint64_t>(kOpWindow)) return;
    if (!QueueChunks(it->second)) return;
    queue_.pop_front();
  }
}

void TcpEndpoint::Complete(std::map<uint64_t, Op>::iterator it, uint64_t value) {
  Event e;
  e.kind = EventKind::kDone;
  e.op = it->second.type;
  e.cookie = it->second.cookie;
  e.value = value;
  worker_->Emit(std::move(e));
  ops_.erase(it);
}

FabricError TcpEndpoint::OnHeader(int socket, const FrameHeader& h, Sink* sink) {
  switch (h.frameType()) {
    case FrameType::kReadData: {
      auto it = ops_.find(h.seq);
      if (it == ops_.end() || it->second.type != OpType::kRead) {
        return Error(FabricErrc::kMalformed, socket, static_cast<int64_t>(h.seq),
                     "read data for an op that is not an outstanding Read (" + DescribeFrame(h) + ")");
      }
      Op& op = it->second;
      const auto r = op.claims.Claim(h.offset, h.payloadBytes);
      if (r != ByteClaims::Result::kOk) {
        return Error(FabricErrc::kMalformed, socket, static_cast<int64_t>(h.seq),
                     std::string("read data ") + ByteClaims::ResultName(r) + " (" + DescribeFrame(h) + ")");
      }
      sink->dst = op.local + h.offset;
      return {};
    }
    case FrameType::kNack:
      sink->buffer = &nackText_;
      return {};
    default:
      return {};
  }
}

FabricError TcpEndpoint::OnPayload(int socket, const FrameHeader& h, bool) {
  const int64_t seq = static_cast<int64_t>(h.seq);
  switch (h.frameType()) {
    case FrameType::kAck: {
      auto it = ops_.find(h.seq);
      if (it == ops_.end()) return Error(FabricErrc::kMalformed, socket, seq, "ack for an op that is not outstanding");
      Op& op = it->second;
      if (op.nextChunk < op.chunks.size() || op.acked) {
        return Error(FabricErrc::kMalformed, socket, seq, "ack for an op not yet sent (or acked twice)");
      }
      if (op.type == OpType::kRead) {
        op.acked = true;
        if (op.claims.Complete()) Complete(it, 0);
      } else {
        Complete(it, op.type == OpType::kFetchAdd ? h.value : 0);
      }
      return {};
    }
    case FrameType::kReadData: {
      auto it = ops_.find(h.seq);
      if (it == ops_.end()) return Error(FabricErrc::kMalformed, socket, seq, "read data for a finished op");
      it->second.claims.Land(h.payloadBytes);
      if (it->second.acked && it->second.claims.Complete()) Complete(it, 0);
      return {};
    }
    case FrameType::kNack: {
      std::string text(nackText_.begin(), nackText_.end());
      for (char& c : text) {
        if (c < 0x20 || c > 0x7e) c = '?';
      }
      const FabricErrc errc = FabricErrcFromWire(h.value);
      return Error(errc, socket, seq, "the target refused: " + (text.empty() ? std::string("(no reason given)") : text));
    }
    default:
      return Error(FabricErrc::kMalformed, socket, seq, "unexpected frame " + DescribeFrame(h));
  }
}

FabricError TcpEndpoint::OnWritten(int, const OutFrame& f, bool) {
  if (f.rail >= 0) scheduler_.OnWritten(f.rail);
  return {};
}

void TcpEndpoint::Fail(FabricError e) {
  if (failed_) return;
  failed_ = true;
  status_ = e.ToStatus();
  if (e.errc == FabricErrc::kPeerClosed && Outstanding() == 0 && queue_.empty()) {
    // Nothing was lost: the peer ended first (its rank finished and closed). Not a
    // WARN, or every clean run ends with one; an op posted later gets the status.
    RY_INFO(log::kNet, "%s (no operation was outstanding)", e.ToString().c_str());
  } else {
    RY_WARN("%s", e.ToString().c_str());
  }
  for (auto& [seq, op] : ops_) {
    Event ev;
    ev.kind = EventKind::kError;
    ev.op = op.type;
    ev.cookie = op.cookie;
    if (static_cast<int64_t>(seq) == e.site.seq) {
      ev.error = e;
    } else {
      // Same cause for a lost or frozen peer; an op refused by the target fails only
      // its own op by name, the others fail because the Endpoint did.
      ev.error = e;
      ev.error.site.seq = static_cast<int64_t>(seq);
      if (IsRemoteAccess(e.errc) || e.errc == FabricErrc::kMalformed) {
        ev.error.errc = FabricErrc::kEndpointFailed;
        ev.error.what = "the endpoint failed earlier: " + e.ToString();
      }
    }
    worker_->Emit(std::move(ev));
  }
  for (const QueueItem& item : queue_) {
    if (!item.fence) continue;
    Event ev;
    ev.kind = EventKind::kError;
    ev.op = OpType::kFence;
    ev.cookie = item.cookie;
    ev.error = e;
    ev.error.errc = FabricErrc::kEndpointFailed;
    ev.error.what = "endpoint failed: " + e.ToString();
    worker_->Emit(std::move(ev));
  }
  ops_.clear();
  queue_.clear();
  fences_ = 0;
  for (auto& s : sockets_) s->Close();
}

void TcpEndpoint::Progress() {
  if (failed_) return;
  Dispatch();
  bool moved = false;
  for (auto& s : sockets_) {
    FrameSocket::PumpResult r;
    FabricError e = s->Pump(*this, worker_->options().pumpBytes, &r, worker_->Readable(s->fd()));
    if (e.ok() && r.closed) e = FabricError{FabricErrc::kPeerClosed, {}, "the peer closed the connection"};
    if (!e.ok()) {
      if (e.site.peer.empty()) {
        FabricError full = Error(e.errc, s->index(), e.site.seq, e.what);
        e = std::move(full);
      }
      Fail(std::move(e));
      return;
    }
    moved = moved || r.bytesIn > 0 || r.bytesOut > 0;
  }
  Dispatch();
  const auto now = Clock::now();
  if (moved) {
    lastActivity_ = now;
  } else if (Outstanding() > 0 && now - lastActivity_ > std::chrono::milliseconds(worker_->options().timeoutMs)) {
    const int64_t oldest = ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first);
    // Name the rail of the oldest op when it has one (an op that is not striped),
    // else the first socket that still holds unsent frames (the stalled one).
    const int rail = ops_.empty() ? -1 : ops_.begin()->second.rail;
    int socket = rail >= 0 ? railSockets_[static_cast<size_t>(rail)].front() : 0;
    for (size_t i = 0; rail < 0 && i < sockets_.size(); ++i) {
      if (sockets_[i]->QueuedFrames() > 0) {
        socket = static_cast<int>(i);
        break;
      }
    }
    Fail(Error(FabricErrc::kTimeout, socket, oldest,
               "no progress for " + std::to_string(worker_->options().timeoutMs) + " ms with " +
                   std::to_string(Outstanding()) + " ops outstanding"));
  }
}

}  // namespace railyard::fabric::tcp
