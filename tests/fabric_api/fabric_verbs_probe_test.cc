// The verbs transport's liveness probes. A connection's bootstrap socket watches the
// peer's host with TCP keepalive; when that keepalive times out while RDMA
// completions still come (a saturated link, not a dead peer: the verdict is
// outvoted), the socket is gone and, before the probes, an idle connection no longer
// noticed a peer that died afterwards. Now an idle Endpoint posts a zero-byte RDMA
// Write and an idle target re-posts its credit write: a live peer's HCA answers,
// a killed peer's does not, and the connection fails with an error naming the probe.
// The soft-RoCE lane cannot starve a keepalive on demand, so the tests stop the
// socket watch with VerbsWorker::ForgetBootstrapsForTesting. RDMA ports needed (the
// soft-RoCE lane); skipped elsewhere.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/verbs/verbs_worker.h"
#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::verbs {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

/// RAILYARD_TIMEOUT_MS of both sides: an idle connection probes every half of it.
constexpr int kTimeoutMs = 2000;

struct Side {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<Worker> worker;
  std::vector<Event> events;
};

/// Makes a verbs Domain and Worker; false (skip) where this host has no RDMA port.
bool MakeSide(Side* s) {
  testing::Knobs k;
  k.timeoutMs = kTimeoutMs;
  const Status st = testing::MakeVerbsDomain(k, &s->domain);
  if (st.code() == Code::kInvalidUsage) return false;
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return false;
  const Status w = s->domain->CreateWorker(&s->worker);
  EXPECT_TRUE(w.ok()) << w.message();
  return w.ok();
}

/// Progresses `s` for `span`; returns the error events it saw.
std::vector<Event> ProgressFor(Side& s, Ms span) {
  std::vector<Event> errors;
  const auto until = Clock::now() + span;
  while (Clock::now() < until) {
    s.events.clear();
    s.worker->Progress(&s.events);
    for (const Event& e : s.events) {
      if (e.kind == EventKind::kError) errors.push_back(e);
    }
  }
  return errors;
}

/// Kills and reaps `pid`.
void Kill(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

class VerbsProbe : public ::testing::TestWithParam<std::string> {};

TEST_P(VerbsProbe, AnIdleEndpointNoticesThatItsPeerWasKilled) {
  Side a;
  if (!MakeSide(&a)) GTEST_SKIP() << "no usable RDMA port on this host";
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The peer: its own Domain (the lane's other host) and Worker, progressed until killed.
    close(pipefd[0]);
    Side t;
    if (!MakeSide(&t)) _exit(10);
    const std::vector<uint8_t> address = t.worker->Address();
    const uint32_t n = static_cast<uint32_t>(address.size());
    if (write(pipefd[1], &n, sizeof n) != sizeof n || write(pipefd[1], address.data(), n) != n) _exit(11);
    close(pipefd[1]);
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      t.events.clear();
      t.worker->Progress(&t.events);
    }
    _exit(0);
  }
  close(pipefd[1]);
  uint32_t n = 0;
  ASSERT_EQ(read(pipefd[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
  ASSERT_LT(n, 4096u);
  std::vector<uint8_t> address(n);
  ASSERT_EQ(read(pipefd[0], address.data(), n), static_cast<ssize_t>(n));
  close(pipefd[0]);

  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a.worker->Connect(address, &ep).ok());
  ASSERT_TRUE(ep->Send(std::vector<uint8_t>{1, 2, 3}, 7).ok());
  bool sent = false;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!sent && Clock::now() < deadline && ep->status().ok()) {
    a.events.clear();
    a.worker->Progress(&a.events);
    for (const Event& e : a.events) sent = sent || (e.kind == EventKind::kDone && e.cookie == 7u);
  }
  ASSERT_TRUE(sent) << "the record was not sent: " << ep->status().message();
  dynamic_cast<VerbsWorker&>(*a.worker).ForgetBootstrapsForTesting();

  // Idle for more than two probe intervals with the peer alive: its HCA answers
  // every probe (a zero-byte Write names no address or rkey) and nothing fails.
  const std::vector<Event> early = ProgressFor(a, Ms(2 * kTimeoutMs));
  for (const Event& e : early) ADD_FAILURE() << "error while the peer lives: " << e.error.ToString();
  ASSERT_TRUE(ep->status().ok()) << ep->status().message();

  // The peer is killed: its bootstrap socket closes, which nobody watches now; the
  // next probe goes unanswered and the idle Endpoint fails.
  Kill(pid);
  const auto failBy = Clock::now() + std::chrono::seconds(60);
  while (ep->status().ok() && Clock::now() < failBy) {
    a.events.clear();
    a.worker->Progress(&a.events);
  }
  ASSERT_FALSE(ep->status().ok()) << "an idle Endpoint never noticed that its peer was killed";
  const std::string text = ep->status().message();
  EXPECT_NE(text.find("liveness probe"), std::string::npos) << text;
  EXPECT_NE(text.find("TIMEOUT"), std::string::npos) << text;
  ep.reset();
}

TEST_P(VerbsProbe, AnIdleTargetNoticesThatItsInitiatorWasKilled) {
  Side t;
  if (!MakeSide(&t)) GTEST_SKIP() << "no usable RDMA port on this host";
  const std::vector<uint8_t> address = t.worker->Address();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The initiator: sends one record, then stays idle until killed.
    Side a;
    if (!MakeSide(&a)) _exit(10);
    std::unique_ptr<Endpoint> ep;
    if (!a.worker->Connect(address, &ep).ok() || !ep->Send(std::vector<uint8_t>{9}, 1).ok()) _exit(11);
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline && ep->status().ok()) {
      a.events.clear();
      a.worker->Progress(&a.events);
    }
    _exit(12);
  }
  bool arrived = false;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!arrived && Clock::now() < deadline) {
    t.events.clear();
    t.worker->Progress(&t.events);
    for (const Event& e : t.events) {
      ASSERT_NE(e.kind, EventKind::kError) << e.error.ToString();
      arrived = arrived || e.kind == EventKind::kRecord;
    }
  }
  if (!arrived) Kill(pid);
  ASSERT_TRUE(arrived) << "the initiator's record never arrived";
  dynamic_cast<VerbsWorker&>(*t.worker).ForgetBootstrapsForTesting();

  const std::vector<Event> early = ProgressFor(t, Ms(2 * kTimeoutMs));
  for (const Event& e : early) ADD_FAILURE() << "error while the initiator lives: " << e.error.ToString();

  Kill(pid);
  std::vector<Event> errors;
  const auto failBy = Clock::now() + std::chrono::seconds(60);
  while (errors.empty() && Clock::now() < failBy) errors = ProgressFor(t, Ms(100));
  ASSERT_FALSE(errors.empty()) << "an idle target never noticed that its initiator was killed";
  const FabricError& e = errors.front().error;
  EXPECT_EQ(e.errc, FabricErrc::kTimeout) << e.ToString();
  EXPECT_EQ(errors.front().op, OpType::kNone);
  EXPECT_EQ(e.site.rail, 0) << e.ToString();
}

INSTANTIATE_TEST_SUITE_P(Transports, VerbsProbe, ::testing::Values(std::string("verbs")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace railyard::fabric::verbs
