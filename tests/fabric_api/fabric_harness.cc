#include "tests/fabric_api/fabric_harness.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "tests/fabric_api/relayed_case.h"
#include "proxy/fabric/verbs/verbs_domain.h"

namespace railyard::fabric::testing {

Status MakeVerbsDomain(const Knobs& k, std::unique_ptr<Domain>* out) {
  // In the soft-RoCE lane (tests/lanes/rxe, flat mode) successive Domains take host
  // h0's and h1's rails in turn, so the traffic crosses the rail veths; any pairing
  // works there (rail i of one host reaches rail i of the other, and itself).
  static int next = 0;
  const char* lane = std::getenv("RXE_LANE_HOSTS");
  std::string hca;
  if (lane != nullptr) {
    const std::string var = "RXE_LANE_DEVS_H" + std::to_string(next++ % 2);
    const char* devs = std::getenv(var.c_str());
    if (devs == nullptr) return SystemError("in the soft-RoCE lane but " + var + " is unset");
    hca = "=";
    for (const char* p = devs; *p != 0; ++p) hca += *p == ' ' ? ',' : *p;
  }
  env::Config config;
  Status s = env::Parse(
      [&](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "RAILYARD_HCA" && !hca.empty()) return hca;
        return std::nullopt;
      },
      {}, &config);
  if (!s.ok()) return s;
  verbs::VerbsOptions o = verbs::VerbsOptions::FromConfig(config);
  o.bootstrapAddress = "127.0.0.1";
  o.timeoutMs = k.timeoutMs;
  // Connection setup under the lane's emulation (a fresh process opening its
  // devices, QPs to RTS) takes seconds: not what a test's short timeout is about.
  o.connectTimeoutMs = k.verbsConnectTimeoutMs > 0 ? k.verbsConnectTimeoutMs : std::max(k.timeoutMs, 20000);
  o.bootstrapPort = k.verbsBootstrapPort;
  o.acceptOnlyFrom = k.verbsAcceptOnlyFrom;
  o.stripe.thresholdBytes = 64 * 1024;
  o.stripe.chunkBytes = 256 * 1024;
  o.stripe.chunksInFlightPerRail = 4;
  s = verbs::CreateVerbsDomain(o, out);
  // A lane that lost its devices is a failure, never a skip.
  if (!s.ok() && lane != nullptr) return SystemError("soft-RoCE lane: " + s.message());
  return s;
}

std::vector<TransportCase> FabricTransports() {
  std::vector<TransportCase> cases;
  cases.push_back({"tcp_1rail", [](const Knobs& k, std::unique_ptr<Domain>* out) {
                     tcp::TcpOptions o;
                     o.rails = {{"lo", "127.0.0.1", 10000}};
                     o.timeoutMs = k.timeoutMs;
                     return tcp::CreateTcpDomain(o, out);
                   }});
  cases.push_back({"tcp_2rails", [](const Knobs& k, std::unique_ptr<Domain>* out) {
                     tcp::TcpOptions o;
                     o.rails = {{"lo", "127.0.0.1", 20000}, {"lo", "127.0.0.2", 10000}};
                     o.socketsPerRail = 2;
                     o.stripe.thresholdBytes = 16 * 1024;
                     o.stripe.chunkBytes = 64 * 1024;
                     o.stripe.chunksInFlightPerRail = 2;
                     o.pumpBytes = 16 * 1024;  // the target lands socket by socket, in small steps
                     o.timeoutMs = k.timeoutMs;
                     return tcp::CreateTcpDomain(o, out);
                   }});
  cases.push_back({"verbs", MakeVerbsDomain});
  cases.push_back({"fake", [](const Knobs&, std::unique_ptr<Domain>* out) {
                     return fake::CreateFakeDomain(fake::FakeOptions{}, out);
                   }});
  // The target's events trail its acks (FakeOptions::targetEventsTrail), as over verbs:
  // a test that takes every kDone at the initiator for the target's events fails here
  // on the host, not only in the soft-RoCE lane.
  cases.push_back({"fake_trailing", [](const Knobs&, std::unique_ptr<Domain>* out) {
                     fake::FakeOptions o;
                     o.targetEventsTrail = true;
                     return fake::CreateFakeDomain(o, out);
                   }});
  // Relayed routes (source -> relay -> target): the fake transport with small
  // slots (64 KiB payload, 4 slots, 2 return slots: rings wrap many times), and TCP
  // on the two striped loopback rails with 32 slots of 256 KiB (more small ops in flight).
  relay::RelayOptions small;
  small.slots = 4;
  small.slotBytes = relay::kSlotPayloadOffset + 64 * 1024;
  small.returnSlots = 2;
  auto named = [&cases](const char* name) {
    return std::find_if(cases.begin(), cases.end(), [name](const TransportCase& c) { return c.name == name; })->make;
  };
  cases.push_back(RelayedCase("fake_relayed", named("fake"), small));
  relay::RelayOptions wide;
  wide.slots = 32;
  wide.slotBytes = relay::kSlotPayloadOffset + 256 * 1024;
  cases.push_back(RelayedCase("tcp_relayed", named("tcp_2rails"), wide));
  // Over verbs (the soft-RoCE lane; skipped where there is no RDMA port): every leg an
  // RC QP, the relay's rings registered on its Domain and written on with RDMA WRITE
  // WITH IMM, so no leg of the route is TCP. Default slots (8 of 512 KiB).
  cases.push_back(RelayedCase("verbs_relayed", named("verbs"), relay::RelayOptions{}));
  return cases;
}

void FillPattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<uint8_t>(x >> (8 * (i % 8)));
  }
}

int64_t FirstMismatch(const uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (p[i] != static_cast<uint8_t>(x >> (8 * (i % 8)))) return static_cast<int64_t>(i);
  }
  return -1;
}

namespace {
size_t CountDir(const char* path) {
  size_t n = 0;
  DIR* d = opendir(path);
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}
}  // namespace

RemoteKey Exchange(const Region* r) {
  RemoteKey k;
  Status s = RemoteKey::Unpack(r->Key().Pack(), &k);
  EXPECT_TRUE(s.ok()) << s.message();
  return k;
}

size_t OpenFds() { return CountDir("/proc/self/fd"); }
size_t Threads() { return CountDir("/proc/self/task"); }

bool FabricTest::MakeSide(Side* side, const Knobs& knobs) {
  Status s = GetParam().make(knobs, &side->domain);
  if (s.code() == Code::kInvalidUsage) {
    skip_ = "transport " + GetParam().name + " not available here: " + s.message();
    return false;
  }
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok()) return false;
  s = side->domain->CreateWorker(&side->worker);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok();
}

void FabricTest::SetUp() {
  if (!MakeSide(&a_, knobs_)) {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    FAIL() << "could not make side A";
  }
  ASSERT_TRUE(MakeSide(&b_, knobs_)) << skip_;
  Reconnect();
}

void FabricTest::Reconnect() {
  ep_.reset();
  Status s = a_.worker->Connect(b_.worker->Address(), &ep_);
  ASSERT_TRUE(s.ok()) << s.message();
}

void FabricTest::TearDown() {
  ep_.reset();
  a_.worker.reset();
  b_.worker.reset();
  a_.domain.reset();
  b_.domain.reset();
}

bool FabricTest::PumpUntil(const std::function<bool()>& done, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    a_.worker->Progress(&a_.events);
    if (done()) return true;
    b_.worker->Progress(&b_.events);
    if (done()) return true;
  }
  return done();
}

Event FabricTest::Wait(uint64_t cookie, int ms) {
  Event out;
  auto find = [&] {
    for (size_t i = 0; i < a_.events.size(); ++i) {
      const Event& e = a_.events[i];
      if ((e.kind == EventKind::kDone || e.kind == EventKind::kError) && e.cookie == cookie) {
        out = e;
        a_.events.erase(a_.events.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    }
    return false;
  };
  if (!PumpUntil(find, ms)) {
    out.kind = EventKind::kError;
    out.error.errc = FabricErrc::kTimeout;
    out.error.what = "the test waited " + std::to_string(ms) + " ms for cookie " + std::to_string(cookie);
  }
  return out;
}

const Region* FabricTest::Reg(Side& side, void* p, size_t n, uint32_t access) {
  const Region* r = nullptr;
  Status s = side.domain->Register(p, n, access, MemoryKind::kHost, &r);
  EXPECT_TRUE(s.ok()) << s.message();
  return r;
}

void ExpectRemoteError(const Domain& d, const Event& e, FabricErrc precise) {
  EXPECT_EQ(e.kind, EventKind::kError) << e.error.ToString();
  if (d.capabilities().Has(kCapPreciseRemoteErrors)) {
    EXPECT_EQ(e.error.errc, precise) << e.error.ToString();
    EXPECT_NE(e.error.ToString().find(FabricErrcName(precise)), std::string::npos) << e.error.ToString();
  } else {
    EXPECT_TRUE(IsRemoteAccess(e.error.errc)) << e.error.ToString();
  }
}

}  // namespace railyard::fabric::testing
