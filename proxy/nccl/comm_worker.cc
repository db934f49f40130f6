#include "proxy/nccl/comm_worker.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "env/log.h"

namespace railyard::proxy::nccl {

CommWorker::CommWorker(fabric::Domain* domain, std::string device) : domain_(domain), device_(std::move(device)) {}

CommWorker::~CommWorker() { Stop(); }

Status CommWorker::Start() {
  std::lock_guard lock(mu_);
  if (worker_ != nullptr) return Status::Ok();
  RY_RETURN_IF_ERROR(domain_->CreateWorker(&worker_));
  wakeFd_ = proxy::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));  // -1: the helper never sleeps on the Worker
  {
    std::lock_guard sl(sleepMu_);
    stop_.store(false);
    wake_ = false;
  }
  helper_ = std::thread([this] { HelperLoop(); });
  return Status::Ok();
}

void CommWorker::Stop() {
  {
    std::lock_guard lock(mu_);
    if (worker_ == nullptr) return;
  }
  {
    std::lock_guard sl(sleepMu_);
    stop_.store(true);
  }
  WakeHelper();  // from a condition-variable nap or a sleep on the Worker's descriptor
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
  // Again at the end: a pass that moved megabytes can outlast kHandoff, and the helper
  // must not take a caller still driving for a quiet one.
  gate_.NoteCall();
  return n;
}

Status CommWorker::AddClient(CommClient* c, uint32_t* id) {
  if (clients_.size() >= kMaxCommId) return InternalError("more than 2^24 fabric comms open on " + device_);
  while (nextId_ == 0 || nextId_ > kMaxCommId || clients_.count(nextId_) != 0) {
    nextId_ = nextId_ >= kMaxCommId ? 1 : nextId_ + 1;
  }
  *id = nextId_++;
  clients_[*id] = c;
  WakeHelper();  // the helper has comms to serve now
  return Status::Ok();
}

void CommWorker::RemoveClient(uint32_t id) { clients_.erase(id); }

void CommWorker::AddListener(uint64_t listenId, HelloSink* sink) {
  listeners_[listenId] = sink;
  WakeHelper();
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
          if (c->FromPeer(e.peer)) c->OnEvent(e);
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
        if (it != clients_.end() && it->second->FromPeer(e.peer)) it->second->OnEvent(e);
        return;
      }
      RY_WARN("fabric comms of %s: dropped a %zu-byte record of kind %u from worker %llx", device_.c_str(),
              e.record.size(), kind, static_cast<unsigned long long>(e.peer));
      return;
    }
  }
}

void CommWorker::WakeHelper() {
  {
    std::lock_guard sl(sleepMu_);
    wake_ = true;
  }
  sleepCv_.notify_all();
  if (wakeFd_.valid()) {
    const uint64_t one = 1;
    (void)!::write(wakeFd_.get(), &one, sizeof one);
  }
}

bool CommWorker::HelperWait(int workerFd, std::chrono::milliseconds d) {
  pollfd fds[2] = {{wakeFd_.get(), POLLIN, 0}, {workerFd, POLLIN, 0}};
  (void)::poll(fds, 2, static_cast<int>(d.count()));
  uint64_t drained = 0;
  (void)!::read(wakeFd_.get(), &drained, sizeof drained);
  std::lock_guard sl(sleepMu_);
  wake_ = false;
  return stop_.load();
}

bool CommWorker::HelperSleep(std::chrono::microseconds d) {
  std::unique_lock sl(sleepMu_);
  sleepCv_.wait_for(sl, d, [this] { return stop_.load() || wake_; });
  wake_ = false;
  return stop_.load();
}

void CommWorker::HelperLoop() {
  pthread_setname_np(pthread_self(), "ry-comms");  // ps -L, top -H, gdb name it
  using std::chrono::microseconds;
  auto idleWait = microseconds(50);
  microseconds standByStretch{0};
  const auto stretch = [&] {
    standByStretch = std::min<microseconds>(std::max<microseconds>(standByStretch * 2, microseconds(1000)),
                                            kMaxStandByStretch);
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    // While a caller drives (it called within kHandoff), stand by without touching
    // the Worker's lock: the caller never waits for the helper. Each time the helper
    // wakes to find the caller still driving, it looks again later (kHandoff, then
    // stretched by 1, 2, 4, 7 ms): every wake-up is a context switch on a host whose
    // cores the polling callers keep busy: about a thousand a second per process at a
    // fixed 1 ms, 5x fewer context switches and 2-7 % more at 1-64 MiB on loopback once
    // stretched (docs/benchmarks.md, "Helper wake-ups").
    const auto standBy = gate_.StandBy();
    if (standBy > Clock::duration::zero()) {
      if (HelperSleep(std::chrono::ceil<microseconds>(standBy) + standByStretch)) return;
      stretch();
      continue;
    }
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      // A caller holds the Worker right now: it is driving (a long pass, or about to
      // note its call). Stand by as above rather than polling the lock every 50 us,
      // which woke the helper thousands of times a second during large transfers.
      if (HelperSleep(ProgressGate::kHandoff + standByStretch)) return;
      stretch();
      continue;
    }
    standByStretch = microseconds(0);  // the caller went quiet: the next stand-by starts at kHandoff
    if (clients_.empty() && listeners_.empty() && idleWait >= std::chrono::milliseconds(2)) {
      // Nothing of ours is open and peers have been quiet: sleep until a comm or
      // listen comm appears (peers' connections still get a pass every 2 ms).
      lock.unlock();
      if (HelperSleep(std::chrono::milliseconds(2))) return;
      if (!lock.try_lock()) continue;
    }
    const uint64_t before = worker_->stats().bytesLanded + worker_->stats().bytesServed;
    events_.clear();
    const size_t n = worker_->Progress(&events_);
    helperPasses_.fetch_add(1, std::memory_order_relaxed);
    for (const fabric::Event& e : events_) Dispatch(e);
    const uint64_t after = worker_->stats().bytesLanded + worker_->stats().bytesServed;
    // Quiet for a while (2 ms of empty passes) and the Worker offers a descriptor:
    // sleep on it rather than poll every 2 ms (the cable set's composite WaitFd).
    const int sleepFd = n == 0 && after == before && idleWait >= std::chrono::milliseconds(2) &&
                                wakeFd_.valid() && worker_->Quiet()
                            ? worker_->WaitFd()
                            : -1;
    lock.unlock();
    if (n > 0 || after != before) {
      idleWait = microseconds(50);
      // Data moves: go on pumping, but let a caller that waits for the lock in first.
      const auto until = Clock::now() + std::chrono::milliseconds(1);
      while (callers_.load(std::memory_order_relaxed) > 0 && Clock::now() < until) std::this_thread::yield();
      continue;
    }
    // Quiet: look again after a growing pause (50 us .. 2 ms), the lock free for
    // callers meanwhile; then on the Worker's descriptor, up to kMaxQuietWait.
    if (sleepFd >= 0) {
      if (HelperWait(sleepFd, kMaxQuietWait)) return;
      continue;
    }
    if (HelperSleep(idleWait)) return;
    idleWait = std::min<microseconds>(idleWait * 2, std::chrono::milliseconds(2));
  }
}

}  // namespace railyard::proxy::nccl
