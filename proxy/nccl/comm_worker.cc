#include "proxy/nccl/comm_worker.h"

#include "env/log.h"

namespace railyard::proxy::nccl {

CommWorker::CommWorker(fabric::Domain* domain, std::string device) : domain_(domain), device_(std::move(device)) {}

CommWorker::~CommWorker() { Stop(); }

Status CommWorker::Start() {
  std::lock_guard lock(mu_);
  if (worker_ != nullptr) return Status::Ok();
  RY_RETURN_IF_ERROR(domain_->CreateWorker(&worker_));
  stop_ = false;
  helper_ = std::thread([this] { HelperLoop(); });
  return Status::Ok();
}

void CommWorker::Stop() {
  {
    std::lock_guard lock(mu_);
    if (worker_ == nullptr) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (helper_.joinable()) helper_.join();
  std::lock_guard lock(mu_);
  if (!clients_.empty() || !listeners_.empty()) {
    RY_WARN("fabric comms of device %s: %zu comms and %zu listen comms still open at stop", device_.c_str(),
            clients_.size(), listeners_.size());
  }
  loopback_.reset();  // before its Worker
  if (flushRegion_ != nullptr) (void)domain_->Deregister(flushRegion_);
  flushRegion_ = nullptr;
  worker_.reset();
}

Status CommWorker::LoopbackLocked(fabric::Endpoint** ep, fabric::LocalSlice* word) {
  if (worker_ == nullptr) return InvalidUsage("fabric comms of " + device_ + ": flush after the worker stopped");
  if (flushRegion_ == nullptr) {
    RY_RETURN_IF_ERROR(domain_->Register(flushWord_.data(), flushWord_.size(), fabric::kAccessLocal,
                                         fabric::MemoryKind::kHost, &flushRegion_));
  }
  if (loopback_ == nullptr || !loopback_->status().ok()) {
    loopback_.reset();
    RY_RETURN_IF_ERROR(worker_->Connect(worker_->Address(), &loopback_));
  }
  *ep = loopback_.get();
  *word = fabric::LocalSlice{flushRegion_, 0, 1};
  return Status::Ok();
}

size_t CommWorker::DriveLocked() {
  gate_.NoteCall();
  events_.clear();
  const size_t n = worker_->Progress(&events_);
  for (const fabric::Event& e : events_) Dispatch(e);
  return n;
}

Status CommWorker::AddClient(CommClient* c, uint32_t* id) {
  if (clients_.size() >= kMaxCommId) return InternalError("more than 2^24 fabric comms open on " + device_);
  while (nextId_ == 0 || nextId_ > kMaxCommId || clients_.count(nextId_) != 0) {
    nextId_ = nextId_ >= kMaxCommId ? 1 : nextId_ + 1;
  }
  *id = nextId_++;
  clients_[*id] = c;
  cv_.notify_all();  // the helper has comms to serve now
  return Status::Ok();
}

void CommWorker::RemoveClient(uint32_t id) { clients_.erase(id); }

void CommWorker::AddListener(uint64_t listenId, HelloSink* sink) {
  listeners_[listenId] = sink;
  cv_.notify_all();
}

void CommWorker::RemoveListener(uint64_t listenId) { listeners_.erase(listenId); }

void CommWorker::Dispatch(const fabric::Event& e) {
  using fabric::EventKind;
  switch (e.kind) {
    case EventKind::kDone:
    case EventKind::kError: {
      if (e.kind == EventKind::kError && e.op == fabric::OpType::kNone) {
        // A peer's connection into this Worker failed: every comm of that peer hears it.
        for (auto& [id, c] : clients_) {
          if (c->PeerWorker() != 0 && c->PeerWorker() == e.peer) c->OnEvent(e);
        }
        return;
      }
      auto it = clients_.find(static_cast<uint32_t>(e.cookie >> kCookieCommShift));
      if (it != clients_.end()) it->second->OnEvent(e);  // else: the comm was closed
      return;
    }
    case EventKind::kImmediate: {
      auto it = clients_.find(static_cast<uint32_t>(e.value >> kImmCommShift));
      if (it == clients_.end()) {
        RY_INFO(log::kNet, "fabric comms of %s: immediate 0x%llx for comm %llu, which is not open (dropped)",
                device_.c_str(), static_cast<unsigned long long>(e.value),
                static_cast<unsigned long long>(e.value >> kImmCommShift));
        return;
      }
      it->second->OnEvent(e);
      return;
    }
    case EventKind::kRecord: {
      const uint16_t kind = RecordKindOf(e.record);
      if (kind == static_cast<uint16_t>(RecordKind::kFabricHello)) {
        Hello h;
        fabric::RemoteKey fifo;
        if (Status s = DecodeHello(e.record, &h, &fifo); !s.ok()) {
          RY_WARN("fabric comms of %s: refused a hello from worker %llx: %s", device_.c_str(),
                  static_cast<unsigned long long>(e.peer), s.message().c_str());
          return;
        }
        auto it = listeners_.find(h.listenId);
        if (it == listeners_.end()) {
          RY_WARN("fabric comms of %s: hello from %s (pid %u) for listen comm %llx, which is not open (closed "
                  "listener or stale handle): its connect fails by timeout",
                  device_.c_str(), h.host.c_str(), h.pid, static_cast<unsigned long long>(h.listenId));
          return;
        }
        it->second->OnHello(std::move(h), std::move(fifo), e.peer);
        return;
      }
      if (kind == static_cast<uint16_t>(RecordKind::kFabricClose)) {
        CloseNotice c;
        if (Status s = DecodeClose(e.record, &c); !s.ok()) {
          RY_WARN("fabric comms of %s: %s", device_.c_str(), s.message().c_str());
          return;
        }
        auto it = clients_.find(c.commId);
        if (it != clients_.end() && it->second->PeerWorker() == e.peer) it->second->OnEvent(e);
        return;
      }
      RY_WARN("fabric comms of %s: dropped a %zu-byte record of kind %u from worker %llx", device_.c_str(),
              e.record.size(), kind, static_cast<unsigned long long>(e.peer));
      return;
    }
  }
}

void CommWorker::HelperLoop() {
  std::unique_lock lock(mu_);
  auto idleWait = std::chrono::microseconds(50);
  while (!stop_) {
    if (clients_.empty() && listeners_.empty() && idleWait >= std::chrono::milliseconds(2)) {
      // Nothing of ours is open and peers have been quiet: sleep until a comm or
      // listen comm appears (peers' connections still get a pass every 2 ms below).
      cv_.wait_for(lock, std::chrono::milliseconds(2));
    }
    const auto standBy = gate_.StandBy();
    if (standBy > Clock::duration::zero()) {
      cv_.wait_for(lock, standBy);
      continue;
    }
    const uint64_t before = worker_->stats().bytesLanded + worker_->stats().bytesServed;
    events_.clear();
    const size_t n = worker_->Progress(&events_);
    for (const fabric::Event& e : events_) Dispatch(e);
    const uint64_t after = worker_->stats().bytesLanded + worker_->stats().bytesServed;
    if (n > 0 || after != before) {
      idleWait = std::chrono::microseconds(50);
      // Data moves: go on pumping, but let a caller that waits for the lock in first.
      if (callers_.load(std::memory_order_relaxed) > 0) {
        lock.unlock();
        const auto until = Clock::now() + std::chrono::milliseconds(1);
        while (callers_.load(std::memory_order_relaxed) > 0 && Clock::now() < until) std::this_thread::yield();
        lock.lock();
      }
      continue;
    }
    // Quiet: look again after a growing pause (50 us .. 2 ms; the TCP Worker offers
    // no descriptor to wait on), the lock free for callers meanwhile.
    cv_.wait_for(lock, idleWait);
    idleWait = std::min<std::chrono::microseconds>(idleWait * 2, std::chrono::milliseconds(2));
  }
}

}  // namespace railyard::proxy::nccl
