#include "storage/expert/expert_server.h"

#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "env/log.h"
#include "env/log_budget.h"
#include "proxy/fabric/hello_admission.h"
#include "proxy/fabric/quiet_wait.h"
#include "proxy/socket.h"
#include "storage/expert/expert_error.h"
#include "storage/expert/expert_wire.h"

namespace railyard::expert {
namespace {

/// The longest sleep of the progress thread on the Worker's descriptor: how long a
/// stop (or the store check) waits for it at most.
constexpr int kQuietWaitMs = 20;

/// PROTOCOL when a request's reserved bytes are not zero: what a later version may
/// give meaning to is not read as this one's (hostile-peer probe: 0xffffff was served).
Status CheckReserved(const RequestMessage& req) {
  if (req.reserved[0] == 0 && req.reserved[1] == 0 && req.reserved[2] == 0) return Status::Ok();
  return ExpertError(ExpertErrc::kProtocol, "request op " + std::to_string(req.op) +
                                                " has reserved bytes that are not zero (another wire version's request?)");
}

}  // namespace

ExpertServer::ExpertServer(std::unique_ptr<Store> store, fabric::Domain* domain, fabric::Worker* worker,
                           const ServerOptions& o)
    : store_(std::move(store)), domain_(domain), worker_(worker), options_(o), ledger_(o.pinCapBytes) {}

Status ExpertServer::Start(std::unique_ptr<Store> store, fabric::Domain* domain, fabric::Worker* worker,
                           const ServerOptions& options, std::unique_ptr<ExpertServer>* out) {
  if (!store) return ExpertError(ExpertErrc::kInvalidArgument, "ExpertServer::Start without a store");
  if ((domain == nullptr) != (worker == nullptr)) {
    return ExpertError(ExpertErrc::kInvalidArgument, "ExpertServer::Start needs both a Domain and a Worker, or neither");
  }
  std::unique_ptr<ExpertServer> s(new ExpertServer(std::move(store), domain, worker, options));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(options.port);
  if (inet_pton(AF_INET, options.listenAddress.c_str(), &a.sin_addr) != 1) {
    return ExpertError(ExpertErrc::kInvalidArgument, "listen address '" + options.listenAddress + "' is not IPv4");
  }
  s->listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(s->listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = sizeof a;
  if (s->listenFd_ < 0 || ::bind(s->listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(s->listenFd_, 64) != 0 || ::getsockname(s->listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return ExpertError(ExpertErrc::kSystem, "expert store control socket on " + options.listenAddress + ":" +
                                                std::to_string(options.port) + ": " + std::strerror(errno));
  }
  s->port_ = ntohs(a.sin_port);
  s->acceptThread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  if (worker) s->progressThread_ = std::thread([p = s.get()] { p->ProgressLoop(); });
  *out = std::move(s);
  return Status::Ok();
}

ExpertServer::~ExpertServer() { Stop(); }

void ExpertServer::Stop() {
  if (stop_.exchange(true)) return;
  if (listenFd_ >= 0) ::shutdown(listenFd_, SHUT_RDWR);
  if (acceptThread_.joinable()) acceptThread_.join();
  std::vector<ConnThread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const LiveConnection& c : liveConns_) ::shutdown(c.fd, SHUT_RDWR);
    threads.swap(connThreads_);
  }
  for (ConnThread& t : threads) t.thread.join();
  if (progressThread_.joinable()) progressThread_.join();
  served_.reset();  // deregisters, then unmaps
  if (listenFd_ >= 0) ::close(listenFd_);
  listenFd_ = -1;
}

ServerStats ExpertServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ExpertServer::AcceptLoop() {
  pthread_setname_np(pthread_self(), "ry-exp-accept");  // ps -L, top -H, gdb name it
  uint64_t next = 1;
  while (!stop_.load()) {
    pollfd p{listenFd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    sockaddr_in from{};
    socklen_t fromLen = sizeof from;
    const int fd = ::accept4(listenFd_, reinterpret_cast<sockaddr*>(&from), &fromLen, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char ip[INET_ADDRSTRLEN] = "?";
    if (fromLen >= sizeof from && from.sin_family == AF_INET) inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    const std::string source = std::string(ip) + ":" + std::to_string(ntohs(from.sin_port));
    const uint32_t sourceIp = from.sin_family == AF_INET ? from.sin_addr.s_addr : 0;
    std::lock_guard<std::mutex> lock(mu_);
    const size_t fromSource = perSource_.count(sourceIp) != 0 ? perSource_[sourceIp] : 0;
    bool full = fromSource >= options_.maxConnectionsPerSource || stop_.load();
    if (!full && live_ >= options_.maxConnections) full = !MakeRoom(sourceIp, source);
    if (full) {
      ++stats_.refused;
      // Said, first and every 1024th (hostile-peer probe: refusals were silent).
      if (!stop_.load() && refusedAtAccept_++ % 1024 == 0) {
        if (live_ >= options_.maxConnections) {
          // (Hostile-peer probe: this said idle clients went after the handshake timeout;
          // only those that have not chosen a transport by then do. A connected client
          // may rest as long as its owner keeps it, as an inference engine's does.)
          RY_WARN("expert store: refused a client from %s: %zu clients connected already (at most %zu; one that "
                  "chooses no transport within %d ms of its hello is dropped, a connected one stays until it closes "
                  "or, idle, gives its seat to a client from an address holding fewer; the address holding the most "
                  "has none idle now, or it is this one; %llu refused so, logged every 1024th)",
                  source.c_str(), live_, options_.maxConnections, options_.handshakeTimeoutMs,
                  static_cast<unsigned long long>(refusedAtAccept_));
        } else {
          RY_WARN("expert store: refused a client from %s: %zu clients of that address connected already (at most "
                  "%zu from one address; %llu refused so, logged every 1024th)",
                  source.c_str(), fromSource, options_.maxConnectionsPerSource,
                  static_cast<unsigned long long>(refusedAtAccept_));
        }
      }
      ::close(fd);  // over the connection limit: no Hello (the client sees PEER_LOST)
      continue;
    }
    ++live_;
    ++perSource_[sourceIp];
    auto phase = std::make_shared<std::atomic<int>>(kBusy);
    liveConns_.push_back(LiveConnection{fd, sourceIp, source, phase});
    for (size_t i = 0; i < connThreads_.size();) {
      if (connThreads_[i].done->load()) {
        connThreads_[i].thread.join();
        connThreads_.erase(connThreads_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    connThreads_.push_back({std::thread([this, fd, done, id = next++, source, sourceIp, phase] {
                              Serve(fd, id, source, sourceIp, *phase);
                              done->store(true);
                            }),
                            done});
  }
}

bool ExpertServer::MakeRoom(uint32_t sourceIp, const std::string& source) {
  std::vector<fabric::HeldConnection> held;
  held.reserve(liveConns_.size());
  for (const LiveConnection& c : liveConns_) held.push_back({c.sourceIp, c.phase->load() == kIdle});
  const fabric::Admission a = fabric::AdmitIdle(held, sourceIp, options_.maxConnections);
  if (!a.admit) return false;
  if (a.evict == fabric::Admission::kNone) return true;
  const LiveConnection& victim = liveConns_[a.evict];
  int idle = kIdle;
  if (!victim.phase->compare_exchange_strong(idle, kEvicted)) return false;  // a request came meanwhile
  ::shutdown(victim.fd, SHUT_RDWR);  // its thread wakes, sees kEvicted and ends it (finish closes the fd)
  if (evictedAtAccept_++ % 1024 == 0) {
    RY_WARN("expert store: %zu clients connected (at most %zu): closed an idle one from %s, the address holding the "
            "most, for a new one from %s (%llu closed so, logged every 1024th)",
            live_, options_.maxConnections, victim.source.c_str(), source.c_str(),
            static_cast<unsigned long long>(evictedAtAccept_));
  }
  return true;
}

Status ExpertServer::AwaitRequest(int fd, const std::string& who, std::atomic<int>& phase, bool* stopped) {
  // Between requests the client may think as long as it likes: no timeout while
  // waiting for the first byte, the socket timeout once a request has begun.
  phase.store(kIdle);
  pollfd p{fd, POLLIN, 0};
  while (!stop_.load() && ::poll(&p, 1, 200) == 0) {
  }
  int idle = kIdle;
  if (!phase.compare_exchange_strong(idle, kBusy)) {
    return ExpertError(ExpertErrc::kPeerLost, who + ": closed while idle, for a client from an address holding fewer "
                                                    "connections (this store serves its most at once)");
  }
  *stopped = stop_.load();
  return Status::Ok();
}

void ExpertServer::ProgressLoop() {
  pthread_setname_np(pthread_self(), "ry-exp-prog");  // ps -L, top -H, gdb name it
  std::vector<fabric::Event> events;
  uint64_t lastServed = 0;
  int wokenIdle = 0;  // idle passes in a row after a wake-up
  auto lastCheck = std::chrono::steady_clock::now();
  log::LogBudget errorBudget(20, std::chrono::seconds(10));
  while (!stop_.load()) {
    if (options_.storeCheckIntervalMs > 0 &&
        std::chrono::steady_clock::now() - lastCheck > std::chrono::milliseconds(options_.storeCheckIntervalMs)) {
      lastCheck = std::chrono::steady_clock::now();
      (void)CheckStore();
    }
    events.clear();
    const size_t n = worker_->Progress(&events);
    for (const fabric::Event& e : events) {
      if (e.kind != fabric::EventKind::kError) continue;
      // A peer causes these at will (hostile-peer probe: one WARN per forged Write):
      // at most 20 a 10 s window at WARN, the rest at INFO and counted.
      if (errorBudget.Take(log::LogBudget::Clock::now())) {
        RY_WARN("expert store: %s", e.error.ToString().c_str());
      } else {
        RY_INFO(log::kNet, "expert store: %s", e.error.ToString().c_str());
      }
    }
    if (const uint64_t quiet = errorBudget.TakeSuppressed(log::LogBudget::Clock::now()); quiet > 0) {
      RY_WARN("expert store: %llu more fabric errors from clients were logged at INFO only (at most 20 per 10 s at WARN)",
              static_cast<unsigned long long>(quiet));
    }
    const fabric::WorkerStats ws = worker_->stats();
    const bool busy = n > 0 || ws.bytesServed != lastServed;
    lastServed = ws.bytesServed;
    if (busy) {
      wokenIdle = 0;
      continue;
    }
    // Idle: sleep on the Worker's descriptor, woken by a client's READ request (at
    // most kQuietWaitMs, for the stop flag and the store check). A Worker that cannot
    // sleep so is polled often while READ clients are connected (their Reads are
    // served from here), rarely otherwise.
    // Woken 64 times in a row with nothing to do (a descriptor that stays readable),
    // it backs off the same way rather than spin.
    const fabric::QuietWait w = fabric::SleepUntilInput(*worker_, std::chrono::milliseconds(kQuietWaitMs));
    if (w == fabric::QuietWait::kTimedOut || (w == fabric::QuietWait::kWoken && ++wokenIdle < 64)) continue;
    std::this_thread::sleep_for(std::chrono::microseconds(readClients_.load() > 0 || ws.peerConnections > 0 ? 50 : 2000));
  }
}

Status ExpertServer::CheckStore() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!served_) return Status::Ok();
  for (size_t i = 0; i < store_->manifest().layers.size(); ++i) {
    if (Status s = store_->CheckLayer(i); !s.ok()) {
      RY_WARN("expert store: %s: withdrawing the layer registrations (READ clients' fetches now fail)", s.message().c_str());
      served_.reset();  // deregistered first: no Read reaches the copy afterwards
      ledger_.Release(store_->TotalBytes());
      ++stats_.withdrawals;
      return s;
    }
  }
  return Status::Ok();
}

Status ExpertServer::ServingStatus() {
  RY_RETURN_IF_ERROR(CheckStore());
  std::lock_guard<std::mutex> lock(mu_);
  if (!served_) {
    return ExpertError(ExpertErrc::kStoreChanged,
                       "the layer registrations were withdrawn (a layer file changed since the store was opened)");
  }
  return Status::Ok();
}

Status ExpertServer::SendReply(int fd, Status s, const void* payload, uint64_t payloadBytes, const std::string& who) {
  ReplyHeader h{};
  std::string text;
  if (!s.ok()) {
    h.errc = static_cast<uint8_t>(ExpertErrcOf(s));
    text = s.message().substr(0, kMaxReplyText);
    payloadBytes = 0;
  }
  h.textBytes = static_cast<uint32_t>(text.size());
  h.payloadBytes = payloadBytes;
  RY_RETURN_IF_ERROR(WireSend(fd, &h, sizeof h, who + " reply"));
  if (!text.empty()) RY_RETURN_IF_ERROR(WireSend(fd, text.data(), text.size(), who + " reply text"));
  if (payloadBytes > 0) RY_RETURN_IF_ERROR(WireSend(fd, payload, payloadBytes, who + " reply payload"));
  return Status::Ok();
}

void ExpertServer::Serve(int fd, uint64_t id, const std::string& source, uint32_t sourceIp, std::atomic<int>& phase) {
  const std::string who = "expert client " + std::to_string(id) + " (" + source + ")";
  uint64_t reserved = 0;
  bool readClient = false;
  auto finish = [&](const Status& s) {
    if (!s.ok()) RY_INFO(log::kNet, "%s: %s", who.c_str(), s.message().c_str());
    ledger_.Release(reserved);
    std::lock_guard<std::mutex> lock(mu_);
    if (readClient) readClients_.fetch_sub(1);  // the registrations stay: ReleaseIdleLayers
    for (size_t i = 0; i < liveConns_.size(); ++i) {
      if (liveConns_[i].fd == fd) {
        liveConns_.erase(liveConns_.begin() + static_cast<long>(i));
        break;
      }
    }
    --live_;
    if (auto it = perSource_.find(sourceIp); it != perSource_.end() && --it->second == 0) perSource_.erase(it);
    ::close(fd);
  };
  (void)SetSocketTimeouts(fd, std::min(options_.timeoutMs, options_.handshakeTimeoutMs));  // until the choice
  const std::string& text = store_->manifestText();
  HelloHeader hello{kHelloMagic, kWireVersion, 0, static_cast<uint32_t>(text.size())};
  Status s = WireSend(fd, &hello, sizeof hello, who + " hello");
  if (s.ok()) s = WireSend(fd, text.data(), text.size(), who + " manifest");
  ChooseMessage choose{};
  if (s.ok()) {
    // The choice within the handshake timeout as a whole (review: SO_RCVTIMEO alone
    // restarts with each byte, so one byte every 9 s held a slot for 80 s).
    const Status got = proxy::RecvAllWithin(fd, &choose, sizeof choose, who + " transport choice",
                                            std::min(options_.timeoutMs, options_.handshakeTimeoutMs));
    if (!got.ok()) s = ExpertError(ExpertErrc::kPeerLost, got.message());
  }
  if (!s.ok()) return finish(s);
  (void)SetSocketTimeouts(fd, options_.timeoutMs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.accepted;
  }
  auto refuse = [&](Status why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.refused;
      // A WARN naming the client, first and every 1024th (hostile-peer probe: refusals
      // were replied to the client but never logged here).
      if (refusedClients_++ % 1024 == 0) {
        RY_WARN("expert store: refused %s: %s (%llu refused so, logged every 1024th)", who.c_str(),
                why.message().c_str(), static_cast<unsigned long long>(refusedClients_));
      }
    }
    (void)SendReply(fd, why, nullptr, 0, who);
    finish(why);
  };
  if (choose.transport == kTransportTcp) {
    const uint64_t stride = store_->manifest().recordStride;
    Status pin = ledger_.Reserve(stride, who + " (tcp staging buffer)");
    if (!pin.ok() && ReleaseIdleLayers()) pin = ledger_.Reserve(stride, who + " (tcp staging buffer)");
    if (!pin.ok()) return refuse(pin);
    reserved = stride;
    if (Status r = SendReply(fd, Status::Ok(), nullptr, 0, who); !r.ok()) return finish(r);
    return finish(ServeTcp(fd, who, phase));
  }
  if (choose.transport != kTransportRead || domain_ == nullptr) {
    return refuse(ExpertError(ExpertErrc::kUnknownTransport,
                              "transport byte " + std::to_string(choose.transport) +
                                  (choose.transport == kTransportRead ? " (read): this peer serves no fabric Domain"
                                   : std::memcmp(&choose, "RYSN", 4) == 0
                                       ? " is not tcp (1) or read (2): a snapshot-tier client's handshake (this "
                                         "port serves an expert store, not snapshot arenas)"
                                       : " is not tcp (1) or read (2)")));
  }
  for (size_t i = 0; i < store_->manifest().layers.size(); ++i) {
    if (Status r = store_->CheckLayer(i); !r.ok()) return refuse(r);
  }
  std::vector<std::vector<uint8_t>> keys;
  if (Status r = EnsureLayersRegistered(who, &keys); !r.ok()) return refuse(r);
  readClient = true;  // counted by EnsureLayersRegistered: finish uncounts it
  std::vector<uint8_t> payload;
  auto put32 = [&](uint32_t v) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    payload.insert(payload.end(), b, b + 4);
  };
  // Asked per connection: a fabric-mode Worker's address grows when a cable comes up
  // after it started (runtime::CableSetDomain), and a client on that cable needs it.
  const std::vector<uint8_t> workerAddress = worker_ != nullptr ? worker_->Address() : std::vector<uint8_t>{};
  put32(static_cast<uint32_t>(workerAddress.size()));
  payload.insert(payload.end(), workerAddress.begin(), workerAddress.end());
  put32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) {
    put32(static_cast<uint32_t>(k.size()));
    payload.insert(payload.end(), k.begin(), k.end());
  }
  if (Status r = SendReply(fd, Status::Ok(), payload.data(), payload.size(), who); !r.ok()) return finish(r);
  finish(ServeReadControl(fd, who, phase));
}

bool ExpertServer::ReleaseIdleLayers() {
  std::lock_guard<std::mutex> lock(mu_);
  if (readClients_.load() != 0 || !served_) return false;
  served_.reset();
  ledger_.Release(store_->TotalBytes());
  ++stats_.idleReleases;
  return true;
}

Status ExpertServer::EnsureLayersRegistered(const std::string& who, std::vector<std::vector<uint8_t>>* keys) {
  std::lock_guard<std::mutex> lock(mu_);
  const Manifest& m = store_->manifest();
  if (!served_) {
    RY_RETURN_IF_ERROR(ledger_.Reserve(store_->TotalBytes(), who + " (the store's " + std::to_string(m.layers.size()) +
                                                                 " layer files, registered once for remote read)"));
    if (Status s = ServedLayers::Load(*store_, *domain_, &served_); !s.ok()) {
      served_.reset();
      ledger_.Release(store_->TotalBytes());
      return s;
    }
    stats_.layerRegistrations += served_->size();
  }
  keys->clear();
  for (size_t i = 0; i < served_->size(); ++i) keys->push_back(served_->region(i)->Key().Pack());
  readClients_.fetch_add(1);  // under mu_: the last one's finish releases the registrations
  return Status::Ok();
}

Status ExpertServer::ServeTcp(int fd, const std::string& who, std::atomic<int>& phase) {
  const Manifest& m = store_->manifest();
  std::vector<char> buf(m.recordStride);
  for (;;) {
    RequestMessage req{};
    bool stopped = false;
    RY_RETURN_IF_ERROR(AwaitRequest(fd, who, phase, &stopped));
    if (stopped) return Status::Ok();
    RY_RETURN_IF_ERROR(WireRecv(fd, &req, sizeof req, who + " request"));
    if (Status bad = CheckReserved(req); !bad.ok()) {
      (void)SendReply(fd, bad, nullptr, 0, who);
      return bad;
    }
    if (req.op == kOpShutdown) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.shutdowns;
      }
      return SendReply(fd, Status::Ok(), nullptr, 0, who);
    }
    if (req.op != kOpFetch) {
      Status bad = ExpertError(ExpertErrc::kProtocol, "request op " + std::to_string(req.op) + " is not fetch (1) or shutdown (2)");
      (void)SendReply(fd, bad, nullptr, 0, who);
      return bad;
    }
    Status s = Status::Ok();
    if (req.layer >= m.layers.size() || req.expert >= m.expertsPerLayer) {
      s = ExpertError(ExpertErrc::kOutOfRange, "layer index " + std::to_string(req.layer) + " expert " +
                                                   std::to_string(req.expert) + " (store has " +
                                                   std::to_string(m.layers.size()) + " layers x " +
                                                   std::to_string(m.expertsPerLayer) + " experts)");
    } else {
      s = store_->ReadRecord(req.layer, req.expert, buf.data());
    }
    RY_RETURN_IF_ERROR(SendReply(fd, s, buf.data(), buf.size(), who));
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.recordsServedTcp;
    }
  }
}

Status ExpertServer::ServeReadControl(int fd, const std::string& who, std::atomic<int>& phase) {
  for (;;) {
    bool stopped = false;
    RY_RETURN_IF_ERROR(AwaitRequest(fd, who, phase, &stopped));
    if (stopped) return Status::Ok();
    RequestMessage req{};
    RY_RETURN_IF_ERROR(WireRecv(fd, &req, sizeof req, who + " request"));
    if (Status bad = CheckReserved(req); !bad.ok()) {
      (void)SendReply(fd, bad, nullptr, 0, who);
      return bad;
    }
    if (req.op == kOpShutdown) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.shutdowns;
      }
      return SendReply(fd, Status::Ok(), nullptr, 0, who);
    }
    if (req.op == kOpStatus) {
      RY_RETURN_IF_ERROR(SendReply(fd, ServingStatus(), nullptr, 0, who));
      continue;
    }
    Status bad = ExpertError(ExpertErrc::kProtocol, "request op " + std::to_string(req.op) +
                                                        " on a read-transport connection (records move as fabric Reads)");
    (void)SendReply(fd, bad, nullptr, 0, who);
    return bad;
  }
}

}  // namespace railyard::expert
