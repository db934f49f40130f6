// The fabric suite, remote-access errors: out-of-range offsets, wrong keys, writes
// into a read-only region, reads of a write-only one, atomics without the right, a
// stale key, a region deregistered mid-Write and mid-Read. Each ends in a named
// error event, the Endpoint stays failed, and the target's memory and the guard
// bytes around it are untouched. One body per test, run over every transport.
#include <algorithm>

#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

class FabricErrors : public FabricTest {
 protected:
  /// Posts `post` (which must post exactly one op with cookie 1) and expects it to
  /// fail with `precise`; then checks the Endpoint stays failed.
  void ExpectRefused(const std::function<Status()>& post, FabricErrc precise) {
    ASSERT_TRUE(post().ok());
    Event e = Wait(1);
    ExpectRemoteError(*a_.domain, e, precise);
    EXPECT_FALSE(ep_->status().ok());
    EXPECT_EQ(ep_->Outstanding(), 0u);
    EXPECT_FALSE(post().ok()) << "a failed Endpoint accepted a new op";
    // The message names the op's sequence and the peer.
    EXPECT_NE(e.error.ToString().find("seq 0"), std::string::npos) << e.error.ToString();
    EXPECT_NE(e.error.ToString().find("peer"), std::string::npos) << e.error.ToString();
  }
  static bool AllZero(const uint8_t* p, size_t n) {
    return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
  }
};

TEST_P(FabricErrors, WritePastTheEndIsRefusedAndNothingLands) {
  Guarded src(4096), dst(4096);
  FillPattern(src.data(), 4096, 1);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteWrite);
  ExpectRefused([&] { return ep_->Write({rs, 0, 2}, rd->Key(), rd->base + 4095, 1); }, FabricErrc::kOutOfBounds);
  EXPECT_TRUE(AllZero(dst.data(), 4096));
  EXPECT_TRUE(dst.GuardsIntact());
}

// A bad Write queued behind striped Writes with immediates: over verbs it is checked
// while the head waits for its immediate (VerbsEndpoint::Lookahead posts the Writes
// behind it), and its failure fails the Endpoint there (a review found the lookahead
// reading the failed op after Fail had freed it). The bad Write fails by name, and
// nothing lands past the region.
TEST_P(FabricErrors, AWriteOutOfBoundsBehindWritesWithImmediatesFailsByName) {
  if (!Has(kCapWriteImm)) GTEST_SKIP() << "no Write with immediate";
  const size_t each = (256u << 10) + 77, writes = 4;
  std::vector<uint8_t> src(each * writes + 16, 0x3c);
  Guarded dst(each * writes);
  const Region* rs = Reg(a_, src.data(), src.size(), kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), dst.size(), kAccessRemoteWrite);
  for (size_t i = 0; i < writes; ++i) {
    ASSERT_TRUE(ep_->Write({rs, each * i, each}, rd->Key(), rd->base + each * i, 10 + i, static_cast<uint32_t>(i)).ok());
  }
  ASSERT_TRUE(ep_->Write({rs, 0, 16}, rd->Key(), rd->base + dst.size() - 8, 99).ok());
  const Event e = Wait(99);
  ExpectRemoteError(*a_.domain, e, FabricErrc::kOutOfBounds);
  EXPECT_FALSE(ep_->status().ok());
  EXPECT_TRUE(dst.GuardsIntact()) << "bytes landed past the region";
}

TEST_P(FabricErrors, WriteBeforeTheStartIsRefused) {
  Guarded src(4096), dst(4096);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteWrite);
  ExpectRefused([&] { return ep_->Write({rs, 0, 16}, rd->Key(), rd->base - 8, 1); }, FabricErrc::kOutOfBounds);
  EXPECT_TRUE(AllZero(dst.data(), 4096));
  EXPECT_TRUE(dst.GuardsIntact());
}

TEST_P(FabricErrors, HugeStripedWriteOutsideTheRegionIsRefusedBeforeAnyChunkLands) {
  // 8 MiB (striped over every rail) into a 1 MiB region: the op's whole range is
  // checked on its first chunk, so not even the chunks that would fit land.
  const size_t n = 8u << 20;
  std::vector<uint8_t> src(n, 0x77);
  Guarded dst(1u << 20);
  const Region* rs = Reg(a_, src.data(), n, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), dst.size(), kAccessRemoteWrite);
  ExpectRefused([&] { return ep_->Write({rs, 0, n}, rd->Key(), rd->base, 1); }, FabricErrc::kOutOfBounds);
  EXPECT_TRUE(AllZero(dst.data(), dst.size()));
  EXPECT_TRUE(dst.GuardsIntact());
}

TEST_P(FabricErrors, ReadPastTheEndIsRefused) {
  Guarded remote(4096), local(4096);
  const Region* rr = Reg(b_, remote.data(), 4096, kAccessRemoteRead);
  const Region* rl = Reg(a_, local.data(), 4096, kAccessLocal);
  ExpectRefused([&] { return ep_->Read({rl, 0, 4096}, rr->Key(), rr->base + 1, 1); }, FabricErrc::kOutOfBounds);
  EXPECT_TRUE(local.GuardsIntact());
}

TEST_P(FabricErrors, WrongKeyIsRefused) {
  Guarded src(4096), dst(4096);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteWrite);
  RemoteKey k = rd->Key();
  k.softwareKey ^= 0x10;                    // what the TCP target checks
  for (uint32_t& r : k.railRkeys) r ^= 0x10;  // what an HCA checks (verbs)
  FillPattern(src.data(), 4096, 2);
  ExpectRefused([&] { return ep_->Write({rs, 0, 4096}, k, rd->base, 1); }, FabricErrc::kBadKey);
  EXPECT_TRUE(AllZero(dst.data(), 4096));
  EXPECT_TRUE(dst.GuardsIntact());
}

TEST_P(FabricErrors, KeyOfADeregisteredRegionIsRefused) {
  Guarded src(4096), dst(4096);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteWrite);
  const RemoteKey k = rd->Key();
  const uint64_t base = rd->base;
  ASSERT_TRUE(b_.domain->Deregister(rd).ok());
  FillPattern(src.data(), 4096, 3);
  ExpectRefused([&] { return ep_->Write({rs, 0, 4096}, k, base, 1); }, FabricErrc::kBadKey);
  EXPECT_TRUE(AllZero(dst.data(), 4096));
  EXPECT_TRUE(dst.GuardsIntact());
}

TEST_P(FabricErrors, WriteIntoAReadOnlyRegionIsRefused) {
  Guarded src(4096), dst(4096);
  FillPattern(src.data(), 4096, 4);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteRead);
  ExpectRefused([&] { return ep_->Write({rs, 0, 4096}, rd->Key(), rd->base, 1); }, FabricErrc::kAccessDenied);
  EXPECT_TRUE(AllZero(dst.data(), 4096));
  EXPECT_TRUE(dst.GuardsIntact());
}

TEST_P(FabricErrors, ReadOfAWriteOnlyRegionIsRefused) {
  Guarded remote(4096), local(4096);
  FillPattern(remote.data(), 4096, 5);
  const Region* rr = Reg(b_, remote.data(), 4096, kAccessRemoteWrite);
  const Region* rl = Reg(a_, local.data(), 4096, kAccessLocal);
  ExpectRefused([&] { return ep_->Read({rl, 0, 4096}, rr->Key(), rr->base, 1); }, FabricErrc::kAccessDenied);
  EXPECT_TRUE(AllZero(local.data(), 4096)) << "bytes of a region without remote read left the target";
}

TEST_P(FabricErrors, FetchAddWithoutTheAtomicRightIsRefused) {
  if (!Has(kCapFetchAdd)) GTEST_SKIP() << "no FetchAdd";
  Guarded mem(64);
  const Region* r = Reg(b_, mem.data(), 64, kAccessRemoteWrite | kAccessRemoteRead);
  ExpectRefused([&] { return ep_->FetchAdd(r->Key(), r->base, 1, 1); }, FabricErrc::kAccessDenied);
  EXPECT_TRUE(AllZero(mem.data(), 64));
}

TEST_P(FabricErrors, EveryOutstandingOpFailsWithTheEndpoint) {
  Guarded src(4096), dst(4096);
  const Region* rs = Reg(a_, src.data(), 4096, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), 4096, kAccessRemoteRead);  // read-only: the Writes are refused
  for (uint64_t c = 1; c <= 5; ++c) ASSERT_TRUE(ep_->Write({rs, 0, 64}, rd->Key(), rd->base, c).ok());
  ASSERT_TRUE(ep_->Fence(6).ok());
  ASSERT_TRUE(PumpUntil([&] { return a_.events.size() == 6; }));
  EXPECT_EQ(a_.events.size(), 6u);
  for (auto& e : a_.events) {
    EXPECT_EQ(e.kind, EventKind::kError);
    EXPECT_TRUE(IsRemoteAccess(e.error.errc) || e.error.errc == FabricErrc::kEndpointFailed) << e.error.ToString();
  }
  EXPECT_TRUE(AllZero(dst.data(), 4096));
}

// A region deregistered while a large Write is landing: nothing lands after the
// deregistration, the Write fails DEREGISTERED, guards intact. Needs a target whose
// CPU lands the bytes (the TCP emulation); over verbs a deregistered MR is an HCA
// matter (next session: its own test).
TEST_P(FabricErrors, RegionDeregisteredMidWriteTakesNoMoreBytes) {
  if (!Has(kCapTargetCpuChecks)) GTEST_SKIP() << "the target CPU does not land the bytes";
  const size_t n = 64u << 20;
  std::vector<uint8_t> src(n);
  FillPattern(src.data(), n, 6);
  Guarded dst(n);
  const Region* rs = Reg(a_, src.data(), n, kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), n, kAccessRemoteWrite);
  ASSERT_TRUE(ep_->Write({rs, 0, n}, rd->Key(), rd->base, 1).ok());
  // Run the target only until some, not all, bytes have landed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (b_.worker->stats().bytesLanded == 0 && std::chrono::steady_clock::now() < deadline) {
    a_.worker->Progress(&a_.events);
    b_.worker->Progress(&b_.events);
  }
  const uint64_t landed = b_.worker->stats().bytesLanded;
  ASSERT_GT(landed, 0u);
  ASSERT_LT(landed, n);
  ASSERT_TRUE(b_.domain->Deregister(rd).ok());
  const std::vector<uint8_t> snapshot(dst.data(), dst.data() + n);
  Event e = Wait(1);
  ExpectRemoteError(*a_.domain, e, FabricErrc::kDeregistered);
  EXPECT_TRUE(std::equal(snapshot.begin(), snapshot.end(), dst.data())) << "bytes landed after Deregister";
  EXPECT_TRUE(dst.GuardsIntact());
  EXPECT_LT(b_.worker->stats().bytesLanded, n);
}

TEST_P(FabricErrors, RegionDeregisteredMidReadSendsNoMoreBytes) {
  if (!Has(kCapTargetCpuChecks)) GTEST_SKIP() << "the target CPU does not serve the bytes";
  const size_t n = 64u << 20;
  std::vector<uint8_t> remote(n, 0x5A);
  Guarded local(n);
  const Region* rr = Reg(b_, remote.data(), n, kAccessRemoteRead);
  const Region* rl = Reg(a_, local.data(), n, kAccessLocal);
  ASSERT_TRUE(ep_->Read({rl, 0, n}, rr->Key(), rr->base, 1).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (b_.worker->stats().bytesServed == 0 && std::chrono::steady_clock::now() < deadline) {
    a_.worker->Progress(&a_.events);
    b_.worker->Progress(&b_.events);
  }
  const uint64_t served = b_.worker->stats().bytesServed;
  ASSERT_GT(served, 0u);
  ASSERT_LT(served, n);
  ASSERT_TRUE(b_.domain->Deregister(rr).ok());
  Event e = Wait(1);
  ExpectRemoteError(*a_.domain, e, FabricErrc::kDeregistered);
  // At most the chunks already being sent when it was deregistered left afterwards.
  size_t got = static_cast<size_t>(std::count(local.data(), local.data() + n, 0x5A));
  EXPECT_LT(got, n) << "every byte was read although the region was deregistered mid-read";
  EXPECT_TRUE(local.GuardsIntact());
}

TEST_P(FabricErrors, ConnectToAWorkerThatIsGoneFailsNamed) {
  Side gone;
  ASSERT_TRUE(MakeSide(&gone, knobs_));
  const std::vector<uint8_t> address = gone.worker->Address();
  gone.worker.reset();  // its listening sockets close
  // A refused verbs bootstrap dial is retried until the connection-setup deadline
  // (at least 20 s in this suite): A dials with a short one, so the test waits 2 s,
  // not 20, for the same refusal.
  Knobs quick = knobs_;
  quick.verbsConnectTimeoutMs = 2000;
  ep_.reset();
  a_.worker.reset();  // a Worker goes before its Domain
  a_.domain.reset();
  a_.events.clear();
  ASSERT_TRUE(MakeSide(&a_, quick));
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a_.worker->Connect(address, &ep).ok());
  ASSERT_TRUE(ep->Send(std::vector<uint8_t>{1}, 1).ok());
  Event e = Wait(1);
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_TRUE(e.error.errc == FabricErrc::kConnectFailed || e.error.errc == FabricErrc::kPeerClosed)
      << e.error.ToString();
  EXPECT_FALSE(ep->status().ok());
  // A malformed address is refused at Connect.
  std::vector<uint8_t> bad = address;
  bad[0] ^= 1;
  std::unique_ptr<Endpoint> none;
  EXPECT_EQ(a_.worker->Connect(bad, &none).code(), Code::kInvalidArgument);
  EXPECT_EQ(none, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Transports, FabricErrors, ::testing::ValuesIn(FabricTransports()),
                         CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
