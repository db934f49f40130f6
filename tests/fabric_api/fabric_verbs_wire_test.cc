// The verbs transport's peer-data decoders, on any host (no RDMA device needed):
// the Worker address, the bootstrap hello and the write-size record refuse every
// malformed field, and the
// completion-status mapping names the causes the suite relies on.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include <cstring>

#include "proxy/fabric/verbs/verbs_bootstrap.h"
#include "proxy/fabric/verbs/verbs_endpoint.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "proxy/fabric/verbs/verbs_wire.h"

namespace railyard::fabric::verbs {
namespace {

VerbsAddress Good() {
  VerbsAddress a;
  a.workerId = 0x1234;
  a.ipv4 = 0x0100007f;
  a.port = 40000;
  a.rails = 2;
  return a;
}

TEST(VerbsWire, AddressRoundTrips) {
  VerbsAddress out;
  ASSERT_TRUE(VerbsAddress::Unpack(Good().Pack(), &out).ok());
  EXPECT_EQ(out.workerId, 0x1234u);
  EXPECT_EQ(out.ipv4, 0x0100007fu);
  EXPECT_EQ(out.port, 40000);
  EXPECT_EQ(out.rails, 2);
  EXPECT_EQ(out.Name(), "w=0000000000001234 127.0.0.1:40000");
}

TEST(VerbsWire, AddressRefusesEveryBadField) {
  const std::vector<uint8_t> good = Good().Pack();
  auto refused = [](std::vector<uint8_t> b, const char* what) {
    VerbsAddress out;
    out.port = 7;
    Status s = VerbsAddress::Unpack(b, &out);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    EXPECT_EQ(out.port, 7) << "out changed on error";
  };
  refused({good.begin(), good.end() - 1}, "bytes");
  std::vector<uint8_t> b = good;
  b.push_back(0);
  refused(b, "bytes");
  b = good;
  b[0] ^= 1;
  refused(b, "magic");
  b = good;
  b[4] = 2;
  refused(b, "version");
  b = good;
  b[6] = 0;
  refused(b, "rails");
  b = good;
  b[6] = 17;
  refused(b, "rails");
  b = good;
  std::memset(b.data() + 8, 0, 8);
  refused(b, "worker id 0");
  b = good;
  std::memset(b.data() + 20, 0, 2);
  refused(b, "port 0");
}

TEST(VerbsWire, HelloChecksRoleCreditsAndAddresses) {
  VerbsHello h;
  h.role = VerbsHello::kRoleAccept;
  h.workerId = 9;
  h.recordCredits = 64;
  h.recordBytes = 4096;
  EXPECT_TRUE(CheckHello(h, VerbsHello::kRoleAccept).ok());
  EXPECT_FALSE(CheckHello(h, VerbsHello::kRoleConnect).ok());
  VerbsHello bad = h;
  bad.magic ^= 1;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  bad = h;
  bad.version = 1;  // before the write-size record (issue 10): refused, not misread
  EXPECT_NE(CheckHello(bad, VerbsHello::kRoleAccept).message().find("version 1"), std::string::npos);
  bad.version = VerbsHello::kVersion + 1;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  bad = h;
  bad.recordCredits = 3;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  bad = h;
  bad.recordCredits = 5000;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  bad = h;
  bad.recordBytes = 0;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  bad = h;
  bad.workerId = 0;
  EXPECT_FALSE(CheckHello(bad, VerbsHello::kRoleAccept).ok());
  VerbsHello c;
  c.role = VerbsHello::kRoleConnect;
  c.workerId = 3;
  EXPECT_NE(CheckHello(c, VerbsHello::kRoleConnect).message().find("credit address 0"), std::string::npos);
  c.creditAddr = 0x1000;
  EXPECT_TRUE(CheckHello(c, VerbsHello::kRoleConnect).ok());
}

// Issue 10: a Write of several work requests names its whole size in the SEND WITH
// IMM after its chunks; the target takes the size only from a well-formed record.
TEST(VerbsWire, WriteSizeRecordRoundTripsEverySize) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 20, (uint64_t{3} << 20) + 7, kVerbsMaxOpBytes}) {
    const std::vector<uint8_t> b = WriteSizeRecord{n}.Pack();
    ASSERT_EQ(b.size(), WriteSizeRecord::kBytes);
    EXPECT_EQ(std::memcmp(b.data(), "RYSZ", 4), 0);
    WriteSizeRecord out;
    out.bytes = 99;
    ASSERT_TRUE(WriteSizeRecord::Unpack(b, kVerbsMaxOpBytes, &out).ok()) << n;
    EXPECT_EQ(out.bytes, n);
  }
}

TEST(VerbsWire, WriteSizeRecordRefusesEveryBadField) {
  const std::vector<uint8_t> good = WriteSizeRecord{4096}.Pack();
  auto refused = [](std::vector<uint8_t> b, uint64_t max, const char* what) {
    WriteSizeRecord out;
    out.bytes = 7;
    Status s = WriteSizeRecord::Unpack(b, max, &out);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
    EXPECT_EQ(out.bytes, 7u) << "out changed on error";
  };
  refused({good.begin(), good.end() - 1}, kVerbsMaxOpBytes, "15 bytes");
  std::vector<uint8_t> b = good;
  b.push_back(0);
  refused(b, kVerbsMaxOpBytes, "17 bytes");
  refused({}, kVerbsMaxOpBytes, "0 bytes");
  b = good;
  b[3] ^= 1;
  refused(b, kVerbsMaxOpBytes, "magic");
  b = good;
  b[5] = 1;
  refused(b, kVerbsMaxOpBytes, "reserved");
  refused(good, 4095, "4096 bytes (at most 4095)");
  WriteSizeRecord out;
  EXPECT_TRUE(WriteSizeRecord::Unpack(good, 4096, &out).ok());
  EXPECT_EQ(out.bytes, 4096u);
}

// An initiator whose Endpoint goes away with ops under way says so on the bootstrap
// socket (the target's CPU never sees in-flight Writes): the watch reports it apart
// from a plain close, and any other byte stays a protocol error.
TEST(VerbsBootstrap, WatchTellsAnAbandonedEndpointFromAPlainClose) {
  auto pair = [] {
    int sv[2] = {-1, -1};
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    return std::pair<BootstrapChannel, BootstrapChannel>(BootstrapChannel(proxy::Fd(sv[0])),
                                                         BootstrapChannel(proxy::Fd(sv[1])));
  };
  bool closed = true, abandoned = true;
  {
    auto [initiator, target] = pair();
    ASSERT_TRUE(target.Watch(&closed, &abandoned).ok());
    EXPECT_FALSE(closed);
    EXPECT_FALSE(abandoned);
    initiator.Abandon();
    ASSERT_TRUE(target.Watch(&closed, &abandoned).ok());
    EXPECT_TRUE(closed);
    EXPECT_TRUE(abandoned);
  }
  {
    auto [initiator, target] = pair();
    initiator = BootstrapChannel();  // closed with nothing under way
    ASSERT_TRUE(target.Watch(&closed, &abandoned).ok());
    EXPECT_TRUE(closed);
    EXPECT_FALSE(abandoned);
  }
  {
    auto [initiator, target] = pair();
    ASSERT_EQ(::send(initiator.fd(), "?", 1, 0), 1);
    Status st = target.Watch(&closed, &abandoned);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
    EXPECT_FALSE(abandoned);
  }
}

// A keepalive timeout is the peer's host gone only when the connection's QPs have been
// silent as long: a completion within RAILYARD_TIMEOUT_MS outvotes it (soft-RoCE ring: a
// saturated cable starved the probes while the Writes completed).
TEST(VerbsBootstrap, AKeepaliveTimeoutIsOutvotedByARecentCompletion) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  EXPECT_TRUE(BootstrapChannel::LostMeansDead(Clock::time_point{}, now, 5000));  // no completion ever
  EXPECT_FALSE(BootstrapChannel::LostMeansDead(now - std::chrono::milliseconds(100), now, 5000));
  EXPECT_FALSE(BootstrapChannel::LostMeansDead(now - std::chrono::milliseconds(4999), now, 5000));
  EXPECT_TRUE(BootstrapChannel::LostMeansDead(now - std::chrono::milliseconds(5000), now, 5000));
  EXPECT_TRUE(BootstrapChannel::LostMeansDead(now - std::chrono::seconds(60), now, 5000));
  const std::string text = BootstrapChannel::StarvedText("w=00000000000000ab 10.0.0.2:4000", 120);
  EXPECT_NE(text.find("w=00000000000000ab 10.0.0.2:4000"), std::string::npos) << text;
  EXPECT_NE(text.find("120 ms ago"), std::string::npos) << text;
}

// A peer whose own keepalive gave up resets the connection (Linux's keepalive timer
// sends a reset before it reports); Watch says so apart from a plain close, so a recent
// completion can outvote it as it outvotes our own timeout.
TEST(VerbsBootstrap, WatchTellsAResetFromAClose) {
  proxy::Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_TRUE(listener.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  int peer = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(peer, 0);
  ASSERT_EQ(::connect(peer, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  BootstrapChannel ours(proxy::Fd(::accept(listener.get(), nullptr, nullptr)));
  ASSERT_GE(ours.fd(), 0);
  bool closed = true, lost = true, reset = true;
  ASSERT_TRUE(ours.Watch(&closed, nullptr, &lost, &reset).ok());
  EXPECT_FALSE(closed || lost || reset);
  const linger abort{1, 0};  // close with a reset, as a keepalive that gave up does
  ASSERT_EQ(::setsockopt(peer, SOL_SOCKET, SO_LINGER, &abort, sizeof abort), 0);
  ::close(peer);
  pollfd p{ours.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);  // the reset has arrived
  ASSERT_TRUE(ours.Watch(&closed, nullptr, &lost, &reset).ok());
  EXPECT_TRUE(closed);
  EXPECT_TRUE(reset);
  EXPECT_FALSE(lost);
}

TEST(VerbsWire, CompletionStatusesMapToNamedCauses) {
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_REM_ACCESS_ERR), FabricErrc::kRemoteAccess);
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_REM_INV_REQ_ERR), FabricErrc::kRemoteAccess);
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_RETRY_EXC_ERR), FabricErrc::kTimeout);
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_WR_FLUSH_ERR), FabricErrc::kEndpointFailed);
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_LOC_PROT_ERR), FabricErrc::kLocalArgument);
  EXPECT_EQ(ErrcOfCompletion(IBV_WC_FATAL_ERR), FabricErrc::kSystem);
  EXPECT_TRUE(IsRemoteAccess(ErrcOfCompletion(IBV_WC_REM_ACCESS_ERR)));
}

TEST(VerbsWire, AccessFlagsMapToIbvAccess) {
  EXPECT_EQ(IbvAccess(kAccessLocal), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(IbvAccess(kAccessRemoteRead), IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(IbvAccess(kAccessRemoteWrite), IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(IbvAccess(kAccessRemoteAtomic), IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE);
}

}  // namespace
}  // namespace railyard::fabric::verbs
