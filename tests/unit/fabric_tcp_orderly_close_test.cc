// A fabric TCP Endpoint whose peer closes while nothing is outstanding (the other
// rank finished and tore its Worker down first) is an orderly end, not a fault: it
// is logged at INFO, not WARN. railyard-perf -np 2 used to end a clean run with
// "NCCL WARN fabric PEER_CLOSED: ... the peer closed the connection" now and then.
// With an operation outstanding the same close is still a WARN (it loses work).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "tests/unit/log_capture.h"

namespace railyard::fabric {
namespace {

struct Pair {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<Worker> a, b;
  std::unique_ptr<Endpoint> ab;
};

void MakePair(Pair* p) {
  tcp::TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = 10000;
  ASSERT_TRUE(tcp::CreateTcpDomain(o, &p->domain).ok());
  ASSERT_TRUE(p->domain->CreateWorker(&p->a).ok());
  ASSERT_TRUE(p->domain->CreateWorker(&p->b).ok());
  ASSERT_TRUE(p->a->Connect(p->b->Address(), &p->ab).ok());
  // One record each way round establishes the connection and completes.
  const std::vector<uint8_t> rec = {1, 2, 3};
  ASSERT_TRUE(p->ab->Send(rec, 7).ok());
  bool sent = false, arrived = false;
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(sent && arrived) && std::chrono::steady_clock::now() < deadline) {
    events.clear();
    p->a->Progress(&events);
    for (const Event& e : events) sent = sent || (e.kind == EventKind::kDone && e.cookie == 7);
    events.clear();
    p->b->Progress(&events);
    for (const Event& e : events) arrived = arrived || e.kind == EventKind::kRecord;
  }
  ASSERT_TRUE(sent && arrived);
  ASSERT_EQ(p->ab->Outstanding(), 0u);
}

/// Progresses `p.a` until its Endpoint has failed (or 20 s).
void WaitFailed(Pair* p) {
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p->ab->status().ok() && std::chrono::steady_clock::now() < deadline) {
    events.clear();
    p->a->Progress(&events);
  }
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& what) {
  for (const std::string& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(FabricTcpOrderlyClose, PeerClosingWithNothingOutstandingIsInfoNotWarn) {
  Pair p;
  MakePair(&p);
  test_support::LogCapture capture;
  p.b.reset();  // the peer tears its Worker down: its sockets close
  WaitFailed(&p);
  ASSERT_FALSE(p.ab->status().ok());
  EXPECT_FALSE(AnyContains(capture.At(log::Level::kWarn), "PEER_CLOSED")) << "an orderly close was a WARN";
  EXPECT_TRUE(AnyContains(capture.At(log::Level::kInfo), "PEER_CLOSED"));
}

TEST(FabricTcpOrderlyClose, PeerClosingWithARecordOutstandingIsStillAWarn) {
  Pair p;
  MakePair(&p);
  test_support::LogCapture capture;
  // Stop the peer first, then queue a record it will never take.
  p.b.reset();
  const std::vector<uint8_t> rec(64 << 10, 5);
  (void)p.ab->Send(rec, 9);
  WaitFailed(&p);
  ASSERT_FALSE(p.ab->status().ok());
  EXPECT_TRUE(AnyContains(capture.At(log::Level::kWarn), "PEER_CLOSED") ||
              AnyContains(capture.At(log::Level::kWarn), "TIMEOUT"));
}

}  // namespace
}  // namespace railyard::fabric
