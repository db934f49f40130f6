// The verbs transport dials a refused bootstrap connect again until its setup
// deadline (RAILYARD_TIMEOUT_MS), as the TCP transport does (proxy/fabric/tcp/tcp_dial.h):
// a relay host's Forwarder opens its verbs port only once its RDMA ports are open,
// and a rank that dialed it first used to fail at once ("verbs bootstrap: connect:
// Connection refused"; soft-RoCE ring, verbs-ring.opposite_via_railyardd.fabric).
// BootstrapChannel is tested on any host (plain sockets on loopback); the Endpoint
// reaching a late Worker needs RDMA ports (the soft-RoCE lane; skipped elsewhere).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/verbs/verbs_bootstrap.h"
#include "proxy/socket.h"
#include "tests/common/free_port.h"
#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::verbs {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

const uint32_t kLoopback = htonl(INADDR_LOOPBACK);

/// A listening socket on 127.0.0.1:port (SO_REUSEADDR); invalid (test failed) if not.
proxy::Fd ListenOn(uint16_t port) {
  proxy::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = kLoopback;
  a.sin_port = htons(port);
  const bool ok = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd.get(), 4) == 0;
  EXPECT_TRUE(ok) << "listen on port " << port << ": " << proxy::ErrnoText(errno);
  return ok ? std::move(fd) : proxy::Fd();
}

/// Calls Connected until it is done, fails, or `limit` passed; returns its last status.
Status ConnectedWithin(BootstrapChannel* c, Ms limit, bool* done) {
  const auto until = Clock::now() + limit;
  Status s;
  *done = false;
  while (s.ok() && !*done && Clock::now() < until) s = c->Connected(done);
  return s;
}

TEST(VerbsBootstrapRedial, ALateListenerIsReachedWithinTheWindow) {
  const uint16_t port = test_support::FreePort();
  ASSERT_NE(port, 0);
  BootstrapChannel c;
  ASSERT_TRUE(c.Connect(kLoopback, port, Clock::now() + std::chrono::seconds(20)).ok());
  // Nothing listens: refused, and refused again, without failing.
  bool done = false;
  Status s = ConnectedWithin(&c, Ms(300), &done);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(done);
  // The listener comes up (the Forwarder opened its ports): the next redial connects.
  proxy::Fd listener = ListenOn(port);
  ASSERT_TRUE(listener.valid());
  s = ConnectedWithin(&c, Ms(15000), &done);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(done);
  const proxy::Fd accepted(::accept(listener.get(), nullptr, nullptr));
  EXPECT_TRUE(accepted.valid()) << proxy::ErrnoText(errno);
}

TEST(VerbsBootstrapRedial, PastTheWindowTheRefusalsAreCountedAndNamed) {
  const uint16_t port = test_support::FreePort();
  ASSERT_NE(port, 0);
  BootstrapChannel c;
  const auto started = Clock::now();
  ASSERT_TRUE(c.Connect(kLoopback, port, started + Ms(400)).ok());
  bool done = false;
  const Status s = ConnectedWithin(&c, Ms(15000), &done);
  ASSERT_FALSE(s.ok()) << "a port nothing listens on was reached";
  EXPECT_FALSE(done);
  EXPECT_GE(Clock::now() - started, Ms(300)) << "failed before its window: " << s.message();
  EXPECT_EQ(s.code(), Code::kSystemError) << s.message();
  EXPECT_NE(s.message().find("verbs bootstrap: connect: Connection refused"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(" times over "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("railyardd"), std::string::npos) << s.message();
}

TEST(VerbsBootstrapRedial, WithoutAWindowTheFirstRefusalFails) {
  const uint16_t port = test_support::FreePort();
  ASSERT_NE(port, 0);
  BootstrapChannel c;
  Status s = c.Connect(kLoopback, port);
  bool done = false;
  if (s.ok()) s = ConnectedWithin(&c, Ms(15000), &done);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(done);
  EXPECT_NE(s.message().find("Connection refused"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("times over"), std::string::npos) << s.message();
}

// Over RDMA ports: an Endpoint made while nothing listens at its peer's address keeps
// dialing, and the record it was given arrives once a Worker listens there.
class VerbsRedial : public ::testing::TestWithParam<std::string> {};

TEST_P(VerbsRedial, AnEndpointReachesAWorkerThatListensLate) {
  const uint16_t port = test_support::FreePort();
  ASSERT_NE(port, 0);
  testing::Knobs fixed;
  fixed.verbsBootstrapPort = port;
  std::unique_ptr<Domain> source;
  std::unique_ptr<Domain> target;
  Status s = testing::MakeVerbsDomain(testing::Knobs{}, &source);
  if (s.code() == Code::kInvalidUsage) GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(testing::MakeVerbsDomain(fixed, &target).ok());
  std::unique_ptr<Worker> a;
  std::unique_ptr<Worker> early;
  ASSERT_TRUE(source->CreateWorker(&a).ok());
  ASSERT_TRUE(target->CreateWorker(&early).ok());
  const std::vector<uint8_t> address = early->Address();
  early.reset();  // nothing listens on the port now
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(a->Connect(address, &ep).ok());
  const std::vector<uint8_t> record = {7, 1, 2, 3};
  ASSERT_TRUE(ep->Send(record, 42).ok());
  std::vector<Event> aEvents;
  const auto refusedUntil = Clock::now() + Ms(500);
  while (Clock::now() < refusedUntil) a->Progress(&aEvents);
  for (const Event& e : aEvents) EXPECT_NE(e.kind, EventKind::kError) << e.error.ToString();
  ASSERT_TRUE(ep->status().ok()) << ep->status().message();
  std::unique_ptr<Worker> late;
  ASSERT_TRUE(target->CreateWorker(&late).ok());
  std::vector<Event> lateEvents;
  bool arrived = false;
  bool acked = false;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!(arrived && acked) && Clock::now() < deadline && ep->status().ok()) {
    a->Progress(&aEvents);
    late->Progress(&lateEvents);
    for (const Event& e : lateEvents) {
      if (e.kind == EventKind::kRecord) {
        EXPECT_EQ(e.record, record);
        arrived = true;
      }
    }
    lateEvents.clear();
    for (const Event& e : aEvents) {
      ASSERT_NE(e.kind, EventKind::kError) << e.error.ToString();
      if (e.kind == EventKind::kDone && e.cookie == 42u) acked = true;
    }
    aEvents.clear();
  }
  EXPECT_TRUE(arrived) << "the record never reached the late Worker; endpoint: " << ep->status().message();
  EXPECT_TRUE(acked);
  ep.reset();
}

INSTANTIATE_TEST_SUITE_P(Transports, VerbsRedial, ::testing::Values(std::string("verbs")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace railyard::fabric::verbs
