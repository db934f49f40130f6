// The TCP transport dials a refused connect again (proxy/fabric/tcp/tcp_dial.h): a
// peer whose listener comes up after the Endpoint was made (a relay host's railyardd
// still starting) is reached and the record posted meanwhile arrives; a peer that
// never listens fails with CONNECT_FAILED naming the refusals once the window passed;
// with no window (connectRetryMs 0) the first refusal fails the Endpoint.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "tests/common/free_port.h"

namespace railyard::fabric::tcp {
namespace {

using Clock = std::chrono::steady_clock;

struct Side {
  std::unique_ptr<Domain> domain;
  std::unique_ptr<Worker> worker;
  std::vector<Event> events;
};

void MakeSide(Side* s, uint16_t listenPort, int connectRetryMs) {
  TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = 20000;
  o.connectRetryMs = connectRetryMs;
  o.listenPort = listenPort;
  ASSERT_TRUE(CreateTcpDomain(o, &s->domain).ok());
  ASSERT_TRUE(s->domain->CreateWorker(&s->worker).ok());
}

/// Progresses `a` (and `b` when set) until `a` or `b` holds an event of `kind`, or 30 s.
const Event* Until(Side& a, Side* b, EventKind kind) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    a.worker->Progress(&a.events);
    if (b != nullptr) b->worker->Progress(&b->events);
    for (Side* s : {&a, b}) {
      if (s == nullptr) continue;
      for (const Event& e : s->events) {
        if (e.kind == kind) return &e;
      }
    }
  }
  return nullptr;
}

/// The packed address of a Worker that listened on a free port and is gone (nothing
/// listens there now); empty (test failed) when no port was free.
std::vector<uint8_t> GoneAddress() {
  const uint16_t port = test_support::FreePort();
  EXPECT_NE(port, 0);
  if (port == 0) return {};
  Side gone;
  MakeSide(&gone, port, 0);
  return gone.worker->Address();  // `gone` is destroyed on return: its listener closes
}

TEST(TcpRedial, APeerThatListensLateIsReachedAndTheRecordArrives) {
  const uint16_t port = test_support::FreePort();
  ASSERT_NE(port, 0);
  Side a;
  Side early;
  MakeSide(&a, 0, 10000);
  MakeSide(&early, port, 0);
  const std::vector<uint8_t> address = early.worker->Address();
  early.worker.reset();  // nothing listens on the port now
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a.worker->Connect(address, &ep).ok());
  const std::vector<uint8_t> record = {7, 1, 2, 3};
  ASSERT_TRUE(ep->Send(record, 42).ok());
  // Refused for a while: the Endpoint keeps dialing and has not failed.
  const auto until = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < until) a.worker->Progress(&a.events);
  for (const Event& e : a.events) EXPECT_NE(e.kind, EventKind::kError) << e.error.ToString();
  ASSERT_TRUE(ep->status().ok()) << ep->status().message();
  // The listener comes up on the same port (a Worker of a restarted peer).
  Side late;
  MakeSide(&late, port, 0);
  const Event* got = Until(a, &late, EventKind::kRecord);
  ASSERT_NE(got, nullptr) << "the record never arrived at the late listener";
  EXPECT_EQ(got->record, record);
  const Event* done = Until(a, &late, EventKind::kDone);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->cookie, 42u);
  EXPECT_TRUE(ep->status().ok()) << ep->status().message();
  ep.reset();
}

TEST(TcpRedial, APeerThatNeverListensFailsNamingTheRefusals) {
  Side a;
  MakeSide(&a, 0, 400);
  const std::vector<uint8_t> address = GoneAddress();
  ASSERT_FALSE(address.empty());
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a.worker->Connect(address, &ep).ok());
  ASSERT_TRUE(ep->Send(std::vector<uint8_t>{1}, 9).ok());
  const Event* e = Until(a, nullptr, EventKind::kError);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->error.errc, FabricErrc::kConnectFailed) << e->error.ToString();
  EXPECT_EQ(e->cookie, 9u);
  const std::string text = e->error.ToString();
  EXPECT_NE(text.find("Connection refused"), std::string::npos) << text;
  EXPECT_NE(text.find("refused "), std::string::npos) << text;
  EXPECT_NE(text.find("railyardd"), std::string::npos) << text;
  EXPECT_NE(text.find("rail 0"), std::string::npos) << text;
  EXPECT_FALSE(ep->status().ok());
}

TEST(TcpRedial, WithoutAWindowTheFirstRefusalFails) {
  Side a;
  MakeSide(&a, 0, 0);
  const std::vector<uint8_t> address = GoneAddress();
  ASSERT_FALSE(address.empty());
  std::unique_ptr<Endpoint> ep;
  // Loopback may refuse inside connect() itself: then Connect fails, naming it.
  const Status s = a.worker->Connect(address, &ep);
  if (!s.ok()) {
    EXPECT_NE(s.message().find("Connection refused"), std::string::npos) << s.message();
    return;
  }
  ASSERT_TRUE(ep->Send(std::vector<uint8_t>{1}, 5).ok());
  const Event* e = Until(a, nullptr, EventKind::kError);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->error.errc, FabricErrc::kConnectFailed) << e->error.ToString();
  EXPECT_EQ(e->error.ToString().find("times over"), std::string::npos) << e->error.ToString();
}

}  // namespace
}  // namespace railyard::fabric::tcp
