// The fabric suite, sleeping: a Worker that offers WaitFd() and says Quiet() may be
// slept on until a peer's bytes come (what a relay host's Forwarder does), and the
// descriptor must then wake it, on the target (a Write with immediate) and on the
// initiator (its own op's completion). One body, run over every transport of
// FabricTransports(); skipped where the Worker offers no descriptor (fake, relayed).
#include <poll.h>

#include <chrono>

#include "proxy/fabric/quiet_wait.h"
#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

class FabricWait : public FabricTest {
 protected:
  /// Registers src_ (4 KiB of pattern `seed`, at a_) and dst_ (4 KiB, at b_), sets the
  /// connection up on both sides with a first 64-byte Write (cookie 1) and takes its
  /// completion; b_'s events are cleared.
  void FirstWrite(uint64_t seed) {
    FillPattern(src_.data(), src_.size(), seed);
    rs_ = Reg(a_, src_.data(), src_.size(), kAccessLocal);
    rd_ = Reg(b_, dst_.data(), dst_.size(), kAccessRemoteWrite);
    ASSERT_TRUE(rs_ && rd_);
    ASSERT_TRUE(ep_->Write({rs_, 0, 64}, Exchange(rd_), rd_->base, 1).ok());
    ASSERT_EQ(Wait(1).kind, EventKind::kDone);
    b_.events.clear();
  }
  void TearDown() override {
    if (rs_ != nullptr) {
      EXPECT_TRUE(a_.domain->Deregister(rs_).ok());
    }
    if (rd_ != nullptr) {
      EXPECT_TRUE(b_.domain->Deregister(rd_).ok());
    }
    FabricTest::TearDown();
  }
  Guarded src_{4096}, dst_{4096};
  const Region* rs_ = nullptr;
  const Region* rd_ = nullptr;
};

/// Progresses `side` until its Worker says Quiet() (which may take a call to arm and
/// a Progress after it), at most `ms`: fabric::ProgressUntilQuiet, which the tiers'
/// bring-up uses. True when it did.
bool ProgressUntilQuiet(Side& side, int ms) {
  return fabric::ProgressUntilQuiet(*side.worker, std::chrono::steady_clock::now() + std::chrono::milliseconds(ms),
                                    &side.events);
}

/// True when `fd` polls readable within `ms`; `other`, when given, is progressed
/// meanwhile (its bytes may need its Progress), the side of `fd` never.
bool Readable(int fd, Side* other, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (other != nullptr) other->worker->Progress(&other->events);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1) == 1) return true;
  }
  return false;
}

TEST_P(FabricWait, AQuietWorkerIsWokenByAnImmediateAndByItsOwnCompletion) {
  if (!Has(kCapWrite) || !Has(kCapWriteImm)) GTEST_SKIP() << "no Write with immediate";
  if (a_.worker->WaitFd() < 0 || b_.worker->WaitFd() < 0) GTEST_SKIP() << "the Worker offers no descriptor";
  FirstWrite(5);

  ASSERT_TRUE(ProgressUntilQuiet(b_, 10000)) << "the target never said Quiet";
  ASSERT_TRUE(ProgressUntilQuiet(a_, 10000)) << "the initiator never said Quiet";
  pollfd quiet[2] = {{a_.worker->WaitFd(), POLLIN, 0}, {b_.worker->WaitFd(), POLLIN, 0}};
  EXPECT_EQ(::poll(quiet, 2, 0), 0) << "nothing came, yet a descriptor is readable";

  ASSERT_TRUE(ep_->Write({rs_, 0, src_.size()}, Exchange(rd_), rd_->base, 2, 0x5eed).ok());
  // Whatever the Write needs the initiator's Progress for (TCP: its frames) is done
  // once it says Quiet again; its completion needs the target (TCP: an ack), or it
  // comes by itself and wakes it (verbs: its CQ), so it cannot be taken here.
  if (!a_.worker->Quiet()) {
    ASSERT_TRUE(ProgressUntilQuiet(a_, 10000)) << "the initiator never said Quiet";
  }
  // The immediate wakes the target, which nobody progresses.
  EXPECT_TRUE(Readable(b_.worker->WaitFd(), nullptr, 10000)) << "the target was not woken";
  // The initiator's own completion wakes it (the target progressed: TCP's ack).
  EXPECT_TRUE(Readable(a_.worker->WaitFd(), &b_, 10000)) << "the initiator was not woken";
  bool got = false;
  ASSERT_TRUE(PumpUntil([&] {
    for (const Event& e : b_.events) got = got || (e.kind == EventKind::kImmediate && e.value == 0x5eed);
    return got;
  }));
  EXPECT_EQ(FirstMismatch(dst_.data(), dst_.size(), 5), -1) << "the data is there when the immediate is";
  EXPECT_EQ(Wait(2).kind, EventKind::kDone);
}

// SleepUntilInput (quiet_wait.h), what the storage tiers' servers sleep in: it returns
// at once, not sleeping, for a Worker with no descriptor; for a Quiet one it sleeps its
// whole bound while nothing comes, and until the peer's Write with immediate comes, well before its 60 s bound (a missed
// wake-up shows as the elapsed time, not as a slow test that passes).
TEST_P(FabricWait, SleepUntilInputSleepsOnlyOnADescriptorAndWakesOnAPeersWrite) {
  if (b_.worker->WaitFd() < 0) {
    EXPECT_EQ(SleepUntilInput(*b_.worker, std::chrono::seconds(60)), QuietWait::kCannotSleep);
    return;
  }
  if (!Has(kCapWrite) || !Has(kCapWriteImm)) GTEST_SKIP() << "no Write with immediate";
  FirstWrite(9);
  ASSERT_TRUE(ProgressUntilQuiet(b_, 10000)) << "the target never said Quiet";
  // Nothing comes: it sleeps the whole bound (poll timed out), not returning at once.
  EXPECT_EQ(SleepUntilInput(*b_.worker, std::chrono::milliseconds(50)), QuietWait::kTimedOut);
  ASSERT_TRUE(ProgressUntilQuiet(b_, 10000)) << "the target never said Quiet";
  ASSERT_TRUE(ep_->Write({rs_, 0, src_.size()}, Exchange(rd_), rd_->base, 2, 0x51ee).ok());
  if (!a_.worker->Quiet()) {
    ASSERT_TRUE(ProgressUntilQuiet(a_, 10000)) << "the initiator never said Quiet";
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool got = false;
  while (!got && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    (void)SleepUntilInput(*b_.worker, std::chrono::seconds(60));
    b_.worker->Progress(&b_.events);
    for (const Event& e : b_.events) got = got || (e.kind == EventKind::kImmediate && e.value == 0x51ee);
  }
  EXPECT_TRUE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30)) << "slept through the peer's Write";
  EXPECT_EQ(FirstMismatch(dst_.data(), dst_.size(), 9), -1);
  EXPECT_EQ(Wait(2).kind, EventKind::kDone);
}

INSTANTIATE_TEST_SUITE_P(Transports, FabricWait, ::testing::ValuesIn(FabricTransports()), CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
