#include "storage/snapshot/snapshot_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <sstream>

#include "env/log.h"
#include "proxy/fabric/hello_admission.h"
#include "proxy/fabric/quiet_wait.h"
#include "storage/snapshot/control_socket.h"

namespace railyard::storage::snapshot {
namespace {

/// The longest sleep of the progress thread on the Worker's descriptor: how long a
/// stop waits for it at most.
constexpr int kQuietWaitMs = 20;

// What a count field accepts, for its errors: slots= is a plain integer, blob= and max= are bytes.
std::string Accepted(const std::string& field) {
  if (field == "slots") return "an integer of 1 or more (slots x blob at most 1 TiB)";
  return "a byte count of 1 or more with an optional K, M or G suffix (powers of 1024; the arena at most 1 TiB)";
}

// One count field of the spec `text`; errors name the spec, the field, its value and what it accepts.
Status ParseCount(const std::string& text, const std::string& field, const std::string& v, bool suffixes,
                  uint64_t* out) {
  const std::string where = "arena spec '" + text + "': " + field + "='" + v + "'";
  uint64_t n = 0;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, n);
  if (ec != std::errc() || p == v.data()) return InvalidArgument(where + " is not a number: expected " + Accepted(field));
  uint64_t mult = 1;
  if (p != end) {
    const std::string suf(p, end);
    if (!suffixes || suf.size() != 1) return InvalidArgument(where + " has a bad suffix: expected " + Accepted(field));
    switch (suf[0]) {
      case 'K': case 'k': mult = 1ull << 10; break;
      case 'M': case 'm': mult = 1ull << 20; break;
      case 'G': case 'g': mult = 1ull << 30; break;
      default: return InvalidArgument(where + " has a bad suffix (K, M or G): expected " + Accepted(field));
    }
  }
  if (n == 0 || n > (uint64_t{1} << 62) / mult) return InvalidArgument(where + " is out of range: expected " + Accepted(field));
  *out = n * mult;
  return Status::Ok();
}

}  // namespace

Status ParseArenaSpec(const std::string& text, ArenaSpec* out) {
  ArenaSpec s;
  bool haveKind = false, haveMode = false;
  std::stringstream in(text);
  std::string item;
  std::vector<std::string> seen;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return InvalidArgument("arena spec '" + text + "': '" + item + "' is not field=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    // New-user trial: slots=4,slots=8 took the last one silently.
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
      return InvalidArgument("arena spec '" + text + "': " + k + "= given twice");
    }
    seen.push_back(k);
    if (k == "kind") {
      if (!ValidKind(v)) return InvalidArgument("arena spec: kind '" + v + "' must be 1..31 bytes of [A-Za-z0-9_.-]");
      s.kind = v;
      haveKind = true;
    } else if (k == "mode") {
      if (v == "raw") s.mode = Mode::kRaw;
      else if (v == "paging") s.mode = Mode::kPaging;
      else return InvalidArgument("arena spec: mode '" + v + "' (raw or paging)");
      haveMode = true;
    } else if (k == "blob") {
      RY_RETURN_IF_ERROR(ParseCount(text, k, v, true, &s.blobBytes));
    } else if (k == "slots") {
      RY_RETURN_IF_ERROR(ParseCount(text, k, v, false, &s.slots));
    } else if (k == "max") {
      RY_RETURN_IF_ERROR(ParseCount(text, k, v, true, &s.maxBytes));
    } else {
      return InvalidArgument("arena spec '" + text + "': unknown field '" + k + "' (kind, mode, blob, slots, max)");
    }
  }
  if (s.slots != 0 && s.maxBytes != 0) {
    return InvalidArgument("arena spec '" + text + "': slots= (a fixed size) and max= (sized by the first client, "
                           "mode=raw) exclude each other: give one of them, not both");
  }
  if (!haveKind || !haveMode || s.blobBytes == 0 || (s.slots == 0 && s.maxBytes == 0)) {
    return InvalidArgument("arena spec '" + text + "': needs kind=, mode=, blob= and one of slots= or max=");
  }
  if (s.maxBytes != 0 && s.mode != Mode::kRaw) {
    return InvalidArgument("arena spec '" + text + "': max= (a client-sized arena) is for mode=raw only");
  }
  if (s.maxBytes != 0 && s.maxBytes < s.blobBytes) {
    return InvalidArgument("arena spec '" + text + "': max= is below one blob");
  }
  if (s.maxBytes % s.blobBytes != 0) {
    // Clients size the arena in whole blobs: a max= between two would refuse each one
    // that asked for it (new-user trial).
    return InvalidArgument("arena spec '" + text + "': max= " + std::to_string(s.maxBytes) +
                           " is not a whole number of blobs of " + std::to_string(s.blobBytes) + " bytes");
  }
  if (s.slots > (uint64_t{1} << 40) / s.blobBytes || s.maxBytes > (uint64_t{1} << 40)) {
    return InvalidArgument("arena spec '" + text + "': arena over 1 TiB");
  }
  *out = s;
  return Status::Ok();
}

Status CheckArenasFitMemory(const std::vector<ArenaSpec>& arenas, uint64_t memoryBytes) {
  if (memoryBytes == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return Status::Ok();  // unknown: nothing to compare with
    memoryBytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  uint64_t total = 0;
  std::string each;
  for (const ArenaSpec& a : arenas) {
    const uint64_t bytes = a.slots != 0 ? a.arenaBytes() : a.maxBytes;  // each at most 1 TiB (ParseArenaSpec)
    total += bytes;
    each += (each.empty() ? "" : ", ") + a.kind + " " + std::to_string(bytes);
  }
  if (total <= memoryBytes) return Status::Ok();
  return InvalidArgument("snapshot: the arenas need " + std::to_string(total) + " bytes of memory (" + each +
                         ") but this host has " + std::to_string(memoryBytes) +
                         ": make slots, blob or max smaller (a paging arena spills to its swap file, "
                         "so its slots are only the part kept in memory)");
}

Status SnapshotServer::Materialize(Arena& a) {
  const ArenaSpec& spec = a.spec;
  void* p = ::mmap(nullptr, spec.arenaBytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) {
    return SystemError("snapshot server: cannot map " + std::to_string(spec.arenaBytes()) + " bytes for kind '" +
                       spec.kind + "': " + proxy::ErrnoText(errno));
  }
  a.memory = static_cast<uint8_t*>(p);
  return cache_.Acquire(p, spec.arenaBytes(),
                        fabric::kAccessLocal | fabric::kAccessRemoteRead | fabric::kAccessRemoteWrite,
                        fabric::MemoryKind::kHost, &a.region);
}

Status SnapshotServer::Start(fabric::RegistrationCache& cache, fabric::Worker& worker, ServerOptions options,
                             std::unique_ptr<SnapshotServer>* out) {
  if (options.arenas.empty()) return InvalidArgument("snapshot server: no arena");
  RY_RETURN_IF_ERROR(CheckArenasFitMemory(options.arenas, options.memoryBytes));
  std::unique_ptr<SnapshotServer> s(new SnapshotServer(cache, worker));
  s->options_ = options;
  // The control port first: a port in use fails the start before any swap file is
  // created or opened (new-user trial: a failed start left a new swap file behind).
  RY_RETURN_IF_ERROR(ListenControl(options.address, options.port, &s->listener_, &s->port_));
  for (const ArenaSpec& spec : options.arenas) {
    if (!ValidKind(spec.kind) || spec.blobBytes == 0 || (spec.slots == 0 && spec.maxBytes == 0) ||
        (spec.slots == 0 && spec.mode != Mode::kRaw)) {
      return InvalidArgument("snapshot server: bad arena '" + spec.kind + "'");
    }
    if (s->arenas_.count(spec.kind) != 0) return InvalidArgument("snapshot server: kind '" + spec.kind + "' given twice");
    auto a = std::make_unique<Arena>();
    a->spec = spec;
    Arena* raw = a.get();
    s->arenas_[spec.kind] = std::move(a);  // owned now: the destructor unmaps on any later error
    if (spec.slots != 0) RY_RETURN_IF_ERROR(s->Materialize(*raw));
    if (spec.mode == Mode::kPaging) {
      std::unique_ptr<SwapFile> swap;
      SwapRebuild rebuild;
      RY_RETURN_IF_ERROR(SwapFile::Open(options.swapDir, spec.kind, spec.blobBytes, options.swapSync, &swap, &rebuild));
      if (rebuild.cacheOnlyDiscarded) {
        RY_WARN("snapshot: kind '%s': %s has no durable flag (only arenas with RAILYARD_SWAP_SYNC=0 kept it, which "
                "keep no blob past a restart): its records were dropped and it starts empty",
                spec.kind.c_str(), swap->path().c_str());
      }
      if (rebuild.torn > 0) {
        // Which keys (new-user trial: only a count, and clients then found those keys
        // absent without a word why).
        std::string keys;
        for (uint64_t k : rebuild.tornKeys) keys += (keys.empty() ? "" : ", ") + std::to_string(k);
        if (rebuild.tornKeys.size() == SwapRebuild::kMaxTornKeys) keys += ", ...";
        RY_WARN("snapshot: kind '%s': dropped %llu torn records of %s (keys %s; a torn header names none; a key "
                "with an older intact record keeps that one, else it is absent)",
                spec.kind.c_str(), static_cast<unsigned long long>(rebuild.torn), swap->path().c_str(),
                keys.empty() ? "unknown" : keys.c_str());
      }
      if (!rebuild.records.empty()) {
        RY_INFO(log::kNet, "snapshot: kind '%s': %zu committed blobs found in %s (RAILYARD_SWAP_SYNC=1)",
                spec.kind.c_str(), rebuild.records.size(), swap->path().c_str());
      }
      // A client stopped mid-operation is dropped (its slots given back) within the
      // control timeout of its last request, and its key revoked first: a get or a put
      // finding every slot taken waits twice that.
      if (!s->checksums_ && spec.blobBytes >= kChecksumPoolMinBytes) {  // smaller blobs never use it
        s->checksums_ = std::make_unique<ChecksumPool>(
            options.checksumHelpers >= 0 ? options.checksumHelpers : DefaultChecksumHelpers(UsableCpus()));
      }
      raw->paging = std::make_unique<PagingArena>(raw->memory, spec.slots, spec.blobBytes, std::move(swap), rebuild,
                                                  2 * static_cast<int64_t>(options.timeoutMs), s->checksums_.get());
    }
  }
  s->progressThread_ = std::thread([p = s.get()] { p->ProgressLoop(); });
  s->acceptThread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  *out = std::move(s);
  return Status::Ok();
}

SnapshotServer::~SnapshotServer() {
  stop_.store(true);
  if (acceptThread_.joinable()) acceptThread_.join();
  {
    std::lock_guard<std::mutex> lock(connMu_);
    for (auto& c : connections_) c->fd.Shutdown();
  }
  // Requests queued for a slot end now, not at their slot wait (review).
  for (auto& [kind, a] : arenas_) {
    if (a->paging) a->paging->Stop();
  }
  for (auto& c : connections_) {
    if (c->thread.joinable()) c->thread.join();
  }
  if (progressThread_.joinable()) progressThread_.join();
  for (auto& [kind, a] : arenas_) {
    if (a->region != nullptr) {
      // A region the NIC may still hold is never unmapped: its pages could be reused
      // and a late remote write land in them (review). Kept mapped until exit.
      if (Status st = cache_.Release(a->region); !st.ok()) {
        RY_WARN("snapshot: kind '%s': the arena's deregistration failed (%s); its %llu bytes stay mapped until "
                "the process exits",
                kind.c_str(), st.message().c_str(), static_cast<unsigned long long>(a->spec.arenaBytes()));
        continue;
      }
    }
    if (a->unrevoked) {
      RY_WARN("snapshot: kind '%s': a client's key over the arena could not be revoked; its %llu bytes stay mapped "
              "until the process exits",
              kind.c_str(), static_cast<unsigned long long>(a->spec.arenaBytes()));
      continue;
    }
    if (a->memory != nullptr) ::munmap(a->memory, a->spec.arenaBytes());
  }
}

PagingStats SnapshotServer::Stats(const std::string& kind) const {
  auto it = arenas_.find(kind);
  if (it == arenas_.end() || !it->second->paging) return {};
  return it->second->paging->stats();
}

void SnapshotServer::SetFaultReadSeen(const std::string& kind, std::function<void(uint64_t)> seen) {
  auto it = arenas_.find(kind);
  if (it != arenas_.end() && it->second->paging) it->second->paging->SetFaultReadSeen(std::move(seen));
}

void SnapshotServer::ProgressLoop() {
  pthread_setname_np(pthread_self(), "ry-snap-prog");  // ps -L, top -H, gdb name it
  // Serves the clients' one-sided operations. Idle, it sleeps on the Worker's
  // descriptor (woken by a peer's bytes; kQuietWaitMs bounds it for the stop flag);
  // a Worker that cannot sleep so is polled with a back-off of up to 200 us, which
  // any landed or served byte resets. (An idle server no longer spins; on loopback
  // the puts' and gets' GB/s did not move measurably with it.)
  std::vector<fabric::Event> events;
  uint64_t last = 0;
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    events.clear();
    worker_.Progress(&events);
    for (const fabric::Event& e : events) {
      if (e.kind == fabric::EventKind::kError) RY_INFO(log::kNet, "snapshot: %s", e.error.ToString().c_str());
    }
    const fabric::WorkerStats st = worker_.stats();
    const uint64_t now = st.bytesLanded + st.bytesServed + st.framesRefused + st.peerConnections * 1000003ull;
    if (now != last || !events.empty()) {
      last = now;
      idle = 0;
      continue;
    }
    // Slept through: nothing came. Woken (or cannot sleep) and still idle: after 64
    // such passes in a row back off (a descriptor that stays readable must not spin).
    if (fabric::SleepUntilInput(worker_, std::chrono::milliseconds(kQuietWaitMs)) == fabric::QuietWait::kTimedOut) {
      continue;
    }
    if (++idle > 64) std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, idle - 64)));
  }
}

void SnapshotServer::ReapDone() {
  std::lock_guard<std::mutex> lock(connMu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void SnapshotServer::AcceptLoop() {
  pthread_setname_np(pthread_self(), "ry-snap-accept");  // ps -L, top -H, gdb name it
  while (!stop_.load()) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) {
      ReapDone();
      continue;
    }
    sockaddr_in from{};
    socklen_t fromLen = sizeof from;
    proxy::Fd fd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &fromLen, SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    char ip[INET_ADDRSTRLEN] = "?";
    if (fromLen >= sizeof from && from.sin_family == AF_INET) inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    ReapDone();
    const uint32_t sourceIp = from.sin_family == AF_INET ? from.sin_addr.s_addr : 0;
    {
      std::lock_guard<std::mutex> lock(connMu_);
      const size_t fromSource = static_cast<size_t>(std::count_if(
          connections_.begin(), connections_.end(), [&](const auto& c) { return c->sourceIp == sourceIp; }));
      bool full = fromSource >= options_.maxConnectionsPerSource;
      if (!full && connections_.size() >= options_.maxConnections) full = !MakeRoom(sourceIp, ip);
      if (full) {
        if (refusedAtAccept_++ % 1024 == 0) {
          if (connections_.size() >= options_.maxConnections) {
            RY_WARN("snapshot: refused a client from %s: %zu clients connected already (at most %zu), and the "
                    "address holding the most has none idle to close, or it is this one (%llu refused so, logged "
                    "every 1024th)",
                    ip, connections_.size(), options_.maxConnections, static_cast<unsigned long long>(refusedAtAccept_));
          } else {
            RY_WARN("snapshot: refused a client from %s: %zu clients of that address connected already (at most %zu "
                    "from one address; %llu refused so, logged every 1024th)",
                    ip, fromSource, options_.maxConnectionsPerSource, static_cast<unsigned long long>(refusedAtAccept_));
          }
        }
        continue;  // fd closes: the client sees its handshake fail
      }
    }
    (void)proxy::TuneTcpSocket(fd.get(), 0);
    (void)SetTimeouts(fd.get(), options_.timeoutMs);
    (void)SetKeepalive(fd.get(), options_.timeoutMs);
    auto c = std::make_unique<Connection>();
    c->fd = std::move(fd);
    c->source = std::string(ip) + ":" + std::to_string(ntohs(from.sin_port));
    c->sourceIp = sourceIp;
    Connection* raw = c.get();
    const uint64_t client = nextClient_++;
    std::lock_guard<std::mutex> lock(connMu_);
    raw->thread = std::thread([this, raw, client] { Serve(raw, client); });
    connections_.push_back(std::move(c));
  }
}

bool SnapshotServer::MakeRoom(uint32_t sourceIp, const char* ip) {
  std::vector<fabric::HeldConnection> held;
  held.reserve(connections_.size());
  for (const auto& c : connections_) held.push_back({c->sourceIp, c->phase.load() == Connection::kIdle});
  const fabric::Admission a = fabric::AdmitIdle(held, sourceIp, options_.maxConnections);
  if (!a.admit) return false;
  if (a.evict == fabric::Admission::kNone) return true;
  Connection& victim = *connections_[a.evict];
  int idle = Connection::kIdle;
  if (!victim.phase.compare_exchange_strong(idle, Connection::kEvicted)) return false;  // a request came meanwhile
  victim.fd.Shutdown();  // its Serve wakes, sees kEvicted and ends it (fd is reset under connMu_, held here)
  if (evictedAtAccept_++ % 1024 == 0) {
    RY_WARN("snapshot: %zu clients connected (at most %zu): closed an idle one from %s, the address holding the "
            "most, for a new one from %s (%llu closed so, logged every 1024th)",
            connections_.size(), options_.maxConnections, victim.source.c_str(), ip,
            static_cast<unsigned long long>(evictedAtAccept_));
  }
  return true;
}

std::vector<uint8_t> SnapshotServer::ArenaList() {
  Reply head;  // status ok; the head's 8 bytes only
  std::vector<uint8_t> b = head.Encode();
  b.resize(8);
  const uint32_t count = static_cast<uint32_t>(std::min<size_t>(arenas_.size(), ArenaInfo::kMaxArenas));
  b.insert(b.end(), reinterpret_cast<const uint8_t*>(&count), reinterpret_cast<const uint8_t*>(&count) + 4);
  uint32_t n = 0;
  for (auto& [kind, a] : arenas_) {
    if (n++ == count) break;
    ArenaInfo info;
    {
      std::lock_guard<std::mutex> lock(a->mu);
      info.kind = kind;
      info.mode = a->spec.mode;
      info.blobBytes = a->spec.blobBytes;
      info.arenaBytes = a->spec.arenaBytes();
      info.maxBytes = a->spec.maxBytes;
    }
    auto e = info.Encode();
    b.insert(b.end(), e.begin(), e.end());
  }
  return b;
}

Status SnapshotServer::Handshake(int fd, Arena** arena, bool* listed, bool* closedEarly, uint32_t* clientTimeoutMs) {
  std::array<uint8_t, Header::kBytes> hb{};
  bool eof = false;
  // The whole handshake within the timeout, not each byte (hostile-peer probe).
  const auto began = std::chrono::steady_clock::now();
  // The magic first, refused at once when it is not ours: a client of another protocol
  // that sends fewer bytes than a header (an expert-tier client's 8-byte transport
  // choice) would otherwise wait with this peer for the rest until a timeout (C API
  // trial: railyard_expert_open on a snapshot port took 30 s).
  RY_RETURN_IF_ERROR(proxy::RecvAllWithin(fd, hb.data(), 4, "snapshot handshake", options_.timeoutMs, &eof));
  if (eof) {
    // Closed before a byte (a port probe, a health check): nothing to refuse (review: it
    // was logged as a refused client with "bad magic 0x00000000").
    *closedEarly = true;
    return Status::Ok();
  }
  RY_RETURN_IF_ERROR(Header::CheckMagic(std::span<const uint8_t, 4>(hb.data(), 4)));
  const int leftForHeader = options_.timeoutMs - static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::steady_clock::now() - began).count());
  RY_RETURN_IF_ERROR(proxy::RecvAllWithin(fd, hb.data() + 4, hb.size() - 4,
                                          "snapshot handshake, the " + std::to_string(hb.size() - 4) +
                                              " bytes after its magic",
                                          std::max(leftForHeader, 1)));
  Header h;
  RY_RETURN_IF_ERROR(Header::Decode(hb, &h));
  *clientTimeoutMs = h.timeoutMs;
  if (h.mode == Mode::kList) {
    *listed = true;
    return Status::Ok();
  }
  std::vector<uint8_t> address(h.addressBytes);
  const int left = options_.timeoutMs - static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::steady_clock::now() - began).count());
  RY_RETURN_IF_ERROR(proxy::RecvAllWithin(fd, address.data(), address.size(), "snapshot handshake address",
                                          std::max(left, 1)));
  auto it = arenas_.find(h.kind);
  if (it == arenas_.end()) {
    std::string kinds;
    for (auto& [k, a] : arenas_) kinds += (kinds.empty() ? "" : ", ") + k;
    return InvalidArgument("snapshot handshake: this peer has no arena of kind '" + h.kind + "' (it has " + kinds + ")");
  }
  Arena& a = *it->second;
  std::lock_guard<std::mutex> lock(a.mu);
  const ArenaSpec& spec = a.spec;
  const std::string who = "snapshot handshake, kind '" + h.kind + "': ";
  if (h.mode != spec.mode) {
    return InvalidArgument(who + "mode " + ModeName(h.mode) + " differs from the peer's " + ModeName(spec.mode));
  }
  if (h.blobBytes != spec.blobBytes) {
    return InvalidArgument(who + "blob bytes " + std::to_string(h.blobBytes) + " differ from the peer's " +
                           std::to_string(spec.blobBytes));
  }
  if (a.region == nullptr && spec.maxBytes != 0) {  // the first client sizes a raw arena
    if (h.arenaBytes > spec.maxBytes) {
      return InvalidArgument(who + "arena bytes " + std::to_string(h.arenaBytes) + " exceed the peer's maximum " +
                             std::to_string(spec.maxBytes));
    }
    a.spec.slots = h.arenaBytes / h.blobBytes;
    if (Status st = Materialize(a); !st.ok()) {
      if (a.memory != nullptr) ::munmap(a.memory, a.spec.arenaBytes());
      a.memory = nullptr;
      a.region = nullptr;
      a.spec.slots = 0;
      return st;
    }
  }
  if (h.arenaBytes != spec.arenaBytes()) {
    return InvalidArgument(who + "arena bytes " + std::to_string(h.arenaBytes) + " differ from the peer's " +
                           std::to_string(spec.arenaBytes()));
  }
  *arena = it->second.get();
  return Status::Ok();
}

bool SnapshotServer::MayLog(std::atomic<uint64_t>& count, log::LogBudget& budget) {
  count.fetch_add(1);
  std::lock_guard<std::mutex> lock(logMu_);
  return budget.Take(log::LogBudget::Clock::now());
}

void SnapshotServer::Serve(Connection* c, uint64_t client) {
  const int fd = c->fd.get();
  Arena* arena = nullptr;
  bool listed = false, closedEarly = false;
  uint32_t clientTimeoutMs = 0;
  Status hs = Handshake(fd, &arena, &listed, &closedEarly, &clientTimeoutMs);
  if (hs.ok() && (listed || closedEarly)) {
    if (listed) {
      std::vector<uint8_t> lb = ArenaList();
      iovec iov{lb.data(), lb.size()};
      (void)proxy::SendAll(fd, &iov, 1, "snapshot arena list");
    }
    std::lock_guard<std::mutex> lock(connMu_);
    c->fd.Reset();
    c->done.store(true);
    return;
  }
  // A paging client gets its own registration of the arena (its own key), revoked
  // before its slots are reclaimed: see RevokeAndDrop.
  const fabric::Region* own = nullptr;
  if (hs.ok() && arena->paging) {
    hs = cache_.domain().Register(arena->memory, arena->spec.arenaBytes(),
                                  fabric::kAccessLocal | fabric::kAccessRemoteRead | fabric::kAccessRemoteWrite,
                                  fabric::MemoryKind::kHost, &own);
  }
  Reply reply;
  reply.status = hs;
  if (hs.ok()) {
    reply.workerAddress = worker_.Address();
    reply.arenaKey = (own != nullptr ? own : arena->region)->Key().Pack();
    reply.slotWaitMs = arena->paging ? static_cast<uint64_t>(arena->paging->slotWaitMs()) : 0;
  } else if (MayLog(refusedClients_, refusedLog_)) {
    // A WARN naming the client, the first and then at most one per 10 s (hostile-peer
    // probe: bad magic, versions and sizes were refused to the client but never logged
    // here; new-user trial: a count-based limit hid every later, different refusal).
    RY_WARN("snapshot: refused a client from %s: %s (%llu refused so; at most one logged per 10 s)",
            c->source.c_str(), hs.message().c_str(), static_cast<unsigned long long>(refusedClients_.load()));
  }
  std::vector<uint8_t> rb = reply.Encode();
  iovec iov{rb.data(), rb.size()};
  bool overstayed = false;  // dropped for HoldsTooLong
  const bool replied = proxy::SendAll(fd, &iov, 1, "snapshot reply").ok();
  if (replied && !hs.ok()) {
    // What a refused client sent past what was read is taken off the socket, so the close
    // is a FIN after the reply, not a reset that could discard the reply at the client
    // before it reads it (an expert-tier client's choice was read only in part).
    // At most what a handshake could hold: a client that keeps sending does not keep this
    // thread here (review).
    std::array<uint8_t, 512> rest{};
    size_t drained = 0;
    for (ssize_t n; drained < Header::kBytes + Header::kMaxAddressBytes &&
                    (n = ::recv(fd, rest.data(), rest.size(), MSG_DONTWAIT)) > 0;) {
      drained += static_cast<size_t>(n);
    }
  }
  if (replied && hs.ok()) {
    for (;;) {
      // Between operations a client holds nothing here, and its handle may rest as long
      // as its owner likes (new-user trial: a handle idle for RAILYARD_TIMEOUT_MS was
      // closed, silently): wait for its next request without a deadline (a dead host is
      // found by TCP keepalive, a closed socket or the server's stop at once). In the
      // middle of one (a slot allocated, a pin held) the socket's timeout applies, so a
      // client that stops there gives its slots back.
      if (arena->paging == nullptr || !arena->paging->Holds(client)) {
        // Idle: the accept thread may close this connection for a new client when the
        // server is full (MakeRoom), this one's address holding the most.
        c->phase.store(Connection::kIdle);
        pollfd p{fd, POLLIN, 0};
        int ready = 0;
        do {
          ready = ::poll(&p, 1, -1);
        } while (ready < 0 && errno == EINTR);
        int idle = Connection::kIdle;
        if (!c->phase.compare_exchange_strong(idle, Connection::kBusy)) break;  // evicted
        if (ready < 0) break;
      }
      std::array<uint8_t, Request::kBytes> qb{};
      bool eof = false;
      if (!proxy::RecvAll(fd, qb.data(), qb.size(), "snapshot request", &eof).ok() || eof) break;  // eof: closed cleanly
      Request q;
      Response r;
      Status st = Request::Decode(qb, &q);
      const bool decoded = st.ok();
      if (st.ok() && !arena->paging) {
        st = InvalidUsage("snapshot: kind '" + arena->spec.kind + "' is a raw arena: no " + OpName(q.op) +
                          " (the client writes and reads offsets itself)");
      }
      // A client that sits on a slot or pin past the timeout while others queue for one
      // is dropped, as one that stopped mid-operation would be (hostile-peer probe); not
      // at the commit or release that ends a hold of its own (review: a slow put lost its
      // blob just as it finished).
      const bool ends = (q.op == Op::kCommit || q.op == Op::kRelease) && arena->paging != nullptr &&
                        arena->paging->HoldsKey(client, q.key);
      if (st.ok() && !ends && arena->paging->HoldsTooLong(client, options_.timeoutMs)) {
        overstayed = true;
        st = InvalidUsage("snapshot: kind '" + arena->spec.kind +
                          "': this client held an arena slot or pin for more than the peer's RAILYARD_TIMEOUT_MS (" +
                          std::to_string(options_.timeoutMs) +
                          " ms) while other clients waited for a slot: it is dropped, its uncommitted blobs and "
                          "pins given back");
      }
      bool faulting = false;        // a get answered kFaulting: its last answer is kReady or kError
      std::vector<uint8_t> spilled;  // answers of a fault that did not fit the socket at once
      if (st.ok()) {
        PagingArena& pa = *arena->paging;
        bool found = true;
        // A get's fault is announced as it goes (Response), each answer sent without
        // waiting (kQueued comes under the arena's lock; a fault, though read without
        // it, holds up the key's other gets, removes and commits): what the socket does
        // not take at once waits in `spilled`, sent (waiting) once the call returns. (A
        // client that stops reading so is ended by the socket's send timeout then.)
        const PagingArena::FaultProgress progress = [&](uint64_t at, uint64_t sum, uint64_t ready) {
          Response m;
          m.result = faulting ? Response::kReady : Response::kFaulting;
          m.offset = faulting ? ready : at;
          m.checksum = faulting ? 0 : sum;
          faulting = true;
          SendOrSpill(fd, m.Encode(), &spilled);
        };
        bool busy = false;  // a client holding a slot or pin is not made to wait (kBusy)
        // A request queued for a slot (or, any but a release, for a get's fault of its key) says so
        // (kQueued) the same way, often enough for this client's timeout.
        const PagingArena::Queued queued{
            // One the socket did not take carries no news: none is added behind it (a
            // client that stops reading cannot make this connection hold more).
            .tell = [&] { if (spilled.empty()) SendOrSpill(fd, Response{.result = Response::kQueued}.Encode(), &spilled); },
            .everyMs = QueuedBeatMs(options_.timeoutMs, clientTimeoutMs)};
        switch (q.op) {
          case Op::kAlloc:
            st = pa.Alloc(client, q.key, &r.offset, &busy, queued);
            break;
          case Op::kCommit:
            st = pa.Commit(client, q.key, q.checksum, queued);
            break;
          case Op::kGet:
            st = pa.Get(client, q.key, &found, &r.offset, &r.checksum, progress, &busy, queued);
            break;
          case Op::kRelease:
            st = pa.Release(client, q.key);
            break;
          case Op::kRemove:
            st = pa.Remove(q.key, &found, queued);
            break;
        }
        if (st.ok() && !found) r.result = Response::kAbsent;
        if (st.ok() && busy) r = Response{.result = Response::kBusy};  // nothing but the result
      }
      if (!spilled.empty()) {
        iovec sp{spilled.data(), spilled.size()};
        if (!proxy::SendAll(fd, &sp, 1, "snapshot fault progress").ok()) break;
      }
      if (faulting && st.ok()) {  // the whole blob is in the slot and checked
        r.result = Response::kReady;
        r.offset = arena->spec.blobBytes;
        r.checksum = 0;
      }
      if (st.ok() && q.op == Op::kRelease) continue;  // no response (wire version 3)
      if (overstayed && q.op == Op::kRelease) break;   // nor then: nobody waits for one
      if (!st.ok() && decoded && q.op == Op::kRelease) {
        // Nobody waits for this answer: a client releasing what it does not hold is
        // logged (the first, then at most one per 10 s) and otherwise changes nothing.
        if (MayLog(badReleases_, badReleaseLog_)) {
          RY_WARN("snapshot: kind '%s': client from %s: %s (%llu such releases; at most one logged per 10 s)",
                  arena->spec.kind.c_str(), c->source.c_str(), st.message().c_str(),
                  static_cast<unsigned long long>(badReleases_.load()));
        }
        continue;
      }
      if (!st.ok()) {
        r.result = Response::kError;
        r.code = static_cast<uint32_t>(st.code());
        r.message = st.message();
      }
      std::vector<uint8_t> out = r.Encode();
      iovec o{out.data(), out.size()};
      if (!proxy::SendAll(fd, &o, 1, "snapshot response").ok()) break;
      if (!decoded || overstayed) break;  // a malformed request ends the connection
    }
  }
  // The client went away (or broke the protocol): its uncommitted slots and pins go,
  // but only once its key is revoked. Deregister returns when no byte can land through
  // that key any more (TCP: a landing under way finishes first and later ones are
  // refused; verbs: ibv_dereg_mr, after which the HCA refuses the rkey), so a Write the
  // client posted before it died, still in a socket or on the wire, cannot land in a
  // slot that Drop hands to another client.
  if (own != nullptr) {
    if (Status st = cache_.domain().Deregister(own); !st.ok()) {
      // The key may still be live: reclaiming now could let a late Write land in a
      // reused slot, so the client's slots stay taken (leaked, never reused).
      RY_WARN("snapshot: kind '%s': cannot revoke a gone client's arena key (its slots stay out of use): %s",
              arena->spec.kind.c_str(), st.message().c_str());
      arena->unrevoked = true;
      own = nullptr;
      arena = nullptr;
    }
  }
  if (arena != nullptr && arena->paging) {
    // New-user trial: clients stopped mid-put were dropped without a word here (the
    // first, then at most one per 10 s: a client can do this at will).
    if (overstayed && MayLog(droppedHolding_, droppedLog_)) {
      RY_WARN("snapshot: kind '%s': dropped the client from %s, which held an arena slot or pin for more than "
              "RAILYARD_TIMEOUT_MS (%d ms) while other clients waited for one: its uncommitted slots and pins are "
              "given back (%llu clients dropped mid-operation; at most one logged per 10 s)",
              arena->spec.kind.c_str(), c->source.c_str(), options_.timeoutMs,
              static_cast<unsigned long long>(droppedHolding_.load()));
    } else if (arena->paging->Holds(client) && MayLog(droppedHolding_, droppedLog_)) {
      RY_WARN("snapshot: kind '%s': the client from %s went away, or stopped for RAILYARD_TIMEOUT_MS (%d ms), in the "
              "middle of a put or get: its uncommitted slots and pins are given back (%llu such clients; at most "
              "one logged per 10 s)",
              arena->spec.kind.c_str(), c->source.c_str(), options_.timeoutMs,
              static_cast<unsigned long long>(droppedHolding_.load()));
    }
    arena->paging->Drop(client);
  }
  {
    std::lock_guard<std::mutex> lock(connMu_);
    c->fd.Reset();
  }
  c->done.store(true);
}

}  // namespace railyard::storage::snapshot
