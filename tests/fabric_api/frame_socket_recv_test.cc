// The receive side of the TCP transport's FrameSocket, on a socketpair: frames cut at
// every byte boundary still arrive whole, small frames queued together cost one
// recv() (header, payload and the frames behind them come in one read-ahead, and
// a short read ends the pass without asking again for EAGAIN), and read-ahead
// payload bytes obey the landing rule (none lands once the Region is deregistered).
//
// This executable defines recv() itself, counting calls and forwarding to the
// recvfrom system call, so the counts are the FrameSocket's own syscalls.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/region_table.h"
#include "proxy/fabric/tcp/frame_socket.h"

namespace {
std::atomic<int> gRecvCalls{0};
}  // namespace

/// Interposes libc's recv for this test binary: counts, then makes the syscall.
extern "C" ssize_t recv(int fd, void* buf, size_t n, int flags) {
  gRecvCalls.fetch_add(1);
  return static_cast<ssize_t>(::syscall(SYS_recvfrom, fd, buf, n, flags, nullptr, nullptr));
}

namespace railyard::fabric::tcp {
namespace {

/// Collects the Write frames a target would get: payloads land in `mem` at the
/// header's offset (pinned to `pin` when set); OnHeader may run a hook first.
class Collector : public FrameHandler {
 public:
  std::vector<char> mem = std::vector<char>(1 << 20, 0);
  std::shared_ptr<RegionRecord> pin;
  std::vector<std::pair<uint64_t, bool>> payloads;  ///< (seq, intact) in arrival order
  std::function<void()> onHeader;

  FabricError OnHeader(int, const FrameHeader& h, Sink* sink) override {
    if (onHeader) onHeader();
    sink->dst = mem.data() + h.offset;
    sink->pin = pin;
    return {};
  }
  FabricError OnPayload(int, const FrameHeader& h, bool intact) override {
    payloads.emplace_back(h.seq, intact);
    return {};
  }
  FabricError OnWritten(int, const OutFrame&, bool) override { return {}; }
};

class FrameSocketRecv : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    peer_ = sv[0];
    sock_ = std::make_unique<FrameSocket>(proxy::Fd(sv[1]), 0, Direction::kToTarget, false);
  }
  void TearDown() override { close(peer_); }

  /// Wire bytes of a Write frame of op `seq` with `payload` at `offset`.
  static std::string Frame(uint64_t seq, uint64_t offset, const std::string& payload) {
    FrameHeader h = MakeHeader(FrameType::kWrite);
    h.seq = seq;
    h.addr = 0x1000;
    h.opBytes = offset + payload.size();
    h.offset = offset;
    h.key = 7;
    h.payloadBytes = static_cast<uint32_t>(payload.size());
    std::string s(reinterpret_cast<const char*>(&h), sizeof h);
    return s + payload;
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::send(peer_, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  /// One Pump of the receive side; the FrameSocket's recv() calls it made.
  int PumpOnce(Collector& c) {
    FrameSocket::PumpResult r;
    const int before = gRecvCalls.load();
    FabricError e = sock_->Pump(c, 64ull << 20, &r, true);
    EXPECT_TRUE(e.ok()) << e.ToString();
    return gRecvCalls.load() - before;
  }

  int peer_ = -1;
  std::unique_ptr<FrameSocket> sock_;
};

TEST_F(FrameSocketRecv, ThreeSmallFramesQueuedTogetherCostOneRecv) {
  Collector c;
  Send(Frame(0, 0, "eight b!") + Frame(1, 100, std::string(152, 'c')) + Frame(2, 300, ""));
  // Before read-ahead: a recv per header and per payload, and one more for EAGAIN (6).
  EXPECT_EQ(PumpOnce(c), 1);
  ASSERT_EQ(c.payloads.size(), 3u);
  EXPECT_EQ(c.payloads[0], std::make_pair(uint64_t{0}, true));
  EXPECT_EQ(c.payloads[1], std::make_pair(uint64_t{1}, true));
  EXPECT_EQ(c.payloads[2], std::make_pair(uint64_t{2}, true));
  EXPECT_EQ(std::string(c.mem.data(), 8), "eight b!");
  EXPECT_EQ(std::string(c.mem.data() + 100, 152), std::string(152, 'c'));
  EXPECT_EQ(c.mem[99], 0);
  EXPECT_EQ(c.mem[252], 0);
}

TEST_F(FrameSocketRecv, FramesCutAtEveryByteArriveWhole) {
  std::string all;
  for (uint64_t i = 0; i < 4; ++i) all += Frame(i, i * 1000, std::string(37 + i * 300, static_cast<char>('a' + i)));
  for (size_t cut = 0; cut < all.size(); ++cut) {
    Collector step;
    Send(all.substr(0, cut));
    PumpOnce(step);
    Send(all.substr(cut));
    PumpOnce(step);
    ASSERT_EQ(step.payloads.size(), 4u) << "cut at byte " << cut;
    for (uint64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(std::string(step.mem.data() + i * 1000, 37 + i * 300), std::string(37 + i * 300, static_cast<char>('a' + i)))
          << "cut at byte " << cut;
    }
    EXPECT_FALSE(sock_->MidFrame());
  }
}

TEST_F(FrameSocketRecv, LargePayloadLandsInPlaceAfterItsReadAhead) {
  Collector c;
  std::string big(300 * 1024, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 23);
  const std::string wire = Frame(5, 4096, big);
  // The peer writes from a thread: a socketpair holds less than the frame.
  std::thread writer([&] {
    size_t off = 0;
    while (off < wire.size()) {
      const ssize_t n = ::send(peer_, wire.data() + off, wire.size() - off, 0);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c.payloads.empty() && std::chrono::steady_clock::now() < deadline) PumpOnce(c);
  writer.join();
  ASSERT_EQ(c.payloads.size(), 1u);
  EXPECT_TRUE(c.payloads[0].second);
  EXPECT_EQ(std::memcmp(c.mem.data() + 4096, big.data(), big.size()), 0);
  EXPECT_EQ(c.mem[4095], 0);
  EXPECT_EQ(c.mem[4096 + big.size()], 0);
}

TEST_F(FrameSocketRecv, ReadAheadBytesDoNotLandAfterDeregistration) {
  RegionTable table;
  Collector c;
  std::shared_ptr<RegionRecord> rec;
  ASSERT_TRUE(table.Register(c.mem.data(), c.mem.size(), kAccessRemoteWrite, MemoryKind::kHost, &rec).ok());
  c.pin = rec;
  // The Region goes away between the header and its payload (both read in one recv).
  c.onHeader = [&] { ASSERT_TRUE(table.Deregister(&rec->region()).ok()); };
  Send(Frame(0, 64, std::string(200, 'z')));
  EXPECT_EQ(PumpOnce(c), 1);
  ASSERT_EQ(c.payloads.size(), 1u);
  EXPECT_FALSE(c.payloads[0].second);  // the handler hears the payload was dropped
  for (size_t i = 0; i < 400; ++i) ASSERT_EQ(c.mem[i], 0) << "byte " << i << " landed after deregistration";
}

TEST_F(FrameSocketRecv, PeerClosingMidFrameIsAnErrorAndAtABoundaryIsNot) {
  Collector c;
  const std::string f = Frame(0, 0, std::string(100, 'q'));
  Send(f + f.substr(0, 80));  // one whole frame, then a header and 16 payload bytes
  shutdown(peer_, SHUT_WR);
  FrameSocket::PumpResult r;
  FabricError e = sock_->Pump(c, 64ull << 20, &r, true);
  for (int i = 0; i < 3 && e.ok() && !r.closed; ++i) e = sock_->Pump(c, 64ull << 20, &r, true);
  EXPECT_EQ(c.payloads.size(), 1u);
  EXPECT_EQ(e.errc, FabricErrc::kPeerClosed) << e.ToString();
}

}  // namespace
}  // namespace railyard::fabric::tcp
