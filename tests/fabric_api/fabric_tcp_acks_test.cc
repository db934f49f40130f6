// Lazily acknowledged Writes on the TCP transport's wire (version 2, tcp_frame.h:
// kFlagLazyAck, the cumulative bound every ack carries in `offset`, kFlagBoundOnly),
// each end against a raw socket speaking the wire by hand, hostile where it can be:
//  - the target sends a lazy Write no ack of its own; the next ack's bound covers it,
//    or, when none follows, a bound-only ack does (after kMaxDeferredAcks lazy Writes
//    or kDeferredAckMicros);
//  - the initiator completes lazy Writes by a bound only, and refuses (MALFORMED,
//    naming the op) an ack of its own for a lazy Write, a bound past the ops it posted
//    and a bound over a Write it has not sent whole.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "tests/common/free_port.h"
#include "tests/fabric_api/tcp_raw_peer.h"

namespace railyard::fabric::tcp {
namespace {

/// Frames from a raw socket, reassembled (non-blocking reads while `pump` runs).
class RawFrames {
 public:
  explicit RawFrames(int fd) : fd_(fd) {}
  /// The next whole frame, progressing with `pump` for up to 10 s; false on timeout or EOF.
  bool Next(const std::function<void()>& pump, FrameHeader* h, std::string* payload = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (buf_.size() >= sizeof(FrameHeader)) {
        std::memcpy(h, buf_.data(), sizeof *h);
        const size_t total = sizeof(FrameHeader) + h->payloadBytes;
        if (buf_.size() >= total) {
          if (payload != nullptr) payload->assign(buf_.begin() + sizeof(FrameHeader), buf_.begin() + total);
          buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(total));
          return true;
        }
      }
      char tmp[65536];
      const ssize_t n = recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n == 0) return false;
      if (n > 0) buf_.insert(buf_.end(), tmp, tmp + n);
      pump();
    }
    return false;
  }
  /// Progresses with `pump` for `passes` calls and says whether any byte arrived.
  bool Quiet(const std::function<void()>& pump, int passes) {
    for (int i = 0; i < passes; ++i) {
      pump();
      char tmp[4096];
      const ssize_t n = recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (n > 0) buf_.insert(buf_.end(), tmp, tmp + n);
    }
    return buf_.empty();
  }

 private:
  int fd_;
  std::vector<char> buf_;
};

void SendAll(int fd, const void* p, size_t n) {
  ASSERT_EQ(send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}

// ---- the target (a Worker) against a raw initiator ----------------------------------

class TcpAckTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    o.timeoutMs = 5000;
    ASSERT_TRUE(CreateTcpDomain(o, &domain_).ok());
    ASSERT_TRUE(domain_->CreateWorker(&worker_).ok());
    mem_.assign(4096, 0);
    ASSERT_TRUE(domain_->Register(mem_.data(), mem_.size(), kAccessRemoteWrite, MemoryKind::kHost, &region_).ok());
    fd_ = raw_peer::ConnectToRail0(*worker_);
    ASSERT_GE(fd_, 0);
    FrameHeader h = raw_peer::Hello();
    SendAll(fd_, &h, sizeof h);
    frames_ = std::make_unique<RawFrames>(fd_);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    worker_.reset();
    domain_.reset();
  }
  /// The bytes of one Write frame of 8 bytes at mem_ + 8 * seq (payload: 8 × 'a' + seq).
  std::string WriteFrame(uint64_t seq, uint16_t flags) {
    FrameHeader h = MakeHeader(FrameType::kWrite);
    h.flags = flags;
    h.imm = (flags & kFlagImmediate) ? static_cast<uint32_t>(seq) : 0;
    h.seq = seq;
    h.addr = region_->base + 8 * seq;
    h.opBytes = 8;
    h.key = region_->softwareKey;
    h.payloadBytes = 8;
    std::string out(reinterpret_cast<const char*>(&h), sizeof h);
    out += std::string(8, static_cast<char>('a' + seq % 26));
    return out;
  }
  void Progress() { worker_->Progress(&events_); }
  size_t Immediates() const {
    size_t n = 0;
    for (const Event& e : events_) n += e.kind == EventKind::kImmediate;
    return n;
  }

  std::unique_ptr<Domain> domain_;
  std::unique_ptr<Worker> worker_;
  const Region* region_ = nullptr;
  std::vector<uint8_t> mem_;
  int fd_ = -1;
  std::unique_ptr<RawFrames> frames_;
  std::vector<Event> events_;
};

TEST_F(TcpAckTarget, ALazyWriteGetsNoAckOfItsOwnAndTheNextAcksBoundCoversIt) {
  const std::string lazy = WriteFrame(0, kFlagLazyAck | kFlagImmediate);
  SendAll(fd_, lazy.data(), lazy.size());
  // It lands and its immediate comes, but no ack: nothing for a while (the deferred
  // bound waits kDeferredAckMicros; the plain Write below follows at once).
  ASSERT_TRUE([&] {
    for (int i = 0; i < 100000 && Immediates() == 0; ++i) Progress();
    return Immediates() == 1;
  }());
  const std::string plain = WriteFrame(1, 0);
  SendAll(fd_, plain.data(), plain.size());
  FrameHeader ack;
  ASSERT_TRUE(frames_->Next([&] { Progress(); }, &ack));
  EXPECT_EQ(ack.frameType(), FrameType::kAck);
  if (ack.flags & kFlagBoundOnly) {
    // The deferred bound went out before the plain Write arrived (a slow machine): it
    // covers the lazy Write, and the plain Write's own ack follows.
    EXPECT_EQ(ack.offset, 1u);
    ASSERT_TRUE(frames_->Next([&] { Progress(); }, &ack));
  }
  EXPECT_EQ(ack.flags, 0) << DescribeFrame(ack);
  EXPECT_EQ(ack.seq, 1u) << "the ack names the plain Write, never the lazy one";
  EXPECT_EQ(ack.offset, 1u) << "its bound covers the lazy Write before it";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mem_.data()), 16), "aaaaaaaabbbbbbbb");
}

TEST_F(TcpAckTarget, LazyWritesAloneAreCoveredByBoundOnlyAcks) {
  const int n = 40;  // more than kMaxDeferredAcks
  std::string all;
  for (int i = 0; i < n; ++i) all += WriteFrame(static_cast<uint64_t>(i), kFlagLazyAck);
  SendAll(fd_, all.data(), all.size());
  uint64_t bound = 0;
  int acks = 0;
  while (bound < static_cast<uint64_t>(n)) {
    FrameHeader ack;
    ASSERT_TRUE(frames_->Next([&] { Progress(); }, &ack)) << "bound " << bound << " after " << acks << " acks";
    ASSERT_EQ(ack.frameType(), FrameType::kAck);
    EXPECT_EQ(ack.flags, kFlagBoundOnly) << DescribeFrame(ack);
    EXPECT_EQ(ack.seq, 0u);
    EXPECT_GT(ack.offset, bound) << "a bound-only ack that covers nothing new";
    EXPECT_LE(ack.offset, static_cast<uint64_t>(n));
    bound = ack.offset;
    ++acks;
  }
  EXPECT_EQ(bound, static_cast<uint64_t>(n));
  EXPECT_LT(acks, n) << "one ack per lazy Write";
  EXPECT_TRUE(frames_->Quiet([&] { Progress(); }, 2000)) << "an ack after everything was covered";
  for (int i = 0; i < n; ++i) EXPECT_EQ(mem_[8u * i], static_cast<uint8_t>('a' + i % 26)) << i;
}

// ---- the initiator (an Endpoint) against a raw target ----------------------------------

class TcpAckInitiator : public ::testing::Test {
 protected:
  void SetUp() override {
    TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    o.timeoutMs = 10000;
    ASSERT_TRUE(CreateTcpDomain(o, &domain_).ok());
    ASSERT_TRUE(domain_->CreateWorker(&worker_).ok());
    uint16_t port = 0;
    listen_ = test_support::ListenLoopback(&port, 4);
    ASSERT_GE(listen_, 0);
    WorkerAddress peer;
    peer.workerId = 0x77;
    peer.rails = {{htonl(INADDR_LOOPBACK), port, 10000}};
    ASSERT_TRUE(worker_->Connect(peer.Pack(), &ep_).ok());
    Progress();
    fd_ = accept(listen_, nullptr, nullptr);
    ASSERT_GE(fd_, 0);
    frames_ = std::make_unique<RawFrames>(fd_);
    FrameHeader hello;
    ASSERT_TRUE(frames_->Next([&] { Progress(); }, &hello));
    ASSERT_EQ(hello.frameType(), FrameType::kHello);
    src_.assign(4096, 'x');
    ASSERT_TRUE(domain_->Register(src_.data(), src_.size(), kAccessLocal, MemoryKind::kHost, &local_).ok());
    key_.softwareKey = 5;
    key_.base = 0x10000;
    key_.length = 1 << 20;
  }
  void TearDown() override {
    ep_.reset();
    if (fd_ >= 0) close(fd_);
    if (listen_ >= 0) close(listen_);
    worker_.reset();
    domain_.reset();
  }
  void Progress() { worker_->Progress(&events_); }
  void SendAck(uint64_t seq, uint64_t bound, uint16_t flags = 0) {
    FrameHeader h = MakeHeader(FrameType::kAck);
    h.flags = flags;
    h.seq = seq;
    h.offset = bound;
    SendAll(fd_, &h, sizeof h);
  }
  /// Progresses until `n` events or 10 s.
  bool EventsReach(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (events_.size() < n && std::chrono::steady_clock::now() < deadline) Progress();
    return events_.size() >= n;
  }
  /// The written frame of the next op (header checked as a Write).
  FrameHeader NextWrite() {
    FrameHeader h{};
    EXPECT_TRUE(frames_->Next([&] { Progress(); }, &h));
    EXPECT_EQ(h.frameType(), FrameType::kWrite);
    return h;
  }

  std::unique_ptr<Domain> domain_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<Endpoint> ep_;
  int listen_ = -1, fd_ = -1;
  std::unique_ptr<RawFrames> frames_;
  std::vector<char> src_;
  const Region* local_ = nullptr;
  RemoteKey key_;
  std::vector<Event> events_;
};

TEST_F(TcpAckInitiator, ABoundCompletesTheLazyWritesBelowItAndNothingElse) {
  ASSERT_TRUE(ep_->WriteLazy({local_, 0, 8}, key_, key_.base, 1, 7u).ok());
  ASSERT_TRUE(ep_->Write({local_, 8, 8}, key_, key_.base + 8, 2).ok());
  ASSERT_TRUE(ep_->WriteLazy({local_, 16, 8}, key_, key_.base + 16, 3).ok());
  FrameHeader w0 = NextWrite(), w1 = NextWrite(), w2 = NextWrite();
  EXPECT_EQ(w0.flags, kFlagLazyAck | kFlagImmediate);
  EXPECT_EQ(w1.flags, 0);
  EXPECT_EQ(w2.flags, kFlagLazyAck);
  EXPECT_EQ(w2.seq, 2u);
  SendAck(1, 0);  // the plain Write; a bound of 0 covers nothing
  ASSERT_TRUE(EventsReach(1));
  EXPECT_EQ(events_[0].kind, EventKind::kDone);
  EXPECT_EQ(events_[0].cookie, 2u);
  EXPECT_EQ(ep_->Outstanding(), 2u);
  SendAck(0, 2, kFlagBoundOnly);  // covers seq 0 (lazy) and 1 (done already)
  ASSERT_TRUE(EventsReach(2));
  EXPECT_EQ(events_[1].kind, EventKind::kDone);
  EXPECT_EQ(events_[1].cookie, 1u);
  SendAck(0, 1, kFlagBoundOnly);  // an older bound, late from another socket: nothing
  SendAck(0, 3, kFlagBoundOnly);
  ASSERT_TRUE(EventsReach(3));
  EXPECT_EQ(events_[2].cookie, 3u);
  EXPECT_EQ(events_.size(), 3u);
  EXPECT_EQ(ep_->Outstanding(), 0u);
  EXPECT_TRUE(ep_->status().ok()) << ep_->status().message();
}

TEST_F(TcpAckInitiator, AnAckOfItsOwnForALazyWriteIsMalformed) {
  ASSERT_TRUE(ep_->WriteLazy({local_, 0, 8}, key_, key_.base, 1).ok());
  NextWrite();
  SendAck(0, 1);
  ASSERT_TRUE(EventsReach(1));
  EXPECT_EQ(events_[0].kind, EventKind::kError);
  EXPECT_EQ(events_[0].cookie, 1u);
  EXPECT_EQ(events_[0].error.errc, FabricErrc::kMalformed);
  const std::string text = events_[0].error.ToString();
  EXPECT_NE(text.find("an ack of its own for a lazily acked Write"), std::string::npos) << text;
  EXPECT_NE(text.find("seq 0"), std::string::npos) << text;
  EXPECT_FALSE(ep_->status().ok());
}

TEST_F(TcpAckInitiator, ABoundPastThePostedOpsIsMalformed) {
  ASSERT_TRUE(ep_->WriteLazy({local_, 0, 8}, key_, key_.base, 1).ok());
  NextWrite();
  SendAck(0, 5, kFlagBoundOnly);
  ASSERT_TRUE(EventsReach(1));
  EXPECT_EQ(events_[0].kind, EventKind::kError) << "a bound past the posted ops completed a Write";
  const std::string text = events_[0].error.ToString();
  EXPECT_NE(text.find("MALFORMED"), std::string::npos) << text;
  EXPECT_NE(text.find("ack bound 5 passes ops never posted (next seq 1)"), std::string::npos) << text;
}

TEST_F(TcpAckInitiator, ABoundOverAWriteNotYetSentWholeIsMalformed) {
  // 64 MiB in 1 MiB chunks, 4 queued at a time: the raw target reads none of it, so
  // most chunks are still unqueued when its bound claims the Write is done.
  std::vector<char> big(64u << 20, 'y');
  const Region* rb = nullptr;
  ASSERT_TRUE(domain_->Register(big.data(), big.size(), kAccessLocal, MemoryKind::kHost, &rb).ok());
  RemoteKey k = key_;
  k.length = big.size();
  ASSERT_TRUE(ep_->WriteLazy({rb, 0, big.size()}, k, k.base, 1).ok());
  for (int i = 0; i < 50; ++i) Progress();
  SendAck(0, 1, kFlagBoundOnly);
  ASSERT_TRUE(EventsReach(1));
  EXPECT_EQ(events_[0].kind, EventKind::kError) << "a Write not sent whole completed";
  const std::string text = events_[0].error.ToString();
  EXPECT_NE(text.find("ack bound 1 passes a Write not yet sent whole"), std::string::npos) << text;
  ep_.reset();
  EXPECT_TRUE(domain_->Deregister(rb).ok());
}

}  // namespace
}  // namespace railyard::fabric::tcp
