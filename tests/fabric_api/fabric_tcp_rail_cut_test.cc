// One rail of a two-rail TCP connection cut mid-stream: the initiator's TIMEOUT names
// the cut rail. New-user trial: with the second of two rails cut (nftables), the error
// always named rail 0, the healthy one, and an operator went to look at the wrong
// cable. The stalled socket is the one whose bytes the peer never acknowledged
// (FrameSocket::UnackedBytes), whichever rail it is on.
//
// Both rails are on loopback (127.0.0.1 and 127.0.0.2) in a network namespace of the
// test's own child process, where nftables drops everything to 127.0.0.2 (root only;
// it skips otherwise).
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"

namespace railyard::fabric::tcp {
namespace {

constexpr int kSkip = 77;

/// The child's whole run: 0 when the TIMEOUT named rail 1 (device "cut"), else a
/// message on stderr and 1; kSkip when the namespace or nftables is missing.
int CutSecondRailAndReadTheError() {
  if (::unshare(CLONE_NEWNET) != 0) return kSkip;
  if (std::system("ip link set lo up") != 0) return kSkip;
  TcpOptions o;
  o.rails = {{"kept", "127.0.0.1", 10000}, {"cut", "127.0.0.2", 10000}};
  o.timeoutMs = 1000;
  o.stripe.thresholdBytes = 64 << 10;  // every Write below is striped over both rails
  o.stripe.chunkBytes = 64 << 10;
  TcpOptions target = o;
  target.timeoutMs = 60000;  // the initiator's TIMEOUT is the one under test: the target's own must not come first
  std::unique_ptr<Domain> a, b;
  std::unique_ptr<Worker> wa, wb;
  if (!CreateTcpDomain(o, &a).ok() || !CreateTcpDomain(target, &b).ok() || !a->CreateWorker(&wa).ok() ||
      !b->CreateWorker(&wb).ok()) {
    std::fprintf(stderr, "cannot make the two Domains\n");
    return 1;
  }
  constexpr size_t kBytes = 256 << 10;  // a rail's share fits its socket buffers: no frame stays queued
  std::vector<uint8_t> src(kBytes, 7), dst(kBytes);
  const Region *rs = nullptr, *rd = nullptr;
  if (!a->Register(src.data(), kBytes, kAccessLocal, MemoryKind::kHost, &rs).ok() ||
      !b->Register(dst.data(), kBytes, kAccessRemoteWrite, MemoryKind::kHost, &rd).ok()) {
    std::fprintf(stderr, "cannot register\n");
    return 1;
  }
  std::unique_ptr<Endpoint> ep;
  if (!wa->Connect(wb->Address(), &ep).ok()) {
    std::fprintf(stderr, "cannot connect\n");
    return 1;
  }
  const RemoteKey key = rd->Key();
  std::vector<Event> events;
  int done = 0;
  bool cut = false;
  std::string error;
  uint64_t cookie = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (error.empty() && std::chrono::steady_clock::now() < until) {
    // Two Writes in flight; the cut once two have landed (the stream runs on both rails).
    // Small Writes (4 chunks): the cut rail's bytes sit unacknowledged in its kernel
    // buffers, with nothing left queued above them (the trial's case).
    while (ep->Outstanding() < 2) {
      if (!ep->Write({rs, 0, kBytes}, key, key.base, ++cookie).ok()) break;
    }
    if (!cut && done >= 2) {
      if (std::system("nft add table inet railcut && nft add chain inet railcut out "
                      "'{ type filter hook output priority 0; }' && nft add rule inet railcut out ip daddr 127.0.0.2 drop") !=
          0) {
        return kSkip;
      }
      cut = true;
    }
    // The initiator's events only: the target's own TIMEOUT names the socket it caught
    // mid-frame, which would pass for the Endpoint's (review).
    events.clear();
    wa->Progress(&events);
    for (const Event& e : events) {
      if (e.kind == EventKind::kDone) ++done;
      if (e.kind == EventKind::kError && error.empty()) error = e.error.ToString();
    }
    events.clear();
    wb->Progress(&events);
  }
  std::fprintf(stderr, "after %d Writes: %s\n", done, error.c_str());
  if (!cut) return 1;
  if (error.find("TIMEOUT") == std::string::npos || error.find("device cut rail 1") == std::string::npos) {
    std::fprintf(stderr, "expected a TIMEOUT naming device cut, rail 1\n");
    return 1;
  }
  return 0;
}

TEST(TcpRailCut, TheTimeoutNamesTheCutRailNotTheFirst) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace and nftables";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(CutSecondRailAndReadTheError());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: status " << status;
  if (WEXITSTATUS(status) == kSkip) GTEST_SKIP() << "no network namespace or nftables here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's stderr above";
}

}  // namespace
}  // namespace railyard::fabric::tcp
