#include "proxy/verbs/verbs_setup.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "env/log.h"
#include "proxy/tcp/tcp_recv_comm.h"

namespace railyard::proxy::verbs {

namespace {

std::vector<char> ReadyRecord() {
  RecordHeader h = MakeHeader(static_cast<RecordKind>(kKindQpReady));
  std::vector<char> out(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

/// Rkeys of `buf` on each of the bundle's rails, into the rails of `set`.
void FillRkeys(const QpBundle& qps, const RegisteredBuffer& buf, bool fifo, QpSet* set) {
  for (size_t r = 0; r < set->rails.size(); ++r) {
    const uint32_t key = buf.mr()->hcaRkey[static_cast<size_t>(qps.ports()[r])];
    (fifo ? set->rails[r].fifoRkey : set->rails[r].ringRkey) = key;
  }
}

Status TimedOut(const Clock::time_point& since, int timeoutMs, const std::string& what) {
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
  if (waited.count() <= timeoutMs) return Status::Ok();
  return RemoteError(what + " did not complete within " + std::to_string(timeoutMs) +
                     " ms (RAILYARD_TIMEOUT_MS)");
}

}  // namespace

Status RecordReader::Read(int fd, const std::string& peer, bool* done) {
  *done = false;
  for (;;) {
    if (buf_.size() < want_) {
      const size_t have = buf_.size();
      buf_.resize(want_);
      size_t got = 0;
      bool closed = false;
      Status s = TryRecv(fd, buf_.data() + have, want_ - have, &got, &closed);
      buf_.resize(have + got);
      if (!s.ok()) return SystemError("verbs handshake with " + peer + ": " + s.message());
      if (closed) return SystemError("verbs handshake with " + peer + ": the peer closed the connection");
      if (buf_.size() < want_) return Status::Ok();
    }
    if (want_ == sizeof(RecordHeader)) {
      RecordHeader h;
      std::memcpy(&h, buf_.data(), sizeof h);
      RY_RETURN_IF_ERROR(CheckHeader(h, "verbs handshake record"));
      if (h.kind == kKindQpSet) {
        want_ = sizeof(QpSetHeader);
        continue;
      }
    } else if (want_ == sizeof(QpSetHeader)) {
      uint32_t bytes = 0;
      RY_RETURN_IF_ERROR(QpSetLength(buf_.data(), buf_.size(), &bytes));
      if (bytes > want_) {
        want_ = bytes;
        continue;
      }
    }
    *done = true;
    return Status::Ok();
  }
}

Status RecordWriter::Write(int fd, const std::string& peer, bool* done) {
  *done = false;
  if (sent_ < buf_.size()) {
    Status s = TrySend(fd, buf_.data() + sent_, buf_.size() - sent_, &sent_);
    if (!s.ok()) return SystemError("verbs handshake with " + peer + ": " + s.message());
  }
  *done = sent_ == buf_.size();
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Connector

Status VerbsConnector::Start(const ListenAddress& to, const VerbsDeviceSetup& setup, const TcpOptions& tcp,
                             const std::string& host, std::unique_ptr<VerbsConnector>* out) {
  SocketTarget control;
  control.remote = to.addr;
  control.remoteLen = to.len;
  control.rail = setup.options.device;
  return Start(to, setup, tcp, host, std::move(control), out);
}

Status VerbsConnector::Start(const ListenAddress& to, const VerbsDeviceSetup& setup, const TcpOptions& tcp,
                             const std::string& host, SocketTarget control,
                             std::unique_ptr<VerbsConnector>* out) {
  if (to.verbsRails == 0) {
    return InvalidUsage("transport mismatch: " + to.ToString() + " listens with the TCP transport and this "
                        "process uses verbs (set RAILYARD_TRANSPORT the same on every host)");
  }
  std::unique_ptr<VerbsConnector> c(new VerbsConnector());
  c->to_ = to;
  c->setup_ = setup;
  TcpOptions o = tcp;
  o.nsocks = 0;  // the control socket only
  std::vector<SocketTarget> targets;
  targets.push_back(std::move(control));
  RY_RETURN_IF_ERROR(TcpConnector::Start(to, std::move(targets), o, host, &c->tcp_));
  *out = std::move(c);
  return Status::Ok();
}

Status VerbsConnector::Progress(SendComm** comm) {
  *comm = nullptr;
  const std::string peer = to_.ToString();
  if (state_ == 0) {
    bool done = false;
    RY_RETURN_IF_ERROR(tcp_->ProgressConnection(&conn_, &done));
    if (!done) return Status::Ok();
    const int nqps = DataQpCount(setup_.link.qpsPerConn, static_cast<int>(setup_.ports.size()), to_.verbsRails);
    RY_RETURN_IF_ERROR(QpBundle::Create(setup_.ib, setup_.ports, nqps, 0, sizeof(ChunkHeader), &qps_));
    RY_RETURN_IF_ERROR(RegisteredBuffer::Create(sizeof(FifoSlot) * RecvTable::kMaxRequests, &fifo_));
    RY_RETURN_IF_ERROR(RegisteredBuffer::Create((sizeof(ChunkHeader) * kRingEntries + sizeof(uint64_t) * kHeartbeatSlots) * qps_->qps().size(), &staging_));
    QpSet mine = qps_->Describe();
    const QpLinkAttrs attrs = ResolveQpLinkAttrs(setup_.link, setup_.initTrafficClass);
    mine.trafficClass = attrs.trafficClass;
    mine.serviceLevel = attrs.serviceLevel;
    mine.fifoAddr = reinterpret_cast<uint64_t>(fifo_->data());
    FillRkeys(*qps_, *fifo_, true, &mine);
    writer_.Set(EncodeQpSet(mine));
    state_ = 1;
  }
  if (state_ == 1) {
    bool done = false;
    RY_RETURN_IF_ERROR(writer_.Write(conn_.control.get(), peer, &done));
    if (!done) return TimedOut(started_, setup_.options.timeoutMs, "verbs connect to " + peer);
    state_ = 2;
  }
  if (state_ == 2) {
    bool done = false;
    if (Status r = reader_.Read(conn_.control.get(), peer, &done); !r.ok()) {
      return Status(r.code(), r.message() + " (from " + peer + "); no QP was modified");
    }
    if (!done) return TimedOut(started_, setup_.options.timeoutMs, "verbs connect to " + peer);
    Status s = DecodeQpSet(reader_.bytes().data(), reader_.bytes().size(),
                           static_cast<int>(qps_->qps().size()), &remote_);
    if (!s.ok()) return Status(s.code(), s.message() + " (from " + peer + "); no QP was modified");
    if (remote_.ringEntries != kRingEntries || remote_.ringAddr == 0) {
      return InvalidUsage("QP record from " + peer + " gives " + std::to_string(remote_.ringEntries) +
                          " completion-ring entries, expected " + std::to_string(kRingEntries));
    }
    const QpLinkAttrs attrs = ResolveQpLinkAttrs(setup_.link, setup_.initTrafficClass);
    RY_RETURN_IF_ERROR(qps_->Connect(remote_, attrs, attrs.trafficClass, attrs.serviceLevel));
    writer_.Set(ReadyRecord());
    state_ = 3;
  }
  bool done = false;
  RY_RETURN_IF_ERROR(writer_.Write(conn_.control.get(), peer, &done));
  if (!done) return TimedOut(started_, setup_.options.timeoutMs, "verbs connect to " + peer);
  VerbsLink link;
  link.peer = conn_.peer;
  link.peer.device = qps_->RailsText();
  link.options = setup_.options;
  link.control = std::move(conn_.control);
  link.remote = std::move(remote_);
  link.qps = std::move(qps_);
  RY_INFO(log::kNet, "verbs: connected to %s with %zu QPs", link.peer.ToString().c_str(), link.qps->qps().size());
  *comm = new VerbsSendComm(std::move(link), std::move(fifo_), std::move(staging_));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Listener

Status VerbsListenComm::Create(const sockaddr_storage& bindAddr, socklen_t bindLen, const VerbsDeviceSetup& setup,
                               const TcpOptions& tcp, const std::string& host,
                               std::unique_ptr<VerbsListenComm>* out, ListenAddress* handle) {
  std::unique_ptr<VerbsListenComm> l(new VerbsListenComm());
  l->setup_ = setup;
  l->tcpOptions_ = tcp;
  TcpOptions o = tcp;
  if (setup.fabric) {
    o.acceptControlOnly = true;  // verbs peers (control socket only) and relayed TCP peers
  } else {
    o.nsocks = 0;
  }
  RY_RETURN_IF_ERROR(TcpListenComm::Create(bindAddr, bindLen, o, host, &GlobalMrCache(), &l->tcp_, handle));
  handle->verbsRails = static_cast<int>(setup.ports.size());
  *out = std::move(l);
  return Status::Ok();
}

Status VerbsListenComm::Step(Pending& p, RecvComm** comm) {
  const std::string peer = p.conn.peer.ToString();
  if (p.state == 0) {
    bool done = false;
    if (Status r = p.reader.Read(p.conn.control.get(), peer, &done); !r.ok()) {
      return Status(r.code(), r.message() + " (from " + peer + "); no QP was created");
    }
    if (!done) return TimedOut(p.since, setup_.options.timeoutMs, "verbs accept from " + peer);
    Status s = DecodeQpSet(p.reader.bytes().data(), p.reader.bytes().size(), 0, &p.remote);
    if (!s.ok()) return Status(s.code(), s.message() + " (from " + peer + "); no QP was created");
    if (p.remote.fifoAddr == 0) return InvalidUsage("QP record from " + peer + " has no CTS FIFO address");
    const int nqps = static_cast<int>(p.remote.qps.size());
    if (setup_.fabric) {
      std::vector<int> ports, qpRails;
      if (Status m = MatchRails(p.remote, &ports, &qpRails); !m.ok()) {
        return Status(m.code(), m.message() + " (from " + peer + "); no QP was created");
      }
      RY_RETURN_IF_ERROR(QpBundle::Create(setup_.ib, ports, nqps, kRingEntries, sizeof(FifoSlot), &p.qps, &qpRails));
    } else {
      RY_RETURN_IF_ERROR(QpBundle::Create(setup_.ib, setup_.ports, nqps, kRingEntries, sizeof(FifoSlot), &p.qps));
    }
    RY_RETURN_IF_ERROR(RegisteredBuffer::Create(sizeof(ChunkHeader) * kRingEntries * nqps + kHeartbeatBytes, &p.rings));
    RY_RETURN_IF_ERROR(RegisteredBuffer::Create(sizeof(FifoSlot) * RecvTable::kMaxRequests, &p.staging));
    // The connector chose TC and SL (it sends them); timeout/retry are ours.
    const QpLinkAttrs attrs = ResolveQpLinkAttrs(setup_.link, setup_.initTrafficClass);
    RY_RETURN_IF_ERROR(p.qps->Connect(p.remote, attrs, p.remote.trafficClass, p.remote.serviceLevel));
    // Receive WRs go up before our record leaves, so no immediate ever finds none.
    for (size_t qi = 0; qi < p.qps->qps().size(); ++qi) {
      for (uint32_t i = 0; i < kRingEntries; ++i) {
        ibv_recv_wr wr{};
        wr.wr_id = qi;
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_recv(p.qps->qps()[qi].qp, &wr, &bad); rc != 0) {
          return SystemError("ibv_post_recv on QP " + std::to_string(p.qps->qps()[qi].qp->qp_num) + ": " + ErrnoText(rc));
        }
      }
    }
    QpSet mine = p.qps->Describe();
    mine.ringAddr = reinterpret_cast<uint64_t>(p.rings->data());
    mine.ringEntries = kRingEntries;
    FillRkeys(*p.qps, *p.rings, false, &mine);
    p.writer.Set(EncodeQpSet(mine));
    p.reader = RecordReader();
    p.state = 1;
  }
  if (p.state == 1) {
    bool done = false;
    RY_RETURN_IF_ERROR(p.writer.Write(p.conn.control.get(), peer, &done));
    if (!done) return TimedOut(p.since, setup_.options.timeoutMs, "verbs accept from " + peer);
    p.state = 2;
  }
  bool done = false;
  RY_RETURN_IF_ERROR(p.reader.Read(p.conn.control.get(), peer, &done));
  if (!done) return TimedOut(p.since, setup_.options.timeoutMs, "verbs accept from " + peer);
  RecordHeader h;
  std::memcpy(&h, p.reader.bytes().data(), sizeof h);
  if (h.kind != kKindQpReady) {
    return InvalidUsage("verbs handshake with " + peer + ": record kind " + std::to_string(h.kind) +
                        " where the ready record was expected");
  }
  VerbsLink link;
  link.peer = p.conn.peer;
  link.peer.device = p.qps->RailsText();
  link.options = setup_.options;
  link.control = std::move(p.conn.control);
  link.remote = std::move(p.remote);
  link.qps = std::move(p.qps);
  RY_INFO(log::kNet, "verbs: accepted %s with %zu QPs", link.peer.ToString().c_str(), link.qps->qps().size());
  *comm = new VerbsRecvComm(std::move(link), std::move(p.rings), std::move(p.staging));
  return Status::Ok();
}

Status VerbsListenComm::MatchRails(const QpSet& remote, std::vector<int>* ports,
                                   std::vector<int>* qpRails) const {
  std::vector<int> railMap(remote.rails.size(), -1);
  for (size_t r = 0; r < remote.rails.size(); ++r) {
    const uint8_t* g = remote.rails[r].gid;
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g, kMapped, sizeof kMapped) != 0) {
      return InvalidUsage("peer rail " + RailName(remote.rails[r]) +
                          " has no IPv4-mapped GID: fabric mode matches rails by IPv4 subnet");
    }
    in_addr a{};
    std::memcpy(&a.s_addr, g + 12, 4);
    for (int port : setup_.ports) {
      if (!setup_.ib->at(static_cast<size_t>(port)).OnSubnet(a)) continue;
      auto it = std::find(ports->begin(), ports->end(), port);
      if (it == ports->end()) it = ports->insert(ports->end(), port);
      railMap[r] = static_cast<int>(it - ports->begin());
      break;
    }
    if (railMap[r] < 0) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &a, text, sizeof text);
      return InvalidUsage(std::string("no local RDMA port is on the subnet of peer rail ") +
                          RailName(remote.rails[r]) + " (" + text + ")");
    }
  }
  for (const QpWire& q : remote.qps) qpRails->push_back(railMap[q.rail]);
  return Status::Ok();
}

Status VerbsListenComm::Accept(RecvComm** recvComm) {
  *recvComm = nullptr;
  for (;;) {
    auto p = std::make_unique<Pending>();
    bool got = false;
    RY_RETURN_IF_ERROR(tcp_->AcceptConnection(&p->conn, &got));
    if (!got) break;
    if (!p->conn.data.empty()) {
      // Fabric mode: a TCP connection (a relayed peer, or a host without RDMA).
      RY_INFO(log::kNet, "accepted a TCP connection from %s with %zu data sockets",
              p->conn.peer.ToString().c_str(), p->conn.data.size());
      *recvComm = new TcpRecvComm(std::move(p->conn), tcpOptions_, &GlobalMrCache());
      return Status::Ok();
    }
    pending_.push_back(std::move(p));
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    RecvComm* comm = nullptr;
    Status s = Step(*pending_[i], &comm);
    if (!s.ok() || comm != nullptr) pending_.erase(pending_.begin() + static_cast<long>(i));
    if (!s.ok()) {
      RY_WARN("verbs: refused a connection: %s", s.message().c_str());
      return s;
    }
    if (comm != nullptr) {
      *recvComm = comm;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace railyard::proxy::verbs
