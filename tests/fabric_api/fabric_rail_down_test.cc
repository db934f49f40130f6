// A rail taken down mid-stripe (issue 10, Faults), over verbs in the soft-RoCE lane
// (tests/lanes/rxe, topology 2x2: A on h0's rails rxe_h0r0 + rxe_h0r1, B on h1's):
// A streams striped Writes to B, and once a few have completed the netdev under A's
// rail 1 (h0r1) goes down. The stream ends in error events naming the device, the
// rail, the QP and the sequence, within the Domain's timeout; every op posted gets
// exactly one event; the Endpoint stays failed. Only the "verbs" case is instantiated,
// and it runs only inside the lane (it takes a link of the machine down): elsewhere
// the test skips. ctest label verbs, run by tests/lanes/run-verbs.sh stage 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {
namespace {

using Ms = std::chrono::milliseconds;

/// The netdev under the initiator's rail 1 in the lane's 2x2 topology.
constexpr const char* kCutNetdev = "h0r1";

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

class FabricRailDown : public FabricTest {
 protected:
  FabricRailDown() { knobs_.timeoutMs = 8000; }
  void SetUp() override {
    if (std::getenv("RXE_LANE_HOSTS") == nullptr) {
      GTEST_SKIP() << "takes a rail's link down: only inside the soft-RoCE lane (tests/lanes/rxe)";
    }
    FabricTest::SetUp();
  }
  void TearDown() override {
    FabricTest::TearDown();
    if (!cut_) return;
    // Up again, and wait (bounded) until rxe reports the port active, so the lane's
    // next tests find both rails as they were.
    (void)Sh(std::string("ip link set ") + kCutNetdev + " up");
    const std::string state = "/sys/class/infiniband/rxe_" + std::string(kCutNetdev) + "/ports/1/state";
    bool active = false;
    for (int i = 0; i < 200 && !active; ++i) {
      if (FILE* f = std::fopen(state.c_str(), "r")) {
        char line[64] = {};
        active = std::fgets(line, sizeof line, f) != nullptr && std::strstr(line, "ACTIVE") != nullptr;
        std::fclose(f);
      }
      if (!active) std::this_thread::sleep_for(Ms(50));  // polling the port's state, not a barrier
    }
    EXPECT_TRUE(active) << state << " did not come back ACTIVE within 10 s";
  }
  bool cut_ = false;
};

TEST_P(FabricRailDown, AStripedStreamWhoseRailGoesDownEndsInNamedErrors) {
  ASSERT_TRUE(Has(kCapStriping)) << "the verbs Domain over two rails stripes";
  ASSERT_EQ(a_.domain->rails().size(), 2u) << "the lane's 2x2 topology gives each side two rails";
  const size_t n = 4u << 20;  // 16 chunks of 256 KiB (the case's stripe chunk) over both rails
  static std::vector<uint8_t> src(n, 0x5A), dst(4 * n, 0);
  const Region* rs = Reg(a_, src.data(), src.size(), kAccessLocal);
  const Region* rd = Reg(b_, dst.data(), dst.size(), kAccessRemoteWrite);
  ASSERT_TRUE(rs && rd);
  RemoteKey key;
  ASSERT_TRUE(RemoteKey::Unpack(rd->Key().Pack(), &key).ok());

  std::map<uint64_t, int> events;  // cookie -> events seen (each op must get exactly one)
  uint64_t next = 0;
  int completed = 0;
  std::vector<std::string> errors;  // every error event's text, in order
  bool failed = false;
  std::chrono::steady_clock::time_point cutAt;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  // Post while the Endpoint takes ops (4 Writes in flight), cut the rail once 3 have
  // completed (the stream is running on both rails), then drain every outstanding op.
  while (std::chrono::steady_clock::now() < deadline) {
    while (!failed && ep_->status().ok() && ep_->Outstanding() < 4) {
      ASSERT_TRUE(ep_->Write({rs, 0, n}, key, key.base + (next % 4) * n, next).ok());
      events[next++] = 0;
    }
    for (Side* s : {&a_, &b_}) {
      s->events.clear();
      s->worker->Progress(&s->events);
    }
    for (const Event& e : a_.events) {
      if (e.op != OpType::kWrite) continue;
      ASSERT_TRUE(events.count(e.cookie)) << "an event for cookie " << e.cookie << " that was never posted";
      ++events[e.cookie];
      if (e.kind == EventKind::kDone) ++completed;
      if (e.kind == EventKind::kError) {
        if (!failed) {
          EXPECT_TRUE(cut_) << "an error before the rail went down: " << e.error.ToString();
        }
        failed = true;
        errors.push_back(e.error.ToString());
      }
    }
    if (!cut_ && completed >= 3) {
      ASSERT_EQ(Sh(std::string("ip link set ") + kCutNetdev + " down"), 0);
      cut_ = true;
      cutAt = std::chrono::steady_clock::now();
    }
    if (failed && ep_->Outstanding() == 0) break;
  }
  const auto took = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - cutAt).count();
  ASSERT_TRUE(cut_) << "fewer than 3 Writes completed before the deadline";
  ASSERT_TRUE(failed) << "no error event within 90 s of " << kCutNetdev << " going down (" << completed
                      << " Writes completed)";
  // The cause is named: the device (either end of the cut link may report first),
  // rail 1, the QP and the sequence of the op it hit. The other ops' events say the
  // Endpoint failed (fail_outstanding.h); each names its own sequence.
  std::string cause;
  for (const std::string& t : errors) {
    if ((t.find("rxe_h0r1") != std::string::npos || t.find("rxe_h1r1") != std::string::npos) &&
        t.find(" rail 1") != std::string::npos) {
      cause = t;
      break;
    }
  }
  std::printf("[ fabric ] rail down: errors done %lld ms after the cut (timeout %d ms), %d Writes done, %zu "
              "errors; the cause: %s\n",
              static_cast<long long>(took), knobs_.timeoutMs, completed, errors.size(), cause.c_str());
  ASSERT_FALSE(cause.empty()) << "no error names rxe_h0r1/rxe_h1r1 and rail 1; the first: " << errors.front();
  EXPECT_NE(cause.find(" seq "), std::string::npos) << cause;
  EXPECT_NE(cause.find("QP "), std::string::npos) << cause;
  for (const std::string& t : errors) EXPECT_NE(t.find(" seq "), std::string::npos) << t;
  EXPECT_LT(took, knobs_.timeoutMs + 30000) << "retries (rxe's retry count x timeout) plus the Domain's timeout";
  // Every op posted got exactly one event; none is left outstanding; the Endpoint
  // stays failed and takes nothing more.
  EXPECT_EQ(ep_->Outstanding(), 0u);
  for (const auto& [cookie, count] : events) EXPECT_EQ(count, 1) << "cookie " << cookie;
  EXPECT_FALSE(ep_->status().ok());
  EXPECT_FALSE(ep_->Write({rs, 0, 8}, key, key.base, 999).ok()) << "the failed Endpoint took a new op";
}

std::vector<TransportCase> VerbsOnly() {
  std::vector<TransportCase> out;
  for (TransportCase& c : FabricTransports()) {
    if (c.name == "verbs") out.push_back(std::move(c));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Transports, FabricRailDown, ::testing::ValuesIn(VerbsOnly()), CaseName);

}  // namespace
}  // namespace railyard::fabric::testing
