// The fabric relay as a relay host runs it (forwarder_host.h), in one process on
// loopback: hosts A - R - B, each cable one rail on its own 127.0.x.0 address, the
// graph built by hand. A's RoutedWorker (the graph RouteFn) reaches B through R's
// ForwarderHost at the fixed port; the bytes are checked at B. Also: no Forwarder
// while the seat is not held, a second one on the same port cannot serve, and a
// target off the graph is refused with the relay's reason.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "proxy/fabric/relay/forwarder_host.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/relay/relay_client.h"
#include "proxy/fabric/relay/routed_worker.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "tests/common/free_port.h"
#include "tests/unit/log_capture.h"

namespace railyard::fabric::relay {
namespace {

constexpr uint64_t kA = 1, kR = 2, kB = 3;

/// A port free on 127.0.1.2 and 127.0.2.2 right now (bound, then closed).
uint16_t FreePort() { return test_support::FreePort({"127.0.1.2", "127.0.2.2"}); }

topology::ClusterGraph Graph() {
  topology::ClusterGraph g;
  g.AddHost(kA, "hA");
  g.AddHost(kR, "hR");
  g.AddHost(kB, "hB");
  g.AddLink({kA, "a0", "127.0.1.1", 10000}, {kR, "r0", "127.0.1.2", 10000});
  g.AddLink({kR, "r1", "127.0.2.2", 10000}, {kB, "b0", "127.0.2.3", 10000});
  return g;
}

std::unique_ptr<Domain> TcpOn(const char* ip, int timeoutMs = 3000) {
  tcp::TcpOptions o;
  o.rails = {RailInfo{"lo", ip, 10000}};
  o.timeoutMs = timeoutMs;
  std::unique_ptr<Domain> d;
  EXPECT_TRUE(tcp::CreateTcpDomain(o, &d).ok());
  return d;
}

ForwarderHostOptions Options(uint16_t port) {
  ForwarderHostOptions o;
  o.port = port;
  o.relay.timeoutMs = 3000;
  o.tcp.timeoutMs = 3000;
  o.retryMs = 20;
  return o;
}

/// Polls `cond` up to `ms`.
template <class F>
bool Within(int ms, F cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return cond();
}

class ForwarderHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = FreePort();
    ASSERT_NE(port_, 0);
    graph_ = Graph();
  }
  GraphFn GraphOf() {
    return [this] { return graph_; };
  }
  uint16_t port_ = 0;
  topology::ClusterGraph graph_;
};

TEST_F(ForwarderHostTest, CarriesAWriteFromAToBAtTheFixedPort) {
  std::atomic<bool> holding{true};
  std::unique_ptr<ForwarderHost> relay;
  ASSERT_TRUE(ForwarderHost::Start(GraphOf(), kR, [&] { return holding.load(); }, Options(port_), &relay).ok());
  ASSERT_TRUE(Within(5000, [&] { return relay->Serving(); })) << relay->lastProblem();
  EXPECT_EQ(relay->PortNeighbours(), (std::vector<uint64_t>{kA, kB}));

  auto dstD = TcpOn("127.0.2.3");
  std::unique_ptr<Worker> dstW;
  ASSERT_TRUE(dstD->CreateWorker(&dstW).ok());
  std::vector<char> dst(100000, 0), src(100000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  const Region* dstR = nullptr;
  const Region* srcR = nullptr;
  ASSERT_TRUE(dstD->Register(dst.data(), dst.size(), kAccessRemoteWrite, MemoryKind::kHost, &dstR).ok());

  auto srcD = TcpOn("127.0.1.1");
  ASSERT_TRUE(srcD->Register(src.data(), src.size(), kAccessLocal, MemoryKind::kHost, &srcR).ok());
  std::unique_ptr<Worker> direct;
  ASSERT_TRUE(srcD->CreateWorker(&direct).ok());
  std::unique_ptr<RelayClient> client;
  RelayOptions ro;
  ro.timeoutMs = 3000;
  ASSERT_TRUE(RelayClient::Create(*srcD, ro, &client).ok());
  RoutedWorker a(std::move(direct), std::move(client), MakeGraphRouteFn(GraphOf(), kA, kR, port_));
  {
    std::unique_ptr<Endpoint> ep;
    ASSERT_TRUE(a.Connect(dstW->Address(), &ep).ok());
    ASSERT_TRUE(ep->Write(LocalSlice{srcR, 0, src.size()}, dstR->Key(), dstR->base, 42, 7u).ok());
    bool done = false, imm = false;
    std::string err;
    std::vector<Event> ev;
    ASSERT_TRUE(Within(10000, [&] {
      ev.clear();
      a.Progress(&ev);
      dstW->Progress(&ev);
      for (const Event& e : ev) {
        if (e.kind == EventKind::kDone && e.cookie == 42) done = true;
        if (e.kind == EventKind::kImmediate && e.value == 7u) imm = true;
        if (e.kind == EventKind::kError) err = e.error.ToString();
      }
      return (done && imm) || !err.empty();
    })) << relay->lastProblem();
    ASSERT_TRUE(err.empty()) << err;
    EXPECT_EQ(std::memcmp(dst.data(), src.data(), src.size()), 0);
    EXPECT_EQ(relay->stats().routesOpened, 1u);
    EXPECT_GE(relay->stats().bytesForwarded, src.size());
  }
  // The seat goes elsewhere: the Forwarder stops and its port is free again.
  holding.store(false);
  ASSERT_TRUE(Within(5000, [&] { return !relay->Serving(); }));
  EXPECT_TRUE(relay->PortNeighbours().empty());
  EXPECT_TRUE(dstD->Deregister(dstR).ok());
  EXPECT_TRUE(srcD->Deregister(srcR).ok());
}

TEST_F(ForwarderHostTest, NotServingWithoutTheSeatAndOnePerPort) {
  std::atomic<bool> holding{false};
  test_support::LogCapture logs;
  std::unique_ptr<ForwarderHost> first, second;
  ForwarderHostOptions firstOptions = Options(port_);
  firstOptions.warnAfterMs = 100;
  ASSERT_TRUE(ForwarderHost::Start(GraphOf(), kR, [&] { return holding.load(); }, firstOptions, &first).ok());
  ASSERT_TRUE(ForwarderHost::Start(GraphOf(), kR, [] { return true; }, Options(port_), &second).ok());
  ASSERT_TRUE(Within(5000, [&] { return second->Serving(); })) << second->lastProblem();
  // The first waits for the seat; once it believes it holds it, the port is taken.
  EXPECT_FALSE(first->Serving());
  holding.store(true);
  ASSERT_TRUE(Within(5000, [&] { return first->lastProblem().find("bind") != std::string::npos; }))
      << first->lastProblem();
  EXPECT_FALSE(first->Serving());
  EXPECT_NE(first->lastProblem().find("Address already in use"), std::string::npos) << first->lastProblem();
  // A port held past warnAfterMs is said at WARN (the default level), once, naming the
  // port and the cause (new-user trial: railyardd said nothing while its port was held).
  const std::string portText = "port " + std::to_string(port_);
  auto warned = [&] {
    size_t n = 0;
    for (const std::string& w : logs.At(log::Level::kWarn)) {
      if (w.find(portText) != std::string::npos && w.find("Address already in use") != std::string::npos &&
          w.find("another process is bound") != std::string::npos) {
        ++n;
      }
    }
    return n;
  };
  ASSERT_TRUE(Within(5000, [&] { return warned() == 1; })) << ::testing::PrintToString(logs.lines());
  // The holder leaves: the other binds the port at its next retry.
  second.reset();
  ASSERT_TRUE(Within(5000, [&] { return first->Serving(); })) << first->lastProblem();
  EXPECT_EQ(warned(), 1u) << "the same cause is warned once: " << ::testing::PrintToString(logs.lines());
}

TEST_F(ForwarderHostTest, RefusesATargetOffTheGraph) {
  std::unique_ptr<ForwarderHost> relay;
  ASSERT_TRUE(ForwarderHost::Start(GraphOf(), kR, [] { return true; }, Options(port_), &relay).ok());
  ASSERT_TRUE(Within(5000, [&] { return relay->Serving(); })) << relay->lastProblem();
  // A target on 127.0.2.9: no link of the graph has it. The source goes to R's
  // Forwarder anyway (a hostile or confused source), which refuses.
  auto offD = TcpOn("127.0.2.9");
  std::unique_ptr<Worker> offW;
  ASSERT_TRUE(offD->CreateWorker(&offW).ok());
  auto srcD = TcpOn("127.0.1.1");
  std::unique_ptr<RelayClient> client;
  RelayOptions ro;
  ro.timeoutMs = 3000;
  ASSERT_TRUE(RelayClient::Create(*srcD, ro, &client).ok());
  std::vector<uint8_t> fwd;
  ASSERT_TRUE(ForwarderAddress(graph_, kR, kA, port_, &fwd).ok());
  std::unique_ptr<Endpoint> ep;
  ASSERT_TRUE(client->Connect(fwd, offW->Address(), &ep).ok());
  ASSERT_TRUE(ep->Send(std::vector<uint8_t>(16, 1), 9).ok());
  std::string err;
  std::vector<Event> ev;
  ASSERT_TRUE(Within(10000, [&] {
    ev.clear();
    client->Progress(&ev);
    offW->Progress(&ev);
    for (const Event& e : ev) {
      if (e.kind == EventKind::kError) err = e.error.ToString();
    }
    return !err.empty();
  }));
  EXPECT_NE(err.find("refused"), std::string::npos) << err;
  EXPECT_NE(relay->lastProblem().find("on no cable"), std::string::npos) << relay->lastProblem();
  EXPECT_EQ(relay->stats().routesRefused, 1u);
  ep.reset();
}

}  // namespace
}  // namespace railyard::fabric::relay
