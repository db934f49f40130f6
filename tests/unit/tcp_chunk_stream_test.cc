// ChunkWriter → socket → ChunkReader with non-blocking calls that stop anywhere:
// small socket buffers force partial headers and payloads; every chunk must land
// intact in the posted buffer, be counted once, and a chunk the posted receive
// does not allow must be refused before its payload lands.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include "proxy/mr_cache.h"
#include "proxy/protocol/recv_table.h"
#include "proxy/tcp/tcp_chunk_reader.h"
#include "proxy/tcp/tcp_chunk_writer.h"

namespace railyard::proxy {
namespace {

constexpr int kPtrHost = 1;  // NCCL_PTR_HOST

class ChunkStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    const int small = 4096;  // far smaller than a chunk: every call stops part-way
    ::setsockopt(fds_[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(fds_[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }

  /// Posts one receive of `bytes` into dst_ and returns its CTS record.
  CtsRecord Post(size_t bytes) {
    dst_.assign(bytes, 0);
    MemoryRegion* mr = nullptr;
    EXPECT_TRUE(cache_.Register(dst_.data(), dst_.size(), kPtrHost, &mr).ok());
    mr_ = mr;
    void* data = dst_.data();
    size_t size = bytes;
    int tag = 7;
    RecvTable::Entry* e = nullptr;
    CtsRecord cts{};
    EXPECT_TRUE(table_.Post(1, &data, &size, &tag, &mr, &e, &cts).ok());
    entry_ = e;
    return cts;
  }

  /// Chunk `off`..`off+len` of a `total`-byte message from src into the posted buffer.
  OutChunk Chunk(const CtsRecord& cts, const char* src, size_t off, size_t len, size_t total) {
    OutChunk c{};
    c.header.header = MakeHeader(RecordKind::kChunk);
    c.header.seq = cts.seq;
    c.header.slot = 0;
    c.header.len = static_cast<uint32_t>(len);
    c.header.addr = cts.entries[0].addr + off;
    c.header.total = total;
    c.header.rkey = cts.entries[0].rkey;
    c.payload = src + off;
    c.written = &written_;
    return c;
  }

  int fds_[2] = {-1, -1};
  MrCache cache_;
  RecvTable table_{nullptr, &cache_};
  RecvTable::Entry* entry_ = nullptr;
  MemoryRegion* mr_ = nullptr;  ///< registration of dst_
  std::vector<char> dst_;
  std::atomic<int> written_{0};
};

TEST_F(ChunkStreamTest, PartialWritesAndReadsLandEveryChunkIntact) {
  constexpr size_t kTotal = 300000;  // 5 chunks, the last one short
  constexpr size_t kChunk = 65536;
  std::vector<char> src(kTotal);
  std::iota(src.begin(), src.end(), 0);
  const CtsRecord cts = Post(kTotal);
  ChunkWriter w(fds_[0], "data socket 1");
  int chunks = 0;
  for (size_t off = 0; off < kTotal; off += kChunk, ++chunks) {
    w.Push(Chunk(cts, src.data(), off, std::min(kChunk, kTotal - off), kTotal));
  }
  ChunkReader r(fds_[1], "data socket 1 from test", "test");
  int calls = 0;
  while (!RecvTable::Done(*entry_) && calls < 1000000) {
    size_t wrote = 0, read = 0;
    bool eof = false;
    ASSERT_TRUE(w.WriteSome(1 << 20, &wrote).ok());
    const Status s = r.ReadSome(table_, 1000, &read, &eof);  // small budget: stop mid-chunk too
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_FALSE(eof);
    ++calls;
  }
  EXPECT_TRUE(RecvTable::Done(*entry_));
  EXPECT_TRUE(w.Idle());
  EXPECT_EQ(written_.load(), chunks);
  EXPECT_GT(calls, chunks) << "the small buffers should have split the chunks";
  EXPECT_EQ(std::memcmp(dst_.data(), src.data(), kTotal), 0);
  EXPECT_EQ(entry_->total[0].load(), static_cast<int64_t>(kTotal));
}

TEST_F(ChunkStreamTest, ChunksAlreadyQueuedBackToBackAreReadAcrossTheirBoundaries) {
  constexpr size_t kTotal = 3000;  // three chunks that sit in the socket together
  std::vector<char> src(kTotal);
  std::iota(src.begin(), src.end(), 7);
  const CtsRecord cts = Post(kTotal);
  ChunkWriter w(fds_[0], "data socket 1");
  for (size_t off = 0; off < kTotal; off += 1000) w.Push(Chunk(cts, src.data(), off, 1000, kTotal));
  size_t wrote = 0;
  ASSERT_TRUE(w.WriteSome(1 << 20, &wrote).ok());
  ASSERT_TRUE(w.Idle());
  ChunkReader r(fds_[1], "data socket 1 from test", "test");
  size_t read = 0;
  bool eof = false;
  const Status s = r.ReadSome(table_, 1 << 20, &read, &eof);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(read, kTotal + 3 * sizeof(ChunkHeader));
  EXPECT_TRUE(RecvTable::Done(*entry_));
  EXPECT_EQ(std::memcmp(dst_.data(), src.data(), kTotal), 0);
}

TEST_F(ChunkStreamTest, ChunkOutsideThePostedBufferIsRefusedBeforeItsPayloadLands) {
  std::vector<char> src(8192, 'x');
  const CtsRecord cts = Post(4096);
  ChunkWriter w(fds_[0], "data socket 1");
  w.Push(Chunk(cts, src.data(), 0, 8192, 8192));  // twice the posted buffer
  ChunkReader r(fds_[1], "data socket 1 from test", "test");
  size_t wrote = 0, read = 0;
  bool eof = false;
  ASSERT_TRUE(w.WriteSome(1 << 20, &wrote).ok());
  Status s = Status::Ok();
  for (int i = 0; i < 1000 && s.ok() && read == 0; ++i) s = r.ReadSome(table_, 1 << 20, &read, &eof);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(from test)"), std::string::npos) << s.message();
  EXPECT_EQ(std::count(dst_.begin(), dst_.end(), 'x'), 0) << "payload bytes landed";
}

TEST_F(ChunkStreamTest, CleanCloseBetweenChunksIsEofAndInsideAChunkIsAnError) {
  std::vector<char> src(1000, 'y');
  const CtsRecord cts = Post(1000);
  {
    ChunkReader r(fds_[1], "data socket 1 from test", "test");
    ::shutdown(fds_[0], SHUT_WR);
    size_t read = 0;
    bool eof = false;
    ASSERT_TRUE(r.ReadSome(table_, 1 << 20, &read, &eof).ok());
    EXPECT_TRUE(eof);
    EXPECT_FALSE(r.open());
  }
  TearDown();
  SetUp();
  OutChunk c = Chunk(cts, src.data(), 0, 1000, 1000);
  ASSERT_EQ(::send(fds_[0], &c.header, sizeof c.header, 0), static_cast<ssize_t>(sizeof c.header));
  ASSERT_EQ(::send(fds_[0], src.data(), 10, 0), 10);
  ::shutdown(fds_[0], SHUT_WR);
  ChunkReader r(fds_[1], "data socket 1 from test", "test");
  size_t read = 0;
  bool eof = false;
  const Status s = r.ReadSome(table_, 1 << 20, &read, &eof);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("connection closed by peer after 10 of 1000 bytes"), std::string::npos)
      << s.message();
}

TEST_F(ChunkStreamTest, LatePayloadOfAClaimedChunkCannotLandAfterDeregMr) {
  // Two data sockets of one connection, one table: socket A sends a header and
  // part of its payload, socket B a whole chunk over the same bytes, then the
  // buffer is deregistered and A's payload resumes.
  int other[2] = {-1, -1};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, other), 0);
  const CtsRecord cts = Post(4096);
  std::vector<char> a(4096, 'a'), b(4096, 'b');
  OutChunk ca = Chunk(cts, a.data(), 0, 4096, 4096);
  ASSERT_EQ(::send(fds_[0], &ca.header, sizeof ca.header, 0), static_cast<ssize_t>(sizeof ca.header));
  ASSERT_EQ(::send(fds_[0], a.data(), 100, 0), 100);
  ChunkReader ra(fds_[1], "data socket 1 from test", "test");
  size_t read = 0;
  bool eof = false;
  ASSERT_TRUE(ra.ReadSome(table_, 1 << 20, &read, &eof).ok());
  ASSERT_EQ(read, sizeof ca.header + 100);

  OutChunk cb = Chunk(cts, b.data(), 0, 4096, 4096);
  ASSERT_EQ(::send(other[0], &cb.header, sizeof cb.header, 0), static_cast<ssize_t>(sizeof cb.header));
  ASSERT_EQ(::send(other[0], b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  ChunkReader rb(other[1], "data socket 2 from test", "test");
  Status s = rb.ReadSome(table_, 1 << 20, &read, &eof);
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.message();
  EXPECT_EQ(std::count(dst_.begin(), dst_.end(), 'b'), 0) << "the overlapping chunk landed";
  EXPECT_FALSE(RecvTable::Done(*entry_));

  ASSERT_TRUE(cache_.Deregister(mr_).ok());
  ASSERT_EQ(::send(fds_[0], a.data() + 100, 3996, 0), 3996);
  s = ra.ReadSome(table_, 1 << 20, &read, &eof);
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("deregistered"), std::string::npos) << s.message();
  EXPECT_EQ(std::count(dst_.begin(), dst_.end(), 'a'), 100) << "bytes landed after deregMr";
  EXPECT_FALSE(RecvTable::Done(*entry_));
  ::close(other[0]);
  ::close(other[1]);
}

}  // namespace
}  // namespace railyard::proxy
