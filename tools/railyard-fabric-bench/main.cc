// railyard-fabric-bench: latency and bandwidth of the fabric's one-sided operations
// (Endpoint::Write, Write with immediate, Read, FetchAdd) between two processes of this
// host, over the TCP
// transport (loopback or RAILYARD_SOCKET-style addresses) or the verbs transport
// (RDMA ports chosen per process with --hca-target / --hca-initiator).
//
// The tool forks first: the child is the target (a Domain, a Worker, one region open
// for remote read, write and atomics, progressed in a busy loop); the parent is the
// initiator. The target's Worker address and region key go to the initiator over a
// pipe (what an out-of-band exchange does between hosts). Over verbs the target
// sleeps 200 µs whenever a Progress call found nothing (its CPU takes no part in
// one-sided ops); over TCP it spins, as it moves the bytes.
//
// Per size (8 B up to --max-bytes, times --factor each step):
//   latency:   one op at a time, post to kDone, 3 untimed then --iters samples; the
//              median (µs).
//              ib_write_lat / ib_read_lat report half a ping-pong or a READ round
//              trip; this is the initiator's post-to-completion time.
//   bandwidth: --depth ops in flight, --bw-bytes per round (at least 2 ops, at most
//              100000), --rounds rounds; the median of the rounds (GB/s = 1e9 B/s).
// FetchAdd runs at 8 B only (latency and ops/s at --depth). "writeimm" is a Write
// with a 32-bit immediate (the op the NCCL comms and GIN signals post: over verbs a
// striped one ends in a size record on rail 0 once its other rails' chunks landed);
// the target's Progress loop takes the immediates and re-posts their receives.
//
// Output: one JSON object per line on stdout, e.g.
//   {"transport":"verbs","op":"write","size":65536,"lat_median_us":41.2,"bw_gbps":0.031,"ops":512}
// lat_median_us is null above --lat-max-bytes (no latency measured there).
// Exit status: 0 done, 1 a fabric error or the target failed, 2 usage error.
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "tools/common/cli_parse.h"

namespace {

using namespace railyard;
using namespace railyard::fabric;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string transport = "tcp";
  std::string tcpAddress = "127.0.0.1";
  std::string hcaTarget, hcaInitiator;
  uint64_t minBytes = 8, maxBytes = 256ull << 20, latMaxBytes = 1ull << 20, bwBytes = 256ull << 20;
  int factor = 2, iters = 200, depth = 16, rounds = 3;
  std::string ops = "write,read,fetchadd";
};

Status MakeDomain(const Args& a, bool target, std::unique_ptr<Domain>* out) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  if (a.transport == "tcp") {
    tcp::TcpOptions o = tcp::TcpOptions::FromConfig(*cfg, {{"lo", a.tcpAddress, 10000}});
    return tcp::CreateTcpDomain(o, out);
  }
  env::Config c = *cfg;
  const std::string& hca = target ? a.hcaTarget : a.hcaInitiator;
  if (!hca.empty()) c.hca = hca;
  verbs::VerbsOptions o = verbs::VerbsOptions::FromConfig(c);
  o.bootstrapAddress = a.tcpAddress;
  return verbs::CreateVerbsDomain(o, out);
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

/// The target process: serves until `stopFd` reads EOF.
int RunTarget(const Args& a, int infoFd, int stopFd) {
  std::unique_ptr<Domain> d;
  std::unique_ptr<Worker> w;
  Status s = MakeDomain(a, true, &d);
  if (s.ok()) s = d->CreateWorker(&w);
  std::vector<char> mem(a.maxBytes + 64, 0);
  const Region* r = nullptr;
  if (s.ok()) s = d->Register(mem.data(), mem.size(), kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic,
                              MemoryKind::kHost, &r);
  if (!s.ok()) {
    std::fprintf(stderr, "railyard-fabric-bench target: %s\n", s.message().c_str());
    return 1;
  }
  const std::vector<uint8_t> addr = w->Address(), key = r->Key().Pack();
  const uint32_t sizes[2] = {static_cast<uint32_t>(addr.size()), static_cast<uint32_t>(key.size())};
  if (!WriteAll(infoFd, sizes, sizeof sizes) || !WriteAll(infoFd, addr.data(), addr.size()) ||
      !WriteAll(infoFd, key.data(), key.size())) {
    return 1;
  }
  close(infoFd);
  std::vector<Event> events;
  for (uint64_t i = 0;; ++i) {
    events.clear();
    // One-sided ops need no CPU here; a target that spins would only take a core
    // from the initiator and, under emulation, from the soft-RoCE kernel threads
    // (perftest's server does not poll either). TCP's target does the work itself.
    if (w->Progress(&events) == 0 && a.transport == "verbs") usleep(200);
    if (i % 4096 == 0) {
      pollfd p{stopFd, POLLIN, 0};
      if (poll(&p, 1, 0) > 0) break;  // EOF: the initiator is done
    }
  }
  (void)d->Deregister(r);
  return 0;
}

/// Why `v` is no IPv4 unicast address a rail can bind ("" when it is): dotted quad
/// only (inet_pton, no blanks), not 0.0.0.0, broadcast or multicast.
std::string UnicastIpv4Error(const std::string& v) {
  in_addr a{};
  if (inet_pton(AF_INET, v.c_str(), &a) != 1) return "'" + v + "' is not an IPv4 address (a.b.c.d)";
  const uint32_t h = ntohl(a.s_addr);
  if (h == 0) return "0.0.0.0 is no one address: give the one to bind";
  if (h == 0xFFFFFFFFu) return "255.255.255.255 is the broadcast address, not one to bind";
  if ((h >> 28) == 0xE) return "'" + v + "' is a multicast address, not one to bind";
  return "";
}

/// --ops split at commas, blanks around each name dropped ("write, read" is write and
/// read); main checks every name and refuses one given twice.
std::vector<std::string> SplitOps(const std::string& list) {
  std::vector<std::string> ops;
  for (size_t p = 0; p <= list.size();) {
    size_t q = list.find(',', p);
    if (q == std::string::npos) q = list.size();
    const size_t b = list.find_first_not_of(" \t", p);
    const size_t e = list.find_last_not_of(" \t", q == 0 ? 0 : q - 1);
    ops.push_back(b < q && e != std::string::npos && e >= b ? list.substr(b, e - b + 1) : std::string());
    p = q + 1;
  }
  return ops;
}

struct Bench {
  const Args& a;
  Worker& w;
  Endpoint& ep;
  const Region* local;
  RemoteKey key;
  std::vector<Event> events;
  uint64_t cookie = 1;
  bool failed = false;

  Status Post(const std::string& op, uint64_t size, uint64_t c) {
    if (op == "write") return ep.Write({local, 0, size}, key, key.base, c);
    if (op == "writeimm") return ep.Write({local, 0, size}, key, key.base, c, static_cast<uint32_t>(c));
    if (op == "read") return ep.Read({local, 0, size}, key, key.base, c);
    return ep.FetchAdd(key, key.base + (a.maxBytes & ~7ull), 1, c);
  }
  /// Progresses until `n` completions came; false on an error event.
  bool Reap(size_t n, size_t* got) {
    events.clear();
    w.Progress(&events);
    for (const Event& e : events) {
      if (e.kind == EventKind::kError) {
        std::fprintf(stderr, "railyard-fabric-bench: %s\n", e.error.ToString().c_str());
        failed = true;
        return false;
      }
      if (e.kind == EventKind::kDone) ++*got;
    }
    (void)n;
    return true;
  }
  /// The median of --iters timed ops, after kWarmUp untimed ones (a trial saw the
  /// first op of a size take 10-500x the rest: the median of 2 was that cold op).
  static constexpr int kWarmUp = 3;
  double LatencyUs(const std::string& op, uint64_t size) {
    std::vector<double> us;
    for (int i = -kWarmUp; i < a.iters && !failed; ++i) {
      const auto t0 = Clock::now();
      if (!Post(op, size, cookie++).ok()) return -1;
      size_t got = 0;
      while (got < 1 && Reap(1, &got)) {
      }
      if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (us.empty()) return -1;
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  }
  double BandwidthGbps(const std::string& op, uint64_t size, uint64_t* opsOut) {
    const uint64_t ops = std::clamp<uint64_t>(a.bwBytes / size, 2, 100000);
    *opsOut = ops;
    std::vector<double> gbps;
    for (int r = 0; r < a.rounds && !failed; ++r) {
      uint64_t posted = 0;
      size_t got = 0;
      const auto t0 = Clock::now();
      while (got < ops && !failed) {
        while (posted < ops && posted - got < static_cast<uint64_t>(a.depth)) {
          if (!Post(op, size, cookie++).ok()) return -1;
          ++posted;
        }
        Reap(ops, &got);
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      gbps.push_back(static_cast<double>(size) * static_cast<double>(ops) / s / 1e9);
    }
    if (gbps.empty()) return -1;
    std::nth_element(gbps.begin(), gbps.begin() + gbps.size() / 2, gbps.end());
    return gbps[gbps.size() / 2];
  }
};

int RunInitiator(const Args& a, int infoFd) {
  uint32_t sizes[2] = {};
  std::vector<uint8_t> addr, keyBytes;
  if (!ReadAll(infoFd, sizes, sizeof sizes) || sizes[0] > 4096 || sizes[1] > 4096) {
    std::fprintf(stderr, "railyard-fabric-bench: the target process failed to start\n");
    return 1;
  }
  addr.resize(sizes[0]);
  keyBytes.resize(sizes[1]);
  if (!ReadAll(infoFd, addr.data(), addr.size()) || !ReadAll(infoFd, keyBytes.data(), keyBytes.size())) return 1;
  std::unique_ptr<Domain> d;
  std::unique_ptr<Worker> w;
  std::unique_ptr<Endpoint> ep;
  RemoteKey key;
  Status s = MakeDomain(a, false, &d);
  if (s.ok()) s = d->CreateWorker(&w);
  if (s.ok()) s = RemoteKey::Unpack(keyBytes, &key);
  if (s.ok()) s = w->Connect(addr, &ep);
  std::vector<char> mem(a.maxBytes + 64, 0x5A);
  const Region* local = nullptr;
  if (s.ok()) s = d->Register(mem.data(), mem.size(), kAccessLocal, MemoryKind::kHost, &local);
  if (!s.ok()) {
    std::fprintf(stderr, "railyard-fabric-bench: %s\n", s.message().c_str());
    return 1;
  }
  Bench b{a, *w, *ep, local, key, {}, 1, false};
  for (const std::string& op : SplitOps(a.ops)) {
    for (uint64_t size = a.minBytes; size <= a.maxBytes && !b.failed; size *= static_cast<uint64_t>(a.factor)) {
      const uint64_t sz = op == "fetchadd" ? 8 : size;
      const bool timed = sz <= a.latMaxBytes;  // else no latency: JSON null
      const double lat = timed ? b.LatencyUs(op, sz) : 0;
      uint64_t n = 0;
      const double bw = b.BandwidthGbps(op, sz, &n);
      if (b.failed) break;
      char latText[32] = "null";
      if (timed) std::snprintf(latText, sizeof latText, "%.2f", lat);
      std::printf("{\"transport\":\"%s\",\"op\":\"%s\",\"size\":%llu,\"lat_median_us\":%s,\"bw_gbps\":%.4f,"
                  "\"mops\":%.4f,\"ops\":%llu,\"depth\":%d,\"rails\":%zu}\n",
                  a.transport.c_str(), op.c_str(), static_cast<unsigned long long>(sz), latText, bw,
                  bw * 1e9 / static_cast<double>(sz) / 1e6, static_cast<unsigned long long>(n), a.depth,
                  d->rails().size());
      std::fflush(stdout);
      if (op == "fetchadd") break;
    }
  }
  ep.reset();
  (void)d->Deregister(local);
  return b.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"railyard-fabric-bench: one-sided Write/Read/FetchAdd latency and bandwidth, 2 processes"};
  app.add_option("--transport", a.transport, "tcp or verbs")->check(CLI::IsMember({"tcp", "verbs"}));
  // Checked here, not first in the forked target (a trial got exit 1 and "status 256").
  app.add_option("--address", a.tcpAddress, "IPv4 the TCP rail / the verbs bootstrap listener binds")
      ->check(CLI::Validator(UnicastIpv4Error, "IPV4 unicast"));
  app.add_option("--hca-target", a.hcaTarget, "verbs: RAILYARD_HCA of the target process");
  app.add_option("--hca-initiator", a.hcaInitiator, "verbs: RAILYARD_HCA of the initiator process");
  app.add_option("--ops", a.ops, "comma-separated: write, writeimm, read, fetchadd (fetchadd: 8 B only)");
  // Sizes take K/M/G suffixes (powers of 1024), as railyard-tcp-pump's.
  app.add_option("--min-bytes", a.minBytes, "smallest size (bytes)")
      ->transform(CLI::AsSizeValue(false))
      ->check(tools::InRange(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--max-bytes", a.maxBytes, "largest size (bytes)")
      ->transform(CLI::AsSizeValue(false))
      ->check(tools::InRange(uint64_t{8}, uint64_t{1} << 30));
  app.add_option("--lat-max-bytes", a.latMaxBytes, "latency only up to this size (bytes; 0: none)")
      ->transform(CLI::AsSizeValue(false))
      ->check(tools::InRange(uint64_t{0}, uint64_t{1} << 30));
  app.add_option("--bw-bytes", a.bwBytes, "bytes per bandwidth round (at least 2 ops, at most 100000)")
      ->transform(CLI::AsSizeValue(false))
      ->check(tools::InRange(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--factor", a.factor, "size step factor (sizes min, min*factor, ... up to max)")->check(tools::InRange(2, 1024));
  app.add_option("--iters", a.iters, "latency samples per size")->check(tools::InRange(1, 1000000));
  app.add_option("--depth", a.depth, "ops in flight for bandwidth")->check(tools::InRange(1, 1024));
  app.add_option("--rounds", a.rounds, "bandwidth rounds (median)")->check(tools::InRange(1, 100));
  app.footer("Output: a JSON object per size and op on stdout; bw_gbps is GB/s (1e9 bytes/s), "
             "lat_median_us the median post-to-completion time (null above --lat-max-bytes).\n"
             "Exit status: 0 done, 1 a fabric error or the target failed, 2 usage error.");
  if (auto rc = railyard::tools::ParseCommandLine(app, argc, argv, "railyard-fabric-bench")) return *rc;
  const std::vector<std::string> ops = SplitOps(a.ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& op = ops[i];
    if (op != "write" && op != "writeimm" && op != "read" && op != "fetchadd") {
      std::fprintf(stderr, "railyard-fabric-bench: --ops: '%s' is not write, writeimm, read or fetchadd\n", op.c_str());
      return railyard::tools::kUsageExit;
    }
    if (std::find(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(i), op) != ops.begin() + static_cast<std::ptrdiff_t>(i)) {
      std::fprintf(stderr, "railyard-fabric-bench: --ops: '%s' is given twice\n", op.c_str());
      return railyard::tools::kUsageExit;
    }
  }
  if (a.transport == "tcp" && !(a.hcaTarget.empty() && a.hcaInitiator.empty())) {
    std::fprintf(stderr, "railyard-fabric-bench: --hca-target and --hca-initiator choose RDMA ports: they need --transport verbs\n");
    return railyard::tools::kUsageExit;
  }
  if (a.minBytes > a.maxBytes) {
    std::fprintf(stderr, "railyard-fabric-bench: --min-bytes is above --max-bytes\n");
    return railyard::tools::kUsageExit;
  }
  int info[2], stop[2];
  if (pipe(info) != 0 || pipe(stop) != 0) return 1;
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    close(info[0]);
    close(stop[1]);
    _exit(RunTarget(a, info[1], stop[0]));
  }
  close(info[1]);
  close(stop[0]);
  const int rc = RunInitiator(a, info[0]);
  close(stop[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    if (WIFSIGNALED(st)) {
      std::fprintf(stderr, "railyard-fabric-bench: the target process was killed by signal %d\n", WTERMSIG(st));
    } else {
      std::fprintf(stderr, "railyard-fabric-bench: the target process failed (exit %d; its error is above)\n",
                   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return 1;
  }
  return rc;
}
