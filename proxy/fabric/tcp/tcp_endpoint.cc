#include "proxy/fabric/tcp/tcp_endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "env/log.h"
#include "proxy/fabric/fail_outstanding.h"

namespace railyard::fabric::tcp {
namespace {

std::string HexId(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// The netmask (network byte order) of this host's interface address `address`
/// (IPv4 text); 0 when no interface has it.
uint32_t LocalNetmask(const std::string& address) {
  in_addr want{};
  if (inet_pton(AF_INET, address.c_str(), &want) != 1) return 0;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  uint32_t mask = 0;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != want.s_addr) continue;
    mask = reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    break;
  }
  freeifaddrs(list);
  return mask;
}

/// Which local rail talks to which of the peer's rails. Local rail i with peer rail i
/// (as many as both have) when each such pair shares a subnet, or the local address
/// is not found on an interface (the historical pairing; loopback and flat networks
/// keep it). Otherwise (a switchless host: each rail faces a different peer, on its
/// own subnet, and rail i of two hosts need not share a cable) each peer rail pairs
/// with the unused local rail on its subnet, the same-index one first; rails with no
/// rail on their subnet are left out. When nothing pairs by subnet (routed networks)
/// the index pairing is kept, and connect reports what the network does with it.
std::vector<std::pair<int, int>> PairRails(const std::vector<RailInfo>& local, const WorkerAddress& peer) {
  const size_t n = std::min(peer.rails.size(), local.size());
  std::vector<uint32_t> addr(local.size(), 0), mask(local.size(), 0);
  for (size_t i = 0; i < local.size(); ++i) {
    in_addr a{};
    if (inet_pton(AF_INET, local[i].address.c_str(), &a) == 1) addr[i] = a.s_addr;
    mask[i] = LocalNetmask(local[i].address);
  }
  auto onLink = [&](size_t i, size_t j) { return mask[i] != 0 && ((peer.rails[j].ipv4 ^ addr[i]) & mask[i]) == 0; };
  std::vector<std::pair<int, int>> index;
  bool indexOk = true;
  for (size_t i = 0; i < n; ++i) {
    index.emplace_back(static_cast<int>(i), static_cast<int>(i));
    indexOk = indexOk && (mask[i] == 0 || onLink(i, i));
  }
  if (indexOk) return index;
  std::vector<std::pair<int, int>> bySubnet;
  std::vector<bool> used(local.size(), false);
  for (size_t j = 0; j < peer.rails.size(); ++j) {
    int pick = -1;
    if (j < local.size() && !used[j] && onLink(j, j)) pick = static_cast<int>(j);
    for (size_t i = 0; pick < 0 && i < local.size(); ++i) {
      if (!used[i] && onLink(i, j)) pick = static_cast<int>(i);
    }
    if (pick < 0) continue;
    used[static_cast<size_t>(pick)] = true;
    bySubnet.emplace_back(pick, static_cast<int>(j));
  }
  return bySubnet.empty() ? index : bySubnet;
}

std::vector<uint32_t> Speeds(const WorkerAddress& peer, const std::vector<RailInfo>& local,
                             const std::vector<std::pair<int, int>>& pairs) {
  std::vector<uint32_t> s;
  for (auto [i, j] : pairs) {
    s.push_back(std::min(local[static_cast<size_t>(i)].speedMbps, peer.rails[static_cast<size_t>(j)].speedMbps));
  }
  return s;
}

}  // namespace

/// A spliced Endpoint's rails: peer rail j from local rail splice.localRail[j].
std::vector<std::pair<int, int>> SplicePairs(const SpliceRoute& splice) {
  std::vector<std::pair<int, int>> pairs;
  for (size_t j = 0; j < splice.localRail.size(); ++j) pairs.emplace_back(splice.localRail[j], static_cast<int>(j));
  return pairs;
}

TcpEndpoint::TcpEndpoint(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection, const SpliceRoute* splice)
    : worker_(worker),
      peer_(peer),
      connection_(connection),
      pairs_(splice != nullptr ? SplicePairs(*splice) : PairRails(worker->options().rails, peer)),
      scheduler_(Speeds(peer, worker->options().rails, pairs_), worker->options().stripe.chunksInFlightPerRail) {
  peerName_ = "w=" + HexId(peer.workerId) + " " + RailAddressText(peer.rails[0]);
  if (splice != nullptr && !splice->via.empty()) peerName_ += " via " + splice->via;
  spliced_ = splice != nullptr;
  lastActivity_ = Clock::now();
}

Status TcpEndpoint::Create(TcpWorker* worker, const WorkerAddress& peer, uint64_t connection,
                           std::unique_ptr<TcpEndpoint>* out, const SpliceRoute* splice) {
  if (splice != nullptr) {
    if (splice->localRail.empty() || splice->localRail.size() > peer.rails.size() || !splice->dial) {
      return InvalidArgument("fabric connect through a relay: " + std::to_string(splice->localRail.size()) +
                             " peer rails planned for a peer of " + std::to_string(peer.rails.size()));
    }
    for (int li : splice->localRail) {
      if (li < 0 || static_cast<size_t>(li) >= worker->options().rails.size()) {
        return InvalidArgument("fabric connect through a relay: local rail " + std::to_string(li) + " of " +
                               std::to_string(worker->options().rails.size()));
      }
    }
  }
  std::unique_ptr<TcpEndpoint> ep(new TcpEndpoint(worker, peer, connection, splice));
  const auto& local = worker->options().rails;
  const int rails = static_cast<int>(ep->pairs_.size());
  const int perRail = worker->options().socketsPerRail;
  const int total = rails * perRail;
  ep->railSockets_.resize(static_cast<size_t>(rails));
  for (int r = 0; r < rails; ++r) {
    const size_t li = static_cast<size_t>(ep->pairs_[static_cast<size_t>(r)].first);
    const size_t pj = static_cast<size_t>(ep->pairs_[static_cast<size_t>(r)].second);
    const std::string where = "fabric connect on rail " + std::to_string(r) + " (" + local[li].device + " " +
                              local[li].address + ") to " + RailAddressText(peer.rails[pj]);
    DialPlan plan;
    plan.local.sin_family = AF_INET;
    inet_pton(AF_INET, local[li].address.c_str(), &plan.local.sin_addr);
    plan.remote.sin_family = AF_INET;
    plan.remote.sin_addr.s_addr = peer.rails[pj].ipv4;
    plan.remote.sin_port = htons(peer.rails[pj].port);
    plan.redialUntil = Clock::now() + std::chrono::milliseconds(worker->options().connectRetryMs);
    for (int s = 0; s < perRail; ++s) {
      const int index = static_cast<int>(ep->sockets_.size());
      std::unique_ptr<FrameSocket> sock;
      if (splice != nullptr) {
        DialPlan via;
        via.redialUntil = plan.redialUntil;
        RY_RETURN_IF_ERROR(splice->dial(static_cast<int>(pj), s, &via));
        if (via.preamble.size() > kMaxPreambleBytes) {
          return InvalidArgument(where + ": a relay record of " + std::to_string(via.preamble.size()) + " bytes");
        }
        plan = std::move(via);
      }
      if (FabricError e = FrameSocket::Open(plan, index, Direction::kToInitiator, &sock); !e.ok()) {
        return SystemError(where + ": " + e.what);
      }
      OutFrame hello;
      hello.header = MakeHeader(FrameType::kHello);
      hello.header.addr = worker->id();
      hello.header.key = worker->options().connectionName;  // 0: named by addr
      hello.header.seq = connection;
      hello.header.offset = static_cast<uint64_t>(index);
      hello.header.opBytes = static_cast<uint64_t>(total);
      hello.header.value = static_cast<uint64_t>(pj);  // the peer's listener (rail) index
      if (splice != nullptr) hello.header.flags = kFlagRelayed;  // arrives from the last relay
      sock->Queue(std::move(hello));
      if (sock->fd() >= 0) worker->Watch(sock->fd());
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
    e.site.device = worker_->options().rails[static_cast<size_t>(pairs_[static_cast<size_t>(rail)].first)].device;
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
  if (op.lazy) lazy_.push_back(seq);
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

Status TcpEndpoint::PostWrite(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                              std::optional<uint32_t> immediate, bool lazy) {
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
  op.lazy = lazy;
  return Post(std::move(op));
}

Status TcpEndpoint::Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                          std::optional<uint32_t> immediate) {
  return PostWrite(src, key, remoteAddr, cookie, immediate, /*lazy=*/false);
}

Status TcpEndpoint::WriteLazy(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                              std::optional<uint32_t> immediate) {
  return PostWrite(src, key, remoteAddr, cookie, immediate, /*lazy=*/true);
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
      // A tiny op (a credit, a bare immediate) rides on the next rail without taking its turn.
      rail = op.rail = op.bytes <= StripeScheduler::kTinyOpBytes ? scheduler_.Peek() : scheduler_.Pick();
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
        if (op.lazy) f.header.flags |= kFlagLazyAck;
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
      if (h.flags & kFlagBoundOnly) return ApplyBound(socket, h.offset);
      auto it = ops_.find(h.seq);
      if (it == ops_.end()) return Error(FabricErrc::kMalformed, socket, seq, "ack for an op that is not outstanding");
      Op& op = it->second;
      if (op.nextChunk < op.chunks.size() || op.acked) {
        return Error(FabricErrc::kMalformed, socket, seq, "ack for an op not yet sent (or acked twice)");
      }
      if (op.lazy) return Error(FabricErrc::kMalformed, socket, seq, "an ack of its own for a lazily acked Write");
      // The bound completes lazy Writes only: `it` (this op's) stays valid.
      if (FabricError e = ApplyBound(socket, h.offset); !e.ok()) return e;
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

FabricError TcpEndpoint::ApplyBound(int socket, uint64_t bound) {
  if (bound > nextSeq_) {
    return Error(FabricErrc::kMalformed, socket, static_cast<int64_t>(bound),
                 "ack bound " + std::to_string(bound) + " passes ops never posted (next seq " +
                     std::to_string(nextSeq_) + ")");
  }
  while (!lazy_.empty() && lazy_.front() < bound) {
    auto it = ops_.find(lazy_.front());
    if (it != ops_.end() && it->second.nextChunk < it->second.chunks.size()) {
      return Error(FabricErrc::kMalformed, socket, static_cast<int64_t>(it->first),
                   "ack bound " + std::to_string(bound) + " passes a Write not yet sent whole");
    }
    lazy_.pop_front();
    if (it != ops_.end()) Complete(it, 0);
  }
  return {};
}

FabricError TcpEndpoint::OnWritten(int, const OutFrame& f, bool) {
  if (f.rail >= 0) scheduler_.OnWritten(f.rail);
  return {};
}

bool TcpEndpoint::Redialing() const {
  return std::any_of(sockets_.begin(), sockets_.end(), [](const auto& s) { return s->Redialing(); });
}

bool TcpEndpoint::Quiet() const {
  if (failed_) return true;
  if (!queue_.empty()) return false;
  for (const auto& s : sockets_) {
    if (s->QueuedFrames() > 0) return false;
  }
  return true;
}

void TcpEndpoint::Fail(FabricError e) {
  if (failed_) return;
  failed_ = true;
  status_ = e.ToStatus();
  if (e.errc == FabricErrc::kPeerClosed && Outstanding() == 0 && queue_.empty()) {
    // Nothing was lost: the peer ended first (its rank finished and closed). Not a
    // WARN, or every clean run ends with one; an op posted later gets the status.
    RY_INFO(log::kNet, "%s (no operation was outstanding: an orderly end, nothing lost)", e.ToString().c_str());
  } else if (e.errc == FabricErrc::kPeerClosed && quietClose_) {
    // This end is closing too (a close notice outstanding), or its owner names the
    // loss to whoever had work on it (a relay's leg): QuietPeerClose().
    RY_INFO(log::kNet, "%s (%zu ops outstanding; QuietPeerClose)", e.ToString().c_str(), Outstanding());
  } else {
    RY_WARN("%s", e.ToString().c_str());
  }
  std::vector<OutstandingOp> lost;
  lost.reserve(ops_.size() + fences_);
  for (const auto& [seq, op] : ops_) lost.push_back({op.type, op.cookie, static_cast<int64_t>(seq)});
  for (const QueueItem& item : queue_) {
    if (item.fence) lost.push_back({OpType::kFence, item.cookie, -1});
  }
  FailOutstanding(e, lost, OthersRule::kKeepCauseUnlessRefusal, [&](Event ev) { worker_->Emit(std::move(ev)); });
  ops_.clear();
  lazy_.clear();
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
    if (r.dialed && s->fd() >= 0) worker_->Watch(s->fd());
    if (!e.ok()) {
      if (spliced_ && e.errc == FabricErrc::kPeerClosed) {
        // A spliced socket is a chain of TCP connections: a relay that dies, or whose
        // next leg breaks, resets the socket as the peer would. This end cannot tell
        // which; each relay logs the leg that broke.
        e.what += " (through relays: the peer or any relay on the path may have ended it; each relay logs "
                  "which of its legs broke, at INFO)";
      }
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
  } else if (Outstanding() > 0 && now - lastActivity_ > std::chrono::milliseconds(worker_->options().timeoutMs) &&
             !Redialing()) {
    const int64_t oldest = ops_.empty() ? -1 : static_cast<int64_t>(ops_.begin()->first);
    // Name the rail of the oldest op when it has one (an op that is not striped), else
    // a socket whose connect was never answered, else the socket whose bytes the peer
    // has not acknowledged (a cut rail's: the others drained; new-user trial: a cut
    // second rail was named as rail 0), else the first that still holds unsent frames.
    const int rail = ops_.empty() ? -1 : ops_.begin()->second.rail;
    int socket = rail >= 0 ? railSockets_[static_cast<size_t>(rail)].front() : -1;
    for (size_t i = 0; socket < 0 && i < sockets_.size(); ++i) {  // a connect never answered says most
      if (sockets_[i]->connecting()) socket = static_cast<int>(i);
    }
    uint64_t mostUnacked = 0;
    for (size_t i = 0; rail < 0 && (socket < 0 || mostUnacked > 0) && i < sockets_.size(); ++i) {
      const uint64_t unacked = sockets_[i]->UnackedBytes();
      if (unacked > mostUnacked) {
        mostUnacked = unacked;
        socket = static_cast<int>(i);
      }
    }
    for (size_t i = 0; socket < 0 && i < sockets_.size(); ++i) {
      if (sockets_[i]->QueuedFrames() > 0) socket = static_cast<int>(i);
    }
    if (socket < 0) socket = 0;
    // A socket whose connect never completed: its SYNs went unanswered (a firewall
    // dropping the port, a host gone), which is no data stall (new-user trial: a relay
    // whose TCP port was dropped read as "no progress").
    const bool neverConnected = static_cast<size_t>(socket) < sockets_.size() && sockets_[static_cast<size_t>(socket)]->connecting();
    // Spliced, the named rail is only this host's first hop: a cable cut or a relay
    // frozen further on stalls the socket the same way.
    Fail(Error(FabricErrc::kTimeout, socket, oldest,
               "no progress for " + std::to_string(worker_->options().timeoutMs) + " ms (RAILYARD_TIMEOUT_MS) with " +
                   std::to_string(Outstanding()) + " ops outstanding" +
                   (neverConnected ? std::string("; its TCP connect to ") + (spliced_ ? "the relay" : "the peer") +
                                         " never completed (no answer to it: a firewall dropping that port, or the "
                                         "host is gone)"
                                   : std::string()) +
                   (spliced_ ? std::string(" (through relays: the rail named is this host's first hop; the stall may be "
                                           "on any cable or relay of the path)")
                             : std::string())));
  }
}

}  // namespace railyard::fabric::tcp
