#include "topology/cabling_agent.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <set>
#include <tuple>

#include "env/log.h"

namespace railyard::topology {

namespace {

constexpr uint32_t kCablingMagic = 0x42435952u;  // "RYCB"
constexpr uint16_t kCablingVersion = 1;
constexpr uint16_t kKindHello = 1;
constexpr uint16_t kKindRecord = 2;
constexpr uint32_t kMaxLinks = 64;

struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint64_t origin;
  uint64_t seq;
  char hostName[32];
};
static_assert(sizeof(WireHeader) == 56);

struct WireHello {
  char ifname[16];
  uint32_t addr;  ///< network byte order
  uint32_t speedMbps;
};
static_assert(sizeof(WireHello) == 24);

struct WireLink {
  char ifname[16];
  char peerIfname[16];
  uint64_t peerHost;
  uint32_t addr;
  uint32_t peerAddr;
  uint32_t speedMbps;
  uint32_t pad;
};
static_assert(sizeof(WireLink) == 56);

template <size_t N>
void PutString(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  std::memcpy(dst, s.data(), std::min(s.size(), N - 1));
}
template <size_t N>
std::string GetString(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Ip(uint32_t networkOrder) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{networkOrder};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

}  // namespace

Status DecodeCablingMessage(const void* data, size_t size, CablingMessage* out) {
  const char* buf = static_cast<const char*>(data);
  if (size < sizeof(WireHeader)) {
    return InvalidArgument("cabling datagram of " + std::to_string(size) + " bytes, shorter than its " +
                           std::to_string(sizeof(WireHeader)) + "-byte header");
  }
  WireHeader h;
  std::memcpy(&h, buf, sizeof h);
  if (h.magic != kCablingMagic || h.version != kCablingVersion) {
    char why[96];
    std::snprintf(why, sizeof why, "cabling datagram with magic 0x%08x version %u: not Railyard cabling version %u",
                  h.magic, unsigned{h.version}, unsigned{kCablingVersion});
    return InvalidArgument(why);
  }
  *out = CablingMessage{};
  out->origin = h.origin;
  out->seq = h.seq;
  out->hostName = GetString(h.hostName);
  if (h.kind == kKindHello) {
    if (size != sizeof h + sizeof(WireHello)) {
      return InvalidArgument("cabling hello of " + std::to_string(size) + " bytes, expected " +
                             std::to_string(sizeof h + sizeof(WireHello)));
    }
    WireHello w;
    std::memcpy(&w, buf + sizeof h, sizeof w);
    out->hello = true;
    out->ifname = GetString(w.ifname);
    out->addr = w.addr;
    out->speedMbps = static_cast<int>(w.speedMbps);
    return Status::Ok();
  }
  if (h.kind != kKindRecord) {
    return InvalidArgument("cabling datagram of unknown kind " + std::to_string(h.kind));
  }
  if (size < sizeof h + 8) {
    return InvalidArgument("link-state record of " + std::to_string(size) + " bytes, shorter than " +
                           std::to_string(sizeof h + 8));
  }
  uint32_t count = 0;
  std::memcpy(&count, buf + sizeof h, sizeof count);
  if (count > kMaxLinks || size != sizeof h + 8 + count * sizeof(WireLink)) {
    return InvalidArgument("link-state record of " + std::to_string(size) + " bytes announces " +
                           std::to_string(count) + " links (at most " + std::to_string(kMaxLinks) +
                           ", 56 bytes each after a 64-byte head)");
  }
  for (uint32_t i = 0; i < count; ++i) {
    WireLink w;
    std::memcpy(&w, buf + sizeof h + 8 + i * sizeof w, sizeof w);
    out->links.push_back({GetString(w.ifname), GetString(w.peerIfname), w.addr, w.peerAddr, w.peerHost,
                          static_cast<int>(w.speedMbps)});
  }
  return Status::Ok();
}

uint64_t HostIdFromMacs(std::vector<std::string> macs) {
  std::sort(macs.begin(), macs.end());
  uint64_t h = 1469598103934665603ull;
  for (const std::string& m : macs) {
    for (unsigned char c : m) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= ';';
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

uint64_t LocalHostId() {
  std::string seed;
  if (FILE* f = std::fopen("/etc/machine-id", "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) seed = buf;
    std::fclose(f);
  }
  // Cloned images (and VMs sharing a root filesystem) carry the same machine-id; the
  // boot id tells their kernels apart. Both are the same for every process of a boot.
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) seed += std::string(";boot=") + buf;
    std::fclose(f);
  }
  struct stat st{};
  if (::stat("/proc/self/ns/net", &st) == 0) seed += ";netns=" + std::to_string(st.st_ino);
  if (seed.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    seed = host;
  }
  return HostIdFromMacs({seed});
}

Status CablingAgent::Start(const std::string& hostName, std::vector<AgentRail> rails,
                           const AgentOptions& options, std::unique_ptr<CablingAgent>* out,
                           uint64_t hostId) {
  std::unique_ptr<CablingAgent> a(new CablingAgent());
  a->hostName_ = hostName;
  a->options_ = options;
  std::vector<std::string> macs;
  for (const AgentRail& r : rails) macs.push_back(r.mac.empty() ? r.ifname : r.mac);
  a->hostId_ = hostId != 0 ? hostId : HostIdFromMacs(macs);
  for (AgentRail& r : rails) {
    RailState st;
    st.rail = r;
    st.fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (st.fd < 0) return SystemError("cabling agent: socket(): " + std::string(strerror(errno)));
    a->rails_.push_back(std::move(st));  // owned from here on, closed by the destructor
    const int fd = a->rails_.back().fd;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, r.ifname.c_str(),
                   static_cast<socklen_t>(r.ifname.size())) != 0) {
      return SystemError("cabling agent: SO_BINDTODEVICE(" + r.ifname + "): " + strerror(errno));
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(options.port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return SystemError("cabling agent: bind(*:" + std::to_string(options.port) + ") on rail " +
                         r.ifname + ": " + strerror(errno));
    }
  }
  a->startedMs_ = NowMs();
  a->wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (a->wakeFd_ < 0) return SystemError("cabling agent: eventfd(): " + std::string(strerror(errno)));
  {
    std::lock_guard lock(a->mu_);
    a->Rebuild();
  }
  try {
    a->thread_ = std::thread([p = a.get()] { p->Run(); });
  } catch (const std::system_error& e) {
    return SystemError(std::string("cabling agent: cannot start its thread: ") + e.what());
  }
  RY_INFO(log::kInit | log::kNet, "cabling agent for host %s (id %016llx) on %zu rails, port %u",
          hostName.c_str(), static_cast<unsigned long long>(a->hostId_), a->rails_.size(),
          unsigned{options.port});
  *out = std::move(a);
  return Status::Ok();
}

CablingAgent::~CablingAgent() {
  stop_.store(true);
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    (void)!::write(wakeFd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  for (RailState& r : rails_) {
    if (r.fd >= 0) ::close(r.fd);
  }
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

void CablingAgent::Run() {
  std::vector<pollfd> pfds;
  pfds.push_back({wakeFd_, POLLIN, 0});
  for (const RailState& r : rails_) pfds.push_back({r.fd, POLLIN, 0});
  int64_t next = NowMs();
  while (!stop_.load()) {
    const int64_t now = NowMs();
    if (now >= next) {
      Tick(now);
      next = now + options_.intervalMs;
    }
    const int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(0, next - NowMs())));
    if (rc <= 0) continue;
    if (pfds[0].revents != 0) break;
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) Receive(rails_[i - 1], NowMs());
    }
  }
}

std::vector<char> CablingAgent::EncodeHello(const RailState& r) const {
  std::vector<char> buf(sizeof(WireHeader) + sizeof(WireHello));
  WireHeader h{kCablingMagic, kCablingVersion, kKindHello, hostId_, 0, {}};
  PutString(h.hostName, hostName_);
  WireHello w{};
  PutString(w.ifname, r.rail.ifname);
  w.addr = r.rail.addr.s_addr;
  w.speedMbps = static_cast<uint32_t>(r.rail.speedMbps);
  std::memcpy(buf.data(), &h, sizeof h);
  std::memcpy(buf.data() + sizeof h, &w, sizeof w);
  return buf;
}

std::vector<char> CablingAgent::EncodeRecord(uint64_t origin, const HostRecord& rec) const {
  const uint32_t n = std::min<uint32_t>(static_cast<uint32_t>(rec.links.size()), kMaxLinks);
  std::vector<char> buf(sizeof(WireHeader) + 8 + n * sizeof(WireLink));
  WireHeader h{kCablingMagic, kCablingVersion, kKindRecord, origin, rec.seq, {}};
  PutString(h.hostName, rec.name);
  std::memcpy(buf.data(), &h, sizeof h);
  std::memcpy(buf.data() + sizeof h, &n, sizeof n);
  for (uint32_t i = 0; i < n; ++i) {
    const LinkRecord& l = rec.links[i];
    WireLink w{};
    PutString(w.ifname, l.ifname);
    PutString(w.peerIfname, l.peerIfname);
    w.peerHost = l.peerHost;
    w.addr = l.addr;
    w.peerAddr = l.peerAddr;
    w.speedMbps = static_cast<uint32_t>(l.speedMbps);
    std::memcpy(buf.data() + sizeof h + 8 + i * sizeof w, &w, sizeof w);
  }
  return buf;
}

void CablingAgent::SendAll(const std::vector<char>& datagram, const RailState* except) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(options_.port);
  to.sin_addr.s_addr = htonl(INADDR_BROADCAST);
  for (const RailState& r : rails_) {
    if (&r == except) continue;
    // Best effort: a rail that is down or cut drops the datagram; the neighbour on
    // it then ages out, which is exactly what the graph should say.
    (void)::sendto(r.fd, datagram.data(), datagram.size(), MSG_DONTWAIT,
                   reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
}

std::vector<CablingAgent::LinkRecord> CablingAgent::OwnLinks() const {
  std::vector<LinkRecord> v;
  for (const RailState& r : rails_) {
    if (r.heard.size() != 1) continue;  // silent, or a shared segment
    const Neighbour& n = r.heard.begin()->second;
    v.push_back({r.rail.ifname, n.ifname, r.rail.addr.s_addr, n.addr, n.host,
                 std::min(r.rail.speedMbps, n.speedMbps)});
  }
  return v;
}

void CablingAgent::Tick(int64_t nowMs) {
  std::vector<std::vector<char>> out;
  {
    std::lock_guard lock(mu_);
    for (RailState& r : rails_) {
      std::erase_if(r.heard, [&](const auto& kv) {
        return nowMs - kv.second.lastSeenMs > options_.deadIntervalMs;
      });
    }
    std::erase_if(records_, [&](const auto& kv) {
      return nowMs - kv.second.receivedMs > options_.deadIntervalMs;
    });
    Rebuild();
    HostRecord own;
    own.name = hostName_;
    own.seq = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    own.links = OwnLinks();
    out.push_back(EncodeRecord(hostId_, own));
    for (const auto& [origin, rec] : records_) out.push_back(EncodeRecord(origin, rec));
  }
  for (const RailState& r : rails_) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(options_.port);
    to.sin_addr.s_addr = htonl(INADDR_BROADCAST);
    const std::vector<char> hello = EncodeHello(r);
    (void)::sendto(r.fd, hello.data(), hello.size(), MSG_DONTWAIT,
                   reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
  for (const auto& d : out) SendAll(d, nullptr);
}

void CablingAgent::Receive(RailState& r, int64_t nowMs) {
  char buf[sizeof(WireHeader) + 8 + kMaxLinks * sizeof(WireLink)];
  for (;;) {
    const ssize_t n = ::recv(r.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) return;
    CablingMessage m;
    if (!DecodeCablingMessage(buf, static_cast<size_t>(n), &m).ok() || m.origin == hostId_) continue;
    if (m.hello) {
      std::lock_guard lock(mu_);
      const bool isNew = r.heard.count(m.origin) == 0;
      Neighbour& nb = r.heard[m.origin];
      nb = {m.origin, m.hostName, m.ifname, m.addr, m.speedMbps, nowMs};
      if (isNew) {
        RY_INFO(log::kNet, "cabling: rail %s hears host %s (%s on %s)", r.rail.ifname.c_str(),
                nb.hostName.c_str(), Ip(nb.addr).c_str(), nb.ifname.c_str());
        if (r.heard.size() == 2) {
          RY_INFO(log::kNet, "cabling: rail %s hears several hosts: a shared segment, not a cable; left out of the graph",
                  r.rail.ifname.c_str());
        }
      }
      continue;
    }
    std::vector<char> forward;
    {
      std::lock_guard lock(mu_);
      HostRecord& rec = records_[m.origin];
      if (m.seq <= rec.seq) continue;  // old news
      rec.name = m.hostName;
      rec.seq = m.seq;
      rec.receivedMs = nowMs;
      rec.links.clear();
      for (const CablingMessage::Link& l : m.links) {
        rec.links.push_back({l.ifname, l.peerIfname, l.addr, l.peerAddr, l.peerHost, l.speedMbps});
      }
      Rebuild();
      forward.assign(buf, buf + n);
    }
    SendAll(forward, &r);  // flood onwards at once; the periodic re-flood repairs losses
  }
}

void CablingAgent::Rebuild() {
  // Every host's claimed links, as (host, if) → (peer host, peer if) plus details.
  struct Claim {
    uint64_t host;
    std::string ifname;
    uint64_t peer;
    std::string peerIf;
    bool operator<(const Claim& o) const {
      return std::tie(host, ifname, peer, peerIf) < std::tie(o.host, o.ifname, o.peer, o.peerIf);
    }
  };
  std::map<Claim, LinkRecord> claims;
  ClusterGraph g;
  g.AddHost(hostId_, hostName_);
  for (const LinkRecord& l : OwnLinks()) claims[{hostId_, l.ifname, l.peerHost, l.peerIfname}] = l;
  for (const auto& [origin, rec] : records_) {
    g.AddHost(origin, rec.name);
    for (const LinkRecord& l : rec.links) claims[{origin, l.ifname, l.peerHost, l.peerIfname}] = l;
  }
  // A rail-link counts only when both of its ends report it.
  for (const auto& [c, l] : claims) {
    if (c.host > c.peer) continue;
    if (claims.count({c.peer, c.peerIf, c.host, c.ifname}) == 0) continue;
    if (c.peer != hostId_ && records_.count(c.peer) == 0) continue;
    g.AddLink({c.host, c.ifname, Ip(l.addr), l.speedMbps}, {c.peer, c.peerIf, Ip(l.peerAddr), l.speedMbps});
  }
  std::vector<std::string> shared;
  for (const RailState& r : rails_) {
    if (r.heard.size() > 1) shared.push_back(r.rail.ifname);
  }
  shared_ = shared;
  bool same = g.Links() == graph_.Links() && g.Hosts() == graph_.Hosts();
  for (uint64_t h : g.Hosts()) same = same && g.HostName(h) == graph_.HostName(h);
  if (!same) {
    graph_ = std::move(g);
    ++version_;
    changedMs_.store(NowMs(), std::memory_order_relaxed);
    changed_.notify_all();
  }
}

ClusterGraph CablingAgent::Graph() const {
  std::lock_guard lock(mu_);
  return graph_;
}

uint64_t CablingAgent::Version() const {
  std::lock_guard lock(mu_);
  return version_;
}

bool CablingAgent::WaitFor(const std::function<bool(const ClusterGraph&, uint64_t)>& pred,
                           int timeoutMs) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeoutMs),
                           [&] { return pred(graph_, version_); });
}

bool CablingAgent::Settled() const {
  const int64_t now = NowMs();
  return now - startedMs_ >= 3 * options_.intervalMs &&
         now - changedMs_.load(std::memory_order_relaxed) >= 2 * options_.intervalMs;
}

std::vector<std::string> CablingAgent::SharedSegments() const {
  std::lock_guard lock(mu_);
  return shared_;
}

}  // namespace railyard::topology
