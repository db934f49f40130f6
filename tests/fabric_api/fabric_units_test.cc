// Units of the fabric layer: packed remote keys and worker addresses (every field
// from a peer validated), byte-range claims, chunk cutting and the weighted rail
// scheduler, frame-header shape checks, error names.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "proxy/fabric/byte_claims.h"
#include "proxy/fabric/fabric_error.h"
#include "proxy/fabric/region_table.h"
#include "proxy/fabric/remote_key.h"
#include "proxy/fabric/stripe_scheduler.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "tests/unit/parse_env.h"

namespace railyard::fabric {
namespace {

RemoteKey SampleKey() {
  RemoteKey k;
  k.base = 0x7f0000001000;
  k.length = 12345;
  k.softwareKey = 0xdeadbeefcafe;
  k.access = kAccessRemoteRead | kAccessRemoteWrite;
  k.railRkeys = {0x11, 0x22, 0x33};
  return k;
}

TEST(FabricRemoteKey, PackUnpackRoundTrips) {
  const RemoteKey k = SampleKey();
  const auto bytes = k.Pack();
  EXPECT_EQ(bytes.size(), RemoteKey::PackedBytes(3));
  RemoteKey back;
  ASSERT_TRUE(RemoteKey::Unpack(bytes, &back).ok());
  EXPECT_EQ(back, k);
  RemoteKey none = k;
  none.railRkeys.clear();
  ASSERT_TRUE(RemoteKey::Unpack(none.Pack(), &back).ok());
  EXPECT_EQ(back, none);
}

TEST(FabricRemoteKey, EveryCorruptionIsRefusedAndLeavesTheOutputAlone) {
  const auto good = SampleKey().Pack();
  auto expectBad = [&](std::vector<uint8_t> b, const char* needle) {
    RemoteKey out;
    out.base = 42;
    Status s = RemoteKey::Unpack(b, &out);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(out.base, 42u);
  };
  expectBad({good.begin(), good.begin() + 10}, "shorter");
  auto b = good;
  b[0] ^= 1;
  expectBad(b, "magic");
  b = good;
  b[4] = 9;
  expectBad(b, "version 9");
  b = good;
  b[6] = 200;
  expectBad(b, "rails");
  b = good;
  b.push_back(0);
  expectBad(b, "expected");
  b = good;
  std::memset(b.data() + 16, 0xff, 8);  // length wraps
  expectBad(b, "wraps");
  b = good;
  std::memset(b.data() + 24, 0, 8);
  expectBad(b, "software key 0");
  b = good;
  b[32] = 0xf0;
  expectBad(b, "access");
  b = good;
  b[36] = 1;
  expectBad(b, "reserved");
}

TEST(FabricWorkerAddress, PackUnpackAndCorruptions) {
  tcp::WorkerAddress a;
  a.workerId = 77;
  a.rails = {{0x0100007f, 4000, 10000}, {0x0200007f, 4001, 25000}};
  tcp::WorkerAddress back;
  ASSERT_TRUE(tcp::WorkerAddress::Unpack(a.Pack(), &back).ok());
  EXPECT_EQ(back, a);
  EXPECT_EQ(tcp::RailAddressText(a.rails[1]), "127.0.0.2:4001");
  auto bad = [&](std::vector<uint8_t> b) {
    tcp::WorkerAddress out;
    return tcp::WorkerAddress::Unpack(b, &out).code() == Code::kInvalidArgument;
  };
  auto b = a.Pack();
  EXPECT_TRUE(bad({b.begin(), b.end() - 1}));
  b[0] ^= 1;
  EXPECT_TRUE(bad(b));
  b = a.Pack();
  b[6] = 0;  // zero rails
  EXPECT_TRUE(bad(b));
  b = a.Pack();
  std::memset(b.data() + 8, 0, 8);  // worker id 0
  EXPECT_TRUE(bad(b));
  b = a.Pack();
  std::memset(b.data() + 16 + 4, 0, 2);  // port 0
  EXPECT_TRUE(bad(b));
  b = a.Pack();
  b[16 + 6] = 1;  // reserved
  EXPECT_TRUE(bad(b));
}

TEST(FabricByteClaims, ClaimsAreDisjointInsideTheOpAndCompleteOnlyWhenAllLanded) {
  ByteClaims c(100);
  EXPECT_FALSE(c.Complete());
  EXPECT_EQ(c.Claim(0, 40), ByteClaims::Result::kOk);
  EXPECT_EQ(c.Claim(60, 40), ByteClaims::Result::kOk);
  EXPECT_EQ(c.Claim(39, 2), ByteClaims::Result::kOverlap);
  EXPECT_EQ(c.Claim(59, 2), ByteClaims::Result::kOverlap);
  EXPECT_EQ(c.Claim(0, 100), ByteClaims::Result::kOverlap);
  EXPECT_EQ(c.Claim(90, 20), ByteClaims::Result::kOutOfRange);
  EXPECT_EQ(c.Claim(~0ull, 2), ByteClaims::Result::kOutOfRange);
  EXPECT_EQ(c.Claim(50, 0), ByteClaims::Result::kOk);  // empty: claims nothing
  EXPECT_TRUE(c.Land(40));
  EXPECT_TRUE(c.Land(40));
  EXPECT_FALSE(c.Land(1)) << "landed more than was claimed";
  EXPECT_FALSE(c.Complete());
  EXPECT_FALSE(c.FullyClaimed());
  EXPECT_EQ(c.Claim(40, 20), ByteClaims::Result::kOk);
  EXPECT_TRUE(c.FullyClaimed());
  EXPECT_FALSE(c.Complete()) << "complete before the last claim landed";
  EXPECT_TRUE(c.Land(20));
  EXPECT_TRUE(c.Complete());
  EXPECT_EQ(c.Claim(10, 1), ByteClaims::Result::kOverlap) << "a byte claimed after completion";
  EXPECT_TRUE(ByteClaims(0).Complete());
}

TEST(FabricByteClaims, BoundsTheNumberOfClaims) {
  ByteClaims c(1000, 3);
  EXPECT_EQ(c.Claim(0, 1), ByteClaims::Result::kOk);
  EXPECT_EQ(c.Claim(1, 1), ByteClaims::Result::kOk);
  EXPECT_EQ(c.Claim(2, 1), ByteClaims::Result::kOk);
  EXPECT_EQ(c.Claim(3, 1), ByteClaims::Result::kTooMany);
}

TEST(FabricStripe, CutsAtTheThresholdAndShareRounding) {
  StripeOptions o;
  o.thresholdBytes = 64 * 1024;
  o.chunkBytes = 1 << 20;
  EXPECT_EQ(CutIntoChunks(0, 2, o), (std::vector<Chunk>{Chunk{0, 0}}));
  EXPECT_EQ(CutIntoChunks(65536, 2, o), (std::vector<Chunk>{Chunk{0, 65536}}));  // at the threshold: whole
  // Just above: striped in two page-rounded halves.
  auto c = CutIntoChunks(65537, 2, o);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], (Chunk{0, 36864}));
  EXPECT_EQ(c[1], (Chunk{36864, 65537 - 36864}));
  EXPECT_FALSE(IsStriped(65536, 2, o));
  EXPECT_TRUE(IsStriped(65537, 2, o));
  EXPECT_FALSE(IsStriped(10 << 20, 1, o));
  // One rail: cut at chunkBytes only.
  c = CutIntoChunks((3 << 20) + 5, 1, o);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[3], (Chunk{3u << 20, 5}));
  // Large striped op: chunkBytes pieces covering every byte once.
  c = CutIntoChunks(10'000'001, 3, o);
  uint64_t next = 0;
  for (const Chunk& k : c) {
    EXPECT_EQ(k.offset, next);
    EXPECT_LE(k.bytes, o.chunkBytes);
    next += k.bytes;
  }
  EXPECT_EQ(next, 10'000'001u);
}

TEST(FabricStripe, SchedulerWeighsBySpeedAndBoundsChunksInFlight) {
  StripeScheduler s({20000, 10000}, 1000);
  std::map<int, int> picks;
  for (int i = 0; i < 300; ++i) {
    const int r = s.Pick();
    ASSERT_GE(r, 0);
    ++picks[r];
  }
  EXPECT_EQ(picks[0], 200);
  EXPECT_EQ(picks[1], 100);
  // Bounded: with 2 per rail and nothing written out, the third pick of a rail is refused.
  StripeScheduler b({10000, 10000}, 2);
  for (int i = 0; i < 4; ++i) {
    const int r = b.Pick();
    ASSERT_GE(r, 0);
    b.OnQueued(r);
  }
  EXPECT_EQ(b.InFlight(0), 2);
  EXPECT_EQ(b.InFlight(1), 2);
  EXPECT_EQ(b.Pick(), -1);
  b.OnWritten(1);
  EXPECT_EQ(b.Pick(), 1) << "only rail 1 has room";
  // A full fast rail does not stall the slow one.
  StripeScheduler f({100000, 1}, 1);
  const int first = f.Pick();
  EXPECT_EQ(first, 0);
  f.OnQueued(first);
  EXPECT_EQ(f.Pick(), 1);
  // Speed 0 counts as 1.
  StripeScheduler z({0, 0}, 4);
  EXPECT_GE(z.Pick(), 0);
  // Peek names the rail Pick would take and leaves the turn: data picks alternate even
  // with a peeked (tiny) op between every two of them.
  StripeScheduler p({10000, 10000}, 1000);
  std::map<int, int> data;
  for (int i = 0; i < 10; ++i) {
    const int peeked = p.Peek();
    EXPECT_EQ(p.Peek(), peeked) << "Peek changes nothing";
    const int r = p.Pick();
    EXPECT_EQ(r, peeked);
    ++data[r];
  }
  EXPECT_EQ(data[0], 5);
  EXPECT_EQ(data[1], 5);
  StripeScheduler full({10000, 10000}, 1);
  full.OnQueued(0);
  EXPECT_EQ(full.Peek(), 1) << "only rail 1 has room";
  full.OnQueued(1);
  EXPECT_EQ(full.Peek(), -1);
}

TEST(FabricStripe, OptionsValidate) {
  StripeOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.chunkBytes = 100;
  EXPECT_FALSE(o.Validate().ok());
  o = StripeOptions{};
  o.chunksInFlightPerRail = 0;
  EXPECT_FALSE(o.Validate().ok());
}

TEST(FabricStripe, OptionsComeFromTheVariableTable) {
  Status st;
  env::Config c = test_support::ParseEnv({}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  StripeOptions o = StripeOptions::FromConfig(c);
  EXPECT_EQ(o.thresholdBytes, 64u * 1024);  // the documented defaults
  EXPECT_EQ(o.chunkBytes, 512u * 1024);
  EXPECT_EQ(o.chunksInFlightPerRail, 4);
  c = test_support::ParseEnv({{"RAILYARD_STRIPE_THRESHOLD_BYTES", "1M"},
                              {"RAILYARD_STRIPE_CHUNK_BYTES", "256K"},
                              {"RAILYARD_STRIPE_CHUNKS_PER_RAIL", "9"},
                              {"RAILYARD_TIMEOUT_MS", "1234"}},
                             &st);
  ASSERT_TRUE(st.ok()) << st.message();
  const tcp::TcpOptions t = tcp::TcpOptions::FromConfig(c, {{"lo", "127.0.0.1", 1}});
  EXPECT_EQ(t.stripe.thresholdBytes, 1u << 20);
  EXPECT_EQ(t.stripe.chunkBytes, 256u * 1024);
  EXPECT_EQ(t.stripe.chunksInFlightPerRail, 9);
  EXPECT_EQ(t.timeoutMs, 1234);
  EXPECT_TRUE(t.Validate().ok());
  for (auto bad : std::vector<std::pair<std::string, std::string>>{{"RAILYARD_STRIPE_CHUNK_BYTES", "128M"},
                                                                   {"RAILYARD_STRIPE_CHUNK_BYTES", "1K"},
                                                                   {"RAILYARD_STRIPE_CHUNKS_PER_RAIL", "0"}}) {
    test_support::ParseEnv({bad}, &st);
    EXPECT_EQ(st.code(), Code::kInvalidUsage) << bad.first << "=" << bad.second;
    EXPECT_NE(st.message().find(bad.first), std::string::npos) << st.message();
  }
}

TEST(FabricTcpOptions, ValidateNamesTheBadField) {
  tcp::TcpOptions o;
  EXPECT_NE(o.Validate().message().find("0 rails"), std::string::npos);
  o.rails = {{"eth0", "not-an-address", 1}};
  EXPECT_NE(o.Validate().message().find("not-an-address"), std::string::npos);
  o.rails = {{"lo", "127.0.0.1", 1}};
  o.socketsPerRail = 17;
  EXPECT_NE(o.Validate().message().find("sockets per rail"), std::string::npos);
  o.socketsPerRail = 1;
  EXPECT_TRUE(o.Validate().ok());
}

tcp::FrameHeader Frame(tcp::FrameType t) { return tcp::MakeHeader(t); }

Status Decode(const tcp::FrameHeader& h, tcp::Direction d) {
  tcp::FrameHeader out;
  return tcp::DecodeFrameHeader(reinterpret_cast<const uint8_t*>(&h), d, &out);
}

TEST(FabricFrame, HeaderShapesAreChecked) {
  using tcp::Direction;
  using tcp::FrameType;
  auto w = Frame(FrameType::kWrite);
  w.opBytes = 100;
  w.offset = 40;
  w.payloadBytes = 60;
  EXPECT_TRUE(Decode(w, Direction::kToTarget).ok());
  EXPECT_FALSE(Decode(w, Direction::kToInitiator).ok()) << "a write frame sent to an initiator";
  w.payloadBytes = 61;
  EXPECT_FALSE(Decode(w, Direction::kToTarget).ok()) << "chunk beyond its op";
  w.payloadBytes = 60;
  w.magic ^= 1;
  EXPECT_FALSE(Decode(w, Direction::kToTarget).ok());
  w.magic ^= 1;
  w.version = tcp::kWireVersion + 1;
  EXPECT_EQ(Decode(w, Direction::kToTarget).code(), Code::kInvalidUsage) << "another version";
  w.version = 1;  // the version before lazy acks: refused, naming both
  EXPECT_EQ(Decode(w, Direction::kToTarget).code(), Code::kInvalidUsage) << "wire version 1";
  EXPECT_NE(Decode(w, Direction::kToTarget).message().find("fabric wire version 1 from the peer, this build speaks 3"),
            std::string::npos)
      << Decode(w, Direction::kToTarget).message();
  w.version = 2;  // the version before relayed hellos
  EXPECT_NE(Decode(w, Direction::kToTarget).message().find("fabric wire version 2 from the peer, this build speaks 3"),
            std::string::npos)
      << Decode(w, Direction::kToTarget).message();
  w.version = tcp::kWireVersion;
  w.flags = 2;
  EXPECT_FALSE(Decode(w, Direction::kToTarget).ok());
  w.flags = tcp::kFlagLazyAck;
  EXPECT_TRUE(Decode(w, Direction::kToTarget).ok()) << "a lazily acked write";
  w.flags = tcp::kFlagLazyAck | tcp::kFlagImmediate;
  EXPECT_TRUE(Decode(w, Direction::kToTarget).ok()) << "a lazily acked write with immediate";
  w.flags = tcp::kFlagBoundOnly;
  EXPECT_NE(Decode(w, Direction::kToTarget).message().find("bound-only flag on a non-ack"), std::string::npos);
  w.flags = tcp::kFlagRelayed;  // hellos only (wire version 3)
  EXPECT_NE(Decode(w, Direction::kToTarget).message().find("relayed flag on a non-hello"), std::string::npos);
  w.flags = 32;
  EXPECT_NE(Decode(w, Direction::kToTarget).message().find("unknown flags 32"), std::string::npos);
  auto hello = Frame(FrameType::kHello);
  hello.addr = 9;
  hello.opBytes = 2;
  hello.offset = 1;
  hello.flags = tcp::kFlagRelayed;
  EXPECT_TRUE(Decode(hello, Direction::kToTarget).ok()) << "a hello spliced through relays";
  w.flags = 0;
  w.type = 99;
  EXPECT_FALSE(Decode(w, Direction::kToTarget).ok());
  auto r = Frame(FrameType::kRecord);
  r.opBytes = r.payloadBytes = tcp::kMaxRecordBytes + 1;
  EXPECT_FALSE(Decode(r, Direction::kToTarget).ok());
  r.opBytes = r.payloadBytes = 5;
  EXPECT_TRUE(Decode(r, Direction::kToTarget).ok());
  r.flags = tcp::kFlagImmediate;
  EXPECT_FALSE(Decode(r, Direction::kToTarget).ok()) << "immediate on a record";
  auto f = Frame(FrameType::kFetchAdd);
  f.opBytes = 8;
  EXPECT_TRUE(Decode(f, Direction::kToTarget).ok());
  f.opBytes = 4;
  EXPECT_FALSE(Decode(f, Direction::kToTarget).ok());
  auto rq = Frame(FrameType::kReadReq);
  rq.opBytes = 1000;
  rq.offset = 900;
  rq.value = 101;
  EXPECT_FALSE(Decode(rq, Direction::kToTarget).ok());
  auto ack = Frame(FrameType::kAck);
  ack.seq = 5;
  ack.offset = 3;  // the cumulative bound
  EXPECT_TRUE(Decode(ack, Direction::kToInitiator).ok());
  ack.flags = tcp::kFlagLazyAck;
  EXPECT_NE(Decode(ack, Direction::kToInitiator).message().find("lazy-ack flag on a non-write"), std::string::npos);
  ack.flags = tcp::kFlagBoundOnly;
  EXPECT_NE(Decode(ack, Direction::kToInitiator).message().find("bound-only ack naming an op"), std::string::npos);
  ack.seq = 0;
  EXPECT_TRUE(Decode(ack, Direction::kToInitiator).ok()) << "a bound-only ack";
  ack.value = 1;
  EXPECT_FALSE(Decode(ack, Direction::kToInitiator).ok()) << "a bound-only ack with a fetch-add value";
  auto rec = Frame(FrameType::kRecord);
  rec.opBytes = rec.payloadBytes = 5;
  rec.flags = tcp::kFlagLazyAck;
  EXPECT_FALSE(Decode(rec, Direction::kToTarget).ok()) << "lazy ack on a record";
  auto n = Frame(FrameType::kNack);
  n.payloadBytes = tcp::kMaxNackText + 1;
  EXPECT_FALSE(Decode(n, Direction::kToInitiator).ok());
  auto big = Frame(FrameType::kReadData);
  big.payloadBytes = static_cast<uint32_t>(tcp::kMaxFramePayload + 1);
  EXPECT_FALSE(Decode(big, Direction::kToInitiator).ok());
}

TEST(FabricError, NamesAndStatus) {
  FabricError e;
  e.errc = FabricErrc::kBadKey;
  e.site.rank = 3;
  e.site.peer = "w=1";
  e.site.device = "lo";
  e.site.rail = 1;
  e.site.qp = 0;
  e.site.qpName = "socket";
  e.site.seq = 7;
  e.what = "x";
  EXPECT_EQ(e.ToString(), "fabric BAD_KEY: rank 3 peer w=1 device lo rail 1 socket 0 seq 7: x");
  EXPECT_EQ(e.ToStatus().code(), Code::kRemoteError);
  e.errc = FabricErrc::kTimeout;
  EXPECT_EQ(e.ToStatus().code(), Code::kSystemError);
  EXPECT_EQ(FabricErrcFromWire(999), FabricErrc::kMalformed);
  EXPECT_EQ(FabricErrcFromWire(5), FabricErrc::kDeregistered);
  EXPECT_TRUE(IsRemoteAccess(FabricErrc::kDeregistered));
  EXPECT_FALSE(IsRemoteAccess(FabricErrc::kPeerClosed));
}

/// splitmix64's output function and its inverse (the multipliers are odd, so invertible
/// mod 2^64; each xor-shift by k >= 32 is its own inverse).
uint64_t SplitMixOut(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t InverseOdd(uint64_t a) {  // Newton: x = x (2 - a x), doubling the correct bits
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
uint64_t UnXorShift(uint64_t z, int k) {
  uint64_t x = z;
  for (int i = 0; i < 64 / k + 1; ++i) x = z ^ (x >> k);
  return x;
}
uint64_t SplitMixState(uint64_t out) {
  uint64_t z = UnXorShift(out, 31) * InverseOdd(0x94d049bb133111ebull);
  z = UnXorShift(z, 27) * InverseOdd(0xbf58476d1ce4e5b9ull);
  return UnXorShift(z, 30);
}

// Hostile-peer probe: software keys came from a splitmix64 sequence, so one key a peer
// was given gave away the next registration's (the next client's arena key) by
// inverting the mix and stepping the state. Each key is now drawn on its own: none is
// what that inversion predicts from the key before it.
TEST(FabricRegionTable, NoKeyIsPredictableFromTheKeyBefore) {
  ASSERT_EQ(SplitMixOut(SplitMixState(0x0123456789abcdefull)), 0x0123456789abcdefull);  // the inversion works
  RegionTable t;
  static uint8_t mem[64][64];
  std::vector<std::shared_ptr<RegionRecord>> recs(64);
  for (size_t i = 0; i < recs.size(); ++i) {
    ASSERT_TRUE(t.Register(mem[i], sizeof mem[i], kAccessRemoteWrite, MemoryKind::kHost, &recs[i]).ok());
  }
  int predicted = 0;
  for (size_t i = 1; i < recs.size(); ++i) {
    const uint64_t before = recs[i - 1]->region().softwareKey;
    const uint64_t next = recs[i]->region().softwareKey;
    predicted += SplitMixOut(SplitMixState(before) + 0x9e3779b97f4a7c15ull) == next;
    predicted += next == before + 1;
  }
  EXPECT_EQ(predicted, 0);
}

TEST(FabricRegionTable, ResolveChecksKeyRightsAndBounds) {
  RegionTable t;
  static uint8_t mem[256];
  std::shared_ptr<RegionRecord> rec;
  ASSERT_TRUE(t.Register(mem, sizeof mem, kAccessRemoteRead, MemoryKind::kHost, &rec).ok());
  const Region& r = rec->region();
  EXPECT_NE(r.softwareKey, 0u);
  std::shared_ptr<RegionRecord> got;
  std::string why;
  EXPECT_EQ(t.Resolve(r.softwareKey, r.base, 256, kAccessRemoteRead, &got, &why), FabricErrc::kNone);
  EXPECT_EQ(t.Resolve(r.softwareKey, r.base + 1, 256, kAccessRemoteRead, &got, &why), FabricErrc::kOutOfBounds);
  EXPECT_EQ(t.Resolve(r.softwareKey, r.base, 1, kAccessRemoteWrite, &got, &why), FabricErrc::kAccessDenied);
  EXPECT_NE(why.find("remote-read"), std::string::npos) << why;
  EXPECT_EQ(t.Resolve(r.softwareKey + 1, r.base, 1, kAccessRemoteRead, &got, &why), FabricErrc::kBadKey);
  // Two regions never share a key; a deregistered one no longer resolves and its
  // pins refuse to land.
  std::shared_ptr<RegionRecord> rec2;
  ASSERT_TRUE(t.Register(mem, 16, kAccessRemoteWrite, MemoryKind::kHost, &rec2).ok());
  EXPECT_NE(rec2->region().softwareKey, r.softwareKey);
  ASSERT_EQ(t.Resolve(r.softwareKey, r.base, 1, kAccessRemoteRead, &got, &why), FabricErrc::kNone);
  const uint64_t key = r.softwareKey;
  ASSERT_TRUE(t.Deregister(&rec->region()).ok());
  EXPECT_EQ(t.Deregister(&rec->region()).code(), Code::kInvalidArgument);
  EXPECT_EQ(t.Resolve(key, reinterpret_cast<uint64_t>(mem), 1, kAccessRemoteRead, &got, &why), FabricErrc::kBadKey);
  bool ran = false;
  EXPECT_FALSE(rec->WithLive([&] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_EQ(t.Size(), 1u);
}

}  // namespace
}  // namespace railyard::fabric
