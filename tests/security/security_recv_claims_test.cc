// Security: a hostile sender that speaks the wire protocol itself (wire_peer.h)
// against a receiving rank that drives the plugin through ncclNetPlugin_v11, as
// NCCL does (dlopen, tests/conformance/harness.h). The receiver's buffers are
// filled with guard bytes; no byte may land after a receive completed, after
// deregMr, or in another receive, and overlapping chunks must be refused by name.
//
// Rank 0 receives through the plugin; rank 1 is the hostile peer (no plugin).
// A connection has two data sockets, served by the receiver's two helper threads.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/harness.h"
#include "tests/security/wire_peer.h"

namespace railyard::security {
namespace {

using conformance::Buffer;
using conformance::CapturedWarnings;
using conformance::Rank;
using conformance::RunOptions;
using conformance::RunRanks;
using conformance::Session;
using conformance::WaitForWarning;

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;
constexpr int kDataSockets = 2;
constexpr char kGuard = 'G';

/// Tokens on the harness channel between the receiver (0) and the peer (1).
enum : uint64_t { kPosted = 1, kStaged = 2, kDeregistered = 3, kLateSent = 4, kDone = 5, kMorePosted = 6 };

RunOptions Options() {
  RunOptions o;
  o.nranks = 2;
  o.timeout = Ms(40000);
  o.pluginTimeoutMs = 5000;
  return o;
}

/// The receiving rank: plugin session, a listen comm and the accepted connection.
struct Receiver {
  Session session;
  void* listen = nullptr;
  void* recv = nullptr;

  /// Listens, hands the peer the handle and accepts its connection.
  bool Open(Rank& r) {
    if (!session.ok()) return false;
    char handle[kHandle] = {};
    EXPECT_EQ(session.net().Listen(0, handle, &listen), ncclSuccess);
    if (listen == nullptr || !r.Send(1, handle, kHandle)) return false;
    const ncclResult_t rc = session.net().ConnectAccept(0, nullptr, nullptr, listen, &recv, r.deadline());
    EXPECT_EQ(rc, ncclSuccess) << CapturedWarnings();
    return rc == ncclSuccess;
  }
  /// One guarded, registered buffer with one receive posted into it.
  struct Posted {
    std::unique_ptr<Buffer> buf;
    void* mh = nullptr;
    void* req = nullptr;
  };
  ncclResult_t Post(size_t bytes, Posted* p) {
    p->buf = std::make_unique<Buffer>(bytes);
    std::memset(p->buf->data(), kGuard, bytes);
    if (session.net().RegMr(recv, p->buf->data(), bytes, &p->mh) != ncclSuccess) return ncclInternalError;
    void* data = p->buf->data();
    size_t size = bytes;
    int tag = 1;
    return session.net().Irecv(recv, 1, &data, &size, &tag, &p->mh, &p->req);
  }
  /// test() until done or an error, at most `ms`. Returns the last rc; *done as test().
  ncclResult_t TestUntil(void* req, int ms, int* done, int* size) {
    const auto until = Clock::now() + Ms(ms);
    ncclResult_t rc = ncclSuccess;
    *done = 0;
    while (Clock::now() < until) {
      rc = session.net().Test(req, done, size);
      if (rc != ncclSuccess || *done) break;
      std::this_thread::yield();
    }
    return rc;
  }
  ~Receiver() {
    if (recv != nullptr) session.net().CloseRecv(recv);
    if (listen != nullptr) session.net().CloseListen(listen);
  }
};

/// Watches `bytes` of `data` for up to `ms` and returns the offset of the first byte
/// that differs from `expected`, or SIZE_MAX if it never does (a bounded look for a
/// late write; the violation, when there is one, shows within milliseconds).
size_t WatchForChange(const char* data, const std::vector<char>& expected, int ms) {
  const auto until = Clock::now() + Ms(ms);
  do {
    for (size_t i = 0; i < expected.size(); ++i) {
      if (data[i] != expected[i]) return i;
    }
    std::this_thread::sleep_for(Ms(5));
  } while (Clock::now() < until);
  return SIZE_MAX;
}

/// The peer's side of the opening: the connection, then the CTS of the first receive.
bool PeerOpen(Rank& r, RawConnection* c, proxy::CtsRecord* cts) {
  char handle[kHandle] = {};
  if (!r.Recv(0, handle, kHandle)) return false;
  proxy::ListenAddress to;
  if (!DecodeListenHandle(handle, &to)) return false;
  OpenConnection(to, kDataSockets, r.deadline(), c);
  if (!c->ok() || !r.Expect(0, kPosted)) return false;
  return ReadCts(*c, cts, r.deadline());
}

/// The attack of issue 9 item 1: chunk header for seq 0 on data socket 2 (and
/// `firstPayload` bytes of its payload), wait until the receiver has read it, then
/// a whole chunk over the same bytes on data socket 1.
bool StageHeaderThenWholeChunk(const RawConnection& c, const proxy::CtsRecord& cts, uint64_t total,
                               uint64_t lateOff, uint32_t lateLen, size_t firstPayload, uint64_t wholeOff,
                               uint32_t wholeLen, char wholeFill, Clock::time_point deadline) {
  const proxy::ChunkHeader late = Chunk(cts, 0, lateOff, lateLen, total);
  std::vector<char> first(firstPayload, 'A');
  if (!SendAll(c.socks[2].fd, &late, sizeof late, deadline)) return false;
  if (!first.empty() && !SendAll(c.socks[2].fd, first.data(), first.size(), deadline)) return false;
  EXPECT_TRUE(WaitConsumed(c.socks[2], deadline)) << "the receiver never read data socket 2";
  const proxy::ChunkHeader whole = Chunk(cts, 0, wholeOff, wholeLen, total);
  std::vector<char> payload(wholeLen, wholeFill);
  return SendAll(c.socks[1].fd, &whole, sizeof whole, deadline) &&
         SendAll(c.socks[1].fd, payload.data(), payload.size(), deadline);
}

TEST(SecurityRecvClaims, LatePayloadOnAnotherSocketNeverLandsAfterCompletionOrDeregMr) {
  RunRanks(Options(), [](Rank& r) {
    if (r.rank() == 0) {
      Receiver rx;
      ASSERT_TRUE(rx.Open(r));
      Receiver::Posted p;
      ASSERT_EQ(rx.Post(4096, &p), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kPosted));
      ASSERT_TRUE(r.Expect(1, kStaged));
      int done = 0, size = -1;
      const ncclResult_t rc = rx.TestUntil(p.req, 5000, &done, &size);
      EXPECT_FALSE(rc == ncclSuccess && done)
          << "the receive completed from a whole chunk over bytes data socket 2 had claimed";
      EXPECT_NE(rc, ncclSuccess) << "the overlapping chunk must fail the receive";
      const std::string warn = WaitForWarning(
          [](const std::string& w) { return w.find("overlap") != std::string::npos; }, Clock::now() + Ms(3000));
      EXPECT_FALSE(warn.empty()) << "no warning names the overlap:\n" << CapturedWarnings();
      EXPECT_NE(warn.find("seq 0"), std::string::npos) << warn;
      const std::vector<char> seen(p.buf->data(), p.buf->data() + 4096);
      EXPECT_EQ(conformance::FirstNotEqual(seen.data(), seen.size(), kGuard), SIZE_MAX)
          << "bytes of the refused chunk landed";
      EXPECT_EQ(rx.session.net().DeregMr(rx.recv, p.mh), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kDeregistered));
      ASSERT_TRUE(r.Expect(1, kLateSent));
      const size_t changed = WatchForChange(p.buf->data(), seen, 500);
      EXPECT_EQ(changed, SIZE_MAX) << "byte " << changed << " of the buffer was overwritten after "
                                   << (done ? "completion and " : "") << "deregMr (now '"
                                   << p.buf->data()[changed == SIZE_MAX ? 0 : changed] << "')";
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      RawConnection c;
      proxy::CtsRecord cts{};
      ASSERT_TRUE(PeerOpen(r, &c, &cts));
      ASSERT_TRUE(StageHeaderThenWholeChunk(c, cts, 4096, 0, 4096, 0, 0, 4096, 'A', r.deadline()));
      ASSERT_TRUE(r.SendU64(0, kStaged));
      ASSERT_TRUE(r.Expect(0, kDeregistered));
      std::vector<char> late(4096, 'B');
      ASSERT_TRUE(SendAll(c.socks[2].fd, late.data(), late.size(), r.deadline()));
      (void)WaitConsumed(c.socks[2], Clock::now() + Ms(1000));  // a receiver that stopped reading is fine
      ASSERT_TRUE(r.SendU64(0, kLateSent));
      ASSERT_TRUE(r.Expect(0, kDone));
    }
  });
}

TEST(SecurityRecvClaims, Seq32NeverCompletesWithBytesNobodyWrote) {
  RunRanks(Options(), [](Rank& r) {
    if (r.rank() == 0) {
      Receiver rx;
      ASSERT_TRUE(rx.Open(r));
      Receiver::Posted first;
      ASSERT_EQ(rx.Post(4096, &first), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kPosted));
      ASSERT_TRUE(r.Expect(1, kStaged));
      int done = 0, size = -1;
      const ncclResult_t rc = rx.TestUntil(first.req, 5000, &done, &size);
      // seq 1..32 (seq 32 reuses seq 0's table entry), if the comm still takes receives.
      std::vector<Receiver::Posted> later(32);
      int posted = 0;
      if (rc == ncclSuccess && done) {
        for (Receiver::Posted& p : later) {
          if (rx.Post(4096, &p) != ncclSuccess) break;
          ++posted;
        }
      } else {
        Receiver::Posted probe;
        EXPECT_NE(rx.Post(4096, &probe), ncclSuccess) << "a failed comm must refuse new receives";
      }
      ASSERT_TRUE(r.SendU64(1, posted));
      ASSERT_TRUE(r.Expect(1, kLateSent));
      if (posted == 32) {
        int done32 = 0;
        const ncclResult_t rc32 = rx.TestUntil(later[31].req, 500, &done32, &size);
        EXPECT_FALSE(rc32 == ncclSuccess && done32)
            << "seq 32 completed although nobody sent it a byte (first wrong byte at "
            << conformance::FirstNotEqual(later[31].buf->data(), 4096, 'A') << ")";
      }
      EXPECT_FALSE(rc == ncclSuccess && done) << "seq 0 completed from a chunk overlapping a claim";
      EXPECT_FALSE(WaitForWarning([](const std::string& w) { return w.find("overlap") != std::string::npos; },
                                  Clock::now() + Ms(3000))
                       .empty())
          << CapturedWarnings();
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      RawConnection c;
      proxy::CtsRecord cts{};
      ASSERT_TRUE(PeerOpen(r, &c, &cts));
      ASSERT_TRUE(StageHeaderThenWholeChunk(c, cts, 4096, 0, 4096, 0, 0, 4096, 'A', r.deadline()));
      ASSERT_TRUE(r.SendU64(0, kStaged));
      uint64_t posted = 0;
      ASSERT_TRUE(r.RecvU64(0, &posted));
      for (uint64_t i = 0; i < posted; ++i) {
        proxy::CtsRecord more{};
        ASSERT_TRUE(ReadCts(c, &more, r.deadline()));  // the peer reads them, sends nothing for them
      }
      std::vector<char> late(4096, 'B');  // the payload of the header sent first
      ASSERT_TRUE(SendAll(c.socks[2].fd, late.data(), late.size(), r.deadline()));
      (void)WaitConsumed(c.socks[2], Clock::now() + Ms(1000));
      ASSERT_TRUE(r.SendU64(0, kLateSent));
      ASSERT_TRUE(r.Expect(0, kDone));
    }
  });
}

TEST(SecurityRecvClaims, OverlappingChunksAtDifferentOffsetsAreRefused) {
  RunRanks(Options(), [](Rank& r) {
    if (r.rank() == 0) {
      Receiver rx;
      ASSERT_TRUE(rx.Open(r));
      Receiver::Posted p;
      ASSERT_EQ(rx.Post(8192, &p), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kPosted));
      ASSERT_TRUE(r.Expect(1, kStaged));
      int done = 0, size = -1;
      ncclResult_t rc = rx.TestUntil(p.req, 5000, &done, &size);
      EXPECT_NE(rc, ncclSuccess);
      EXPECT_FALSE(done);
      const std::string warn = WaitForWarning(
          [](const std::string& w) { return w.find("overlap") != std::string::npos; }, Clock::now() + Ms(3000));
      EXPECT_NE(warn.find("[2048, 6144)"), std::string::npos) << "the refusal names the bytes:\n" << warn;
      const char* b = p.buf->data();
      EXPECT_EQ(conformance::FirstNotEqual(b, 1000, 'A'), SIZE_MAX) << "the claimed chunk's first bytes";
      EXPECT_EQ(conformance::FirstNotEqual(b + 1000, 8192 - 1000, kGuard), SIZE_MAX)
          << "bytes of the overlapping chunk landed";
      const std::vector<char> seen(b, b + 8192);
      ASSERT_TRUE(r.SendU64(1, kDeregistered));  // "go on"
      ASSERT_TRUE(r.Expect(1, kLateSent));
      EXPECT_EQ(WatchForChange(b, seen, 500), SIZE_MAX) << "the rest of data socket 2's chunk landed in a failed receive";
      rc = rx.session.net().Test(p.req, &done, &size);
      EXPECT_FALSE(rc == ncclSuccess && done) << "the receive completed with bytes [6144, 8192) never sent";
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      RawConnection c;
      proxy::CtsRecord cts{};
      ASSERT_TRUE(PeerOpen(r, &c, &cts));
      // Data socket 2 claims [0, 4096) and sends 1000 bytes; data socket 1 a whole
      // chunk [2048, 6144).
      ASSERT_TRUE(StageHeaderThenWholeChunk(c, cts, 8192, 0, 4096, 1000, 2048, 4096, 'C', r.deadline()));
      ASSERT_TRUE(r.SendU64(0, kStaged));
      ASSERT_TRUE(r.Expect(0, kDeregistered));
      std::vector<char> rest(3096, 'A');
      ASSERT_TRUE(SendAll(c.socks[2].fd, rest.data(), rest.size(), r.deadline()));
      (void)WaitConsumed(c.socks[2], Clock::now() + Ms(1000));
      ASSERT_TRUE(r.SendU64(0, kLateSent));
      ASSERT_TRUE(r.Expect(0, kDone));
    }
  });
}

TEST(SecurityRecvClaims, DeregMrWithAChunkStillArrivingLetsNoByteLand) {
  RunRanks(Options(), [](Rank& r) {
    if (r.rank() == 0) {
      Receiver rx;
      ASSERT_TRUE(rx.Open(r));
      Receiver::Posted p;
      ASSERT_EQ(rx.Post(8192, &p), ncclSuccess);
      ASSERT_TRUE(r.SendU64(1, kPosted));
      ASSERT_TRUE(r.Expect(1, kStaged));
      int done = 0, size = -1;
      ncclResult_t rc = rx.session.net().Test(p.req, &done, &size);
      EXPECT_EQ(rc, ncclSuccess) << CapturedWarnings();
      EXPECT_FALSE(done) << "[100, 4096) has not arrived";
      // NCCL's teardown order (src/transport/net.cc recvProxyFree): deregMr, free, then closeRecv.
      ASSERT_EQ(rx.session.net().DeregMr(rx.recv, p.mh), ncclSuccess);
      const std::vector<char> seen(p.buf->data(), p.buf->data() + 8192);
      ASSERT_TRUE(r.SendU64(1, kDeregistered));
      ASSERT_TRUE(r.Expect(1, kLateSent));
      const size_t changed = WatchForChange(p.buf->data(), seen, 500);
      EXPECT_EQ(changed, SIZE_MAX) << "byte " << changed << " landed after deregMr";
      rc = rx.TestUntil(p.req, 3000, &done, &size);
      EXPECT_NE(rc, ncclSuccess) << "the refused payload must fail the receive";
      EXPECT_FALSE(done);
      EXPECT_FALSE(WaitForWarning([](const std::string& w) { return w.find("deregistered") != std::string::npos; },
                                  Clock::now() + Ms(3000))
                       .empty())
          << CapturedWarnings();
      ASSERT_TRUE(r.SendU64(1, kDone));
    } else {
      RawConnection c;
      proxy::CtsRecord cts{};
      ASSERT_TRUE(PeerOpen(r, &c, &cts));
      // Data socket 2: [0, 4096) with 100 bytes so far; data socket 1: [4096, 8192) whole.
      ASSERT_TRUE(StageHeaderThenWholeChunk(c, cts, 8192, 0, 4096, 100, 4096, 4096, 'C', r.deadline()));
      EXPECT_TRUE(WaitConsumed(c.socks[1], r.deadline()));
      ASSERT_TRUE(r.SendU64(0, kStaged));
      ASSERT_TRUE(r.Expect(0, kDeregistered));
      std::vector<char> rest(3996, 'B');
      ASSERT_TRUE(SendAll(c.socks[2].fd, rest.data(), rest.size(), r.deadline()));
      (void)WaitConsumed(c.socks[2], Clock::now() + Ms(1000));
      ASSERT_TRUE(r.SendU64(0, kLateSent));
      ASSERT_TRUE(r.Expect(0, kDone));
    }
  });
}

}  // namespace
}  // namespace railyard::security
