// The relay's hostile-peer rules, in-process over the fake transport: what a
// Forwarder refuses (a MAC where no key is set, a missing or wrong MAC with a
// cluster key, a source that is not a neighbour on its port, a target its routing
// does not carry to, too many routes from one source), immediates and records of
// routes the sender does not own, and the wire decoders' checks of peer bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "proxy/fabric/fake/fake_transport.h"
#include "proxy/fabric/relay/forwarder.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/relay_wire.h"
#include "topology/cluster_key.h"

namespace railyard::fabric::relay {
namespace {

std::shared_ptr<const topology::ClusterKey> Key(const char* secret) {
  std::shared_ptr<const topology::ClusterKey> k;
  EXPECT_TRUE(topology::ClusterKey::FromSecret(secret, &k).ok());
  return k;
}

/// Source, relay and target over the fake transport; the relay's routing is `resolve`.
class RelayPolicy : public ::testing::Test {
 protected:
  void Build(RelayOptions relayOpts, RelayOptions sourceOpts, ResolveFn resolve = nullptr) {
    ASSERT_TRUE(fake::CreateFakeDomain({}, &srcD_).ok());
    ASSERT_TRUE(fake::CreateFakeDomain({}, &relayD_).ok());
    ASSERT_TRUE(fake::CreateFakeDomain({}, &dstD_).ok());
    ASSERT_TRUE(dstD_->CreateWorker(&dstW_).ok());
    if (!resolve) {
      resolve = [](std::span<const uint8_t>, NextHop* out) {
        *out = NextHop{};
        return Status::Ok();
      };
    }
    ASSERT_TRUE(Forwarder::Create({relayD_.get()}, relayOpts, resolve, &fwd_).ok());
    ASSERT_TRUE(RelayClient::Create(*srcD_, sourceOpts, &client_).ok());
    ASSERT_TRUE(dstD_->Register(mem_, sizeof mem_, kAccessRemoteWrite | kAccessRemoteRead, MemoryKind::kHost, &region_).ok());
    ASSERT_TRUE(srcD_->Register(src_, sizeof src_, kAccessLocal, MemoryKind::kHost, &local_).ok());
  }
  void TearDown() override {
    eps_.clear();
    client_.reset();
    fwd_.reset();
    dstW_.reset();
  }
  Endpoint* Open() {
    eps_.emplace_back();
    EXPECT_TRUE(client_->Connect(fwd_->Address(0), dstW_->Address(), &eps_.back()).ok());
    return eps_.back().get();
  }
  /// Progresses everything until `cookie` completes or fails (bounded).
  Event Wait(uint64_t cookie, int ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      client_->Progress(&ev_);
      fwd_->Progress();
      dstW_->Progress(&dstEv_);
      for (size_t i = 0; i < ev_.size(); ++i) {
        if (ev_[i].cookie == cookie) {
          Event e = ev_[i];
          ev_.erase(ev_.begin() + static_cast<std::ptrdiff_t>(i));
          return e;
        }
      }
    }
    Event e;
    e.kind = EventKind::kError;
    e.error.errc = FabricErrc::kNone;
    e.error.what = "no event in time";
    return e;
  }
  Event WriteAndWait(Endpoint* ep, uint64_t cookie) {
    EXPECT_TRUE(ep->Write({local_, 0, 64}, region_->Key(), region_->base, cookie).ok());
    return Wait(cookie);
  }
  /// Opens route 1 by hand, as a RelayClient would: a kOpen control of 8 slots of
  /// `o.slotBytes` from `w` to the destination Worker, its returns into `ret`, sent over
  /// a new Endpoint `*ep` to the Forwarder.
  void SendRouteOpen(Worker* w, const RelayOptions& o, const Region* ret, uint64_t nonce,
                     std::unique_ptr<Endpoint>* ep) {
    ASSERT_TRUE(w->Connect(fwd_->Address(0), ep).ok());
    RouteOpen ro;
    ro.slots = 8;
    ro.slotBytes = o.slotBytes;
    ro.returnSlots = o.returnSlots;
    ro.source = w->Address();
    ro.target = dstW_->Address();
    ro.returnKey = ret->Key().Pack();
    ro.nonce = nonce;
    Control c;
    c.kind = ControlKind::kOpen;
    c.route = 1;
    c.body = EncodeRouteOpen(ro);
    ASSERT_TRUE((*ep)->Send(EncodeControl(c), 1).ok());
  }

  std::unique_ptr<Domain> srcD_, relayD_, dstD_;
  std::unique_ptr<Worker> dstW_;
  std::unique_ptr<Forwarder> fwd_;
  std::unique_ptr<RelayClient> client_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<Event> ev_, dstEv_;
  alignas(8) uint8_t mem_[4096] = {};
  alignas(8) uint8_t src_[4096] = {};
  const Region* region_ = nullptr;
  const Region* local_ = nullptr;
};

RelayOptions Short() {
  RelayOptions o;
  o.timeoutMs = 300;  // the source gives up after 2 x this when nobody answers
  return o;
}

TEST_F(RelayPolicy, SameClusterKeyOpensAndCarries) {
  RelayOptions o = Short();
  o.clusterKey = Key("0123456789abcdef0123456789abcdef-good");
  Build(o, o);
  std::memset(src_, 0x5C, 64);
  Event e = WriteAndWait(Open(), 1);
  ASSERT_EQ(e.kind, EventKind::kDone) << e.error.ToString();
  EXPECT_EQ(mem_[63], 0x5C);
  EXPECT_EQ(fwd_->stats().routesOpened, 1u);
}

TEST_F(RelayPolicy, WrongClusterKeyIsRefusedAndNothingLands) {
  RelayOptions r = Short(), s = Short();
  r.clusterKey = Key("0123456789abcdef0123456789abcdef-good");
  s.clusterKey = Key("0123456789abcdef0123456789abcdef-evil");
  Build(r, s);
  std::memset(src_, 0x5C, 64);
  Event e = WriteAndWait(Open(), 1);
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.error.errc, FabricErrc::kTimeout) << e.error.ToString();  // a forger gets no answer
  EXPECT_EQ(fwd_->stats().routesOpened, 0u);
  EXPECT_EQ(fwd_->stats().routesRefused, 1u);
  EXPECT_NE(fwd_->lastRefusal().find("MAC"), std::string::npos) << fwd_->lastRefusal();
  EXPECT_EQ(mem_[0], 0);
}

TEST_F(RelayPolicy, MacWithoutAKeyOnTheRelayIsRefused) {
  RelayOptions s = Short();
  s.clusterKey = Key("0123456789abcdef0123456789abcdef-good");
  Build(Short(), s);
  EXPECT_EQ(WriteAndWait(Open(), 1).kind, EventKind::kError);
  EXPECT_EQ(fwd_->stats().routesRefused, 1u);
  EXPECT_NE(fwd_->lastRefusal().find("configured differently"), std::string::npos) << fwd_->lastRefusal();
}

TEST_F(RelayPolicy, TargetTheRoutingRefusesIsAnsweredNamed) {
  std::vector<uint8_t> target;
  ResolveFn resolve = [&target](std::span<const uint8_t> a, NextHop* out) {
    if (std::vector<uint8_t>(a.begin(), a.end()) == target) return InvalidUsage("not a graph host");
    *out = NextHop{};
    return Status::Ok();
  };
  Build(Short(), Short(), resolve);
  target = dstW_->Address();
  Event e = WriteAndWait(Open(), 1);
  ASSERT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.error.errc, FabricErrc::kConnectFailed) << e.error.ToString();
  EXPECT_NE(e.error.ToString().find("not a graph host"), std::string::npos) << e.error.ToString();
  EXPECT_EQ(fwd_->stats().routesOpened, 0u);
  EXPECT_EQ(dstW_->stats().peerConnections, 0u);
}

TEST_F(RelayPolicy, SourceThatIsNotANeighbourGetsNothing) {
  ResolveFn resolve = [](std::span<const uint8_t>, NextHop* out) {
    *out = NextHop{0, {1, 2, 3}};  // everything is behind another relay: no source is a neighbour
    return Status::Ok();
  };
  Build(Short(), Short(), resolve);
  Event e = WriteAndWait(Open(), 1);
  EXPECT_EQ(e.error.errc, FabricErrc::kTimeout) << e.error.ToString();
  EXPECT_EQ(fwd_->stats().routesRefused, 1u);
  EXPECT_NE(fwd_->lastRefusal().find("not a neighbour"), std::string::npos) << fwd_->lastRefusal();
}

/// A hostile source: a raw Worker of its own that sends relay records by hand.
struct Hostile {
  std::unique_ptr<Domain> d;
  std::unique_ptr<Worker> w;
  std::unique_ptr<Endpoint> ep;
  std::vector<Event> ev;
  const Region* ring = nullptr;
  std::vector<uint8_t> mem = std::vector<uint8_t>(4 * 512 * 1024);
};

TEST_F(RelayPolicy, RoutesPerSourceAreCappedAndStraysAreDropped) {
  RelayOptions r = Short();
  r.maxRoutesPerPeer = 1;
  Build(r, Short());
  Hostile h;
  ASSERT_TRUE(fake::CreateFakeDomain({}, &h.d).ok());
  ASSERT_TRUE(h.d->CreateWorker(&h.w).ok());
  ASSERT_TRUE(h.d->Register(h.mem.data(), h.mem.size(), kAccessRemoteWrite | kAccessLocal, MemoryKind::kHost, &h.ring).ok());
  ASSERT_TRUE(h.w->Connect(fwd_->Address(0), &h.ep).ok());
  RouteOpen o;
  o.slots = 8;
  o.slotBytes = r.slotBytes;
  o.returnSlots = r.returnSlots;
  o.source = h.w->Address();
  o.target = dstW_->Address();
  o.returnKey = h.ring->Key().Pack();
  o.nonce = 1;
  Control c;
  c.kind = ControlKind::kOpen;
  c.body = EncodeRouteOpen(o);
  for (uint32_t route = 1; route <= 2; ++route) {
    c.route = route;
    ASSERT_TRUE(h.ep->Send(EncodeControl(c), route).ok());
  }
  // Its records: OpenOk for the first route, a named refusal for the second.
  std::vector<Control> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    h.w->Progress(&h.ev);
    fwd_->Progress();
    for (const Event& e : h.ev) {
      Control x;
      if (e.kind == EventKind::kRecord && DecodeControl(e.record, &x).ok()) got.push_back(x);
    }
    h.ev.clear();
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].kind, ControlKind::kOpenOk);
  EXPECT_EQ(got[0].route, 1u);
  EXPECT_EQ(got[1].kind, ControlKind::kError);
  EXPECT_EQ(got[1].route, 2u);
  EXPECT_NE(std::string(got[1].body.begin(), got[1].body.end()).find("RAILYARD_RELAY_MAX_PER_PEER"), std::string::npos);
  EXPECT_EQ(fwd_->stats().routesOpened, 1u);
  EXPECT_EQ(fwd_->stats().routesRefused, 1u);
  // A legitimate route opens beside it (another source Worker) ...
  Endpoint* ep = Open();
  std::memset(src_, 0x33, 64);
  ASSERT_EQ(WriteAndWait(ep, 7).kind, EventKind::kDone);
  // ... and the hostile source's records and immediates for that route are strays.
  const uint64_t straysBefore = fwd_->stats().strays;
  Control credit;
  credit.kind = ControlKind::kReturnCredit;
  credit.route = static_cast<uint32_t>(got[0].a) + 1;  // the next route id: the legitimate one
  credit.a = 1000;
  ASSERT_TRUE(h.ep->Send(EncodeControl(credit), 50).ok());
  ASSERT_TRUE(h.ep->Send(std::vector<uint8_t>{1, 2, 3}, 51).ok());  // not a relay record at all
  for (int i = 0; i < 50; ++i) {
    h.w->Progress(&h.ev);
    fwd_->Progress();
  }
  EXPECT_EQ(fwd_->stats().strays, straysBefore + 2);
  std::memset(src_, 0x44, 64);
  ASSERT_EQ(WriteAndWait(ep, 8).kind, EventKind::kDone) << "a stray record broke another source's route";
  EXPECT_EQ(mem_[10], 0x44);
  h.ep.reset();
  eps_.clear();
  client_.reset();
  fwd_.reset();
}

/// Two relays in series (source -> R1 -> R2 -> target, R1 reaching the target through
/// R2's Forwarder): R1 carries a Write's last chunk on with WriteFinal through its own
/// RelayedEndpoint, R2 checks it against the chunks before and passes the total on, so
/// the target still sees one immediate naming the whole Write, after all of its bytes.
TEST(RelayChain, AWriteLargerThanASlotThroughTwoRelaysReportsItsWholeSize) {
  std::unique_ptr<Domain> srcD, r1D, r2D, dstD;
  for (auto* d : {&srcD, &r1D, &r2D, &dstD}) ASSERT_TRUE(fake::CreateFakeDomain({}, d).ok());
  std::unique_ptr<Worker> dstW;
  ASSERT_TRUE(dstD->CreateWorker(&dstW).ok());
  const RelayOptions o;
  std::unique_ptr<Forwarder> r2, r1;
  ASSERT_TRUE(Forwarder::Create({r2D.get()}, o, [](std::span<const uint8_t>, NextHop* out) {
                *out = NextHop{};
                return Status::Ok();
              }, &r2).ok());
  const std::vector<uint8_t> target = dstW->Address(), viaR2 = r2->Address(0);
  ASSERT_TRUE(Forwarder::Create({r1D.get()}, o, [&](std::span<const uint8_t> a, NextHop* out) {
                *out = NextHop{};
                if (std::equal(a.begin(), a.end(), target.begin(), target.end())) out->via = viaR2;
                return Status::Ok();
              }, &r1).ok());
  std::unique_ptr<RelayClient> client;
  ASSERT_TRUE(RelayClient::Create(*srcD, o, &client).ok());
  const size_t big = 3u << 20;
  std::vector<uint8_t> src(big), dst(big + 16, 0);
  for (size_t i = 0; i < big; ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  const Region *rs = nullptr, *rd = nullptr;
  ASSERT_TRUE(srcD->Register(src.data(), src.size(), kAccessLocal, MemoryKind::kHost, &rs).ok());
  ASSERT_TRUE(dstD->Register(dst.data(), dst.size(), kAccessRemoteWrite, MemoryKind::kHost, &rd).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(client->Connect(r1->Address(0), target, &ep).ok());
  std::vector<Event> ev, dstEv;
  uint64_t cookie = 1;
  for (size_t n : {o.PayloadBytes() + 1, big}) {
    SCOPED_TRACE("bytes " + std::to_string(n));
    std::fill(dst.begin(), dst.end(), 0);
    ev.clear();
    dstEv.clear();
    ASSERT_TRUE(ep->Write({rs, 0, n}, rd->Key(), rd->base + 8, cookie, static_cast<uint32_t>(0x700 + cookie)).ok());
    int imms = 0;
    uint64_t bytes = 0;
    bool whole = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool done = false;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      client->Progress(&ev);
      r1->Progress();
      r2->Progress();
      const size_t had = dstEv.size();
      dstW->Progress(&dstEv);
      for (size_t i = had; i < dstEv.size(); ++i) {
        if (dstEv[i].kind != EventKind::kImmediate) continue;
        ++imms;
        bytes = dstEv[i].bytes;
        EXPECT_EQ(dstEv[i].value, 0x700 + cookie);
        whole = std::equal(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n), dst.begin() + 8);
      }
      for (const Event& e : ev) done = done || e.cookie == cookie;
    }
    ASSERT_TRUE(done) << "no completion; R1: " << r1->lastRefusal() << " R2: " << r2->lastRefusal();
    for (const Event& e : ev) ASSERT_EQ(e.kind, EventKind::kDone) << e.error.ToString();
    EXPECT_EQ(imms, 1);
    EXPECT_EQ(bytes, n);
    EXPECT_TRUE(whole) << "the immediate came before every byte had landed";
    EXPECT_EQ(r2->stats().routesFailed, 0u) << r2->lastRefusal();
    ++cookie;
  }
  ep.reset();
  client.reset();
  r1.reset();
  r2.reset();
}

TEST(RelayWire, SlotHeadersFromPeersAreChecked) {
  std::vector<uint8_t> slot(kSlotPayloadOffset + 1024, 0);
  RemoteKey k{0x1000, 4096, 77, kAccessRemoteWrite, {}};
  SlotHeader h;
  h.kind = static_cast<uint8_t>(SlotKind::kWrite);
  h.flags = kSlotLast;
  h.slotSeq = 5;
  h.payloadBytes = 1024;
  h.opBytes = 1024;  // wire version 2: a Write chunk names its Write's total and its offset
  ASSERT_TRUE(EncodeSlotHeader(h, k.Pack(), slot.data()).ok());
  SlotView v;
  ASSERT_TRUE(DecodeSlotHeader(slot.data(), slot.size(), 5, &v).ok());
  EXPECT_EQ(v.key, k);
  EXPECT_EQ(DecodeSlotHeader(slot.data(), slot.size(), 6, &v).code(), Code::kInvalidArgument);  // out of sequence
  EXPECT_EQ(DecodeSlotHeader(slot.data(), slot.size() - 1, 5, &v).code(), Code::kInvalidArgument);  // overruns
  auto with = [&](auto edit) {
    std::vector<uint8_t> s = slot;
    SlotHeader x;
    std::memcpy(&x, s.data(), sizeof x);
    edit(x);
    std::memcpy(s.data(), &x, sizeof x);
    return DecodeSlotHeader(s.data(), s.size(), 5, &v).code();
  };
  EXPECT_EQ(with([](SlotHeader& x) { x.magic ^= 1; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.version = 9; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.kind = 42; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.flags = 0x80; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.keyBytes = 0; }), Code::kInvalidArgument);  // a Write without its key
  EXPECT_EQ(with([](SlotHeader& x) { x.keyBytes = 200; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.kind = static_cast<uint8_t>(SlotKind::kRead); }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.reserved = 1; }), Code::kInvalidArgument);
  // Version 2 (issue 10): a chunk inside its Write, the last flag exactly where it ends.
  EXPECT_EQ(with([](SlotHeader& x) { x.flags = kSlotLast | kSlotHasImm; }), Code::kOk);
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 4096; x.value = 3072; }), Code::kOk);
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 4096; x.flags = 0; }), Code::kOk);  // a first chunk
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 4096; }), Code::kInvalidArgument);  // last, but 3072 bytes short
  EXPECT_EQ(with([](SlotHeader& x) { x.flags = 0; }), Code::kInvalidArgument);       // ends it, but not last
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 1000; }), Code::kInvalidArgument);  // past its Write's end
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 4096; x.value = 3500; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.opBytes = 4096; x.flags = kSlotHasImm; }), Code::kInvalidArgument);
  EXPECT_EQ(with([](SlotHeader& x) { x.version = 1; }), Code::kInvalidArgument);  // the pre-total wire
}

/// A hostile source: opens a route by hand (records and Writes of its own) and writes
/// slots whose chunks disagree with the Write's total. The relay fails the route with
/// a named MALFORMED error record, forwards nothing of the bad chunk and delivers no
/// immediate at the target.
TEST_F(RelayPolicy, WriteChunksThatDisagreeWithTheirTotalFailTheRouteNamed) {
  Build(Short(), Short());
  const RelayOptions o = Short();
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(srcD_->CreateWorker(&w).ok());
  std::vector<uint8_t> ret(o.returnSlots * o.slotBytes, 0), slotA(1024, 0), slotB(1024, 0);
  const Region *rRet = nullptr, *rA = nullptr, *rB = nullptr;
  ASSERT_TRUE(srcD_->Register(ret.data(), ret.size(), kAccessLocal | kAccessRemoteWrite, MemoryKind::kHost, &rRet).ok());
  ASSERT_TRUE(srcD_->Register(slotA.data(), slotA.size(), kAccessLocal, MemoryKind::kHost, &rA).ok());
  ASSERT_TRUE(srcD_->Register(slotB.data(), slotB.size(), kAccessLocal, MemoryKind::kHost, &rB).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_NO_FATAL_FAILURE(SendRouteOpen(w.get(), o, rRet, 99, &ep));
  std::vector<Event> wEv;
  auto pumpUntil = [&](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      w->Progress(&wEv);
      fwd_->Progress();
      dstW_->Progress(&dstEv_);
      if (done()) return true;
    }
    return false;
  };
  auto record = [&](ControlKind kind, Control* out) {
    for (const Event& e : wEv) {
      Control r;
      if (e.kind == EventKind::kRecord && DecodeControl(e.record, &r).ok() && r.kind == kind) {
        *out = r;
        return true;
      }
    }
    return false;
  };
  Control ok;
  ASSERT_TRUE(pumpUntil([&] { return record(ControlKind::kOpenOk, &ok); })) << fwd_->lastRefusal();
  uint16_t kb = 0;
  ASSERT_GE(ok.body.size(), 2u);
  std::memcpy(&kb, ok.body.data(), 2);
  RemoteKey up;
  ASSERT_TRUE(RemoteKey::Unpack(std::span<const uint8_t>(ok.body.data() + 2, kb), &up).ok());
  const uint32_t relayRoute = static_cast<uint32_t>(ok.a);
  const std::vector<uint8_t> target = region_->Key().Pack();
  // One slot: the payload, then the header with the immediate naming the slot.
  auto put = [&](const Region* r, std::vector<uint8_t>& buf, uint32_t idx, uint64_t value, uint32_t payload,
                 uint64_t opBytes, uint16_t flags) {
    std::memset(buf.data() + kSlotPayloadOffset, 0x5a, payload);
    SlotHeader h;
    h.kind = static_cast<uint8_t>(SlotKind::kWrite);
    h.flags = flags;
    h.imm = 0x77;
    h.payloadBytes = payload;
    h.slotSeq = idx;
    h.opSeq = 4;
    h.addr = region_->base + value;
    h.opBytes = opBytes;
    h.value = value;
    ASSERT_TRUE(EncodeSlotHeader(h, target, buf.data()).ok());
    const uint64_t at = up.base + idx * o.slotBytes;
    ASSERT_TRUE(ep->Write({r, kSlotPayloadOffset, payload}, up, at + kSlotPayloadOffset, 10 + idx).ok());
    ASSERT_TRUE(ep->Write({r, 0, sizeof(SlotHeader) + target.size()}, up, at, 20 + idx, MakeSlotImmediate(relayRoute, idx)).ok());
  };
  put(rA, slotA, 0, 0, 500, 1000, 0);                          // bytes [0, 500) of a 1000-byte Write
  put(rB, slotB, 1, 500, 700, 1200, kSlotLast | kSlotHasImm);  // ... now "of 1200 bytes"
  Control err;
  ASSERT_TRUE(pumpUntil([&] { return record(ControlKind::kError, &err); }));
  EXPECT_EQ(err.b, static_cast<uint64_t>(FabricErrc::kMalformed));
  EXPECT_EQ(err.a, 4u) << "the error names the op";
  const std::string text(err.body.begin(), err.body.end());
  EXPECT_NE(text.find("disagrees with its write"), std::string::npos) << text;
  ASSERT_TRUE(pumpUntil([&] { return fwd_->stats().routesFailed == 1; }));
  EXPECT_EQ(mem_[500], 0) << "the chunk that disagrees was carried";
  EXPECT_EQ(mem_[1199], 0);
  for (const Event& e : dstEv_) EXPECT_NE(e.kind, EventKind::kImmediate) << "the target saw an immediate";
  ep.reset();
  w.reset();
  for (const Region* r : {rRet, rA, rB}) EXPECT_TRUE(srcD_->Deregister(r).ok());
}

// A source that goes away without closing its route, with a slot under way (a comm
// closed at the end of a job with its close notice still in flight drops its leg at
// once; a killed rank alike), leaves the relay a route to drop when the credit for
// that slot cannot go back: counted closed, not failed, as no error went to anyone
// (CableSetIdleTest counted such a teardown as a failure under load). A route that
// sent its source an error stays a failure (the test above, fabric.frelay.relay-suite).
TEST_F(RelayPolicy, ARouteWhoseSourceWentAwayMidSlotIsClosedNotFailed) {
  Build(Short(), Short());
  const RelayOptions o = Short();
  std::unique_ptr<Worker> w;
  ASSERT_TRUE(srcD_->CreateWorker(&w).ok());
  std::vector<uint8_t> ret(o.returnSlots * o.slotBytes, 0), slot(1024, 0);
  const Region *rRet = nullptr, *rSlot = nullptr;
  ASSERT_TRUE(srcD_->Register(ret.data(), ret.size(), kAccessLocal | kAccessRemoteWrite, MemoryKind::kHost, &rRet).ok());
  ASSERT_TRUE(srcD_->Register(slot.data(), slot.size(), kAccessLocal, MemoryKind::kHost, &rSlot).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_NO_FATAL_FAILURE(SendRouteOpen(w.get(), o, rRet, 5, &ep));
  std::vector<Event> wEv;
  Control ok;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool opened = false;
  while (!opened && std::chrono::steady_clock::now() < deadline) {
    w->Progress(&wEv);
    fwd_->Progress();
    for (const Event& e : wEv) {
      if (e.kind == EventKind::kRecord && DecodeControl(e.record, &ok).ok() && ok.kind == ControlKind::kOpenOk) opened = true;
    }
    wEv.clear();
  }
  ASSERT_TRUE(opened) << fwd_->lastRefusal();
  uint16_t kb = 0;
  ASSERT_GE(ok.body.size(), 2u);
  std::memcpy(&kb, ok.body.data(), 2);
  RemoteKey up;
  ASSERT_TRUE(RemoteKey::Unpack(std::span<const uint8_t>(ok.body.data() + 2, kb), &up).ok());
  // Slot 0: a 64-byte Write to the target, then its header with the immediate.
  const std::vector<uint8_t> target = region_->Key().Pack();
  SlotHeader h;
  h.kind = static_cast<uint8_t>(SlotKind::kWrite);
  h.flags = kSlotLast;
  h.payloadBytes = 64;
  h.opBytes = 64;
  h.addr = region_->base;
  ASSERT_TRUE(EncodeSlotHeader(h, target, slot.data()).ok());
  ASSERT_TRUE(ep->Write({rSlot, kSlotPayloadOffset, 64}, up, up.base + kSlotPayloadOffset, 10).ok());
  ASSERT_TRUE(ep->Write({rSlot, 0, sizeof(SlotHeader) + target.size()}, up, up.base, 11,
                        MakeSlotImmediate(static_cast<uint32_t>(ok.a), 0)).ok());
  // The relay takes the slot and posts it on; the target has not answered yet.
  while (fwd_->stats().slotsForwarded == 0 && std::chrono::steady_clock::now() < deadline) {
    w->Progress(&wEv);
    fwd_->Progress();
  }
  ASSERT_EQ(fwd_->stats().slotsForwarded, 1u);
  ep.reset();  // no Close record: the source's leg and its Worker go now
  w.reset();
  while (fwd_->stats().routesOpen > 0 && std::chrono::steady_clock::now() < deadline) {
    fwd_->Progress();
    dstW_->Progress(&dstEv_);
  }
  const ForwarderStats st = fwd_->stats();
  EXPECT_EQ(st.routesOpen, 0u) << "the relay never dropped the route";
  EXPECT_EQ(st.routesClosed, 1u);
  EXPECT_EQ(st.routesFailed, 0u) << fwd_->lastRefusal();
  for (const Region* r : {rRet, rSlot}) EXPECT_TRUE(srcD_->Deregister(r).ok());
}

TEST(RelayWire, ControlRecordsAndOpensFromPeersAreChecked) {
  Control c;
  c.kind = ControlKind::kCredit;
  c.route = 7;
  c.a = 9;
  std::vector<uint8_t> b = EncodeControl(c);
  Control d;
  ASSERT_TRUE(DecodeControl(b, &d).ok());
  EXPECT_EQ(d.a, 9u);
  EXPECT_EQ(DecodeControl(std::span<const uint8_t>(b.data(), b.size() - 1), &d).code(), Code::kInvalidArgument);
  b.push_back(0);  // a body where none belongs (and a size that does not match)
  EXPECT_EQ(DecodeControl(b, &d).code(), Code::kInvalidArgument);
  b.pop_back();
  b[5] = 99;  // unknown kind
  EXPECT_EQ(DecodeControl(b, &d).code(), Code::kInvalidArgument);

  RouteOpen o;
  o.slots = 8;
  o.slotBytes = 512 * 1024;
  o.returnSlots = 4;
  o.source = {1, 2, 3};
  o.target = {4, 5, 6};
  o.returnKey = RemoteKey{0x1000, 4 * 512 * 1024, 5, kAccessRemoteWrite, {}}.Pack();
  RouteOpen p;
  ASSERT_TRUE(DecodeRouteOpen(EncodeRouteOpen(o), &p).ok());
  EXPECT_EQ(p.target, o.target);
  RouteOpen bad = o;
  bad.returnKey = RemoteKey{0x1000, 512 * 1024, 5, kAccessRemoteWrite, {}}.Pack();  // ring smaller than its slots
  EXPECT_EQ(DecodeRouteOpen(EncodeRouteOpen(bad), &p).code(), Code::kInvalidArgument);
  bad = o;
  bad.slots = 0;
  EXPECT_EQ(DecodeRouteOpen(EncodeRouteOpen(bad), &p).code(), Code::kInvalidArgument);
  bad = o;
  bad.target.assign(kMaxAddressBytes + 1, 1);
  EXPECT_EQ(DecodeRouteOpen(EncodeRouteOpen(bad), &p).code(), Code::kInvalidArgument);
  std::vector<uint8_t> cut = EncodeRouteOpen(o);
  cut.pop_back();
  EXPECT_EQ(DecodeRouteOpen(cut, &p).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::fabric::relay
