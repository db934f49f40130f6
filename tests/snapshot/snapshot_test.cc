// The snapshot tier over the fabric (TCP on loopback, or verbs in the soft-RoCE lane
// with SNAPSHOT_TEST_TRANSPORT=verbs: snapshot_transport.h), against a real
// serving process (railyard-snapshot-peer): round trips of more blobs than the arena holds,
// raw mode, bad input, a malformed handshake, restarts with and without
// RAILYARD_SWAP_SYNC, torn swap records, a client killed between alloc and commit,
// the peer killed mid-put and mid-get, a full swap disk. Every check is by content.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "storage/snapshot/control_socket.h"
#include "storage/snapshot/snapshot_wire.h"
#include "tests/snapshot/snapshot_harness.h"
#include "tests/snapshot/snapshot_transport.h"

namespace railyard::storage::snapshot::testing {
namespace {

constexpr uint64_t kBlob = 256 * 1024;

std::string SendHeader(uint16_t port, const std::vector<uint8_t>& bytes);
constexpr uint64_t kSlots = 8;

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestUsesVerbs()) {
      std::unique_ptr<fabric::Domain> probe;
      Status s = MakeTestDomain(Side::kClient, 1000, &probe);
      if (s.code() == Code::kInvalidUsage) GTEST_SKIP() << "no RDMA port here: " << s.message();
      ASSERT_TRUE(s.ok()) << s.message();
    }
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    side_.reset();
    peer_.reset();
    RemoveTree(dir_);
  }
  /// Starts a peer with a paging kind "kv" (kSlots x kBlob) and a raw kind "raw".
  void StartPeer(bool sync, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {PeerBinary(), "--arena",
                                     "kind=kv,mode=paging,blob=" + std::to_string(kBlob) + ",slots=" + std::to_string(kSlots),
                                     "--arena", "kind=raw,mode=raw,blob=64K,slots=16", "--swap-dir", dir_};
    if (sync) argv.push_back("--sync");
    argv.insert(argv.end(), extra.begin(), extra.end());
    peer_ = std::make_unique<PeerProcess>();
    std::string why;
    ASSERT_TRUE(peer_->Start(argv, &why)) << why;
  }
  /// A peer of kind "big" (blob 1 MiB, 2 slots, no sync) whose swap directory is a
  /// tmpfs of 4 MiB: the 4 KiB file header and three 1 MiB + 4 KiB records fit, the
  /// fourth does not. *skipped when no tmpfs can be mounted here.
  void StartOnSmallDisk(bool* skipped) {
    peer_ = std::make_unique<PeerProcess>();
    std::string why;
    int code = 0;
    *skipped = false;
    if (!peer_->Start({PeerBinary(), "--arena", "kind=big,mode=paging,blob=1M,slots=2", "--swap-dir", dir_,
                       "--tmpfs-bytes", "4m"},
                      &why, &code)) {
      *skipped = code == 77;
      if (!*skipped) FAIL() << why;
    }
  }
  /// The client options of StartOnSmallDisk's kind.
  ClientOptions BigOnSmallDisk() const {
    ClientOptions o = Paging();
    o.kind = "big";
    o.blobBytes = 1 << 20;
    o.arenaBytes = 2 << 20;
    return o;
  }
  /// Starts a peer with control timeout `timeoutMs` (0: the peer's default) serving one
  /// paging arena "small" of `slots` blobs of kSmall bytes (no swap sync); the client
  /// options for it.
  static constexpr uint64_t kSmall = 64 * 1024;
  ClientOptions StartSmallPeer(int timeoutMs, uint64_t slots) {
    std::vector<std::string> args{"--arena", "kind=small,mode=paging,blob=64K,slots=" + std::to_string(slots)};
    if (timeoutMs > 0) args.insert(args.end(), {"--timeout-ms", std::to_string(timeoutMs)});
    StartPeer(false, args);
    ClientOptions o = Paging();
    o.kind = "small";
    o.blobBytes = kSmall;
    o.arenaBytes = slots * kSmall;
    return o;
  }
  ClientOptions Paging() const {
    ClientOptions o;
    o.port = peer_->port();
    o.kind = "kv";
    o.mode = Mode::kPaging;
    o.blobBytes = kBlob;
    o.arenaBytes = kBlob * kSlots;
    o.timeoutMs = 10000;
    o.mover.chunkBytes = 64 * 1024;  // several chunks per blob
    o.mover.chunksPerRail = 2;
    return o;
  }
  ClientOptions Raw() const {
    ClientOptions o = Paging();
    o.kind = "raw";
    o.mode = Mode::kRaw;
    o.blobBytes = 64 * 1024;
    o.arenaBytes = 64 * 1024 * 16;
    return o;
  }
  SnapshotClient& Connect(const ClientOptions& o) {
    side_ = std::make_unique<ClientSide>();
    Status s = side_->Connect(o);
    EXPECT_TRUE(s.ok()) << s.message();
    return *side_->client;
  }
  void PutAll(SnapshotClient& c, uint64_t first, uint64_t count) {
    std::vector<uint8_t> b(kBlob);
    for (uint64_t k = first; k < first + count; ++k) {
      Fill(b.data(), b.size(), k);
      Status s = c.Put(k, b.data(), b.size());
      ASSERT_TRUE(s.ok()) << "key " << k << ": " << s.message();
    }
  }
  void ExpectAll(SnapshotClient& c, uint64_t first, uint64_t count) {
    std::vector<uint8_t> b(kBlob);
    for (uint64_t k = first; k < first + count; ++k) {
      bool found = false;
      std::fill(b.begin(), b.end(), 0);
      Status s = c.Get(k, b.data(), b.size(), &found);
      ASSERT_TRUE(s.ok()) << "key " << k << ": " << s.message();
      ASSERT_TRUE(found) << "key " << k;
      ASSERT_EQ(Mismatch(b.data(), b.size(), k), -1) << "key " << k;
    }
  }

  std::string dir_;
  std::unique_ptr<PeerProcess> peer_;
  std::unique_ptr<ClientSide> side_;
};

TEST_F(SnapshotTest, PagingRoundTripsFiveTimesTheArenaByContent) {
  StartPeer(false);
  SnapshotClient& c = Connect(Paging());
  PutAll(c, 100, 5 * kSlots);
  // Read back in an order that faults most of them from swap, twice.
  ExpectAll(c, 100, 5 * kSlots);
  ExpectAll(c, 100, 5 * kSlots);
  // Overwrite one, read the new bytes; remove one, it is gone.
  std::vector<uint8_t> b(kBlob);
  Fill(b.data(), b.size(), 999);
  ASSERT_TRUE(c.Put(105, b.data(), b.size()).ok());
  bool found = false;
  ASSERT_TRUE(c.Get(105, b.data(), b.size(), &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), b.size(), 999), -1);
  ASSERT_TRUE(c.Remove(106, &found).ok());
  EXPECT_TRUE(found);
  ASSERT_TRUE(c.Get(106, b.data(), b.size(), &found).ok());
  EXPECT_FALSE(found);
  // The swap file holds the evicted blobs.
  std::ifstream swap(dir_ + "/railyard-snapshot-kv.swap", std::ios::ate | std::ios::binary);
  EXPECT_GE(static_cast<uint64_t>(swap.tellg()), 4 * kSlots * kBlob);
}

// Caller memory already registered (by NCCL's regMr on the same Domain, or here by the
// caller's own Acquire) is moved straight from and into: each put from it and get into
// it takes no staging copy (the mover counts them), checked by content past the arena
// (evictions and faults). A buffer a registration covers only in part, and any buffer
// once its registration is released, is staged as before.
TEST_F(SnapshotTest, RegisteredCallerMemoryMovesWithoutTheStagingCopy) {
  StartPeer(false);
  SnapshotClient& c = Connect(Paging());
  // Registered whole; blobs move from and into it 4 KiB past the registration's start.
  std::vector<uint8_t> b(kBlob + 8192);
  uint8_t* p = b.data() + 4096;
  const fabric::Region* reg = nullptr;
  ASSERT_TRUE(side_->cache->Acquire(b.data(), b.size(), fabric::kAccessLocal, fabric::MemoryKind::kHost, &reg).ok());
  const uint64_t blobs = 2 * kSlots;
  for (uint64_t k = 0; k < blobs; ++k) {
    Fill(p, kBlob, k);
    Status s = c.Put(k, p, kBlob);
    ASSERT_TRUE(s.ok()) << "key " << k << ": " << s.message();
  }
  EXPECT_EQ(c.mover().directMoves(), blobs);
  for (uint64_t k = 0; k < blobs; ++k) {
    std::fill(b.begin(), b.end(), 0);
    bool found = false;
    Status s = c.Get(k, p, kBlob, &found);
    ASSERT_TRUE(s.ok()) << "key " << k << ": " << s.message();
    ASSERT_TRUE(found);
    ASSERT_EQ(Mismatch(p, kBlob, k), -1) << "key " << k;
    ASSERT_EQ(std::count(b.begin(), b.begin() + 4096, 0), 4096) << "bytes landed before the blob";
    ASSERT_EQ(std::count(p + kBlob, b.data() + b.size(), 0), 4096) << "bytes landed after the blob";
  }
  EXPECT_EQ(c.mover().directMoves(), 2 * blobs);
  // A buffer a registration covers only in part (its first half): staged, still right.
  std::vector<uint8_t> half(2 * kBlob);
  const fabric::Region* partial = nullptr;
  ASSERT_TRUE(
      side_->cache->Acquire(half.data(), kBlob, fabric::kAccessLocal, fabric::MemoryKind::kHost, &partial).ok());
  uint8_t* straddle = half.data() + kBlob / 2;
  Fill(straddle, kBlob, 777);
  ASSERT_TRUE(c.Put(blobs, straddle, kBlob).ok());
  std::fill(half.begin(), half.end(), 0);
  bool found = false;
  ASSERT_TRUE(c.Get(blobs, straddle, kBlob, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(straddle, kBlob, 777), -1);
  EXPECT_EQ(c.mover().directMoves(), 2 * blobs);
  ASSERT_TRUE(side_->cache->Release(partial).ok());
  // Released: the same buffer is staged again, and the mover held no count of its own.
  ASSERT_TRUE(side_->cache->Release(reg).ok());
  EXPECT_EQ(side_->cache->References(reg), 0u);
  Fill(p, kBlob, 5);
  ASSERT_TRUE(c.Put(5, p, kBlob).ok());
  std::fill(b.begin(), b.end(), 0);
  ASSERT_TRUE(c.Get(5, p, kBlob, &found).ok());
  EXPECT_EQ(Mismatch(p, kBlob, 5), -1);
  EXPECT_EQ(c.mover().directMoves(), 2 * blobs);
}

TEST_F(SnapshotTest, TwoClientsShareOnePagingArena) {
  StartPeer(false);
  SnapshotClient& a = Connect(Paging());
  ClientSide other;
  ASSERT_TRUE(other.Connect(Paging()).ok());
  PutAll(a, 0, 12);
  ExpectAll(*other.client, 0, 12);
  PutAll(*other.client, 12, 12);
  ExpectAll(a, 0, 24);
}

TEST_F(SnapshotTest, GetsRacingEvictionsAndFaultsReturnTheRightBytes) {
  StartPeer(false);
  {
    SnapshotClient& c = Connect(Paging());
    PutAll(c, 0, 3 * kSlots);
  }
  // Three clients read every key in different orders while a fourth keeps writing
  // new keys: every get faults or races an eviction of the 8-slot arena.
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      ClientSide s;
      if (!s.Connect(Paging()).ok()) {
        ++bad;
        return;
      }
      std::vector<uint8_t> b(kBlob);
      for (int round = 0; round < 2; ++round) {
        for (uint64_t i = 0; i < 3 * kSlots; ++i) {
          const uint64_t k = (i * (2 * r + 5) + r) % (3 * kSlots);
          bool found = false;
          if (!s.client->Get(k, b.data(), kBlob, &found).ok() || !found || Mismatch(b.data(), kBlob, k) != -1) ++bad;
        }
      }
    });
  }
  SnapshotClient& w = Connect(Paging());
  PutAll(w, 1000, 2 * kSlots);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  ExpectAll(w, 1000, 2 * kSlots);
}

TEST_F(SnapshotTest, RawModeWholeBlobsAtOffsets) {
  StartPeer(false);
  SnapshotClient& c = Connect(Raw());
  const uint64_t blob = c.blobBytes();
  std::vector<uint8_t> b(blob);
  for (uint64_t slot = 0; slot < 16; ++slot) {
    Fill(b.data(), blob, slot + 7);
    ASSERT_TRUE(c.WriteAt(slot * blob, b.data(), blob).ok());
  }
  for (uint64_t slot = 0; slot < 16; ++slot) {
    ASSERT_TRUE(c.ReadAt(slot * blob, b.data(), blob).ok());
    EXPECT_EQ(Mismatch(b.data(), blob, slot + 7), -1) << "slot " << slot;
  }
}

TEST_F(SnapshotTest, RawModeRefusesBadOffsetsAndSizesAndWritesNothing) {
  StartPeer(false);
  SnapshotClient& c = Connect(Raw());
  const uint64_t blob = c.blobBytes(), arena = c.arenaBytes();
  std::vector<uint8_t> b(2 * blob, 0xEE);
  Fill(b.data(), blob, 1);
  ASSERT_TRUE(c.WriteAt(15 * blob, b.data(), blob).ok());
  std::vector<uint8_t> junk(2 * blob, 0xEE);
  for (uint64_t off : {arena, arena + blob, 15 * blob + 1, blob / 2, uint64_t{0} - blob}) {
    Status s = c.WriteAt(off, junk.data(), blob);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << off;
    EXPECT_NE(s.message().find("nothing was written"), std::string::npos) << s.message();
  }
  for (uint64_t bytes : {uint64_t{0}, blob - 1, blob + 1, 2 * blob}) {
    Status s = c.WriteAt(15 * blob, junk.data(), bytes);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bytes;
    EXPECT_NE(s.message().find("65536 bytes"), std::string::npos) << s.message();
  }
  EXPECT_EQ(c.ReadAt(arena, junk.data(), blob).code(), Code::kInvalidArgument);
  EXPECT_TRUE(c.status().ok());
  std::vector<uint8_t> back(blob);
  ASSERT_TRUE(c.ReadAt(15 * blob, back.data(), blob).ok());
  EXPECT_EQ(Mismatch(back.data(), blob, 1), -1);
  // Paging calls on a raw arena are refused.
  bool found = false;
  EXPECT_EQ(c.Get(1, back.data(), blob, &found).code(), Code::kInvalidUsage);
}

TEST_F(SnapshotTest, DiscoveryListsEveryArenaOfThePeerWithItsSizes) {
  StartPeer(false, {"--arena", "kind=sized,mode=raw,blob=64K,max=1M"});
  std::vector<ArenaInfo> list;
  Status s = ListArenas("127.0.0.1", peer_->port(), 5000, &list);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(list.size(), 3u);
  std::map<std::string, ArenaInfo> by;
  for (const ArenaInfo& a : list) by[a.kind] = a;
  ASSERT_EQ(by.count("kv"), 1u);
  EXPECT_EQ(by["kv"].mode, Mode::kPaging);
  EXPECT_EQ(by["kv"].blobBytes, kBlob);
  EXPECT_EQ(by["kv"].arenaBytes, kBlob * kSlots);
  EXPECT_EQ(by["kv"].maxBytes, 0u);
  EXPECT_EQ(by["raw"].mode, Mode::kRaw);
  EXPECT_EQ(by["raw"].blobBytes, 65536u);
  EXPECT_EQ(by["raw"].arenaBytes, 16u * 65536);
  EXPECT_EQ(by["sized"].arenaBytes, 0u);  // no client has sized it yet
  EXPECT_EQ(by["sized"].maxBytes, 1u << 20);
  // What the list says is enough to connect: the first client sizes "sized", and a
  // later list shows the size it took.
  ClientOptions o = Raw();
  o.kind = "sized";
  o.arenaBytes = 4 * 65536;
  SnapshotClient& c = Connect(o);
  EXPECT_TRUE(c.status().ok());
  ASSERT_TRUE(ListArenas("127.0.0.1", peer_->port(), 5000, &list).ok());
  for (const ArenaInfo& a : list) {
    if (a.kind == "sized") {
      EXPECT_EQ(a.arenaBytes, 4u * 65536);
    }
  }
  // A list request with anything in its kind, size or address fields is refused.
  Header h;
  h.mode = Mode::kList;
  auto bad = h.Encode();
  bad[8] = 'x';
  std::vector<uint8_t> bytes(bad.begin(), bad.end());
  EXPECT_NE(SendHeader(peer_->port(), bytes).find("a list request carries no kind"), std::string::npos);
}

TEST_F(SnapshotTest, RawArenaSizedByTheFirstClient) {
  // "max=": the first client's handshake sizes the arena (slots x blob bytes).
  StartPeer(false, {"--arena", "kind=sized,mode=raw,blob=64K,max=1M"});
  ClientOptions o = Raw();
  o.kind = "sized";
  o.arenaBytes = 8 * 65536;
  SnapshotClient& a = Connect(o);
  std::vector<uint8_t> b(65536);
  Fill(b.data(), b.size(), 5);
  ASSERT_TRUE(a.WriteAt(7 * 65536, b.data(), b.size()).ok());
  // A second client of the same size sees the first one's blob.
  ClientSide second;
  ASSERT_TRUE(second.Connect(o).ok());
  std::vector<uint8_t> back(65536);
  ASSERT_TRUE(second.client->ReadAt(7 * 65536, back.data(), back.size()).ok());
  EXPECT_EQ(Mismatch(back.data(), back.size(), 5), -1);
  // Another size is refused now that the arena exists, and one above max always.
  for (uint64_t bytes : {uint64_t{16} * 65536, uint64_t{4} * 65536}) {
    ClientSide other;
    o.arenaBytes = bytes;
    Status s = other.Connect(o);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << bytes;
    EXPECT_NE(s.message().find("arena bytes " + std::to_string(bytes) + " differ from the peer's 524288"),
              std::string::npos)
        << s.message();
  }
  StartPeer(false, {"--arena", "kind=sized,mode=raw,blob=64K,max=1M"});
  ClientSide big;
  o.arenaBytes = 32 * 65536;
  o.port = peer_->port();
  Status s = big.Connect(o);
  EXPECT_NE(s.message().find("exceed the peer's maximum 1048576"), std::string::npos) << s.message();
}

TEST_F(SnapshotTest, PagingBadInput) {
  StartPeer(false);
  SnapshotClient& c = Connect(Paging());
  std::vector<uint8_t> b(kBlob + 1, 1);
  EXPECT_EQ(c.Put(1, b.data(), kBlob + 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(c.Put(1, b.data(), kBlob - 1).code(), Code::kInvalidArgument);
  bool found = true;
  ASSERT_TRUE(c.Get(1, b.data(), kBlob, &found).ok());
  EXPECT_FALSE(found) << "a refused put stored something";
  found = true;
  ASSERT_TRUE(c.Get(0xdeadbeef, b.data(), kBlob, &found).ok());
  EXPECT_FALSE(found);
  ASSERT_TRUE(c.Remove(0xdeadbeef, &found).ok());
  EXPECT_FALSE(found);
  // A commit whose checksum does not match the slot's bytes is refused; nothing is stored.
  uint64_t sum = 0;
  Fill(b.data(), kBlob, 3);
  ASSERT_TRUE(c.Stage(3, b.data(), kBlob, &sum).ok());
  Status s = c.Commit(3, sum ^ 1);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
  ASSERT_TRUE(c.Get(3, b.data(), kBlob, &found).ok());
  EXPECT_FALSE(found);
  // A commit with no alloc is refused.
  EXPECT_EQ(c.Commit(4, 0).code(), Code::kInvalidUsage);
  // Releases of pins this client does not hold (one already released by its Get, one
  // of an unknown key) are answered with nothing: a stray answer would be taken as the
  // next request's, so the get after them would fail or return the wrong offset.
  Fill(b.data(), kBlob, 5);
  ASSERT_TRUE(c.Put(5, b.data(), kBlob).ok());
  ASSERT_TRUE(c.Get(5, b.data(), kBlob, &found).ok());
  ASSERT_TRUE(c.SendRelease(5).ok());
  ASSERT_TRUE(c.SendRelease(0xdeadbeef).ok());
  std::fill(b.begin(), b.end(), 0);
  Status got = c.Get(5, b.data(), kBlob, &found);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), kBlob, 5), -1);
  EXPECT_TRUE(c.status().ok());
}

TEST_F(SnapshotTest, HandshakeMismatchesAreRefusedNamingTheField) {
  StartPeer(false);
  struct Case {
    const char* field;
    ClientOptions o;
  };
  std::vector<Case> cases;
  ClientOptions o = Paging();
  o.blobBytes = kBlob * 2;
  o.arenaBytes = kBlob * 2 * kSlots;
  cases.push_back({"blob bytes", o});
  o = Paging();
  o.arenaBytes = kBlob * (kSlots + 1);
  cases.push_back({"arena bytes", o});
  o = Paging();
  o.mode = Mode::kRaw;
  cases.push_back({"mode raw differs", o});
  o = Paging();
  o.kind = "nosuch";
  cases.push_back({"no arena of kind 'nosuch'", o});
  for (const Case& k : cases) {
    ClientSide side;
    Status s = side.Connect(k.o);
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << k.field;
    EXPECT_NE(s.message().find(k.field), std::string::npos) << s.message();
  }
}

/// Sends raw header bytes and returns the refusal text ("" when accepted).
std::string SendHeader(uint16_t port, const std::vector<uint8_t>& bytes) {
  proxy::Fd fd;
  if (!ConnectControl("127.0.0.1", port, 5000, &fd).ok()) return "connect failed";
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  if (!proxy::SendAll(fd.get(), &iov, 1, "t").ok()) return "send failed";
  ::shutdown(fd.get(), SHUT_WR);
  uint8_t head[8];
  if (!proxy::RecvAll(fd.get(), head, 8, "t").ok()) return "no reply";
  uint16_t code = 0;
  std::memcpy(&code, head + 6, 2);
  if (code == 0) return "";
  uint32_t n = 0;
  if (!proxy::RecvAll(fd.get(), &n, 4, "t").ok() || n > 1024) return "bad refusal";
  std::string m(n, '\0');
  if (!proxy::RecvAll(fd.get(), m.data(), n, "t").ok()) return "bad refusal";
  return m;
}

TEST_F(SnapshotTest, MalformedHeadersAreRefusedNamingWhatDiffers) {
  StartPeer(false);
  Header h;
  h.kind = "kv";
  h.arenaBytes = kBlob * kSlots;
  h.blobBytes = kBlob;
  h.addressBytes = 4;
  auto good = h.Encode();
  auto with = [&](size_t at, std::vector<uint8_t> patch) {
    std::vector<uint8_t> b(good.begin(), good.end());
    std::copy(patch.begin(), patch.end(), b.begin() + at);
    b.insert(b.end(), {1, 2, 3, 4});
    return b;
  };
  EXPECT_NE(SendHeader(peer_->port(), with(0, {'X'})).find("bad magic"), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(4, {2, 0})).find("version 2 differs from this peer's " + std::to_string(Header::kVersion)), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(6, {9})).find("unknown mode 9"), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(8, {'k', '/'})).find("kind"), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(48, {0, 0, 0, 0, 0, 0, 0, 0})).find("blob bytes is 0"), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(56, {0, 0, 0, 0})).find("worker address"), std::string::npos);
  EXPECT_NE(SendHeader(peer_->port(), with(7, {1})).find("reserved byte 7"), std::string::npos);
  // A truncated header is refused; the peer still serves a good client afterwards.
  EXPECT_NE(SendHeader(peer_->port(), std::vector<uint8_t>(good.begin(), good.begin() + 10))
                .find("the 60 bytes after its magic: connection closed by peer after 6 of 60 bytes"),
            std::string::npos);
  SnapshotClient& c = Connect(Paging());
  PutAll(c, 1, 2);
  ExpectAll(c, 1, 2);
}

TEST_F(SnapshotTest, RestartWithSyncKeepsCommittedBlobs) {
  StartPeer(true);
  {
    SnapshotClient& c = Connect(Paging());
    PutAll(c, 0, 3 * kSlots);
  }
  side_.reset();
  peer_->Signal(SIGKILL);
  StartPeer(true);
  SnapshotClient& c = Connect(Paging());
  ExpectAll(c, 0, 3 * kSlots);
}

TEST_F(SnapshotTest, RestartWithoutSyncStartsEmpty) {
  StartPeer(false);
  {
    SnapshotClient& c = Connect(Paging());
    PutAll(c, 0, 3 * kSlots);
  }
  side_.reset();
  peer_->Signal(SIGKILL);
  StartPeer(false);
  SnapshotClient& c = Connect(Paging());
  std::vector<uint8_t> b(kBlob);
  for (uint64_t k = 0; k < 3 * kSlots; ++k) {
    bool found = true;
    ASSERT_TRUE(c.Get(k, b.data(), kBlob, &found).ok());
    EXPECT_FALSE(found) << k;
  }
}

// A blob in the swap file only is read by the client as the peer faults it back, piece
// by piece (wire version 3: kFaulting, then kReady records): 9 MiB blobs are four read
// pieces of 2.25 MiB (a quarter each), moved in chunks of at most 1 MiB, checked by
// content. A record torn in its last piece, found only after the client read the first
// three, fails that get with the peer's reason; the connection stays in step (the next
// get is right) and the torn blob is never served.
TEST_F(SnapshotTest, AFaultedBlobIsReadAsItsPiecesLandAndATornOneFailsOnlyItsGet) {
  constexpr uint64_t kBig = uint64_t{9} << 20;
  StartPeer(true, {"--arena", "kind=big,mode=paging,blob=9M,slots=2"});
  ClientOptions o = Paging();
  o.kind = "big";
  o.blobBytes = kBig;
  o.arenaBytes = 2 * kBig;
  o.mover.chunkBytes = 1 << 20;
  o.mover.chunksPerRail = 4;
  SnapshotClient& c = Connect(o);
  std::vector<uint8_t> b(kBig);
  for (uint64_t k = 0; k < 4; ++k) {
    Fill(b.data(), kBig, 50 + k);
    ASSERT_TRUE(c.Put(k, b.data(), kBig).ok()) << k;
  }
  // Slots hold 2 and 3: each of these gets faults its blob (2 slots, LRU).
  for (uint64_t k : {0, 1, 2, 3, 0}) {
    bool found = false;
    std::fill(b.begin(), b.end(), 0);
    Status s = c.Get(k, b.data(), kBig, &found);
    ASSERT_TRUE(s.ok()) << k << ": " << s.message();
    ASSERT_TRUE(found) << k;
    ASSERT_EQ(Mismatch(b.data(), kBig, 50 + k), -1) << k;
  }
  EXPECT_EQ(c.faultedGets(), 5u);
  // Each fault announced its pieces: ready at 2.25, 4.5 and 6.75 MiB, and the whole 9 MiB.
  EXPECT_EQ(c.readyRecords(), 20u);
  // Key 1 (record 1: a sync arena wrote one record per put, in order) is in swap only.
  {
    std::fstream f(dir_ + "/railyard-snapshot-big.swap", std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t stride = 4096 + kBig;
    f.seekg(4096 + stride + 4096 + kBig - 100);
    const char was = static_cast<char>(f.get());
    f.seekp(4096 + stride + 4096 + kBig - 100);
    f.put(static_cast<char>(was ^ 0x5a));
  }
  bool found = false;
  Status torn = c.Get(1, b.data(), kBig, &found);
  EXPECT_EQ(torn.code(), Code::kSystemError) << torn.message();
  EXPECT_NE(torn.message().find("torn"), std::string::npos) << torn.message();
  EXPECT_TRUE(c.status().ok()) << "a failed fault is not the connection's failure: " << c.status().message();
  EXPECT_EQ(c.faultedGets(), 6u);
  EXPECT_EQ(c.readyRecords(), 23u);  // the torn one's first three pieces, then its error
  std::fill(b.begin(), b.end(), 0);
  Status next = c.Get(2, b.data(), kBig, &found);
  ASSERT_TRUE(next.ok()) << next.message();
  ASSERT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), kBig, 52), -1);
  ASSERT_TRUE(c.Get(1, b.data(), kBig, &found).ok());
  EXPECT_FALSE(found) << "a torn record was kept";
}

// Batches (two blobs in flight) over the test's transport: twice the arena put in one
// batch and got back in another, checked by content; a record torn in the swap file
// fails only its own blob of a get batch (the peer's kError mid-fault, followed in the
// stream by the next blob's answer), the blobs after it arrive; a killed peer ends a
// batch with the handle's error and leaves the blobs behind the failure not attempted.
TEST_F(SnapshotTest, BatchesRunPastATornBlobAndAKilledPeerEndsThem) {
  StartPeer(true);
  SnapshotClient& c = Connect(Paging());
  constexpr uint64_t kBlobs = 2 * kSlots;
  std::vector<std::vector<uint8_t>> data(kBlobs, std::vector<uint8_t>(kBlob));
  std::vector<BatchBlob> batch(kBlobs);
  for (uint64_t k = 0; k < kBlobs; ++k) {
    Fill(data[k].data(), kBlob, 300 + k);
    batch[k] = {k, data[k].data(), kBlob};
  }
  Status s = c.PutBatch(batch);
  ASSERT_TRUE(s.ok()) << s.message();
  for (auto& d : data) std::fill(d.begin(), d.end(), 0);
  // Backwards: the resident half first, then the half in the swap file only.
  std::reverse(batch.begin(), batch.end());
  s = c.GetBatch(batch);
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint64_t k = 0; k < kBlobs; ++k) {
    ASSERT_TRUE(batch[kBlobs - 1 - k].found) << k;
    ASSERT_EQ(Mismatch(data[k].data(), kBlob, 300 + k), -1) << "key " << k;
  }
  EXPECT_GE(c.faultedGets(), kSlots);
  // Now keys 0..7 are resident and 8..15 in swap only. Tear key 9's record (a sync
  // arena wrote one record per put, in key order), then get 8, 9, 10.
  {
    std::fstream f(dir_ + "/railyard-snapshot-kv.swap", std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t at = 4096 + 9 * (4096 + kBlob) + 4096 + kBlob - 100;
    f.seekg(at);
    const char was = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(was ^ 0x5a));
  }
  std::vector<BatchBlob> three = {{8, data[8].data(), kBlob}, {9, data[9].data(), kBlob}, {10, data[10].data(), kBlob}};
  for (uint64_t k : {8, 9, 10}) std::fill(data[k].begin(), data[k].end(), 0);
  s = c.GetBatch(three);
  EXPECT_EQ(s.code(), Code::kSystemError) << s.message();
  EXPECT_NE(s.message().find("get batch, blob 1 (key 9)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("torn"), std::string::npos) << s.message();
  EXPECT_TRUE(three[0].status.ok() && three[2].status.ok());
  EXPECT_TRUE(three[1].attempted);
  EXPECT_EQ(Mismatch(data[8].data(), kBlob, 308), -1);
  EXPECT_EQ(Mismatch(data[10].data(), kBlob, 310), -1);
  EXPECT_TRUE(c.status().ok()) << c.status().message();
  // A killed peer: the first blob fails with the connection, the one in flight behind
  // it (if any) shares the error, the rest are not attempted; nothing hangs.
  peer_->Signal(SIGKILL);
  for (auto& b : batch) b.found = true;
  s = c.GetBatch(batch);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("get batch, blob 0 (key 15)"), std::string::npos) << s.message();
  // The blob behind it shares the handle's failure, said as such. It is never sent
  // when the peer's reset (its kernel closing the connection with the releases above
  // unread) has come back before the first get's send, which then fails at once
  // (seen under load in CI-like runs).
  if (batch[1].attempted) {
    EXPECT_NE(batch[1].status.message().find("blob 1 (key 14)"), std::string::npos) << batch[1].status.message();
  } else {  // only when blob 0's own send failed
    EXPECT_NE(batch[0].status.message().find("snapshot get of key 15: send failed"), std::string::npos)
        << "blob 1 was not sent, yet blob 0 did not fail at its send: " << batch[0].status.message();
    EXPECT_TRUE(batch[1].status.ok()) << batch[1].status.message();
  }
  EXPECT_FALSE(c.status().ok());
  EXPECT_TRUE(batch[0].attempted);
  EXPECT_FALSE(batch[0].status.ok());
  EXPECT_FALSE(batch[kBlobs - 1].attempted);
  EXPECT_TRUE(batch[kBlobs - 1].status.ok());
  EXPECT_FALSE(batch[kBlobs - 1].found);
}

// Review: four clients batching at once into a 4-slot arena, each asking a blob ahead
// while it holds one, used to wedge the peer (every slot held, every commit queued
// behind an alloc waiting for a slot) until the timeouts failed them all. With kBusy
// answers they queue for slots: every blob of every client goes in and comes back by
// content, well within the timeout.
TEST_F(SnapshotTest, ClientsBatchingAtOnceIntoAFewSlotsQueueRatherThanWedge) {
  ClientOptions o = StartSmallPeer(0, 4);
  constexpr int kClients = 4, kBlobs = 12;
  o.mover.chunkBytes = 16 * 1024;
  std::vector<std::unique_ptr<ClientSide>> sides(kClients);
  for (auto& side : sides) {
    side = std::make_unique<ClientSide>();
    Status s = side->Connect(o);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  std::vector<Status> results(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::vector<std::vector<uint8_t>> data(kBlobs, std::vector<uint8_t>(kSmall));
      std::vector<BatchBlob> batch(kBlobs);
      for (int i = 0; i < kBlobs; ++i) {
        const uint64_t key = 1000 * (c + 1) + i;
        Fill(data[i].data(), kSmall, key);
        batch[i] = {key, data[i].data(), kSmall};
      }
      SnapshotClient& client = *sides[c]->client;
      for (int round = 0; round < 3 && results[c].ok(); ++round) {
        results[c] = client.PutBatch(batch);
        for (auto& d : data) std::fill(d.begin(), d.end(), 0);
        if (results[c].ok()) results[c] = client.GetBatch(batch);
        for (int i = 0; i < kBlobs && results[c].ok(); ++i) {
          if (!batch[i].found || Mismatch(data[i].data(), kSmall, batch[i].key) != -1) {
            results[c] = InternalError("client " + std::to_string(c) + ": key " + std::to_string(batch[i].key) +
                                       " came back wrong");
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_TRUE(results[c].ok()) << "client " << c << ": " << results[c].message();
}

// New-user trial: the peer closed a paging handle that rested for RAILYARD_TIMEOUT_MS
// between operations, silently; the next call failed and the handle was dead. Between
// operations a client now holds nothing and may rest as long as it likes; in the middle
// of one the timeout still applies, so one that stops there (here two, each with a put
// allocated and written, never committed, holding both slots) gives its slot back, and
// a put that found every slot taken waits for it instead of failing at once, even when
// its own RAILYARD_TIMEOUT_MS is shorter than the peer's (a peer keeping a request
// queued says so every quarter of the shorter timeout, kQueued).
TEST_F(SnapshotTest, AnIdleHandleOutlivesThePeersTimeoutAndPutsStoppedHalfwayGiveTheirSlotsBack) {
  constexpr int kPeerTimeoutMs = 800;
  const ClientOptions o = StartSmallPeer(kPeerTimeoutMs, 2);
  SnapshotClient& a = Connect(o);
  std::vector<uint8_t> b(kSmall);
  Fill(b.data(), kSmall, 1);
  ASSERT_TRUE(a.Put(1, b.data(), kSmall).ok());
  // Idle for three times the peer's timeout: the condition under test, not a barrier.
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPeerTimeoutMs));
  bool found = false;
  std::fill(b.begin(), b.end(), 0);
  Status got = a.Get(1, b.data(), kSmall, &found);
  ASSERT_TRUE(got.ok()) << "an idle handle was dropped: " << got.message();
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), kSmall, 1), -1);

  ClientSide stopped[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(stopped[i].Connect(o).ok());
    uint64_t sum = 0;
    Fill(b.data(), kSmall, 70 + i);
    ASSERT_TRUE(stopped[i].client->Stage(70 + i, b.data(), kSmall, &sum).ok()) << i;
  }
  // Both slots are being written: this put waits until the two stopped clients' timeout
  // gives their slots back, then lands; its client gives up on a silent peer after half
  // the peer's timeout, but the peer is not silent: it says kQueued every 100 ms.
  ClientOptions quick = o;
  quick.timeoutMs = kPeerTimeoutMs / 2;
  ClientSide waiter;
  ASSERT_TRUE(waiter.Connect(quick).ok());
  Fill(b.data(), kSmall, 2);
  Status put = waiter.client->Put(2, b.data(), kSmall);
  ASSERT_TRUE(put.ok()) << put.message();
  EXPECT_GE(waiter.client->queuedAnswers(), 1u) << "the peer kept the put queued without a word";
  std::fill(b.begin(), b.end(), 0);
  ASSERT_TRUE(a.Get(2, b.data(), kSmall, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), kSmall, 2), -1);
  for (int i = 0; i < 2; ++i) {  // their commits come too late; nothing half-written is kept
    // The put above needed one drop only: wait for this client's own (CI once committed
    // the second stopped client just before the peer's timeout dropped it).
    const auto dropBy = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!stopped[i].client->ControlClosedByPeer() && std::chrono::steady_clock::now() < dropBy) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(stopped[i].client->ControlClosedByPeer()) << "the peer never dropped stopped client " << i;
    // ... and say why (new-user trial: "connection closed by peer" and nothing more).
    const Status late = stopped[i].client->Commit(70 + i, 0);
    EXPECT_FALSE(late.ok()) << i;
    EXPECT_NE(late.message().find("held key " + std::to_string(70 + i) + " allocated and not committed"),
              std::string::npos)
        << late.message();
    EXPECT_NE(late.message().find("a peer drops a client that stops for its RAILYARD_TIMEOUT_MS (800 ms) in the "
                                  "middle of a put"),
              std::string::npos)
        << late.message();
    ASSERT_TRUE(a.Get(70 + i, b.data(), kSmall, &found).ok());
    EXPECT_FALSE(found) << i;
  }
}

// New-user trial: a client whose RAILYARD_TIMEOUT_MS (here 300 ms) was below the
// peer's kQueued interval (a quarter of the peer's 2400 ms: 600 ms) failed a put queued
// behind a stopped client, taking the live peer for a silent one. The handshake now
// carries the client's timeout and the peer says kQueued often enough for it (every
// 75 ms): the put waits the stopped client's 2.4 s out and lands.
TEST_F(SnapshotTest, AClientWithATimeoutBelowThePeersQueuedIntervalStillWaitsForASlot) {
  const ClientOptions o = StartSmallPeer(2400, 1);
  std::vector<uint8_t> b(kSmall);
  ClientSide stopped;  // holds the one slot, written and never committed
  ASSERT_TRUE(stopped.Connect(o).ok());
  uint64_t sum = 0, slot = 0;
  Fill(b.data(), kSmall, 9);
  ASSERT_TRUE(stopped.client->Alloc(9, &slot).ok());
  ASSERT_TRUE(stopped.client->WriteSlot(slot, b.data(), kSmall, &sum).ok());
  ClientOptions quick = o;
  quick.timeoutMs = 300;
  ClientSide waiter;
  ASSERT_TRUE(waiter.Connect(quick).ok());
  Fill(b.data(), kSmall, 3);
  Status put = waiter.client->Put(3, b.data(), kSmall);
  ASSERT_TRUE(put.ok()) << put.message();
  // It waited most of the peer's 2.4 s, hearing kQueued every 75 ms: far more than once
  // per 300 ms.
  EXPECT_GE(waiter.client->queuedAnswers(), 8u);
  bool found = false;
  std::fill(b.begin(), b.end(), 0);
  ASSERT_TRUE(waiter.client->Get(3, b.data(), kSmall, &found).ok());
  EXPECT_TRUE(found);
  EXPECT_EQ(Mismatch(b.data(), kSmall, 3), -1);
  // The stopped client, resumed, writes its slot again: the peer dropped it and revoked
  // its key, and the failure says why (new-user trial: only "fabric BAD_KEY ... no
  // registered region has key").
  const Status late = stopped.client->WriteSlot(slot, b.data(), kSmall, &sum);
  EXPECT_FALSE(late.ok());
  // A network error (2 in the C API), as the commit's closed connection is (C API trial:
  // the same lost put was 2 or 6 by which of the two it met first).
  EXPECT_EQ(late.code(), Code::kSystemError) << late.message();
  EXPECT_NE(late.message().find("held key 9 allocated and not committed, and had sent it nothing for "),
            std::string::npos)
      << late.message();
  EXPECT_NE(late.message().find("a peer drops a client that stops for its RAILYARD_TIMEOUT_MS (2400 ms)"),
            std::string::npos)
      << late.message();
}

// New-user trial: a handle opened and first used after the peer's
// RAILYARD_ACCEPT_TIMEOUT_MS (here 300 ms) failed its first put with "Broken pipe", and
// stayed failed: the client's Worker moves only while a call runs, so the fabric
// connection's first frames waited for that put, and the peer's listener had closed
// the connection by then. Connect now brings the fabric connection up.
TEST_F(SnapshotTest, AHandleFirstUsedAfterThePeersAcceptTimeoutWorks) {
  StartPeer(false, {"--accept-timeout-ms", "300"});
  SnapshotClient& c = Connect(Paging());
  // Three times the peer's accept timeout: the condition under test, not a barrier.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  PutAll(c, 0, 2);
  ExpectAll(c, 0, 2);
  EXPECT_TRUE(c.status().ok()) << c.status().message();
}

TEST_F(SnapshotTest, TornSwapRecordsAreDroppedNeverServed) {
  StartPeer(true);
  {
    SnapshotClient& c = Connect(Paging());
    PutAll(c, 0, 4);
  }
  side_.reset();
  peer_->Signal(SIGKILL);
  // Tear record 1's payload (one byte) and record 2's header: as a crash mid-write.
  {
    std::fstream f(dir_ + "/railyard-snapshot-kv.swap", std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t stride = 4096 + kBlob;
    f.seekp(4096 + 1 * stride + 4096 + 12345);
    f.put('\x5a' ^ 0x33);
    f.seekp(4096 + 2 * stride + 8);
    f.put('\x01');
  }
  StartPeer(true);
  SnapshotClient& c = Connect(Paging());
  std::vector<uint8_t> b(kBlob);
  int present = 0;
  for (uint64_t k = 0; k < 4; ++k) {
    bool found = false;
    ASSERT_TRUE(c.Get(k, b.data(), kBlob, &found).ok()) << k;
    if (found) {
      ++present;
      EXPECT_EQ(Mismatch(b.data(), kBlob, k), -1) << "served a torn blob " << k;
    }
  }
  EXPECT_EQ(present, 2);  // the two torn records are gone, the two others intact
}

TEST_F(SnapshotTest, ClientKilledBetweenAllocAndCommitLosesItsSlots) {
  StartPeer(false);
  {
    SnapshotClient& c = Connect(Paging());
    PutAll(c, 0, 2);
  }
  // A child stages (allocs and writes) every slot of the arena, then dies uncommitted.
  const pid_t child = ::fork();
  if (child == 0) {
    ClientSide s;
    if (!s.Connect(Paging()).ok()) ::_exit(3);
    std::vector<uint8_t> b(kBlob, 0xCC);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < kSlots; ++k) {
      if (!s.client->Stage(1000 + k, b.data(), kBlob, &sum).ok()) ::_exit(4);
    }
    ::kill(::getpid(), SIGKILL);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFSIGNALED(st)) << "child exit " << WEXITSTATUS(st);
  // None of its keys is served; the slots come back (a full arena's worth of puts fits),
  // and the earlier blobs are intact. Reclaim happens when the peer sees the close:
  // poll with a bound.
  SnapshotClient& c = Connect(Paging());
  std::vector<uint8_t> b(kBlob);
  for (uint64_t k = 0; k < kSlots; ++k) {
    bool found = true;
    ASSERT_TRUE(c.Get(1000 + k, b.data(), kBlob, &found).ok());
    EXPECT_FALSE(found);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status s;
  do {
    Fill(b.data(), kBlob, 50);
    s = c.Put(50, b.data(), kBlob);
  } while (!s.ok() && s.code() == Code::kInvalidUsage && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(s.ok()) << s.message();
  PutAll(c, 51, kSlots - 1);
  ExpectAll(c, 0, 2);
  ExpectAll(c, 50, kSlots);
}

TEST_F(SnapshotTest, LateWritesOfAReclaimedClientNeverLandInAnotherClientsBlob) {
  // Client A allocates every slot, then its control connection goes (as when it is
  // killed) while its fabric Endpoint still works. Once the peer has reclaimed the
  // slots and handed them all to client B, a Write A posts to one of them must not
  // change B's blob: the peer revoked A's arena key before reclaiming.
  StartPeer(false);
  ClientSide a;
  ASSERT_TRUE(a.Connect(Paging()).ok());
  std::vector<uint64_t> offsets(kSlots);
  for (uint64_t k = 0; k < kSlots; ++k) ASSERT_TRUE(a.client->Alloc(1000 + k, &offsets[k]).ok()) << k;
  a.client->CloseControl();
  SnapshotClient& b = Connect(Paging());
  std::vector<uint8_t> blob(kBlob);
  Fill(blob.data(), kBlob, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status s;
  do {
    s = b.Put(0, blob.data(), kBlob);  // refused (no free slot) until the peer reclaims A's
  } while (!s.ok() && s.code() == Code::kInvalidUsage && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(s.ok()) << s.message();
  PutAll(b, 1, kSlots - 1);  // B now holds every slot of the arena, A's old ones included
  std::vector<uint8_t> junk(kBlob, 0xCC);
  uint64_t sum = 0;
  Status late = a.client->WriteSlot(offsets[0], junk.data(), kBlob, &sum);
  EXPECT_FALSE(late.ok()) << "a reclaimed client's Write was accepted";
  ExpectAll(b, 0, kSlots);  // by content: no byte of A's Write landed
}

TEST_F(SnapshotTest, PeerKilledMidPutAndMidGetFailsTheCallNotHangs) {
  StartPeer(true);
  SnapshotClient& c = Connect(Paging());
  PutAll(c, 0, 3);
  for (bool isGet : {false, true}) {
    if (isGet) {
      StartPeer(true);
      Connect(Paging());
    }
    SnapshotClient& cl = *side_->client;
    // The peer freezes, the call is issued, then the peer is killed under it.
    peer_->Signal(SIGSTOP);
    std::atomic<bool> done{false};
    Status result;
    std::vector<uint8_t> b(kBlob);
    Fill(b.data(), kBlob, 77);
    std::thread t([&] {
      bool found = false;
      result = isGet ? cl.Get(1, b.data(), kBlob, &found) : cl.Put(77, b.data(), kBlob);
      done.store(true);
    });
    // Killed while the call waits on the frozen peer (or, if the thread is slower,
    // before it writes its request): either way the call must fail, not hang.
    peer_->Signal(SIGKILL);
    t.join();
    EXPECT_TRUE(done.load());
    EXPECT_FALSE(result.ok()) << (isGet ? "get" : "put") << " returned ok from a killed peer";
    // The error names the call (new-user trial: a get's said only the fabric's PEER_CLOSED).
    EXPECT_NE(result.message().find(isGet ? "snapshot get of key 1" : "snapshot "), std::string::npos)
        << result.message();
    EXPECT_FALSE(cl.status().ok());
    // Later calls fail at once with the same error.
    EXPECT_FALSE(cl.Put(78, b.data(), kBlob).ok());
  }
  // A restarted (sync) peer has the committed blobs and not the killed put's.
  StartPeer(true);
  SnapshotClient& fresh = Connect(Paging());
  ExpectAll(fresh, 0, 3);
  std::vector<uint8_t> b(kBlob);
  bool found = true;
  ASSERT_TRUE(fresh.Get(77, b.data(), kBlob, &found).ok());
  EXPECT_FALSE(found);
}

TEST_F(SnapshotTest, PeerKilledWhileTheBlobsBytesAreMovingFailsThePut) {
  StartPeer(true);
  SnapshotClient& c = Connect(Paging());
  PutAll(c, 0, 2);
  // The slot is allocated with the peer running; then the peer freezes, so the data
  // Writes are posted but never acknowledged, and it is killed under them.
  uint64_t offset = 0;
  ASSERT_TRUE(c.Alloc(9, &offset).ok());
  peer_->Signal(SIGSTOP);
  std::vector<uint8_t> b(kBlob);
  Fill(b.data(), kBlob, 9);
  Status result;
  std::thread t([&] {
    uint64_t sum = 0;
    result = c.WriteSlot(offset, b.data(), kBlob, &sum);
  });
  peer_->Signal(SIGKILL);
  t.join();
  EXPECT_FALSE(result.ok()) << "the data of a put reached a killed peer";
  EXPECT_FALSE(c.status().ok());
  // Restarted (sync): the committed blobs are there, the half-written one never is.
  StartPeer(true);
  SnapshotClient& fresh = Connect(Paging());
  ExpectAll(fresh, 0, 2);
  bool found = true;
  ASSERT_TRUE(fresh.Get(9, b.data(), kBlob, &found).ok());
  EXPECT_FALSE(found);
}

// A frozen peer: the call that waits on it fails saying how long the peer was silent
// (not "Resource temporarily unavailable"), and every later call of the handle, even
// after the peer resumes, says the connection failed earlier, quoting that first error.
TEST_F(SnapshotTest, AFrozenPeerTimesOutSayingSoAndLaterCallsSayItFailedEarlier) {
  StartPeer(false);
  ClientOptions o = Paging();
  o.timeoutMs = 1000;
  SnapshotClient& c = Connect(o);
  PutAll(c, 0, 1);
  peer_->Signal(SIGSTOP);
  uint64_t offset = 0;
  Status first = c.Alloc(5, &offset);
  peer_->Signal(SIGCONT);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.message().find("timed out: the peer was silent for 1000 ms"), std::string::npos) << first.message();
  EXPECT_EQ(first.message().find("Resource temporarily unavailable"), std::string::npos) << first.message();
  std::vector<uint8_t> b(kBlob);
  bool found = false;
  Status later = c.Get(0, b.data(), kBlob, &found);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.message().find("this handle's connection to the peer failed earlier ("), std::string::npos)
      << later.message();
  EXPECT_NE(later.message().find(first.message()), std::string::npos) << later.message();
  // A new handle to the resumed peer works.
  SnapshotClient& fresh = Connect(Paging());
  ExpectAll(fresh, 0, 1);
}

TEST_F(SnapshotTest, FullSwapDiskFailsThePutThatHitItEarlierBlobsStay) {
  bool skipped = false;
  ASSERT_NO_FATAL_FAILURE(StartOnSmallDisk(&skipped));
  if (skipped) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  SnapshotClient& c = Connect(BigOnSmallDisk());
  std::vector<uint8_t> b(1 << 20);
  uint64_t stored = 0;
  Status s;
  for (uint64_t k = 0; k < 20; ++k) {
    Fill(b.data(), b.size(), k);
    s = c.Put(k, b.data(), b.size());
    if (!s.ok()) break;
    ++stored;
  }
  ASSERT_FALSE(s.ok()) << "20 MiB fit in a 4 MiB swap";
  EXPECT_NE(s.message().find("swap disk full"), std::string::npos) << s.message();
  EXPECT_EQ(stored, 5u);  // 2 resident + 3 in swap
  EXPECT_TRUE(c.status().ok()) << "a full disk must not fail the client";
  for (uint64_t k = 0; k < stored; ++k) {
    bool found = false;
    Status g = c.Get(k, b.data(), b.size(), &found);
    ASSERT_TRUE(g.ok()) << k << ": " << g.message();
    ASSERT_TRUE(found) << k;
    EXPECT_EQ(Mismatch(b.data(), b.size(), k), -1) << k;
  }
}

// On a full swap disk a put still gets a slot when a resident blob that is in swap
// already (clean: faulted back, never changed) can give its slot without a write, even
// when the least recently used blob is dirty and cannot be written out. Before, the
// first dirty victim's failed write failed the put. Every blob stays readable.
TEST_F(SnapshotTest, OnAFullSwapDiskAPutEvictsACleanBlobPastADirtyOne) {
  // The swap's tmpfs holds three 1 MiB records; the arena two slots.
  bool skipped = false;
  ASSERT_NO_FATAL_FAILURE(StartOnSmallDisk(&skipped));
  if (skipped) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  SnapshotClient& c = Connect(BigOnSmallDisk());
  std::vector<uint8_t> b(1 << 20);
  auto put = [&](uint64_t k) {
    Fill(b.data(), b.size(), k);
    return c.Put(k, b.data(), b.size());
  };
  auto get = [&](uint64_t k) {
    bool found = false;
    std::fill(b.begin(), b.end(), 0);
    Status g = c.Get(k, b.data(), b.size(), &found);
    if (g.ok() && !found) return Status(Code::kInternalError, "key " + std::to_string(k) + " not found");
    if (g.ok() && Mismatch(b.data(), b.size(), k) != -1) return Status(Code::kInternalError, "key " + std::to_string(k) + " has wrong bytes");
    return g;
  };
  // 0 and 1 resident; 2 evicts 0 and 3 evicts 1 to swap (two records); get 0 evicts 2
  // (the third record: the disk is full) and brings 0 back clean. Resident now: 3
  // (dirty, least recently used) and 0 (clean).
  for (uint64_t k = 0; k < 4; ++k) ASSERT_TRUE(put(k).ok()) << k;
  ASSERT_TRUE(get(0).ok());
  // Evicting 3 needs a fourth record, which the disk refuses; 0 gives its slot instead.
  Status s = put(4);
  ASSERT_TRUE(s.ok()) << s.message();
  // Both resident blobs are dirty now: the next put has nowhere to go, and says so.
  s = put(5);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("swap disk full"), std::string::npos) << s.message();
  for (uint64_t k = 0; k < 5; ++k) EXPECT_TRUE(get(k).ok()) << get(k).message();
}

}  // namespace
}  // namespace railyard::storage::snapshot::testing
