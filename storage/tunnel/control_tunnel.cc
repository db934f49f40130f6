#include "storage/tunnel/control_tunnel.h"

#include <pthread.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "env/log.h"
#include "proxy/fabric/random_id.h"
#include "storage/tunnel/tunnel_wire.h"

namespace railyard::storage::tunnel {

struct ControlTunnel::Tunnel {
  uint64_t id = 0;
  uint64_t peer = 0;         ///< accept: Event::peer of the Open (records must come from it)
  int fd = -1;               ///< the local control connection
  std::unique_ptr<fabric::Endpoint> ep;
  std::string toSocket;      ///< received, not yet written to fd (at most the window)
  uint64_t received = 0;     ///< stream bytes received in all
  uint64_t consumed = 0;     ///< stream bytes written to fd in all
  uint64_t creditSent = 0;   ///< the last credit sent (cumulative)
  uint64_t sent = 0;         ///< stream bytes sent in all
  uint64_t credited = 0;     ///< the peer's last credit
  size_t inflight = 0;       ///< Sends posted, not done
  std::deque<std::vector<uint8_t>> pending;  ///< records waiting for an in-flight slot
  bool localEof = false;     ///< fd ended; kClose queued
  bool remoteClosed = false; ///< kClose received
  bool dead = false;         ///< to be reaped
};

namespace {

/// A tunnel's id, which a peer presents to reach it: drawn on its own from the kernel's
/// CSPRNG (review: an mt19937_64 stream can be recovered from the ids it gave out).
uint64_t RandomId() { return fabric::SecretKey64(); }

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

ControlTunnel::ControlTunnel(Side side, TunnelOptions options) : side_(side), options_(options) {}

Status ControlTunnel::Dial(fabric::Domain& domain, std::vector<uint8_t> remote, TunnelOptions options,
                           std::unique_ptr<ControlTunnel>* out) {
  std::unique_ptr<ControlTunnel> t(new ControlTunnel(Side::kDial, options));
  RY_RETURN_IF_ERROR(domain.CreateWorker(&t->worker_));
  t->address_ = t->worker_->Address();
  if (t->address_.size() > kMaxAddressBytes) return InvalidUsage("control tunnel: this Worker's address is too long for an Open");
  t->remote_ = std::move(remote);
  t->listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (t->listenFd_ < 0 || ::bind(t->listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(t->listenFd_, 16) != 0 || ::getsockname(t->listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return SystemError(std::string("control tunnel: loopback listener: ") + std::strerror(errno));
  }
  t->listenPort_ = ntohs(a.sin_port);
  t->thread_ = std::thread([p = t.get()] { p->Run(); });
  *out = std::move(t);
  return Status::Ok();
}

Status ControlTunnel::Accept(fabric::Domain& domain, const std::string& targetHost, uint16_t targetPort,
                             TunnelOptions options, std::unique_ptr<ControlTunnel>* out) {
  in_addr probe{};
  if (inet_pton(AF_INET, targetHost.c_str(), &probe) != 1 || targetPort == 0) {
    return InvalidArgument("control tunnel: target '" + targetHost + ":" + std::to_string(targetPort) + "' is not IPv4:port");
  }
  std::unique_ptr<ControlTunnel> t(new ControlTunnel(Side::kAccept, options));
  RY_RETURN_IF_ERROR(domain.CreateWorker(&t->worker_));
  t->address_ = t->worker_->Address();
  t->targetHost_ = targetHost;
  t->targetPort_ = targetPort;
  t->thread_ = std::thread([p = t.get()] { p->Run(); });
  *out = std::move(t);
  return Status::Ok();
}

ControlTunnel::~ControlTunnel() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  for (auto& t : tunnels_) {
    if (t->fd >= 0) ::close(t->fd);
    t->ep.reset();
  }
  tunnels_.clear();
  if (listenFd_ >= 0) ::close(listenFd_);
  worker_.reset();
}

std::string ControlTunnel::LocalAddress() const {
  return side_ == Side::kDial ? "127.0.0.1:" + std::to_string(listenPort_) : std::string();
}

TunnelStats ControlTunnel::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string ControlTunnel::lastError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastError_;
}

void ControlTunnel::SendRecord(Tunnel& t, int type, uint64_t value, std::vector<uint8_t> payload) {
  TunnelRecord r;
  r.type = static_cast<TunnelRecordType>(type);
  r.tunnel = t.id;
  r.value = value;
  r.payload = std::move(payload);
  std::vector<uint8_t> bytes;
  if (Status s = Encode(r, &bytes); !s.ok()) return Fail(t, s.message(), false);
  t.pending.push_back(std::move(bytes));
}

void ControlTunnel::Fail(Tunnel& t, const std::string& why, bool endpointError) {
  if (t.dead) return;
  const std::string to = options_.peerName.empty() ? std::string() : " to " + options_.peerName;
  RY_WARN("control tunnel %016llx%s: %s", static_cast<unsigned long long>(t.id), to.c_str(), why.c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    lastError_ = why;
    if (endpointError) ++stats_.failed;
  }
  if (t.fd >= 0) {
    ::shutdown(t.fd, SHUT_RDWR);  // the tier's client sees its control connection end now
    ::close(t.fd);
    t.fd = -1;
  }
  t.dead = true;
}

void ControlTunnel::AcceptLocal() {
  for (;;) {
    const int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto t = std::make_unique<Tunnel>();
    t->id = RandomId();
    t->fd = fd;
    if (tunnels_.size() >= options_.maxTunnels) {
      ::close(fd);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.refused;
      lastError_ = "control tunnel: " + std::to_string(options_.maxTunnels) + " tunnels open already";
      continue;
    }
    if (Status s = worker_->Connect(remote_, &t->ep); !s.ok()) {
      ::close(fd);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.refused;
      lastError_ = "control tunnel: connecting to " + (options_.peerName.empty() ? "the peer" : options_.peerName) +
                   ": " + s.message();
      RY_WARN("%s", lastError_.c_str());
      continue;
    }
    SendRecord(*t, static_cast<int>(TunnelRecordType::kOpen), 0, address_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.opened;
    }
    tunnels_.push_back(std::move(t));
  }
}

void ControlTunnel::OnRecord(uint64_t peer, std::span<const uint8_t> bytes) {
  TunnelRecord r;
  if (Status s = Decode(bytes, &r); !s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.malformed;
    return;
  }
  Tunnel* t = nullptr;
  for (auto& x : tunnels_) {
    if (x->id == r.tunnel && !x->dead) t = x.get();
  }
  if (r.type == TunnelRecordType::kOpen) {
    if (side_ != Side::kAccept || t != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.strays;
      return;
    }
    auto n = std::make_unique<Tunnel>();
    n->id = r.tunnel;
    n->peer = peer;
    if (Status s = worker_->Connect(r.payload, &n->ep); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.refused;
      lastError_ = "control tunnel: an Open names an address this side cannot reach: " + s.message();
      return;  // nowhere to answer
    }
    std::string refusal;
    size_t ofPeer = 0;
    for (const auto& x : tunnels_) ofPeer += x->peer == peer && !x->dead ? 1 : 0;
    if (tunnels_.size() >= options_.maxTunnels) {
      refusal = std::to_string(options_.maxTunnels) + " tunnels open already";
    } else if (ofPeer >= options_.maxTunnelsPerPeer) {
      refusal = "this peer holds " + std::to_string(ofPeer) + " tunnels already (at most " +
                std::to_string(options_.maxTunnelsPerPeer) + " per peer)";
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(targetPort_);
      inet_pton(AF_INET, targetHost_.c_str(), &a.sin_addr);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        refusal = (options_.targetName.empty() ? "the control port " + targetHost_ + ":" + std::to_string(targetPort_)
                                               : options_.targetName) +
                  " refused the connection: " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
      } else {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        SetNonBlocking(fd);
        n->fd = fd;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!refusal.empty()) {
      ++stats_.refused;
      lastError_ = "control tunnel: " + refusal;
      refusal.resize(std::min(refusal.size(), kMaxReasonBytes));
      SendRecord(*n, static_cast<int>(TunnelRecordType::kClose), 0, std::vector<uint8_t>(refusal.begin(), refusal.end()));
      n->localEof = true;  // reaped once the Close is out
    } else {
      ++stats_.opened;
    }
    tunnels_.push_back(std::move(n));
    return;
  }
  if (t == nullptr || (side_ == Side::kAccept && peer != t->peer)) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.strays;
    return;
  }
  switch (r.type) {
    case TunnelRecordType::kData:
      // A sender keeps sent - credited <= window; what it has sent beyond our last
      // credit is therefore at most the window, whatever we have written since.
      if (t->remoteClosed || t->received + r.payload.size() - t->creditSent > options_.windowBytes) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.malformed;
        }
        return Fail(*t, "the peer sent past its credit window (or after its close)", false);
      }
      t->toSocket.append(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
      t->received += r.payload.size();
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.bytesIn += r.payload.size();
      }
      break;
    case TunnelRecordType::kCredit:
      if (r.value > t->sent || r.value < t->credited) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.malformed;
        }
        return Fail(*t, "the peer credited " + std::to_string(r.value) + " bytes (sent " + std::to_string(t->sent) + ")",
                    false);
      }
      t->credited = r.value;
      break;
    case TunnelRecordType::kClose:
      t->remoteClosed = true;
      if (!r.payload.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        // The peer's reason, at most kMaxReasonBytes (Decode): shown, never interpreted;
        // bytes outside printable ASCII become '?'.
        std::string reason(r.payload.begin(), r.payload.end());
        for (char& ch : reason) {
          if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
        }
        lastError_ = "control tunnel closed by " + (options_.peerName.empty() ? "the peer" : options_.peerName) +
                     ": " + reason;
      }
      break;
    case TunnelRecordType::kOpen:
      break;
  }
}

bool ControlTunnel::Pump(Tunnel& t) {
  bool busy = false;
  // Received bytes to the local socket.
  while (t.fd >= 0 && !t.toSocket.empty()) {
    const ssize_t n = ::send(t.fd, t.toSocket.data(), t.toSocket.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      t.toSocket.erase(0, static_cast<size_t>(n));
      t.consumed += static_cast<uint64_t>(n);
      busy = true;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    t.toSocket.clear();  // the local side went away: end this tunnel
    if (!t.localEof) {
      t.localEof = true;
      SendRecord(t, static_cast<int>(TunnelRecordType::kClose), 0, {});
    }
    break;
  }
  // Credit what was consumed: at a quarter window, and whenever everything received is written.
  if (t.consumed > t.creditSent &&
      (t.consumed - t.creditSent >= options_.windowBytes / 4 || t.toSocket.empty()) && !t.localEof) {
    SendRecord(t, static_cast<int>(TunnelRecordType::kCredit), t.consumed, {});
    t.creditSent = t.consumed;
  }
  // Local socket to the fabric, inside the window.
  std::vector<uint8_t> buf;
  while (t.fd >= 0 && !t.localEof && !t.remoteClosed && t.pending.empty() && t.inflight < options_.maxRecordsInFlight &&
         t.sent - t.credited < options_.windowBytes) {
    const uint64_t room = std::min<uint64_t>(kMaxDataBytes, options_.windowBytes - (t.sent - t.credited));
    buf.resize(room);
    const ssize_t n = ::recv(t.fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      buf.resize(static_cast<size_t>(n));
      t.sent += static_cast<uint64_t>(n);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.bytesOut += static_cast<uint64_t>(n);
      }
      SendRecord(t, static_cast<int>(TunnelRecordType::kData), 0, std::move(buf));
      buf.clear();
      busy = true;
      break;  // posted below; the next round reads on
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    t.localEof = true;  // EOF or a reset: the peer's side closes after our last data
    SendRecord(t, static_cast<int>(TunnelRecordType::kClose), 0, {});
    busy = true;
    break;
  }
  // Post queued records, in order.
  while (!t.dead && !t.pending.empty() && t.inflight < options_.maxRecordsInFlight) {
    const uint64_t cookie = nextCookie_++;
    if (Status s = t.ep->Send(t.pending.front(), cookie); !s.ok()) {
      Fail(t, s.message(), true);
      return true;
    }
    cookieTunnel_[cookie] = t.id;
    t.pending.pop_front();
    ++t.inflight;
    busy = true;
  }
  // Ends: the peer closed and everything it sent is written; or our end closed and our
  // last records are out.
  const bool drained = t.pending.empty() && t.inflight == 0;
  if (!t.dead && ((t.remoteClosed && t.toSocket.empty()) || t.localEof) && drained) {
    if (t.fd >= 0) {
      ::close(t.fd);
      t.fd = -1;
    }
    t.dead = true;
    busy = true;
  }
  return busy;
}

void ControlTunnel::Reap() {
  for (size_t i = 0; i < tunnels_.size();) {
    if (tunnels_[i]->dead) {
      if (tunnels_[i]->fd >= 0) ::close(tunnels_[i]->fd);
      tunnels_.erase(tunnels_.begin() + static_cast<long>(i));
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.closed;
    } else {
      ++i;
    }
  }
}

void ControlTunnel::Run() {
  pthread_setname_np(pthread_self(), "ry-tunnel");  // ps -L, top -H, gdb name it
  std::vector<fabric::Event> events;
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    bool busy = false;
    events.clear();
    if (worker_->Progress(&events) > 0) busy = true;
    for (fabric::Event& e : events) {
      if (e.kind == fabric::EventKind::kRecord) {
        OnRecord(e.peer, e.record);
        busy = true;
        continue;
      }
      if (e.kind != fabric::EventKind::kDone && e.kind != fabric::EventKind::kError) continue;
      auto it = cookieTunnel_.find(e.cookie);
      if (it == cookieTunnel_.end()) {
        if (e.kind == fabric::EventKind::kError) RY_INFO(log::kNet, "control tunnel: %s", e.error.ToString().c_str());
        continue;
      }
      const uint64_t id = it->second;
      cookieTunnel_.erase(it);
      for (auto& t : tunnels_) {
        if (t->id != id) continue;
        if (t->inflight > 0) --t->inflight;
        if (e.kind == fabric::EventKind::kError) Fail(*t, "its fabric Endpoint failed: " + e.error.ToString(), true);
      }
    }
    if (side_ == Side::kDial) AcceptLocal();
    for (auto& t : tunnels_) {
      if (!t->dead && t->ep && !t->ep->status().ok()) Fail(*t, "its fabric Endpoint failed: " + t->ep->status().message(), true);
      if (!t->dead && Pump(*t)) busy = true;
    }
    Reap();
    if (busy) continue;
    // Idle: wait for a local socket (or a new local connection) for at most 1 ms; the
    // fabric Worker has no fd to wait on (explicit progress).
    fds.clear();
    if (listenFd_ >= 0) fds.push_back({listenFd_, POLLIN, 0});
    for (auto& t : tunnels_) {
      if (t->fd >= 0) fds.push_back({t->fd, static_cast<short>(POLLIN | (t->toSocket.empty() ? 0 : POLLOUT)), 0});
    }
    ::poll(fds.data(), fds.size(), 1);
  }
}

}  // namespace railyard::storage::tunnel
