#include "topology/cabling_agent.h"

#include <pthread.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <system_error>
#include <tuple>

#include "env/log.h"
#include "topology/graph_json.h"
#include "topology/local_graph.h"
#include "topology/netdev.h"
#include "topology/utf8_name.h"

namespace railyard::topology {

namespace {

constexpr uint32_t kCablingMagic = 0x42435952u;  // "RYCB"
constexpr uint16_t kKindHello = 1;
constexpr uint16_t kKindRecord = 2;
constexpr uint32_t kFlagMac = 1;
constexpr uint32_t kMaxLinks = 64;
constexpr int kReceiveBatch = 256;      ///< datagrams per rail per poll round (Tick stays on time)
constexpr int64_t kRebuildGapMs = 10;   ///< least time between two graph rebuilds (ms)
constexpr const char* kMacPurpose = "railyard.cabling.v2";

/// The header of every version-2 datagram. The first 8 bytes (magic, version)
/// are where version 1 had them, so either side can name the other's version.
struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;
  uint64_t origin;   ///< host id
  uint64_t speaker;  ///< the process speaking for origin (random, never 0)
  uint64_t seq;      ///< the speaker's counter
  uint32_t flags;    ///< kFlagMac: a 32-byte MAC follows the body
  uint32_t bodyBytes;
  uint32_t ageMs;    ///< records: ms since the speaker made it (each holder adds its holding time)
  uint32_t reserved; ///< 0
  char hostName[32];
};
static_assert(sizeof(WireHeader) == 80);

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

constexpr size_t kMaxDatagram = sizeof(WireHeader) + 8 + kMaxLinks * sizeof(WireLink) + sizeof(ClusterMac);

template <size_t N>
void PutString(char (&dst)[N], const std::string& s) {
  std::memset(dst, 0, N);
  const std::string cut = CutUtf8(s, N - 1);
  std::memcpy(dst, cut.data(), cut.size());
}
/// A name field from a peer, made valid UTF-8 and printable (topology/utf8_name.h).
template <size_t N>
std::string GetString(const char (&src)[N]) {
  return SanitizeName(std::string_view(src, strnlen(src, N)), N - 1);
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

/// A random 64-bit id, never 0 (getrandom; a seeded PRNG if it fails).
uint64_t RandomId() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    std::random_device rd;
    v = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(NowMs());
  }
  return v == 0 ? 1 : v;
}

/// The IPv4 netmask (network order) of `addr` on interface `ifname`; 0 if unknown.
uint32_t NetmaskOf(const std::string& ifname, uint32_t addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  uint32_t mask = 0;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_netmask == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (ifname != i->ifa_name) continue;
    if (reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != addr) continue;
    mask = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr;
    break;
  }
  freeifaddrs(list);
  return mask;
}

/// A unicast address a host may hold on a rail: not 0/8, loopback, multicast or broadcast.
bool UsableUnicast(uint32_t networkOrder) {
  const uint32_t h = ntohl(networkOrder);
  return (h >> 24) != 0 && (h >> 24) != 127 && (h >> 28) != 0xE && h != 0xFFFFFFFFu && (h >> 28) != 0xF;
}

}  // namespace

Status DecodeCablingMessage(const void* data, size_t size, CablingMessage* out, CablingRefusal* why) {
  const char* buf = static_cast<const char*>(data);
  CablingRefusal ignored = CablingRefusal::kNone;
  CablingRefusal& refusal = why != nullptr ? *why : ignored;
  refusal = CablingRefusal::kMalformed;
  if (size < 8) return InvalidArgument(std::to_string(size) + "-byte cabling datagram, shorter than magic and version");
  uint32_t magic = 0;
  uint16_t version = 0;
  std::memcpy(&magic, buf, sizeof magic);
  std::memcpy(&version, buf + 4, sizeof version);
  if (magic != kCablingMagic) return InvalidArgument("cabling datagram without the RYCB magic");
  if (version != CablingAgent::kWireVersion) {
    refusal = CablingRefusal::kBadVersion;
    return InvalidArgument("cabling protocol version " + std::to_string(version) + "; this host speaks version " +
                           std::to_string(CablingAgent::kWireVersion) + " (run one Railyard release on every host)");
  }
  if (size < sizeof(WireHeader)) {
    return InvalidArgument(std::to_string(size) + "-byte cabling datagram, shorter than its " +
                           std::to_string(sizeof(WireHeader)) + "-byte header");
  }
  WireHeader h;
  std::memcpy(&h, buf, sizeof h);
  const size_t macBytes = (h.flags & kFlagMac) != 0 ? sizeof(ClusterMac) : 0;
  if (h.bodyBytes > kMaxDatagram || sizeof h + h.bodyBytes + macBytes != size || h.origin == 0 || h.speaker == 0) {
    return InvalidArgument("cabling datagram of " + std::to_string(size) + " bytes whose sizes or ids do not add up");
  }
  *out = CablingMessage{};
  out->origin = h.origin;
  out->speaker = h.speaker;
  out->seq = h.seq;
  out->ageMs = h.ageMs;
  out->hasMac = macBytes != 0;
  out->hostName = GetString(h.hostName);
  const char* payload = buf + sizeof h;
  if (h.kind == kKindHello) {
    if (h.bodyBytes != sizeof(WireHello)) {
      return InvalidArgument("a cabling hello of " + std::to_string(h.bodyBytes) + " body bytes, expected " +
                             std::to_string(sizeof(WireHello)));
    }
    WireHello w;
    std::memcpy(&w, payload, sizeof w);
    out->hello = true;
    out->ifname = GetString(w.ifname);
    out->addr = w.addr;
    out->speedMbps = static_cast<int>(w.speedMbps);
    refusal = CablingRefusal::kNone;
    return Status::Ok();
  }
  if (h.kind != kKindRecord || h.bodyBytes < 8) {
    return InvalidArgument("cabling datagram of kind " + std::to_string(h.kind) + " with " +
                           std::to_string(h.bodyBytes) + " body bytes (a record has at least 8)");
  }
  uint32_t count = 0;
  std::memcpy(&count, payload, sizeof count);
  if (count > kMaxLinks || h.bodyBytes != 8 + count * sizeof(WireLink)) {
    return InvalidArgument("a link-state record of " + std::to_string(h.bodyBytes) + " body bytes announcing " +
                           std::to_string(count) + " links (at most " + std::to_string(kMaxLinks) +
                           ", 56 bytes each after 8)");
  }
  out->links.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    WireLink w;
    std::memcpy(&w, payload + 8 + i * sizeof w, sizeof w);
    out->links.push_back({GetString(w.ifname), GetString(w.peerIfname), w.addr, w.peerAddr, w.peerHost,
                          static_cast<int>(w.speedMbps)});
  }
  refusal = CablingRefusal::kNone;
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
  // Callers check names the operator gave (CheckLocalName); this keeps the wire and
  // every peer's JSON safe whatever a caller passed.
  a->hostName_ = SanitizeName(hostName, kMaxHostNameBytes);
  a->options_ = options;
  a->speaker_ = RandomId();
  std::vector<std::string> macs;
  for (const AgentRail& r : rails) macs.push_back(r.mac.empty() ? r.ifname : r.mac);
  a->hostId_ = hostId != 0 ? hostId : HostIdFromMacs(macs);
  for (AgentRail& r : rails) {
    if (!r.namedUplink && DefaultRouteInterfaces().count(r.ifname) != 0) {  // never hello an uplink
      return InvalidUsage("cabling agent: " + r.ifname + " carries a default route (an uplink): not a rail");
    }
    RailState st;
    st.rail = r;
    st.netmask = NetmaskOf(r.ifname, r.addr.s_addr);
    st.fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (st.fd < 0) return SystemError("cabling agent: socket(): " + std::string(strerror(errno)));
    a->rails_.push_back(std::move(st));  // owned from here on, closed by the destructor
    const int fd = a->rails_.back().fd;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
    // Room for a burst (a flood must not crowd out the real neighbour's hellos);
    // FORCE needs CAP_NET_ADMIN, the plain one is capped by net.core.rmem_max.
    // Likewise for sending: a re-flood of many records must not leave no room for
    // the next hello (sendto would fail with EAGAIN and the cable age out).
    int bufBytes = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufBytes, sizeof bufBytes) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufBytes, sizeof bufBytes);
    }
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufBytes, sizeof bufBytes) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufBytes, sizeof bufBytes);
    }
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
  RY_INFO(log::kInit | log::kNet,
          "cabling agent for host %s (id %016llx, speaker %016llx) on %zu rails, port %u, %s",
          a->hostName_.c_str(), static_cast<unsigned long long>(a->hostId_),
          static_cast<unsigned long long>(a->speaker_), a->rails_.size(), unsigned{options.port},
          options.key ? ("cluster key " + options.key->Fingerprint()).c_str()
                      : "no cluster key (every host on a rail is trusted)");
  PublishLocalAgent(a.get());  // the CollNet tables read the graph (topology/local_graph.h)
  *out = std::move(a);
  return Status::Ok();
}

CablingAgent::~CablingAgent() {
  WithdrawLocalAgent(this);  // first: no reader copies the graph of a dying agent
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
  pthread_setname_np(pthread_self(), "ry-cabling");  // ps -L, top -H, gdb name it
  std::vector<pollfd> pfds;
  pfds.push_back({wakeFd_, POLLIN, 0});
  for (const RailState& r : rails_) pfds.push_back({r.fd, POLLIN, 0});
  int64_t next = NowMs();
  std::vector<std::pair<std::vector<char>, const RailState*>> forward;
  bool dirty = false;  // records or neighbours changed since the last rebuild
  while (!stop_.load()) {
    int64_t now = NowMs();
    if (now >= next) {
      Tick(now, dirty);  // rebuilds when dirty, or when its expiry changed the graph
      dirty = false;
      next = now + options_.intervalMs;
    }
    // Graph rebuilds at most every kRebuildGapMs: a flood of records costs one
    // rebuild per gap, not one per record.
    const int64_t rebuildAt = dirty ? lastRebuildMs_ + kRebuildGapMs : next;
    if (dirty && NowMs() >= rebuildAt) {
      std::lock_guard lock(mu_);
      Rebuild();
      dirty = false;
    }
    now = NowMs();
    const int64_t wake = dirty ? std::min(next, rebuildAt) : next;
    const int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(0, wake - now)));
    if (rc <= 0) continue;
    if (pfds[0].revents != 0) break;
    forward.clear();
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) Receive(rails_[i - 1], NowMs(), &forward, &dirty);
    }
    for (const auto& [datagram, from] : forward) SendAll(datagram, from);  // the flood onwards
  }
}

std::vector<char> CablingAgent::Seal(std::vector<char> datagram) const {
  if (!options_.key) return datagram;
  WireHeader h;
  std::memcpy(&h, datagram.data(), sizeof h);
  h.flags |= kFlagMac;
  std::memcpy(datagram.data(), &h, sizeof h);
  ClusterMac mac;
  (void)options_.key->Mac(kMacPurpose, datagram.data(), datagram.size(), &mac);  // zero on failure: refused
  datagram.insert(datagram.end(), mac.begin(), mac.end());
  return datagram;
}

std::vector<char> CablingAgent::EncodeHello(const RailState& r, uint64_t seq) const {
  std::vector<char> buf(sizeof(WireHeader) + sizeof(WireHello));
  WireHeader h{kCablingMagic, kWireVersion, kKindHello, hostId_, speaker_, seq, 0,
               static_cast<uint32_t>(sizeof(WireHello)), 0, 0, {}};
  PutString(h.hostName, hostName_);
  WireHello w{};
  PutString(w.ifname, r.rail.ifname);
  w.addr = r.rail.addr.s_addr;
  w.speedMbps = static_cast<uint32_t>(r.rail.speedMbps);
  std::memcpy(buf.data(), &h, sizeof h);
  std::memcpy(buf.data() + sizeof h, &w, sizeof w);
  return Seal(std::move(buf));
}

std::vector<char> CablingAgent::EncodeRecord(uint64_t origin, uint64_t speaker, const SpeakerRecord& rec,
                                             int64_t nowMs) const {
  const uint32_t n = std::min<uint32_t>(static_cast<uint32_t>(rec.links.size()), kMaxLinks);
  const uint32_t body = 8 + n * static_cast<uint32_t>(sizeof(WireLink));
  std::vector<char> buf(sizeof(WireHeader) + body);
  const auto age = static_cast<uint32_t>(std::clamp<int64_t>(nowMs - rec.receivedMs, 0, UINT32_MAX));
  WireHeader h{kCablingMagic, kWireVersion, kKindRecord, origin, speaker, rec.seq, 0, body, age, 0, {}};
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
  return Seal(std::move(buf));
}

void CablingAgent::SendAll(const std::vector<char>& datagram, const RailState* except) {
  // Onward floods go back towards the host they came from and to their origin too:
  // another process of that host may listen on other rails than the one that sent
  // it (every process of a host has its own agent on the rails it was given).
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

void CablingAgent::Tick(int64_t nowMs, bool dirty) {
  std::vector<std::vector<char>> out;
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    ++counters_.ticks;
    // The graph is rebuilt here only when `dirty` (a change received since the last
    // rebuild) or when this expiry changed what it is built from: an idle agent
    // rebuilt every interval, a fifth of its thread's instructions (callgrind).
    bool changed = dirty;
    for (RailState& r : rails_) {
      for (auto it = r.heard.begin(); it != r.heard.end();) {
        if (nowMs - it->second.lastSeenMs <= options_.deadIntervalMs) {
          ++it;
          continue;
        }
        if (r.lost.size() < kMaxHeardPerRail) r.lost[it->first] = it->second;  // for the return warning
        it = r.heard.erase(it);
        changed = true;
      }
      std::erase_if(r.lost, [&](const auto& kv) {
        return nowMs - kv.second.lastSeenMs > kReturnWindowDeads * options_.deadIntervalMs;
      });
    }
    // A speaker unheard for the dead interval becomes a tombstone: its links go,
    // its sequence stays, so a copy of its last record still circulating on another
    // host is old news here rather than a resurrection. Tombstones go after a while.
    const int64_t tombstoneMs = std::max<int64_t>(kTombstoneMs, int64_t{60} * options_.deadIntervalMs);
    for (auto it = records_.begin(); it != records_.end();) {
      SpeakerRecord& rec = it->second;
      if (!rec.expired && nowMs - rec.receivedMs > options_.deadIntervalMs) {
        rec.expired = true;
        rec.links.clear();
        changed = true;
      }
      if (rec.expired && nowMs - rec.receivedMs > tombstoneMs) {
        it = records_.erase(it);
      } else {
        ++it;
      }
    }
    std::erase_if(budgets_, [&](const auto& kv) { return nowMs - kv.second.periodStartMs > options_.deadIntervalMs; });
    if (changed) Rebuild();
    WarnOneSided(nowMs);
    FlushRefusals(nowMs);
    SpeakerRecord own;
    own.name = hostName_;
    own.seq = ++ownSeq_;
    seq = own.seq;
    own.links = OwnLinks();
    own.receivedMs = nowMs;
    out.push_back(EncodeRecord(hostId_, speaker_, own, nowMs));
    // The periodic re-flood repairs losses of records of linked hosts; a host no
    // cable of the graph reaches yet is forwarded once, on arrival, and repeats its
    // own record itself (so a flood of made-up hosts costs one forward each). Each
    // speaker sends a new record every interval and every host forwards it on
    // arrival, so the re-flood of the others' runs every few intervals only (about
    // three times per dead interval): every interval, it made each agent of a ring
    // of 4 hosts x 4 rails take some 840 datagrams a second, 10-25 % of a soft-RoCE
    // guest's CPU (ring_comms.sh --threads).
    const int64_t every = std::clamp<int64_t>(options_.deadIntervalMs / (3 * int64_t{options_.intervalMs}), 1, 5);
    if (++ticks_ % static_cast<uint64_t>(every) == 0) {
      for (const auto& [key, rec] : records_) {
        if (!rec.expired && linked_.count(key.first) != 0) out.push_back(EncodeRecord(key.first, key.second, rec, nowMs));
      }
    }
  }
  for (const RailState& r : rails_) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(options_.port);
    to.sin_addr.s_addr = htonl(INADDR_BROADCAST);
    const std::vector<char> hello = EncodeHello(r, seq);
    (void)::sendto(r.fd, hello.data(), hello.size(), MSG_DONTWAIT,
                   reinterpret_cast<const sockaddr*>(&to), sizeof to);
  }
  for (const auto& d : out) SendAll(d, nullptr);
}

void CablingAgent::WarnOneSided(int64_t nowMs) {
  std::set<std::pair<std::string, uint64_t>> still;
  for (const RailState& r : rails_) {
    if (r.heard.size() != 1) continue;  // no neighbour, or a shared segment (never a cable)
    const Neighbour& nb = r.heard.begin()->second;
    if (nowMs - nb.firstSeenMs < 3 * static_cast<int64_t>(options_.deadIntervalMs)) continue;
    bool back = false;  // a live record of that host lists this cable's far end as this host
    for (const auto& [key, rec] : records_) {
      if (key.first != nb.host || rec.expired) continue;
      back = back || std::any_of(rec.links.begin(), rec.links.end(),
                                 [&](const LinkRecord& l) { return l.peerHost == hostId_ && l.ifname == nb.ifname; });
    }
    bool anyRecord = false;
    for (const auto& [key, rec] : records_) anyRecord = anyRecord || (key.first == nb.host && !rec.expired);
    if (back || !anyRecord) continue;  // a cable; or nothing heard of that host's records yet
    const std::pair<std::string, uint64_t> pair{r.rail.ifname, nb.host};
    still.insert(pair);
    if (oneSidedWarned_.count(pair) != 0) continue;
    ++counters_.oneSided;
    RY_WARN("cabling: rail %s hears host %s (%s on %s) for %lld ms, but that host does not hear this one on the cable: "
            "it is left out of the graph. The cabling port (UDP %u) is dropped one way (a firewall), or the far end "
            "listens on another RAILYARD_DISCOVERY_PORT or needs the cluster key this host has not",
            r.rail.ifname.c_str(), nb.hostName.c_str(), Ip(nb.addr).c_str(), nb.ifname.c_str(),
            static_cast<long long>(nowMs - nb.firstSeenMs), static_cast<unsigned>(options_.port));
  }
  oneSidedWarned_ = std::move(still);
}

void CablingAgent::FlushRefusals(int64_t nowMs) {
  for (auto& [kind, t] : throttles_) {
    if (t.since == 0 || (t.lastMs >= 0 && nowMs - t.lastMs < kLogEveryMs)) continue;
    if (t.lastMs < 0) {
      RY_WARN("cabling: refused %llu %s datagram(s); first: %s", static_cast<unsigned long long>(t.since), kind.c_str(),
              t.firstDetail.c_str());
    } else {
      RY_WARN("cabling: refused %llu %s datagram(s) in the last %lld s; first: %s",
              static_cast<unsigned long long>(t.since), kind.c_str(),
              static_cast<long long>((nowMs - t.lastMs + 500) / 1000), t.firstDetail.c_str());
    }
    t.lastMs = nowMs;
    t.since = 0;
    t.firstDetail.clear();
  }
}

void CablingAgent::Receive(RailState& r, int64_t nowMs,
                           std::vector<std::pair<std::vector<char>, const RailState*>>* forward, bool* dirty) {
  alignas(8) char buf[kMaxDatagram + 1];
  for (int i = 0; i < kReceiveBatch; ++i) {
    sockaddr_in from{};
    socklen_t fromLen = sizeof from;
    const ssize_t n = ::recvfrom(r.fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&from), &fromLen);
    if (n < 0) return;
    std::lock_guard lock(mu_);
    if (static_cast<size_t>(n) > kMaxDatagram || from.sin_family != AF_INET) {
      Refuse(
          &AgentCounters::malformed, "malformed",
          [&]() -> std::string {
            return std::to_string(n) + " bytes from " + Ip(from.sin_addr.s_addr) + " on rail " + r.rail.ifname;
          },
          nowMs);
      continue;
    }
    Handle(r, buf, static_cast<size_t>(n), from.sin_addr.s_addr, nowMs, forward, dirty);
  }
}

bool CablingAgent::IsOldNews(const char* buf, size_t n) const {
  if (n < sizeof(WireHeader)) return false;
  WireHeader h;
  std::memcpy(&h, buf, sizeof h);
  if (h.magic != kCablingMagic || h.version != kWireVersion || h.kind != kKindRecord) return false;
  if (h.origin == hostId_ && h.speaker == speaker_) return true;  // our own record, flooded back
  if (h.ageMs >= static_cast<uint32_t>(options_.deadIntervalMs)) return true;
  const auto it = records_.find(SpeakerKey{h.origin, h.speaker});
  return it != records_.end() && h.seq <= it->second.seq && !RestartsTombstone(it->second, h.seq, h.ageMs);
}

bool CablingAgent::RestartsTombstone(const SpeakerRecord& held, uint64_t seq, uint32_t ageMs) const {
  return !options_.key && held.expired && seq >= 1 && seq <= kMaxSeq && seq < held.seq &&
         ageMs < static_cast<uint32_t>(options_.deadIntervalMs / 2);
}

void CablingAgent::Handle(RailState& r, const char* buf, size_t n, uint32_t src, int64_t nowMs,
                          std::vector<std::pair<std::vector<char>, const RailState*>>* forward, bool* dirty) {
  // Worded only for a refusal: building it for every datagram (inet_ntop, sprintf,
  // three strings) was a fifth of the agent thread's instructions (callgrind).
  const auto where = [&] { return "from " + Ip(src) + " on rail " + r.rail.ifname; };
  // The budget comes first: it is the cheapest check, and a flood costs no MACs.
  SourceBudget& b = budgets_[{&r, src}];
  if (nowMs - b.periodStartMs >= options_.intervalMs) {
    b.periodStartMs = nowMs;
    b.used = 0;
  }
  if (++b.used > kSourceBudget) {
    Refuse(
        &AgentCounters::rateLimited, "rate-limited",
        [&]() -> std::string {
          return where() + " (over " + std::to_string(kSourceBudget) + " datagrams in one hello period)";
        },
        nowMs);
    return;
  }
  if (IsOldNews(buf, n)) return;
  CablingMessage m;
  CablingRefusal why = CablingRefusal::kNone;
  if (const Status s = DecodeCablingMessage(buf, n, &m, &why); !s.ok()) {
    if (why == CablingRefusal::kBadVersion) {
      Refuse(
          &AgentCounters::badVersion, "other-version", [&]() -> std::string { return s.message() + " " + where(); },
          nowMs);
    } else {
      Refuse(
          &AgentCounters::malformed, "malformed", [&]() -> std::string { return s.message() + " " + where(); }, nowMs);
    }
    return;
  }
  const size_t macBytes = m.hasMac ? sizeof(ClusterMac) : 0;
  WireHeader h;  // the decode checked that it is all there
  std::memcpy(&h, buf, sizeof h);
  if (options_.key) {
    if (macBytes == 0 || !options_.key->Verify(kMacPurpose, buf, n - macBytes,
                                               reinterpret_cast<const unsigned char*>(buf + n - macBytes))) {
      Refuse(
          &AgentCounters::badMac, "unauthenticated",
          [&]() -> std::string {
            return std::string(macBytes == 0 ? "no MAC" : "a wrong MAC") + " " + where() +
                   " (every host needs the same RAILYARD_CLUSTER_KEY_FILE)";
          },
          nowMs);
      return;
    }
  } else if (macBytes != 0) {
    Refuse(
        &AgentCounters::badMac, "unauthenticated",
        [&]() -> std::string {
          return "a MAC " + where() +
                 ", but this host has no cluster key (set RAILYARD_CLUSTER_KEY_FILE as on the others)";
        },
        nowMs);
    return;
  }
  if (m.hello) {
    if (h.origin == hostId_) return;  // our own broadcast, or another process of this host
    // A hello speaks for the host at the far end of this cable: its address must be
    // the one the datagram came from, a unicast address on this rail's subnet.
    const bool onSubnet = r.netmask == 0 || (m.addr & r.netmask) == (r.rail.addr.s_addr & r.netmask);
    if (m.addr != src || !UsableUnicast(m.addr) || m.addr == r.rail.addr.s_addr || !onSubnet) {
      Refuse(
          &AgentCounters::badHelloAddress, "misaddressed-hello",
          [&]() -> std::string {
            return "a hello claiming address " + Ip(m.addr) + " " + where() +
                   (onSubnet ? "" : " (not on the rail's subnet)");
          },
          nowMs);
      return;
    }
    const bool isNew = r.heard.count(h.origin) == 0;
    if (isNew && r.heard.size() >= kMaxHeardPerRail) {
      // A cable has one host at its far end, a shared segment a few: hellos from more
      // are spoofed (hostile-peer probe: 25,000 made-up hosts in seconds, each a graph
      // rebuild). Refused until some expire.
      Refuse(
          &AgentCounters::railFull, "rail-full",
          [&]() -> std::string {
            return "a hello of a new host " + where() + ": the rail already hears " + std::to_string(kMaxHeardPerRail) +
                   " hosts";
          },
          nowMs);
      return;
    }
    if (isNew) {
      auto lost = r.lost.find(h.origin);
      if (lost != r.lost.end() && lost->second.speaker != h.speaker) {
        r.lost.erase(lost);  // another process of that host (a restart, the next job): no return
      } else if (lost != r.lost.end()) {
        // Expired and back: a link that was down, one that drops packets, or a host
        // whose hellos come further apart than this host's dead interval (new-user
        // trial: one host with other discovery timing made every host's shape flap, and
        // nothing said why; a later one: a link set down and up was blamed on timing).
        ++counters_.returns;
        const int64_t gapMs = nowMs - lost->second.lastSeenMs;
        r.lost.erase(lost);
        if (lastReturnWarnMs_ < 0 || nowMs - lastReturnWarnMs_ >= 6 * kLogEveryMs) {
          lastReturnWarnMs_ = nowMs;
          RY_WARN("cabling: host %s on rail %s was unheard for %lld ms, past RAILYARD_DISCOVERY_DEAD_MS (%d ms), and is "
                  "heard again (%llu such returns so far; at most one logged a minute): the link was down for that "
                  "long (a cable pulled, an interface set down), the cable drops packets, or that host's hellos come "
                  "further apart than this host waits (every host needs the same RAILYARD_DISCOVERY_INTERVAL_MS and "
                  "RAILYARD_DISCOVERY_DEAD_MS)",
                  m.hostName.c_str(), r.rail.ifname.c_str(), static_cast<long long>(gapMs), options_.deadIntervalMs,
                  static_cast<unsigned long long>(counters_.returns));
        }
      }
    }
    Neighbour& nb = r.heard[h.origin];
    const Neighbour old = nb;
    nb = {h.origin, m.hostName, m.ifname, m.addr, m.speedMbps, nowMs, h.speaker, isNew ? nowMs : old.firstSeenMs};
    if (isNew || old.ifname != nb.ifname || old.addr != nb.addr || old.speedMbps != nb.speedMbps ||
        old.hostName != nb.hostName) {
      *dirty = true;
    }
    if (isNew || old.hostName != nb.hostName) WarnDuplicateName(r, nb);
    if (isNew) {
      RY_INFO(log::kNet, "cabling: rail %s hears host %s (%s on %s)", r.rail.ifname.c_str(),
              nb.hostName.c_str(), Ip(nb.addr).c_str(), nb.ifname.c_str());
      if (r.heard.size() == 2) {
        RY_INFO(log::kNet, "cabling: rail %s hears several hosts: a shared segment, not a cable; left out of the graph",
                r.rail.ifname.c_str());
      }
    }
    return;
  }
  // Our own records, copies as old as the dead interval and sequences already held
  // were dropped before the decode (IsOldNews).
  const SpeakerKey key{h.origin, h.speaker};
  auto it = records_.find(key);
  if (it != records_.end() && RestartsTombstone(it->second, h.seq, h.ageMs)) {
    // A new-user trial: replaying one captured record with its sequence raised step by
    // step (each step inside the window) made every host drop the real speaker's
    // records as old news until the forged sequence's tombstone went, about a minute.
    // One WARN per kLogEveryMs, with the count since the last (hostile-peer probe: made-up
    // hosts restarted so flooded every host's log, 1000 lines a second each).
    ++restartsSinceWarn_;
    if (lastRestartWarnMs_ < 0 || nowMs - lastRestartWarnMs_ >= kLogEveryMs) {
      RY_WARN("cabling: host %s (%s) speaks again at sequence %llu, below the %llu it last held: a datagram it did "
              "not send had pushed its sequence ahead, or its speaker restarted its count; taken (no cluster key: "
              "every host on a rail is believed; RAILYARD_CLUSTER_KEY_FILE makes sequences unforgeable) %s (%llu "
              "such restarts since the last of these WARNs; at most one per %lld s)",
              m.hostName.c_str(), HostIdText(h.origin).c_str(), static_cast<unsigned long long>(h.seq),
              static_cast<unsigned long long>(it->second.seq), where().c_str(),
              static_cast<unsigned long long>(restartsSinceWarn_), static_cast<long long>(kLogEveryMs / 1000));
      lastRestartWarnMs_ = nowMs;
      restartsSinceWarn_ = 0;
    }
    it->second.seq = 0;  // taken as if first heard: the window starts again at this sequence
  }
  if (it != records_.end() && it->second.seq != 0) {
    const uint64_t window = kSeqSlack + static_cast<uint64_t>(std::max<int64_t>(0, nowMs - it->second.receivedMs)) /
                                            static_cast<uint64_t>(kMinIntervalMs);
    if (h.seq - it->second.seq > window) {
      Refuse(
          &AgentCounters::futureSeq, "future-sequence",
          [&]() -> std::string {
            return "host " + HostIdText(h.origin) + " sequence " + std::to_string(h.seq) + ", " +
                   std::to_string(h.seq - it->second.seq) + " past the last accepted (window " +
                   std::to_string(window) + ") " + where();
          },
          nowMs);
      return;
    }
  } else if (h.seq == 0 || h.seq > kMaxSeq) {  // first heard (or a tombstone restarting)
    Refuse(
        &AgentCounters::futureSeq, "future-sequence",
        [&]() -> std::string {
          return "host " + HostIdText(h.origin) + " sequence " + std::to_string(h.seq) + " out of range (1.." +
                 std::to_string(kMaxSeq) + ") " + where();
        },
        nowMs);
    return;
  }
  std::vector<LinkRecord> links;
  for (const CablingMessage::Link& l : m.links) {
    if (l.peerHost == 0 || l.peerHost == h.origin) continue;  // nonsense, never a cable
    links.push_back({l.ifname, l.peerIfname, l.addr, l.peerAddr, l.peerHost, l.speedMbps});
  }
  // A speaker new here, or a tombstone coming back to life (hostile-peer probe: made-up
  // hosts' tombstones, restarted, went past the cap below).
  const bool revives = it == records_.end() || it->second.expired;
  if (revives) {
    // Room. A host the graph does not link yet (a host starting up far away, or one
    // made up by a flood) gets at most kMaxUnlinkedSpeakers speakers in all; when the table
    // is full, a tombstone goes first (the oldest), else, for a speaker of a linked
    // host (or this host: another process starting), the stalest speaker of an
    // unlinked host. Else the newcomer is refused: a flood of made-up speakers can
    // neither push out a real one nor, evicted and heard again, live forever.
    // A neighbour this host hears hellos from (checked against their source) counts
    // as linked: a real host starting next to this one joins even during a flood.
    bool linked = linked_.count(h.origin) != 0;
    for (const RailState& rs : rails_) linked = linked || rs.heard.count(h.origin) != 0;
    if (!linked) {
      size_t unlinked = 0;
      for (const auto& [k, v] : records_) unlinked += (!v.expired && linked_.count(k.first) == 0) ? 1 : 0;
      if (unlinked >= kMaxUnlinkedSpeakers) {
        Refuse(
            &AgentCounters::tableFull, "table-full",
            [&]() -> std::string {
              return "a new speaker for unlinked host " + HostIdText(h.origin) + " " + where() + " (" +
                     std::to_string(kMaxUnlinkedSpeakers) + " speakers of unlinked hosts held)";
            },
            nowMs);
        return;
      }
    }
    if (it == records_.end() && records_.size() >= kMaxSpeakers) {
      auto victim = records_.end();
      for (auto j = records_.begin(); j != records_.end(); ++j) {
        if (j->second.expired && (victim == records_.end() || j->second.receivedMs < victim->second.receivedMs)) {
          victim = j;
        }
      }
      if (victim == records_.end() && linked) {
        for (auto j = records_.begin(); j != records_.end(); ++j) {
          if (linked_.count(j->first.first) == 0 &&
              (victim == records_.end() || j->second.receivedMs < victim->second.receivedMs)) {
            victim = j;
          }
        }
      }
      if (victim == records_.end()) {
        Refuse(
            &AgentCounters::tableFull, "table-full",
            [&]() -> std::string {
              return "a new speaker for host " + HostIdText(h.origin) + " " + where() + " (" +
                     std::to_string(kMaxSpeakers) + " speakers held)";
            },
            nowMs);
        return;
      }
      ++counters_.evicted;
      records_.erase(victim);
    }
    it = records_.emplace(key, SpeakerRecord{}).first;
    it->second.firstSeenMs = nowMs;
  }
  SpeakerRecord& rec = it->second;
  // A speaker re-sends its record every interval with a new sequence: only a record
  // that changes what the graph is built from (new, back from a tombstone, another
  // name or other links) asks for a rebuild. Rebuilding on every refresh cost the
  // agent's thread 10-25 % of a soft-RoCE ring guest's CPU (ring_comms.sh --threads).
  const bool sameLinks = std::equal(rec.links.begin(), rec.links.end(), links.begin(), links.end(),
                                    [](const LinkRecord& x, const LinkRecord& y) {
                                      return x.ifname == y.ifname && x.peerIfname == y.peerIfname && x.addr == y.addr &&
                                             x.peerAddr == y.peerAddr && x.peerHost == y.peerHost &&
                                             x.speedMbps == y.speedMbps;
                                    });
  const bool changed = rec.seq == 0 || rec.expired || rec.name != m.hostName || !sameLinks;
  rec.name = m.hostName;
  rec.seq = h.seq;
  rec.receivedMs = nowMs - h.ageMs;  // when its speaker made it, as this host's clock reads
  rec.expired = false;
  rec.links = std::move(links);
  if (changed) *dirty = true;
  // Flood onwards at once (after the batch); the periodic re-flood repairs losses.
  forward->emplace_back(std::vector<char>(buf, buf + n), &r);
}

void CablingAgent::WarnDuplicateName(const RailState& r, const Neighbour& nb) {
  // Once per name, so the heard hosts are searched only for a name not yet warned.
  if (nameClashesWarned_.count(nb.hostName) > 0 || nameClashesWarned_.size() >= kMaxNameClashes) return;
  const std::string who = "host " + HostIdText(nb.host) + " at " + Ip(nb.addr) + " (rail " + r.rail.ifname + ")";
  const char* more = nameClashesWarned_.size() + 1 == kMaxNameClashes ? " (further name clashes are not logged)" : "";
  if (nb.hostName == hostName_) {
    nameClashesWarned_.insert(nb.hostName);
    RY_WARN("cabling: %s announces the name '%s', which is this host's name (this host is at %s on %s): "
            "two hosts share a name; give each its own (RAILYARD_HOST_NAME or railyardd --host-name)%s",
            who.c_str(), nb.hostName.c_str(), Ip(r.rail.addr.s_addr).c_str(), r.rail.ifname.c_str(), more);
    return;
  }
  for (const RailState& other : rails_) {
    for (const auto& [id, seen] : other.heard) {
      if (id == nb.host || seen.hostName != nb.hostName) continue;
      nameClashesWarned_.insert(nb.hostName);
      RY_WARN("cabling: %s and host %s at %s (rail %s) both announce the name '%s': two hosts share a name; "
              "give each its own (RAILYARD_HOST_NAME or railyardd --host-name)%s",
              who.c_str(), HostIdText(id).c_str(), Ip(seen.addr).c_str(), other.rail.ifname.c_str(),
              nb.hostName.c_str(), more);
      return;
    }
  }
}

void CablingAgent::Rebuild() {
  // Every host's claimed links, as (host, if) → (peer host, peer if). A host's
  // claims are the union over its live speakers; this host's own come first from
  // this process's hellos, then from the other processes of this host.
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
  // Speakers oldest first (first heard, then id): a host's name, and the addresses
  // of a link several of its speakers claim, come from its longest-standing speaker,
  // so a newcomer (a process starting, or a forger speaking for the host) changes
  // neither while the old one lives.
  std::vector<const std::pair<const SpeakerKey, SpeakerRecord>*> order;
  for (const auto& kv : records_) {
    if (!kv.second.expired) order.push_back(&kv);
  }
  std::sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    return std::tie(x->second.firstSeenMs, x->first) < std::tie(y->second.firstSeenMs, y->first);
  });
  std::map<uint64_t, std::string> names;
  std::set<uint64_t> live;
  // This host's links on the rails this process watches are what its own hellos saw
  // (OwnLinks), whatever another speaker for this host says of them (hostile-peer probe:
  // without a cluster key, a forged speaker for this host claimed a cable of one of its
  // rails to a made-up host, and the relay dialed the made-up address).
  std::set<std::string> watched;
  for (const RailState& r : rails_) watched.insert(r.rail.ifname);
  for (const auto* kv : order) {
    const uint64_t origin = kv->first.first;
    live.insert(origin);
    if (origin != hostId_) names.try_emplace(origin, kv->second.name);
    for (const LinkRecord& l : kv->second.links) {
      if (origin == hostId_ && watched.count(l.ifname) != 0) continue;
      claims.try_emplace({origin, l.ifname, l.peerHost, l.peerIfname}, l);
    }
  }
  for (const auto& [origin, name] : names) g.AddHost(origin, name);
  // A rail-link counts only when both of its ends report it. The addresses of a
  // link with an end on this host are what this host saw (its own rail, and the
  // neighbour's address as its hellos came from), never what another host claims.
  for (const auto& [c, l] : claims) {
    if (c.host > c.peer) continue;
    auto back = claims.find({c.peer, c.peerIf, c.host, c.ifname});
    if (back == claims.end()) continue;
    if (c.peer != hostId_ && live.count(c.peer) == 0) continue;
    if (c.host != hostId_ && live.count(c.host) == 0) continue;
    const LinkRecord& mine = c.peer == hostId_ ? back->second : l;   // valid when an end is this host
    const bool selfLink = c.host == hostId_ || c.peer == hostId_;
    uint32_t hostAddr = l.addr, peerAddr = back->second.addr;
    if (selfLink) {
      if (c.host == hostId_) {
        hostAddr = mine.addr;
        peerAddr = mine.peerAddr;
      } else {
        hostAddr = mine.peerAddr;
        peerAddr = mine.addr;
      }
    }
    g.AddLink({c.host, c.ifname, Ip(hostAddr), l.speedMbps}, {c.peer, c.peerIf, Ip(peerAddr), l.speedMbps});
  }
  linked_ = {hostId_};
  for (const RailLink& l : g.Links()) {
    linked_.insert(l.a.host);
    linked_.insert(l.b.host);
  }
  std::vector<std::string> shared;
  for (const RailState& r : rails_) {
    if (r.heard.size() > 1) shared.push_back(r.rail.ifname);
  }
  shared_ = shared;
  lastRebuildMs_ = NowMs();
  ++counters_.rebuilds;
  bool same = g.Links() == graph_.Links() && g.Hosts() == graph_.Hosts();
  for (uint64_t h : g.Hosts()) same = same && g.HostName(h) == graph_.HostName(h);
  if (!same) {
    graph_ = std::move(g);
    ++version_;
    changedMs_.store(NowMs(), std::memory_order_relaxed);
    changed_.notify_all();
  }
}

void CablingAgent::InjectForTesting(size_t railIndex, const std::vector<char>& datagram, in_addr source) {
  InjectForTesting(railIndex, datagram, source, NowMs());
}

void CablingAgent::InjectForTesting(size_t railIndex, const std::vector<char>& datagram, in_addr source,
                                    int64_t nowMs) {
  std::vector<std::pair<std::vector<char>, const RailState*>> forward;
  bool dirty = false;
  std::lock_guard lock(mu_);
  Handle(rails_.at(railIndex), datagram.data(), datagram.size(), source.s_addr, nowMs, &forward, &dirty);
  if (dirty) Rebuild();  // as Run does (there, at most every kRebuildGapMs)
}

ClusterGraph CablingAgent::Graph() const {
  std::lock_guard lock(mu_);
  return graph_;
}

uint64_t CablingAgent::Version() const {
  std::lock_guard lock(mu_);
  return version_;
}

AgentCounters CablingAgent::Counters() const {
  std::lock_guard lock(mu_);
  return counters_;
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
