#include "proxy/fabric/fake/fake_transport.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "proxy/fabric/fail_outstanding.h"
#include "proxy/fabric/region_table.h"

namespace railyard::fabric::fake {
namespace {

constexpr uint32_t kFakeAddressMagic = 0x4b465952;  // "RYFK"
constexpr size_t kMaxRecordBytes = 64 * 1024;
constexpr int kWindow = 256;

class FakeDomain;
class FakeWorker;
class FakeEndpoint;

/// An op travelling from an Endpoint to its target Worker.
struct Request {
  uint64_t fromWorker = 0;
  uint64_t endpoint = 0;  ///< endpoint id within fromWorker
  uint64_t seq = 0;
  OpType op = OpType::kNone;
  char* local = nullptr;  ///< Write source / Read destination (same process)
  uint64_t bytes = 0;
  uint64_t remoteAddr = 0;
  uint64_t key = 0;
  bool hasImm = false;
  uint32_t imm = 0;
  uint64_t reportBytes = 0;  ///< Write with immediate: Event::bytes at the target (WriteFinal: the whole Write)
  uint64_t add = 0;
  std::vector<uint8_t> record;
};

/// The answer to a Request.
struct Reply {
  uint64_t endpoint = 0;
  uint64_t seq = 0;
  uint64_t value = 0;
  FabricErrc errc = FabricErrc::kNone;
  std::string what;
};

/// Live Workers by id. Holding its mutex keeps every listed Worker alive.
struct Registry {
  std::mutex mu;
  std::map<uint64_t, FakeWorker*> workers;
};
Registry& TheRegistry() {
  static Registry* r = new Registry;  // never destroyed: Workers may outlive static destruction order
  return *r;
}

class FakeDomain : public Domain {
 public:
  explicit FakeDomain(const FakeOptions& o) : trail_(o.targetEventsTrail) {
    for (int i = 0; i < o.rails; ++i) rails_.push_back({"fake" + std::to_string(i), "", o.speedMbps});
    caps_.flags = kCapSend | kCapWrite | kCapWriteImm | kCapRead | kCapFetchAdd | kCapFence | kCapHostMemory |
                  kCapPreciseRemoteErrors;
    caps_.maxRecordBytes = kMaxRecordBytes;
    caps_.maxOpBytes = 1ull << 40;
    caps_.maxOpsInFlight = kWindow;
  }
  const char* TransportName() const override { return "fake"; }
  const Capabilities& capabilities() const override { return caps_; }
  const std::vector<RailInfo>& rails() const override { return rails_; }
  Status Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) override {
    if (kind != MemoryKind::kHost) return InvalidUsage("the fake fabric transport has no device memory");
    std::shared_ptr<RegionRecord> rec;
    RY_RETURN_IF_ERROR(regions_.Register(addr, bytes, access, kind, &rec));
    *out = &rec->region();
    return Status::Ok();
  }
  Status Deregister(const Region* region) override { return regions_.Deregister(region); }
  Status CreateWorker(std::unique_ptr<Worker>* out) override;
  RegionTable& regions() { return regions_; }
  /// FakeOptions::targetEventsTrail.
  bool trail() const { return trail_; }

 private:
  bool trail_ = false;
  std::vector<RailInfo> rails_;
  Capabilities caps_;
  RegionTable regions_;
};

class FakeWorker : public Worker {
 public:
  explicit FakeWorker(FakeDomain* d) : domain_(d) {
    std::random_device rd;
    std::lock_guard lock(TheRegistry().mu);
    do {
      id_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    } while (id_ == 0 || TheRegistry().workers.count(id_) != 0);
    TheRegistry().workers[id_] = this;
  }
  ~FakeWorker() override;

  std::vector<uint8_t> Address() const override {
    std::vector<uint8_t> a(12);
    std::memcpy(a.data(), &kFakeAddressMagic, 4);
    std::memcpy(a.data() + 4, &id_, 8);
    return a;
  }
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override;
  size_t Progress(std::vector<Event>* events) override;
  WorkerStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }

  uint64_t id() const { return id_; }
  /// Called with the registry lock held (so this Worker is alive).
  void Deliver(Request r) {
    std::lock_guard lock(mu_);
    inbox_.push_back(std::move(r));
  }
  void Answer(Reply r) {
    std::lock_guard lock(mu_);
    replies_.push_back(std::move(r));
  }
  void Attach(uint64_t ep, FakeEndpoint* e) { endpoints_[ep] = e; }
  void Detach(uint64_t ep) { endpoints_.erase(ep); }
  uint64_t NextEndpointId() { return ++lastEndpoint_; }
  void Emit(Event e) { events_.push_back(std::move(e)); }

 private:
  Reply Execute(Request& r, std::vector<Event>* events);

  FakeDomain* domain_;
  uint64_t id_ = 0;
  mutable std::mutex mu_;  ///< guards inbox_, replies_, stats_
  std::deque<Request> inbox_;
  std::deque<Reply> replies_;
  std::vector<Event> trailing_;  ///< targetEventsTrail: target events held for the next Progress
  WorkerStats stats_;
  std::set<std::pair<uint64_t, uint64_t>> refused_;  ///< (worker, endpoint) whose ops are dropped
  std::map<uint64_t, FakeEndpoint*> endpoints_;
  uint64_t lastEndpoint_ = 0;
  std::vector<Event> events_;
};

/// Sends `r` to worker `to`; false when it does not exist (any more).
bool Route(uint64_t to, Request r) {
  std::lock_guard lock(TheRegistry().mu);
  auto it = TheRegistry().workers.find(to);
  if (it == TheRegistry().workers.end()) return false;
  it->second->Deliver(std::move(r));
  return true;
}

void RouteReply(uint64_t to, Reply r) {
  std::lock_guard lock(TheRegistry().mu);
  auto it = TheRegistry().workers.find(to);
  if (it != TheRegistry().workers.end()) it->second->Answer(std::move(r));
}

class FakeEndpoint : public Endpoint {
 public:
  FakeEndpoint(FakeWorker* w, uint64_t peer) : worker_(w), peer_(peer), id_(w->NextEndpointId()) {
    worker_->Attach(id_, this);
    char buf[32];
    std::snprintf(buf, sizeof buf, "fake w=%016llx", static_cast<unsigned long long>(peer));
    peerName_ = buf;
  }
  ~FakeEndpoint() override { worker_->Detach(id_); }

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override {
    if (failed_) return status_;
    if (record.empty() || record.size() > kMaxRecordBytes) {
      return InvalidArgument("fabric Send of " + std::to_string(record.size()) + " bytes (1..65536)");
    }
    Request r;
    r.op = OpType::kSend;
    r.record.assign(record.begin(), record.end());
    return Post(std::move(r), cookie);
  }
  Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate) override {
    if (failed_) return status_;
    RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
    Request r;
    r.op = OpType::kWrite;
    r.local = src.data();
    r.bytes = src.bytes;
    r.remoteAddr = remoteAddr;
    r.key = key.softwareKey;
    r.hasImm = immediate.has_value();
    r.imm = immediate.value_or(0);
    r.reportBytes = src.bytes;
    return Post(std::move(r), cookie);
  }
  Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override {
    if (failed_) return status_;
    if (opBytes < src.bytes) return InvalidArgument("fabric WriteFinal: a whole Write smaller than its last piece");
    RY_RETURN_IF_ERROR(CheckLocal(src, "fabric Write"));
    Request r;
    r.op = OpType::kWrite;
    r.local = src.data();
    r.bytes = src.bytes;
    r.remoteAddr = remoteAddr;
    r.key = key.softwareKey;
    r.hasImm = true;
    r.imm = immediate;
    r.reportBytes = opBytes;
    return Post(std::move(r), cookie);
  }
  Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie) override {
    if (failed_) return status_;
    RY_RETURN_IF_ERROR(CheckLocal(dst, "fabric Read"));
    Request r;
    r.op = OpType::kRead;
    r.local = dst.data();
    r.bytes = dst.bytes;
    r.remoteAddr = remoteAddr;
    r.key = key.softwareKey;
    return Post(std::move(r), cookie);
  }
  Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override {
    if (failed_) return status_;
    Request r;
    r.op = OpType::kFetchAdd;
    r.bytes = 8;
    r.remoteAddr = remoteAddr;
    r.key = key.softwareKey;
    r.add = add;
    return Post(std::move(r), cookie);
  }
  Status Fence(uint64_t cookie) override {
    if (failed_) return status_;
    fences_.push_back({nextSeq_, cookie});
    Progress();
    return Status::Ok();
  }
  Status status() const override { return status_; }
  size_t Outstanding() const override { return ops_.size() + fences_.size(); }
  std::string PeerName() const override { return peerName_; }

  /// Sends what the fences allow; emits fences whose ops are done.
  void Progress() {
    while (!failed_) {
      const uint64_t lowest = ops_.empty() ? nextSeq_ : ops_.begin()->first;
      if (!fences_.empty() && fences_.front().first <= lowest) {
        Event e;
        e.op = OpType::kFence;
        e.cookie = fences_.front().second;
        worker_->Emit(std::move(e));
        fences_.pop_front();
        continue;
      }
      if (queue_.empty()) return;
      Request& r = queue_.front();
      if (!fences_.empty() && r.seq >= fences_.front().first) return;  // held by a fence
      const int64_t seq = static_cast<int64_t>(r.seq);
      if (!Route(peer_, std::move(r))) {
        Fail(FabricErrc::kPeerClosed, seq, "the peer worker is gone");
        return;
      }
      queue_.pop_front();
    }
  }
  void OnReply(const Reply& r) {
    auto it = ops_.find(r.seq);
    if (it == ops_.end() || failed_) return;
    if (r.errc != FabricErrc::kNone) {
      Fail(r.errc, static_cast<int64_t>(r.seq), r.what);
      return;
    }
    Event e;
    e.op = it->second.first;
    e.cookie = it->second.second;
    e.value = r.value;
    worker_->Emit(std::move(e));
    ops_.erase(it);
    Progress();
  }
  void Fail(FabricErrc errc, int64_t seq, const std::string& what) {
    if (failed_) return;
    failed_ = true;
    FabricError err;
    err.errc = errc;
    err.site.peer = peerName_;
    err.site.device = "fake0";
    err.site.rail = 0;
    err.site.seq = seq;
    err.what = what;
    status_ = err.ToStatus();
    std::vector<OutstandingOp> lost;
    for (auto& [s, op] : ops_) lost.push_back({op.first, op.second, static_cast<int64_t>(s)});
    for (auto& f : fences_) lost.push_back({OpType::kFence, f.second, -1});
    FailOutstanding(err, lost, OthersRule::kKeepCauseUnlessRefusal, [&](Event e) { worker_->Emit(std::move(e)); });
    ops_.clear();
    fences_.clear();
    queue_.clear();
  }

 private:
  Status CheckLocal(const LocalSlice& s, const char* what) const {
    if (s.region == nullptr || (s.region->access & kAccessLocal) == 0) {
      return InvalidArgument(std::string(what) + ": the local region is missing or lacks local access");
    }
    if (s.offset > s.region->length || s.bytes > s.region->length - s.offset) {
      return InvalidArgument(std::string(what) + ": local range outside its region");
    }
    return Status::Ok();
  }
  Status Post(Request r, uint64_t cookie) {
    r.fromWorker = worker_->id();
    r.endpoint = id_;
    r.seq = nextSeq_++;
    ops_[r.seq] = {r.op, cookie};
    queue_.push_back(std::move(r));
    Progress();
    return Status::Ok();
  }

  FakeWorker* worker_;
  uint64_t peer_;
  uint64_t id_;
  std::string peerName_;
  uint64_t nextSeq_ = 0;
  std::map<uint64_t, std::pair<OpType, uint64_t>> ops_;  ///< seq -> (op, cookie), not yet answered
  std::deque<Request> queue_;                            ///< not yet delivered (held by a fence)
  std::deque<std::pair<uint64_t, uint64_t>> fences_;     ///< (ops below this seq first, cookie)
  Status status_;
  bool failed_ = false;
};

FakeWorker::~FakeWorker() {
  std::deque<Request> pending;
  {
    std::lock_guard lock(TheRegistry().mu);
    TheRegistry().workers.erase(id_);
    std::lock_guard mine(mu_);
    pending.swap(inbox_);
  }
  for (Request& r : pending) {
    RouteReply(r.fromWorker, Reply{r.endpoint, r.seq, 0, FabricErrc::kPeerClosed, "the peer worker was destroyed"});
  }
}

Status FakeDomain::CreateWorker(std::unique_ptr<Worker>* out) {
  *out = std::make_unique<FakeWorker>(this);
  return Status::Ok();
}

Status FakeWorker::Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) {
  uint32_t magic = 0;
  uint64_t peer = 0;
  if (peerAddress.size() != 12) return InvalidArgument("fake worker address of " + std::to_string(peerAddress.size()) + " bytes");
  std::memcpy(&magic, peerAddress.data(), 4);
  std::memcpy(&peer, peerAddress.data() + 4, 8);
  if (magic != kFakeAddressMagic || peer == 0) return InvalidArgument("not a fake fabric worker address");
  *out = std::make_unique<FakeEndpoint>(this, peer);
  return Status::Ok();
}

Reply FakeWorker::Execute(Request& r, std::vector<Event>* events) {
  Reply out{r.endpoint, r.seq, 0, FabricErrc::kNone, {}};
  if (refused_.count({r.fromWorker, r.endpoint}) != 0) {
    out.errc = FabricErrc::kEndpointFailed;
    out.what = "an earlier op of this endpoint was refused";
    return out;
  }
  auto refuse = [&](FabricErrc errc, std::string why) {
    refused_.insert({r.fromWorker, r.endpoint});
    std::lock_guard lock(mu_);
    ++stats_.framesRefused;
    out.errc = errc;
    out.what = "the target refused: " + why;
    return out;
  };
  if (r.op == OpType::kSend) {
    Event e;
    e.kind = EventKind::kRecord;
    e.op = OpType::kSend;
    e.peer = r.fromWorker;
    e.record = std::move(r.record);
    events->push_back(std::move(e));
    return out;
  }
  const uint32_t right = r.op == OpType::kWrite ? kAccessRemoteWrite
                         : r.op == OpType::kRead ? kAccessRemoteRead
                                                 : kAccessRemoteAtomic;
  if (r.op == OpType::kFetchAdd && r.remoteAddr % 8 != 0) return refuse(FabricErrc::kMisaligned, "fetch-add not 8-byte aligned");
  std::shared_ptr<RegionRecord> pin;
  std::string why;
  const FabricErrc errc = domain_->regions().Resolve(r.key, r.remoteAddr, r.bytes, right, &pin, &why);
  if (errc != FabricErrc::kNone) return refuse(errc, why);
  char* remote = reinterpret_cast<char*>(r.remoteAddr);
  const bool live = pin->WithLive([&] {
    if (r.op == OpType::kWrite) {
      if (r.bytes > 0) std::memcpy(remote, r.local, r.bytes);
    } else if (r.op == OpType::kRead) {
      if (r.bytes > 0) std::memcpy(r.local, remote, r.bytes);
    } else {
      std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(remote));
      out.value = word.fetch_add(r.add, std::memory_order_acq_rel);
    }
  });
  if (!live) return refuse(FabricErrc::kDeregistered, "the region was deregistered");
  {
    std::lock_guard lock(mu_);
    (r.op == OpType::kRead ? stats_.bytesServed : stats_.bytesLanded) += r.op == OpType::kFetchAdd ? 0 : r.bytes;
  }
  if (r.op == OpType::kWrite && r.hasImm) {
    Event e;
    e.kind = EventKind::kImmediate;
    e.op = OpType::kWrite;
    e.value = r.imm;
    e.bytes = r.reportBytes;
    e.peer = r.fromWorker;
    events->push_back(std::move(e));
  }
  return out;
}

size_t FakeWorker::Progress(std::vector<Event>* events) {
  const size_t before = events->size();
  std::move(events_.begin(), events_.end(), std::back_inserter(*events));
  events_.clear();
  // targetEventsTrail: what the last call landed is returned now (a CQ polled late).
  std::move(trailing_.begin(), trailing_.end(), std::back_inserter(*events));
  trailing_.clear();
  // Serve peers' ops, in arrival (= post) order.
  std::deque<Request> work;
  {
    std::lock_guard lock(mu_);
    work.swap(inbox_);
  }
  std::vector<Event>* landed = domain_->trail() ? &trailing_ : events;
  for (Request& r : work) {
    Reply reply = Execute(r, landed);
    const uint64_t to = r.fromWorker;
    RouteReply(to, std::move(reply));
  }
  // Completions of this Worker's ops.
  std::deque<Reply> replies;
  {
    std::lock_guard lock(mu_);
    replies.swap(replies_);
  }
  for (const Reply& r : replies) {
    auto it = endpoints_.find(r.endpoint);
    if (it != endpoints_.end()) it->second->OnReply(r);
  }
  for (auto& [id, ep] : endpoints_) ep->Progress();
  std::move(events_.begin(), events_.end(), std::back_inserter(*events));
  events_.clear();
  return events->size() - before;
}

}  // namespace

Status CreateFakeDomain(const FakeOptions& options, std::unique_ptr<Domain>* out) {
  if (options.rails < 1 || options.rails > 16) return InvalidArgument("fake domain rails 1..16");
  *out = std::make_unique<FakeDomain>(options);
  return Status::Ok();
}

}  // namespace railyard::fabric::fake
