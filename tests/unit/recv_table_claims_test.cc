// RecvTable claims: a chunk claims its bytes when its header is accepted; the
// receive completes only once every claim landed; a late payload cannot land in a
// receive that was reused, deregistered or whose comm failed; overlaps are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "proxy/mr_cache.h"
#include "proxy/protocol/recv_table.h"

namespace railyard::proxy {
namespace {

constexpr int kPtrHost = 1;  // NCCL_PTR_HOST

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

class RecvTableClaims : public ::testing::Test {
 protected:
  struct Posted {
    std::vector<char> buf;
    MemoryRegion* mr = nullptr;
    RecvTable::Entry* entry = nullptr;
    CtsRecord cts{};
  };

  /// Posts one receive of `bytes` (registered in its own region).
  void Post(Posted* p, size_t bytes) {
    p->buf.assign(bytes, 'G');  // guard bytes
    ASSERT_TRUE(cache_.Register(p->buf.data(), p->buf.size(), kPtrHost, &p->mr).ok());
    void* data = p->buf.data();
    int tag = 3;
    Status s = table_.Post(1, &data, &bytes, &tag, &p->mr, &p->entry, &p->cts);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  static ChunkHeader Header(const CtsRecord& cts, uint64_t off, uint32_t len, uint64_t total) {
    ChunkHeader h{};
    h.header = MakeHeader(RecordKind::kChunk);
    h.seq = cts.seq;
    h.slot = 0;
    h.len = len;
    h.addr = cts.entries[0].addr + off;
    h.total = total;
    h.rkey = cts.entries[0].rkey;
    return h;
  }
  /// What a chunk reader does with `bytes` payload bytes of claim `c`.
  Status Write(RecvTable::ChunkClaim* c, size_t bytes, char fill) {
    RecvTable::WritePin pin;
    RY_RETURN_IF_ERROR(table_.BeginWrite(*c, &pin));
    std::memset(c->Next(), fill, bytes);
    pin.Release();
    return table_.EndWrite(c, bytes);
  }

  MrCache cache_;
  Poison poison_;
  RecvTable table_{nullptr, &cache_, &poison_};
};

TEST_F(RecvTableClaims, ReceiveCompletesOnlyWhenEveryClaimHasLanded) {
  Posted p;
  Post(&p, 8192);
  RecvTable::ChunkClaim a, b;
  ASSERT_TRUE(table_.Claim(Header(p.cts, 0, 4096, 8192), &a).ok());
  ASSERT_TRUE(table_.Claim(Header(p.cts, 4096, 4096, 8192), &b).ok());
  ASSERT_TRUE(Write(&b, 4096, 'b').ok());
  EXPECT_FALSE(RecvTable::Done(*p.entry)) << "claim a has not landed";
  ASSERT_TRUE(Write(&a, 1000, 'a').ok());
  EXPECT_FALSE(RecvTable::Done(*p.entry));
  ASSERT_TRUE(Write(&a, 3096, 'a').ok());
  EXPECT_TRUE(RecvTable::Done(*p.entry));
  EXPECT_EQ(p.entry->total[0].load(), 8192);
  EXPECT_EQ(p.buf[0], 'a');
  EXPECT_EQ(p.buf[8191], 'b');
}

TEST_F(RecvTableClaims, AWholeChunkOverAClaimStillArrivingIsRefused) {
  // Header on one socket, then the same bytes as a whole chunk on another.
  Posted p;
  Post(&p, 4096);
  RecvTable::ChunkClaim late, whole;
  ASSERT_TRUE(table_.Claim(Header(p.cts, 0, 4096, 4096), &late).ok());
  const Status s = table_.Claim(Header(p.cts, 0, 4096, 4096), &whole);
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_TRUE(Has(s, "overlap")) << s.message();
  EXPECT_TRUE(Has(s, "seq 0 slot 0")) << s.message();
  EXPECT_FALSE(RecvTable::Done(*p.entry));
  EXPECT_TRUE(Has(table_.Claim(Header(p.cts, 2048, 100, 4096), &whole), "overlap"));
}

TEST_F(RecvTableClaims, ALatePayloadCannotLandInTheEntryReusedForSeqPlus32) {
  Posted first;
  Post(&first, 4096);
  RecvTable::ChunkClaim stale;
  ASSERT_TRUE(table_.Claim(Header(first.cts, 0, 4096, 4096), &stale).ok());
  RecvTable::Release(*first.entry);  // as a failed irecv or a close would
  std::vector<Posted> later(32);
  for (Posted& p : later) Post(&p, 4096);
  ASSERT_EQ(later[31].cts.seq, 32u);
  ASSERT_EQ(later[31].entry, first.entry) << "seq 32 reuses seq 0's entry";
  const Status w = Write(&stale, 4096, 'X');
  EXPECT_EQ(w.code(), Code::kRemoteError);
  EXPECT_TRUE(Has(w, "no longer posted")) << w.message();
  EXPECT_EQ(table_.EndWrite(&stale, 4096).code(), Code::kRemoteError) << "EndWrite re-checks the seq too";
  EXPECT_FALSE(RecvTable::Done(*later[31].entry));
  EXPECT_EQ(first.buf, std::vector<char>(4096, 'G'));
  EXPECT_EQ(later[31].buf, std::vector<char>(4096, 'G'));
  // A header for seq 0 now finds seq 32 there.
  RecvTable::ChunkClaim again;
  EXPECT_TRUE(Has(table_.Claim(Header(first.cts, 0, 4096, 4096), &again), "not posted"));
}

TEST_F(RecvTableClaims, NoByteLandsAfterDeregMrOfABufferWithAClaimInFlight) {
  Posted p;
  Post(&p, 8192);
  RecvTable::ChunkClaim c;
  ASSERT_TRUE(table_.Claim(Header(p.cts, 0, 8192, 8192), &c).ok());
  ASSERT_TRUE(Write(&c, 100, 'x').ok());
  ASSERT_TRUE(cache_.Deregister(p.mr).ok());
  const Status s = Write(&c, 100, 'y');
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_TRUE(Has(s, "deregistered")) << s.message();
  EXPECT_EQ(p.buf[100], 'G');
  EXPECT_FALSE(RecvTable::Done(*p.entry));
}

TEST_F(RecvTableClaims, DeregMrWaitsForAWriteInProgress) {
  Posted p;
  Post(&p, 4096);
  RecvTable::ChunkClaim c;
  ASSERT_TRUE(table_.Claim(Header(p.cts, 0, 4096, 4096), &c).ok());
  RecvTable::WritePin pin;
  ASSERT_TRUE(table_.BeginWrite(c, &pin).ok());
  std::atomic<bool> deregistered{false};
  std::thread t([&] {
    EXPECT_TRUE(cache_.Deregister(p.mr).ok());
    deregistered = true;
  });
  // Bounded look for the violation: deregMr returning while the write is pinned.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (!deregistered && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_FALSE(deregistered) << "deregMr returned while a write into the region was in progress";
  std::memset(c.Next(), 'w', 4096);
  pin.Release();
  t.join();
  EXPECT_TRUE(deregistered);
  EXPECT_EQ(cache_.Size(), 0u);
}

TEST_F(RecvTableClaims, NothingLandsAfterTheCommFailed) {
  Posted p;
  Post(&p, 4096);
  RecvTable::ChunkClaim c;
  ASSERT_TRUE(table_.Claim(Header(p.cts, 0, 2048, 4096), &c).ok());
  poison_.Set(RemoteError("test fault"), false);
  EXPECT_TRUE(Has(Write(&c, 2048, 'x'), "failed"));
  RecvTable::ChunkClaim d;
  EXPECT_TRUE(Has(table_.Claim(Header(p.cts, 2048, 2048, 4096), &d), "failed"));
  EXPECT_EQ(p.buf, std::vector<char>(4096, 'G'));
}

TEST_F(RecvTableClaims, BadHeadersAreRefusedBeforeAnyClaim) {
  Posted p;
  Post(&p, 4096);
  RecvTable::ChunkClaim c;
  ChunkHeader h = Header(p.cts, 0, 4096, 4096);
  h.slot = 1;
  EXPECT_TRUE(Has(table_.Claim(h, &c), "buffer index"));
  h = Header(p.cts, 0, 4096, 8192);
  EXPECT_TRUE(Has(table_.Claim(h, &c), "8192 bytes"));
  h = Header(p.cts, 0, 4096, 4096);
  h.rkey += 1;
  EXPECT_TRUE(Has(table_.Claim(h, &c), "outside the posted"));
  h = Header(p.cts, 1, 4096, 4096);
  EXPECT_TRUE(Has(table_.Claim(h, &c), "outside"));
  h = Header(p.cts, 0, 0, 4096);
  EXPECT_FALSE(table_.Claim(h, &c).ok()) << "an empty chunk of a non-empty message";
  h = Header(p.cts, 0, 4096, 4096);
  h.seq = 1;
  EXPECT_TRUE(Has(table_.Claim(h, &c), "not posted"));
  EXPECT_TRUE(table_.Claim(Header(p.cts, 0, 4096, 4096), &c).ok()) << "nothing was claimed by the refusals";
}

TEST_F(RecvTableClaims, ClaimLandedCompletesPartsOnceAndRefusesRepeats) {
  // The verbs path: parts arrive with their data already placed.
  Posted p;
  Post(&p, 10000);
  ASSERT_TRUE(table_.ClaimLanded(Header(p.cts, 0, 6000, 10000)).ok());
  EXPECT_FALSE(RecvTable::Done(*p.entry));
  EXPECT_TRUE(Has(table_.ClaimLanded(Header(p.cts, 0, 6000, 10000)), "overlap")) << "a repeated part";
  ASSERT_TRUE(table_.ClaimLanded(Header(p.cts, 6000, 4000, 10000)).ok());
  EXPECT_TRUE(RecvTable::Done(*p.entry));
  EXPECT_FALSE(table_.ClaimLanded(Header(p.cts, 6000, 4000, 10000)).ok()) << "after completion";
  Posted empty;
  Post(&empty, 64);
  ASSERT_TRUE(table_.ClaimLanded(Header(empty.cts, 0, 0, 0)).ok());
  EXPECT_TRUE(RecvTable::Done(*empty.entry));
  EXPECT_EQ(empty.entry->total[0].load(), 0);
}

}  // namespace
}  // namespace railyard::proxy
