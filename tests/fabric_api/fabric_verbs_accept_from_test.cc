// Which bootstrap connections a verbs Worker takes (hostile-peer probe: a relay host's
// Forwarder verbs port answered any host that could route to its rail address).
// VerbsOptions::acceptOnlyFrom closes a socket from any other source at accept, before
// its hello is read, as TcpOptions::acceptOnlyFrom does for TCP (AcceptSources, shared);
// and at most VerbsWorker::kMaxSettingUp connections are in their handshake at once, so
// a flood of idle sockets cannot take every descriptor. AcceptSources and the options'
// check run on any host (loopback sockets); the Worker needs RDMA ports (the soft-RoCE
// lane, instance "/verbs"; skipped elsewhere). Sources are told apart on loopback by
// binding 127.0.0.x.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/accept_sources.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/fabric/verbs/verbs_worker.h"
#include "proxy/socket.h"
#include "tests/fabric_api/fabric_harness.h"
#include "tests/fabric_api/tcp_raw_peer.h"

namespace railyard::fabric::verbs {
namespace {

using Clock = std::chrono::steady_clock;

/// A blocking socket bound to `source` and connected to ipv4:port (network order
/// address, host order port); -1 and a test failure if it cannot be.
int ConnectFrom(const char* source, uint32_t ipv4, uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = ipv4;
  to.sin_port = htons(port);
  const bool ok = fd >= 0 && inet_pton(AF_INET, source, &from.sin_addr) == 1 &&
                  bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0 &&
                  connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  EXPECT_TRUE(ok) << "connect from " << source << ": " << proxy::ErrnoText(errno);
  if (!ok && fd >= 0) close(fd);
  return ok ? fd : -1;
}

/// A listener on 127.0.0.1 (ephemeral port) and the socket it accepted from a
/// connection bound to `source`.
struct AcceptedFrom {
  proxy::Fd listener, client, accepted;
  explicit AcceptedFrom(const char* source) {
    listener = proxy::Fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_TRUE(bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(listener.get(), 4) == 0 &&
                getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
    client = proxy::Fd(ConnectFrom(source, a.sin_addr.s_addr, ntohs(a.sin_port)));
    accepted = proxy::Fd(accept(listener.get(), nullptr, nullptr));
    EXPECT_TRUE(accepted.valid());
  }
};

TEST(AcceptSources, AnEmptyListAllowsAnySource) {
  AcceptSources any;
  ASSERT_TRUE(AcceptSources::Parse({}, "test", &any).ok());
  EXPECT_FALSE(any.restricted());
  AcceptedFrom s("127.0.0.3");
  EXPECT_TRUE(any.Allows(s.accepted.get()));
}

TEST(AcceptSources, OnlyTheListedSourcesAreAllowed) {
  AcceptSources only;
  ASSERT_TRUE(AcceptSources::Parse({"127.0.0.9", "127.0.0.2"}, "test", &only).ok());
  EXPECT_TRUE(only.restricted());
  AcceptedFrom listed("127.0.0.2"), other("127.0.0.3");
  EXPECT_TRUE(only.Allows(listed.accepted.get()));
  EXPECT_FALSE(only.Allows(other.accepted.get()));
  EXPECT_FALSE(only.Allows(-1)) << "a socket whose peer cannot be read was allowed";
}

TEST(AcceptSources, AnEntryThatIsNotIpv4IsNamedAndTheListKept) {
  AcceptSources kept;
  ASSERT_TRUE(AcceptSources::Parse({"127.0.0.2"}, "test", &kept).ok());
  const Status s = AcceptSources::Parse({"127.0.0.5", "h1"}, "verbs fabric", &kept);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "verbs fabric: accepted source 'h1' is not an IPv4 address");
  AcceptedFrom listed("127.0.0.2");
  EXPECT_TRUE(kept.Allows(listed.accepted.get())) << "a refused list replaced the one held";
}

TEST(VerbsAcceptFromOptions, AnAddressThatIsNotIpv4IsRefusedWithTheOptions) {
  VerbsOptions o;
  o.acceptOnlyFrom = {"10.0.0.1", "fe80::1"};
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("accepted source 'fe80::1' is not an IPv4 address"), std::string::npos) << s.message();
}

// Over RDMA ports (the harness's verbs Domains bind their bootstrap listener on
// 127.0.0.1, so an Endpoint's bootstrap socket comes from 127.0.0.1).
class VerbsAcceptFrom : public ::testing::TestWithParam<std::string> {
 protected:
  /// The target Worker accepts bootstrap connections from `allowed` only; the source
  /// Worker has a short setup deadline. False (test skipped) without RDMA ports.
  bool Start(std::vector<std::string> allowed) {
    testing::Knobs source;
    source.verbsConnectTimeoutMs = 5000;
    Status s = testing::MakeVerbsDomain(source, &sourceDomain_);
    if (s.code() == Code::kInvalidUsage) return false;
    EXPECT_TRUE(s.ok()) << s.message();
    testing::Knobs target;
    target.verbsAcceptOnlyFrom = std::move(allowed);
    EXPECT_TRUE(testing::MakeVerbsDomain(target, &targetDomain_).ok());
    EXPECT_TRUE(sourceDomain_->CreateWorker(&a_).ok());
    EXPECT_TRUE(targetDomain_->CreateWorker(&b_).ok());
    EXPECT_TRUE(VerbsAddress::Unpack(b_->Address(), &bAddress_).ok());
    return a_ != nullptr && b_ != nullptr;
  }
  void TearDown() override {
    ep_.reset();
    a_.reset();
    b_.reset();
    sourceDomain_.reset();
    targetDomain_.reset();
  }
  /// Connects A -> B and sends a 4-byte record with cookie 1; progresses both until A
  /// has an event for it (60 s at most). Returns that event; empty if none came.
  std::optional<Event> SendOneRecord() {
    std::optional<Event> out;
    if (!a_->Connect(b_->Address(), &ep_).ok() || !ep_->Send(std::vector<uint8_t>{7, 1, 2, 3}, 1).ok()) return out;
    std::vector<Event> aEvents;
    for (const auto until = Clock::now() + std::chrono::seconds(60); Clock::now() < until && !out;) {
      a_->Progress(&aEvents);
      b_->Progress(&bEvents_);
      for (const Event& e : aEvents) {
        if (e.cookie == 1 && (e.kind == EventKind::kDone || e.kind == EventKind::kError)) out = e;
      }
      aEvents.clear();
    }
    return out;
  }
  size_t RecordsAtB() const {
    size_t n = 0;
    for (const Event& e : bEvents_) n += e.kind == EventKind::kRecord ? 1 : 0;
    return n;
  }

  std::unique_ptr<Domain> sourceDomain_, targetDomain_;
  std::unique_ptr<Worker> a_, b_;
  VerbsAddress bAddress_;
  std::unique_ptr<Endpoint> ep_;
  std::vector<Event> bEvents_;
};

TEST_P(VerbsAcceptFrom, AnEndpointFromAnotherSourceFailsAndNothingArrives) {
  if (!Start({"127.0.0.9"})) GTEST_SKIP() << "no RDMA ports here";
  const std::optional<Event> e = SendOneRecord();
  ASSERT_TRUE(e.has_value()) << "no event for the record within 60 s";
  ASSERT_EQ(e->kind, EventKind::kError) << "the record's send did not fail";
  EXPECT_TRUE(e->error.errc == FabricErrc::kPeerClosed || e->error.errc == FabricErrc::kConnectFailed)
      << e->error.ToString();
  EXPECT_EQ(RecordsAtB(), 0u);
  EXPECT_EQ(b_->stats().peerConnections, 0u);
}

TEST_P(VerbsAcceptFrom, AnEndpointFromAnAllowedSourceIsServed) {
  if (!Start({"127.0.0.9", "127.0.0.1"})) GTEST_SKIP() << "no RDMA ports here";
  const std::optional<Event> e = SendOneRecord();
  ASSERT_TRUE(e.has_value()) << "no event for the record within 60 s";
  ASSERT_EQ(e->kind, EventKind::kDone) << e->error.ToString();
  EXPECT_EQ(RecordsAtB(), 1u);
  EXPECT_EQ(b_->stats().peerConnections, 1u);
}

TEST_P(VerbsAcceptFrom, ConnectionsBeyondTheSetupCapAreClosedAtAccept) {
  if (!Start({})) GTEST_SKIP() << "no RDMA ports here";
  // kMaxSettingUp idle sockets (no hello), each taken by the Worker before the next.
  std::vector<proxy::Fd> idle;
  std::vector<Event> events;
  for (size_t i = 0; i < VerbsWorker::kMaxSettingUp; ++i) {
    idle.emplace_back(ConnectFrom("127.0.0.2", bAddress_.ipv4, bAddress_.port));
    ASSERT_TRUE(idle.back().valid());
    b_->Progress(&events);
  }
  // The next one is closed at accept; the ones held stay open.
  proxy::Fd over(ConnectFrom("127.0.0.2", bAddress_.ipv4, bAddress_.port));
  ASSERT_TRUE(over.valid());
  bool closed = false;
  for (const auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until && !closed;) {
    b_->Progress(&events);
    closed = tcp::raw_peer::SawClose(over.get());
  }
  EXPECT_TRUE(closed) << "a connection beyond " << VerbsWorker::kMaxSettingUp << " setting up was kept";
  EXPECT_FALSE(tcp::raw_peer::SawClose(idle.front().get()));
  EXPECT_FALSE(tcp::raw_peer::SawClose(idle.back().get()));
}

// A Progress pass asks the epoll set of the listener and the completion channels what
// is ready; it used to call accept4 on every pass, and a failed accept4 allocates and
// frees a socket, an inode and a file in the kernel (in a fabric-mode rank's hot loop).
TEST_P(VerbsAcceptFrom, AnIdleListenerIsNotAcceptedOnEveryPass) {
  if (!Start({})) GTEST_SKIP() << "no RDMA ports here";
  const std::optional<Event> e = SendOneRecord();
  ASSERT_TRUE(e.has_value() && e->kind == EventKind::kDone) << "the connection was not served";
  auto& b = dynamic_cast<VerbsWorker&>(*b_);
  const uint64_t before = b.AcceptCallsForTesting();
  std::vector<Event> events;
  for (int i = 0; i < 1000; ++i) b.Progress(&events);
  EXPECT_EQ(b.AcceptCallsForTesting(), before) << "accept4 was called with no connection waiting";
  // A new connection is still taken: its socket is accepted and set up.
  proxy::Fd next(ConnectFrom("127.0.0.2", bAddress_.ipv4, bAddress_.port));
  ASSERT_TRUE(next.valid());
  for (const auto until = Clock::now() + std::chrono::seconds(10);
       Clock::now() < until && b.AcceptCallsForTesting() == before;) {
    b.Progress(&events);
  }
  EXPECT_GT(b.AcceptCallsForTesting(), before) << "a waiting connection was not accepted";
}

INSTANTIATE_TEST_SUITE_P(Transports, VerbsAcceptFrom, ::testing::Values(std::string("verbs")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace railyard::fabric::verbs
