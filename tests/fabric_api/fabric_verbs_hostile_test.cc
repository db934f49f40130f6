// Hostile bytes at a verbs Worker's bootstrap listener, live (hostile-peer leftover:
// the decoders are fuzzed, tests/fuzz/verbs_wire_fuzz.cc and qp_record_fuzz.cc, but no
// test had spoken to a running listener). A raw TCP peer sends what no Railyard
// Endpoint sends: bytes that are no hello, a hello of the accepting role, a hello
// followed by a QP record set that is no record set, half a hello and then nothing.
// Each connection must end with one error event naming the setup failure (op kNone),
// its socket closed, no peer connection counted, and a real Endpoint must still be
// served afterwards. RDMA ports needed (the soft-RoCE lane, instance "/verbs";
// skipped elsewhere).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/fabric/verbs/verbs_worker.h"
#include "proxy/socket.h"
#include "tests/fabric_api/fabric_harness.h"
#include "tests/fabric_api/tcp_raw_peer.h"

namespace railyard::fabric::verbs {
namespace {

using Clock = std::chrono::steady_clock;

/// The target's setup deadline: a peer that stops mid-hello is dropped after this.
constexpr int kSetupDeadlineMs = 1500;

class VerbsHostileBootstrap : public ::testing::TestWithParam<std::string> {
 protected:
  /// A target Worker (setup deadline kSetupDeadlineMs) and a source Worker. False
  /// (test skipped) without RDMA ports.
  bool Start() {
    testing::Knobs target;
    target.verbsConnectTimeoutMs = kSetupDeadlineMs;
    Status s = testing::MakeVerbsDomain(target, &targetDomain_);
    if (s.code() == Code::kInvalidUsage) return false;
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(testing::MakeVerbsDomain(testing::Knobs{}, &sourceDomain_).ok());
    EXPECT_TRUE(targetDomain_->CreateWorker(&target_).ok());
    EXPECT_TRUE(sourceDomain_->CreateWorker(&source_).ok());
    EXPECT_TRUE(VerbsAddress::Unpack(target_->Address(), &address_).ok());
    return target_ != nullptr && source_ != nullptr;
  }
  void TearDown() override {
    ep_.reset();
    source_.reset();
    target_.reset();
    sourceDomain_.reset();
    targetDomain_.reset();
  }

  /// A blocking socket connected to the target's bootstrap listener; -1 on failure.
  int Raw() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = address_.ipv4;
    to.sin_port = htons(address_.port);
    const bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
    EXPECT_TRUE(ok) << "connect to the target's bootstrap listener: " << proxy::ErrnoText(errno);
    if (!ok && fd >= 0) close(fd);
    return ok ? fd : -1;
  }

  /// Sends `bytes` on a new raw connection, then drives the target until it closes
  /// that socket (10 s at most). Returns the error events (op kNone) it emitted
  /// meanwhile; `closed` says whether the socket was closed.
  std::vector<Event> Probe(const std::vector<uint8_t>& bytes, bool* closed) {
    proxy::Fd fd(Raw());
    *closed = false;
    std::vector<Event> errors;
    if (!fd.valid()) return errors;
    if (!bytes.empty()) {
      EXPECT_EQ(send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }
    std::vector<Event> events;
    for (const auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until && !*closed;) {
      target_->Progress(&events);
      *closed = tcp::raw_peer::SawClose(fd.get());
    }
    for (int i = 0; i < 10; ++i) target_->Progress(&events);  // an error emitted with the close
    for (Event& e : events) {
      if (e.kind == EventKind::kError && e.op == OpType::kNone) errors.push_back(std::move(e));
    }
    return errors;
  }

  /// A hello of `role` as a connector would send it (valid otherwise).
  static VerbsHello Hello(uint16_t role) {
    VerbsHello h;
    h.role = role;
    h.workerId = 0x5eed;
    h.connection = 1;
    h.creditAddr = 0x1000;
    h.creditRkey = 7;
    if (role == VerbsHello::kRoleAccept) {
      h.recordCredits = 16;
      h.recordBytes = 64;
    }
    return h;
  }
  static std::vector<uint8_t> Bytes(const VerbsHello& h) {
    std::vector<uint8_t> b(sizeof h);
    std::memcpy(b.data(), &h, sizeof h);
    return b;
  }

  /// After the probes: a real Endpoint connects, its record arrives whole, and it is
  /// the target's only peer connection.
  void ExpectARealEndpointIsServed() {
    ASSERT_TRUE(source_->Connect(target_->Address(), &ep_).ok());
    ASSERT_TRUE(ep_->Send(std::vector<uint8_t>{7, 1, 2, 3}, 1).ok());
    std::optional<Event> done;
    size_t records = 0;
    std::vector<Event> s, t;
    for (const auto until = Clock::now() + std::chrono::seconds(60); Clock::now() < until && (!done || records == 0);) {
      source_->Progress(&s);
      target_->Progress(&t);
      for (const Event& e : s) {
        if (e.cookie == 1 && (e.kind == EventKind::kDone || e.kind == EventKind::kError)) done = e;
      }
      for (const Event& e : t) {
        if (e.kind == EventKind::kRecord && e.record == std::vector<uint8_t>{7, 1, 2, 3}) ++records;
      }
      s.clear();
      t.clear();
    }
    ASSERT_TRUE(done.has_value()) << "the real Endpoint's record had no completion within 60 s";
    EXPECT_EQ(done->kind, EventKind::kDone) << done->error.ToString();
    EXPECT_EQ(records, 1u);
    EXPECT_EQ(target_->stats().peerConnections, 1u);
  }

  std::unique_ptr<Domain> targetDomain_, sourceDomain_;
  std::unique_ptr<Worker> target_, source_;
  VerbsAddress address_;
  std::unique_ptr<Endpoint> ep_;
};

/// The one error event of a refused setup: op kNone, the errc given, its text naming
/// the setup and containing `detail`.
void ExpectRefused(const std::vector<Event>& errors, FabricErrc errc, const std::string& detail) {
  ASSERT_EQ(errors.size(), 1u) << "one error event per refused connection";
  EXPECT_EQ(errors[0].error.errc, errc) << errors[0].error.ToString();
  EXPECT_NE(errors[0].error.what.find(detail), std::string::npos) << errors[0].error.what;
  EXPECT_NE(errors[0].error.what.find("connection setup"), std::string::npos) << errors[0].error.what;
}

TEST_P(VerbsHostileBootstrap, BytesThatAreNoHelloAreRefused) {
  if (!Start()) GTEST_SKIP() << "no RDMA ports here";
  bool closed = false;
  const std::vector<Event> errors = Probe(std::vector<uint8_t>(sizeof(VerbsHello), 0xa5), &closed);
  EXPECT_TRUE(closed) << "the socket of a peer that sent no hello stayed open";
  ExpectRefused(errors, FabricErrc::kMalformed, "magic");
  EXPECT_EQ(target_->stats().peerConnections, 0u);
  ExpectARealEndpointIsServed();
}

TEST_P(VerbsHostileBootstrap, AHelloOfTheAcceptingRoleIsRefused) {
  if (!Start()) GTEST_SKIP() << "no RDMA ports here";
  bool closed = false;
  const std::vector<Event> errors = Probe(Bytes(Hello(VerbsHello::kRoleAccept)), &closed);
  EXPECT_TRUE(closed);
  ExpectRefused(errors, FabricErrc::kMalformed, "role");
  EXPECT_EQ(target_->stats().peerConnections, 0u);
  ExpectARealEndpointIsServed();
}

TEST_P(VerbsHostileBootstrap, AHelloFollowedByNoQpRecordSetIsRefused) {
  if (!Start()) GTEST_SKIP() << "no RDMA ports here";
  std::vector<uint8_t> bytes = Bytes(Hello(VerbsHello::kRoleConnect));
  // Where the QP record set's header goes: bytes that are no record header, with a
  // length field (wherever it sits) of 0xffffffff.
  bytes.insert(bytes.end(), 64, 0xff);
  bool closed = false;
  const std::vector<Event> errors = Probe(bytes, &closed);
  EXPECT_TRUE(closed);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].error.errc == FabricErrc::kMalformed) << errors[0].error.ToString();
  EXPECT_NE(errors[0].error.what.find("connection setup failed"), std::string::npos) << errors[0].error.what;
  EXPECT_EQ(target_->stats().peerConnections, 0u);
  ExpectARealEndpointIsServed();
}

TEST_P(VerbsHostileBootstrap, HalfAHelloAndThenNothingIsDroppedAtTheSetupDeadline) {
  if (!Start()) GTEST_SKIP() << "no RDMA ports here";
  std::vector<uint8_t> bytes = Bytes(Hello(VerbsHello::kRoleConnect));
  bytes.resize(bytes.size() / 2);
  const auto start = Clock::now();
  bool closed = false;
  const std::vector<Event> errors = Probe(bytes, &closed);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  EXPECT_TRUE(closed) << "a peer that stopped mid-hello kept its socket";
  EXPECT_GE(took, kSetupDeadlineMs) << "dropped before its setup deadline";
  ExpectRefused(errors, FabricErrc::kTimeout, std::to_string(kSetupDeadlineMs) + " ms");
  EXPECT_EQ(target_->stats().peerConnections, 0u);
  ExpectARealEndpointIsServed();
}

INSTANTIATE_TEST_SUITE_P(Transports, VerbsHostileBootstrap, ::testing::Values(std::string("verbs")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace railyard::fabric::verbs
