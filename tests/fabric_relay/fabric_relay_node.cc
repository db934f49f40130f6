// One host of a relayed route on the netns testbed (tests/fabric/fabric_relay_lane.py
// starts one per namespace): the target (a 64 MiB region, checks the ordering rule
// by content when immediates arrive), the relay (a Forwarder with one port per
// cable and the cable resolver), or the source (the suite's operations through the
// relay, or a stream of Writes that a fault interrupts). Addresses and keys go
// between hosts as hex lines in files; results are printed as "key value" lines.
//
//   fabric_relay_node target --rails RAILS --out FILE [--ordering R,P,E]
//   fabric_relay_node relay  --port RAILS --port RAILS --out FILE
//   fabric_relay_node forwarder-address --ip IP --port P --rails N --out FILE
//                            (writes, as a relay file, the verbs Forwarder port address a
//                            relay host's railyardd serves on its cable's first rail IP:
//                            graph_routes.h; tests/verbs/ring_relay_test.sh railyardd)
//   fabric_relay_node source --rails RAILS --relay FILE --target FILE
//                            --scenario suite|ordering|stream|bench [--timeout-ms N] [--rank N]
//                            [--direct FILE --rounds N [--bench-mib M] [--max-mib S]]
//                            (bench: a target on the relay host; each run moves >= M MiB,
//                            default 32; sizes 64 KiB, 1 MiB, 16 MiB up to S MiB, default 16)
//
// RAILS: TCP rails "IP[,IP]", or verbs "DEV[,DEV]@IP" (the RDMA devices, and the IP of
// the verbs bootstrap listener on that cable: tests/verbs/ring_relay_test.sh, the ring
// of soft-RoCE guests). A relay's ports are all of one kind.
#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "proxy/fabric/relay/cable_resolver.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "tests/fabric_api/fabric_harness.h"

using namespace railyard;
using namespace railyard::fabric;
using railyard::fabric::testing::FillPattern;
using railyard::fabric::testing::FirstMismatch;

namespace {

volatile sig_atomic_t gStop = 0;
void OnTerm(int) { gStop = 1; }

int64_t EpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Hex(const std::vector<uint8_t>& b) {
  std::string s;
  char t[3];
  for (uint8_t x : b) {
    std::snprintf(t, sizeof t, "%02x", x);
    s += t;
  }
  return s;
}
std::vector<uint8_t> Unhex(const std::string& s) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < s.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return b;
}
void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    for (const auto& l : lines) f << l << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}
/// Waits (bounded poll, 60 s) for a file written by another host's node.
std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  for (int i = 0; i < 6000 && out.empty(); ++i) {
    std::ifstream f(path);
    for (std::string l; std::getline(f, l);) out.push_back(l);
    if (out.empty()) usleep(10000);  // polling for a file, not a barrier
  }
  return out;
}
std::vector<RailInfo> Rails(const std::string& csv) {
  std::vector<RailInfo> r;
  std::stringstream ss(csv);
  for (std::string ip; std::getline(ss, ip, ',');) r.push_back({"rail" + std::to_string(r.size()), ip, 10000});
  return r;
}
/// A rails spec is verbs when it names devices: "DEV[,DEV]@IP" (RAILYARD_HCA
/// "=DEV,...", the bootstrap listener on IP); else TCP rails "IP[,IP]".
bool IsVerbs(const std::string& spec) { return spec.find('@') != std::string::npos; }
/// The IP of a rails spec's first rail (verbs: its bootstrap address).
std::string FirstIp(const std::string& spec) {
  const std::string ips = IsVerbs(spec) ? spec.substr(spec.find('@') + 1) : spec;
  return ips.substr(0, ips.find(','));
}
Status MakeDomain(const std::string& spec, int timeoutMs, int rank, std::unique_ptr<Domain>* out) {
  if (IsVerbs(spec)) {
    const std::string hca = "=" + spec.substr(0, spec.find('@'));
    env::Config config;
    // The rest of the configuration from the environment (RAILYARD_IB_TIMEOUT, ...).
    RY_RETURN_IF_ERROR(env::Parse(
        [&](const char* name) -> std::optional<std::string> {
          if (std::string(name) == "RAILYARD_HCA") return hca;
          const char* v = std::getenv(name);
          return v == nullptr ? std::nullopt : std::optional<std::string>(v);
        },
        {}, &config));
    verbs::VerbsOptions o = verbs::VerbsOptions::FromConfig(config);
    o.bootstrapAddress = FirstIp(spec);
    o.timeoutMs = timeoutMs;
    o.connectTimeoutMs = std::max(timeoutMs, 30000);  // QPs to RTS under emulation take seconds
    o.rank = rank;
    return verbs::CreateVerbsDomain(o, out);
  }
  tcp::TcpOptions o;
  o.rails = Rails(spec);
  o.timeoutMs = timeoutMs;
  o.rank = rank;
  o.stripe.thresholdBytes = 64 * 1024;
  return tcp::CreateTcpDomain(o, out);
}

struct Args {
  std::string role;
  std::map<std::string, std::vector<std::string>> opt;
  std::string Get(const std::string& k, const std::string& d = "") const {
    auto it = opt.find(k);
    return it == opt.end() || it->second.empty() ? d : it->second.back();
  }
};

constexpr uint64_t kRegion = 64u << 20;
constexpr uint64_t kFlagsAt = 48u << 20;  // ordering: 8-byte flags from here
constexpr uint64_t kCounterAt = 60u << 20;
constexpr uint32_t kBigImmediate = 0xB16000;  // the suite's Write with immediate larger than a relay slot

int RunTarget(const Args& a) {
  std::unique_ptr<Domain> d;
  std::unique_ptr<Worker> w;
  if (Status s = MakeDomain(a.Get("rails"), 30000, -1, &d); !s.ok() || !d->CreateWorker(&w).ok()) {
    std::fprintf(stderr, "target: %s\n", s.message().c_str());
    return 10;
  }
  static std::vector<uint8_t> mem(kRegion);
  const Region* r = nullptr;
  if (!d->Register(mem.data(), kRegion, kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic, MemoryKind::kHost, &r)
           .ok()) {
    return 11;
  }
  WriteLines(a.Get("out"), {Hex(w->Address()), Hex(r->Key().Pack())});
  int rounds = 0, per = 0;
  uint64_t each = 0;
  if (!a.Get("ordering").empty()) std::sscanf(a.Get("ordering").c_str(), "%d,%d,%lu", &rounds, &per, &each);
  int imms = 0, violations = 0, records = 0;
  std::vector<Event> ev;
  while (!gStop) {
    ev.clear();
    w->Progress(&ev);
    for (const Event& e : ev) {
      if (e.kind == EventKind::kRecord) std::printf("record %d bytes %zu\n", ++records, e.record.size());
      if (e.kind == EventKind::kImmediate && e.value == kBigImmediate) {
        std::printf("big immediate bytes %lu\n", e.bytes);
        continue;
      }
      if (e.kind != EventKind::kImmediate || rounds == 0) continue;
      const int upTo = (static_cast<int>(e.value) + 1) * per;
      for (int i = 0; i < upTo; ++i) {
        if (FirstMismatch(mem.data() + each * i, each, 500 + i) != -1) {
          ++violations;
          break;
        }
      }
      if (e.value != static_cast<uint64_t>(imms)) ++violations;
      if (++imms == rounds) std::printf("ordering immediates %d violations %d\n", imms, violations);
    }
    std::fflush(stdout);
  }
  return 0;
}

int RunRelay(const Args& a) {
  std::vector<std::vector<RailInfo>> ports;
  std::vector<std::string> verbsPorts;
  std::vector<std::unique_ptr<Domain>> domains;
  std::vector<Domain*> raw;
  for (const auto& p : a.opt.at("port")) {
    ports.push_back(Rails(p));
    verbsPorts.push_back(FirstIp(p));
    domains.emplace_back();
    if (Status s = MakeDomain(p, std::stoi(a.Get("timeout-ms", "30000")), -1, &domains.back()); !s.ok()) {
      std::fprintf(stderr, "relay: port %s: %s\n", p.c_str(), s.message().c_str());
      return 10;
    }
    raw.push_back(domains.back().get());
  }
  relay::RelayOptions o;
  o.timeoutMs = std::stoi(a.Get("timeout-ms", "30000"));
  std::unique_ptr<relay::Forwarder> f;
  Status s = relay::Forwarder::Create(raw, o,
                                      IsVerbs(a.opt.at("port")[0]) ? relay::MakeVerbsCableResolver(verbsPorts, 24)
                                                                   : relay::MakeTcpCableResolver(ports, 24),
                                      &f);
  if (!s.ok()) {
    std::fprintf(stderr, "relay: %s\n", s.message().c_str());
    return 11;
  }
  std::vector<std::string> lines;
  for (size_t p = 0; p < raw.size(); ++p) lines.push_back(Hex(f->Address(p)));
  WriteLines(a.Get("out"), lines);
  while (!gStop) f->Progress();
  const auto st = f->stats();
  std::printf("relay opened %lu refused %lu failed %lu slots %lu bytes %lu strays %lu last '%s'\n", st.routesOpened,
              st.routesRefused, st.routesFailed, st.slotsForwarded, st.bytesForwarded, st.strays, f->lastRefusal().c_str());
  return 0;
}

/// The verbs Forwarder port address of a relay host whose cable's first rail is --ip,
/// by the graph's rule (relay::ForwarderAddress, AddressKind::kVerbs).
int RunForwarderAddress(const Args& a) {
  verbs::VerbsAddress v;
  v.workerId = 1;  // not checked by the target
  in_addr ip{};
  if (inet_pton(AF_INET, a.Get("ip").c_str(), &ip) != 1) return 2;
  v.ipv4 = ip.s_addr;
  v.port = static_cast<uint16_t>(std::stoi(a.Get("port")));
  v.rails = static_cast<uint16_t>(std::stoi(a.Get("rails", "1")));
  WriteLines(a.Get("out"), {Hex(v.Pack())});
  return 0;
}

/// The source's side of one scenario.
class Source {
 public:
  int Init(const Args& a) {
    timeoutMs_ = std::stoi(a.Get("timeout-ms", "5000"));
    const int rank = std::stoi(a.Get("rank", "0"));
    if (Status s = MakeDomain(a.Get("rails"), timeoutMs_, rank, &d_); !s.ok()) {
      std::fprintf(stderr, "source: %s\n", s.message().c_str());
      return 10;
    }
    relay::RelayOptions o;
    o.timeoutMs = timeoutMs_;
    o.rank = rank;
    if (!relay::RelayClient::Create(*d_, o, &client_).ok()) return 11;
    const auto rl = ReadLines(a.Get("relay")), tl = ReadLines(a.Get("target"));
    if (rl.empty() || tl.size() < 2) return 12;
    relay_ = Unhex(rl[0]);
    target_ = Unhex(tl[0]);
    if (!RemoteKey::Unpack(Unhex(tl[1]), &key_).ok()) return 13;
    return Connect() ? 0 : 14;
  }
  bool Connect() {
    ep_.reset();
    Status s = client_->Connect(relay_, target_, &ep_);
    if (!s.ok()) std::printf("connect-failed %s\n", s.message().c_str());
    return s.ok();
  }
  Event Wait(uint64_t cookie, int ms = 60000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      for (size_t i = 0; i < ev_.size(); ++i) {
        if (ev_[i].cookie == cookie && (ev_[i].kind == EventKind::kDone || ev_[i].kind == EventKind::kError)) {
          Event e = ev_[i];
          ev_.erase(ev_.begin() + static_cast<std::ptrdiff_t>(i));
          return e;
        }
      }
      client_->Progress(&ev_);
    }
    Event e;
    e.kind = EventKind::kError;
    e.error.errc = FabricErrc::kTimeout;
    e.error.what = "the node waited too long";
    return e;
  }
  const Region* Reg(void* p, uint64_t n) {
    const Region* r = nullptr;
    return d_->Register(p, n, kAccessLocal, MemoryKind::kHost, &r).ok() ? r : nullptr;
  }
  int Fail(const std::string& what) {
    std::printf("FAIL %s\n", what.c_str());
    return 1;
  }

  int Suite() {
    const uint64_t sizes[] = {0, 1, 7, 4095, 4097, 65537, 1000003, (5u << 20) + 3};
    std::vector<uint8_t> src(6u << 20), back((6u << 20) + 16);
    const Region* rs = Reg(src.data(), src.size());
    const Region* rb = Reg(back.data(), back.size());
    uint64_t at = 64, cookie = 1;
    for (uint64_t n : sizes) {
      FillPattern(src.data(), n, n + 11);
      if (!ep_->Write({rs, 0, n}, key_, key_.base + at, cookie).ok()) return Fail("post write");
      Event e = Wait(cookie++);
      if (e.kind != EventKind::kDone) return Fail("write " + std::to_string(n) + ": " + e.error.ToString());
      std::fill(back.begin(), back.end(), 0xEE);
      if (!ep_->Read({rb, 0, n + 16}, key_, key_.base + at - 8, cookie).ok()) return Fail("post read");
      e = Wait(cookie++);
      if (e.kind != EventKind::kDone) return Fail("read " + std::to_string(n) + ": " + e.error.ToString());
      for (int i = 0; i < 8; ++i) {
        if (back[i] != 0 || back[8 + n + i] != 0) return Fail("bytes around a write of " + std::to_string(n) + " changed");
      }
      if (FirstMismatch(back.data() + 8, n, n + 11) != -1) return Fail("write/read of " + std::to_string(n) + " differs");
      std::printf("write-read %lu ok\n", n);
      at += n + 64;
    }
    uint64_t expect = 0;
    for (uint64_t i = 0; i < 10; ++i) {
      if (!ep_->FetchAdd(key_, key_.base + kCounterAt, i + 1, 100 + i).ok()) return Fail("post fetch-add");
    }
    for (uint64_t i = 0; i < 10; ++i) {
      Event e = Wait(100 + i);
      if (e.kind != EventKind::kDone || e.value != expect) return Fail("fetch-add " + std::to_string(i) + " old value");
      expect += i + 1;
    }
    std::printf("fetch-add ok total %lu\n", expect);
    const std::vector<uint8_t> rec = {1, 2, 3, 4};
    for (uint64_t c = 200; c < 204; ++c) {
      if (!ep_->Send(rec, c).ok() || Wait(c).kind != EventKind::kDone) return Fail("record");
    }
    FillPattern(src.data(), 3u << 20, 9);
    if (!ep_->Write({rs, 0, 3u << 20}, key_, key_.base + (8u << 20), 300).ok() || !ep_->Fence(301).ok() ||
        !ep_->Read({rb, 0, 3u << 20}, key_, key_.base + (8u << 20), 302).ok()) {
      return Fail("post fence");
    }
    for (uint64_t c = 300; c < 303; ++c) {
      if (Wait(c).kind != EventKind::kDone) return Fail("fence sequence");
    }
    if (FirstMismatch(back.data(), 3u << 20, 9) != -1) return Fail("read after fence");
    std::printf("fence ok\n");
    // Issue 10: a Write with immediate larger than one relay slot (6 chunks): the target
    // prints its one immediate's bytes ("big immediate bytes N"), which must be the whole.
    if (!ep_->Write({rs, 0, 3u << 20}, key_, key_.base + (8u << 20), 303, kBigImmediate).ok()) return Fail("post big imm");
    if (Wait(303).kind != EventKind::kDone) return Fail("big write with immediate");
    std::printf("big immediate write ok\n");
    // A Write the target refuses (a wrong key): its named error through the relay,
    // and the Endpoint stays failed.
    RemoteKey wrong = key_;
    wrong.softwareKey ^= 1;  // what the TCP target checks
    for (uint32_t& rkey : wrong.railRkeys) rkey ^= 0x100;  // what the HCA checks (verbs)
    if (!ep_->Write({rs, 0, 16}, wrong, key_.base, 400).ok()) return Fail("post refused write");
    Event e = Wait(400);
    std::printf("refused %s\n", e.error.ToString().c_str());
    if (e.kind != EventKind::kError || !IsRemoteAccess(e.error.errc)) return Fail("the out-of-range write was not refused");
    if (ep_->Write({rs, 0, 8}, key_, key_.base, 401).ok()) return Fail("the failed endpoint took a new op");
    std::printf("suite ok\n");
    return 0;
  }

  int Ordering(int rounds, int per, uint64_t each) {
    const int writes = rounds * per;
    std::vector<uint8_t> src(each * writes), flags(8 * rounds, 0xEE);
    for (int i = 0; i < writes; ++i) FillPattern(src.data() + each * i, each, 500 + i);
    const Region* rs = Reg(src.data(), src.size());
    const Region* rf = Reg(flags.data(), flags.size());
    uint64_t cookie = 0;
    for (int r = 0; r < rounds; ++r) {
      for (int i = r * per; i < (r + 1) * per; ++i) {
        if (!ep_->Write({rs, each * i, each}, key_, key_.base + each * i, cookie++).ok()) return Fail("post");
      }
      if (!ep_->Write({rf, 8u * r, 8}, key_, key_.base + kFlagsAt + 8u * r, cookie++, static_cast<uint32_t>(r)).ok()) {
        return Fail("post imm");
      }
    }
    for (uint64_t c = 0; c < cookie; ++c) {
      Event e = Wait(c);
      if (e.kind != EventKind::kDone) return Fail("ordering op: " + e.error.ToString());
    }
    std::printf("ordering posted %lu done\n", cookie);
    return 0;
  }

  int Stream(int maxSeconds) {
    const uint64_t n = 4u << 20;
    std::vector<uint8_t> src(n, 0x3C);
    const Region* rs = Reg(src.data(), n);
    uint64_t cookie = 0;
    int done = 0;
    bool announced = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(maxSeconds);
    while (std::chrono::steady_clock::now() < deadline) {
      while (ep_->status().ok() && ep_->Outstanding() < 4) {
        if (!ep_->Write({rs, 0, n}, key_, key_.base + (cookie % 8) * n, cookie).ok()) return Fail("post");
        ++cookie;
      }
      ev_.clear();
      client_->Progress(&ev_);
      for (const Event& e : ev_) {
        if (e.kind == EventKind::kDone) ++done;
        if (e.kind == EventKind::kError) {
          std::printf("error-at-ms %ld\nerror %s\n", EpochMs(), e.error.ToString().c_str());
          const bool refused = !ep_->Write({rs, 0, 8}, key_, key_.base, 1u << 30).ok();
          std::printf("stays-failed %s\ndone-before %d\n", refused ? "yes" : "no", done);
          std::fflush(stdout);
          // Nothing hangs: the client and its routes go away at once.
          ep_.reset();
          client_.reset();
          std::printf("closed\n");
          return 3;
        }
      }
      if (done >= 4 && !announced) {
        announced = true;
        std::printf("streaming %ld\n", EpochMs());
        std::fflush(stdout);
      }
    }
    return Fail("no error within " + std::to_string(maxSeconds) + " s");
  }

  /// Write throughput, direct (to --direct FILE, a target on the relay host) against
  /// relayed (through the relay to --target), interleaved rounds in one run; prints
  /// "bench SIZE direct GBPS relayed GBPS" per round and the medians.
  /// Each run moves at least `minMiB` MiB and 8 Writes; sizes above `maxMiB` are left out.
  int Bench(const std::string& directFile, int rounds, uint64_t minMiB, uint64_t maxMiB) {
    const auto dl = ReadLines(directFile);
    RemoteKey dkey;
    if (dl.size() < 2 || !RemoteKey::Unpack(Unhex(dl[1]), &dkey).ok()) return Fail("direct target file");
    std::unique_ptr<Worker> dw;
    std::unique_ptr<Endpoint> dep;
    if (!d_->CreateWorker(&dw).ok() || !dw->Connect(Unhex(dl[0]), &dep).ok()) return Fail("direct connect");
    const uint64_t sizes[] = {64u << 10, 1u << 20, 16u << 20};
    std::vector<uint8_t> src(16u << 20, 0x6B);
    const Region* rs = Reg(src.data(), src.size());
    uint64_t cookie = 1ull << 40;
    std::vector<Event> ev;
    auto run = [&](Endpoint* ep, const RemoteKey& k, uint64_t n, const std::function<void()>& progress) {
      const uint64_t total = std::max<uint64_t>(minMiB << 20, 8 * n);
      const uint64_t count = total / n;
      uint64_t posted = 0, done = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while (done < count) {
        while (posted < count && posted - done < 4) {
          Status ps = ep->Write({rs, 0, n}, k, k.base + (posted % 3) * n, cookie++);
          if (!ps.ok()) {
            std::printf("bench post refused %s\n", ps.message().c_str());
            return -1.0;
          }
          ++posted;
        }
        ev.clear();
        progress();
        for (const Event& e : ev) {
          if (e.kind == EventKind::kError) {
            std::printf("bench error %s\n", e.error.ToString().c_str());
            return -1.0;
          }
          if (e.kind == EventKind::kDone) ++done;
        }
      }
      return static_cast<double>(count * n) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
    };
    // Both routes set up (and the relayed one open) before anything is timed.
    // Both Workers are progressed in every run (an Endpoint nobody progresses for the
    // timeout fails, as the TCP transport's do), so both runs pay the same polling.
    auto both = [&] {
      dw->Progress(&ev);
      client_->Progress(&ev);
    };
    if (run(dep.get(), dkey, 1u << 20, both) < 0 || run(ep_.get(), key_, 1u << 20, both) < 0) {
      return Fail("bench warm-up");
    }
    for (uint64_t n : sizes) {
      if (n > (maxMiB << 20)) continue;
      std::vector<double> direct, relayed;
      for (int r = 0; r < rounds; ++r) {
        const double a = run(dep.get(), dkey, n, both);
        const double b = run(ep_.get(), key_, n, both);
        if (a < 0 || b < 0) return Fail("a bench write failed");
        direct.push_back(a);
        relayed.push_back(b);
        std::printf("bench %lu round %d direct %.4f relayed %.4f GB/s\n", n, r, a, b);
      }
      std::sort(direct.begin(), direct.end());
      std::sort(relayed.begin(), relayed.end());
      const double md = direct[direct.size() / 2], mr = relayed[relayed.size() / 2];
      std::printf("median %lu direct %.4f relayed %.4f ratio %.2f\n", n, md, mr, mr / md);
    }
    dep.reset();
    return 0;
  }

  ~Source() {
    ep_.reset();
    client_.reset();
  }

 private:
  int timeoutMs_ = 5000;
  std::unique_ptr<Domain> d_;
  std::unique_ptr<relay::RelayClient> client_;
  std::unique_ptr<Endpoint> ep_;
  std::vector<uint8_t> relay_, target_;
  RemoteKey key_;
  std::vector<Event> ev_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fabric_relay_node target|relay|source --opt value ...\n");
    return 2;
  }
  Args a;
  a.role = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0) return 2;
    a.opt[argv[i] + 2].push_back(argv[i + 1]);
  }
  signal(SIGTERM, OnTerm);
  signal(SIGINT, OnTerm);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (a.role == "target") return RunTarget(a);
  if (a.role == "relay") return RunRelay(a);
  if (a.role == "forwarder-address") return RunForwarderAddress(a);
  if (a.role != "source") return 2;
  Source s;
  const int rc = s.Init(a);
  if (rc != 0) return rc;
  const std::string sc = a.Get("scenario");
  if (sc == "suite") return s.Suite();
  if (sc == "ordering") return s.Ordering(16, 8, (256u << 10) + 77);
  if (sc == "stream") return s.Stream(std::stoi(a.Get("max-seconds", "60")));
  if (sc == "bench") {
    return s.Bench(a.Get("direct"), std::stoi(a.Get("rounds", "5")), std::stoull(a.Get("bench-mib", "32")),
                   std::stoull(a.Get("max-mib", "16")));
  }
  return 2;
}
