// The expert peer and client end to end on loopback, over both transports (TCP
// requests; fabric Reads over the TCP fabric on one and two rails, and over the verbs
// fabric: RDMA READ, in the soft-RoCE lane, skipped on a host without RDMA ports), and the faults:
// unknown transport, out-of-range records, the admission cap, the store changed under
// the peer, the peer gone mid-batch. Every failure is a named error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>

#include "proxy/fabric/registration_cache.h"
#include "storage/expert/expert_client.h"
#include "storage/expert/expert_error.h"
#include "storage/expert/expert_server.h"
#include "storage/expert/expert_wire.h"
#include "tests/expert/expert_test_util.h"
#include "tests/unit/log_capture.h"

namespace railyard::expert {
namespace {

/// A TCP socket listening on 127.0.0.1 at an ephemeral port (backlog 1), its port in
/// *port: a fake peer. -1 on any failure.
int ListenOnLoopback(uint16_t* port) {
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 1) != 0 ||
      ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (ls >= 0) ::close(ls);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return ls;
}

using testing::TempDir;

struct Peer {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<ExpertServer> server;
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }
};

struct Client {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Worker> worker;
  std::vector<char> arena;
  std::unique_ptr<ExpertClient> client;
  ~Client() {
    client.reset();
    worker.reset();
  }
};

/// The fabric under the read transport: TCP on one or two loopback rails, or verbs.
enum class Fabric { kTcp1Rail, kTcp2Rails, kVerbs };

class ExpertPeerTest : public ::testing::TestWithParam<std::tuple<uint8_t, Fabric>> {
 protected:
  void SetUp() override {
    if (fabric() == Fabric::kVerbs) {
      std::unique_ptr<fabric::Domain> probe;
      Status s = testing::VerbsDomain(0, 5000, &probe);
      if (s.code() == Code::kInvalidUsage) GTEST_SKIP() << "no RDMA port here: " << s.message();
      ASSERT_TRUE(s.ok()) << s.message();
    }
    dir_ = tmp_.path + "/store";
    m_ = testing::SmallManifest(3, 6, 40000);  // ~80 KB tensors: a stride of 80128 bytes
    ASSERT_TRUE(testing::WritePatternStore(dir_, m_).ok());
  }
  uint8_t transport() const { return std::get<0>(GetParam()); }
  Fabric fabric() const { return std::get<1>(GetParam()); }
  /// The Domain of lane host `host` (0: the peer, 1: the client).
  Status MakeDomain(int host, std::unique_ptr<fabric::Domain>* out) const {
    if (fabric() == Fabric::kVerbs) return testing::VerbsDomain(host, 5000, out);
    return testing::LoopbackDomain(fabric() == Fabric::kTcp2Rails, 5000, out);
  }

  void StartPeer(Peer* p, uint64_t cap = 0, bool fabric = true, int storeCheckIntervalMs = 100) {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(dir_, true, &store).ok());
    if (fabric) {
      Status d = MakeDomain(0, &p->domain);
      ASSERT_TRUE(d.ok()) << d.message();
      ASSERT_TRUE(p->domain->CreateWorker(&p->worker).ok());
    }
    ServerOptions o;
    o.pinCapBytes = cap;
    o.timeoutMs = 5000;
    o.storeCheckIntervalMs = storeCheckIntervalMs;
    Status s = ExpertServer::Start(std::move(store), p->domain.get(), p->worker.get(), o, &p->server);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  Status OpenClient(const Peer& p, Client* c, uint64_t records, uint8_t transport, bool verify = true) {
    RY_RETURN_IF_ERROR(MakeDomain(1, &c->domain));
    c->cache = std::make_unique<fabric::RegistrationCache>(*c->domain);
    RY_RETURN_IF_ERROR(c->domain->CreateWorker(&c->worker));
    c->arena.assign(records * m_.recordStride, '\x5a');
    ClientOptions o;
    o.transport = transport;
    o.verifyChecksums = verify;
    o.timeoutMs = 5000;
    return ExpertClient::Open(p.address(), o, *c->cache, c->worker.get(), c->arena.data(), c->arena.size(), &c->client);
  }

  TempDir tmp_;
  std::string dir_;
  Manifest m_;
};

TEST_P(ExpertPeerTest, EveryRecordArrivesByteIdentical) {
  Peer p;
  StartPeer(&p);
  Client c;
  const uint64_t n = m_.layers.size() * m_.expertsPerLayer;
  Status s = OpenClient(p, &c, n, transport());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.client->manifest().ToJson(), p.server->store().manifest().ToJson());
  // One at a time, then all of them in one batch (reversed order, into other slots).
  ASSERT_TRUE(c.client->Fetch(1, 4, 0).ok());
  EXPECT_EQ(std::string(c.arena.data(), m_.recordStride), testing::ExpectedRecord(m_, 1, 4));
  std::vector<RecordRequest> batch;
  for (uint64_t i = 0; i < n; ++i) batch.push_back({static_cast<uint32_t>(i / 6), i % 6, (n - 1 - i) * m_.recordStride});
  s = c.client->FetchBatch(batch);
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::string(c.arena.data() + (n - 1 - i) * m_.recordStride, m_.recordStride),
              testing::ExpectedRecord(m_, i / 6, i % 6)) << "record " << i;
  }
  EXPECT_EQ(c.cache->stats().registrations, 1u);
  ASSERT_TRUE(c.client->Close().ok());
  // The peer saw a polite shutdown; over READ it registered each layer file once.
  for (int i = 0; i < 200 && p.server->stats().shutdowns == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(p.server->stats().shutdowns, 1u);
  EXPECT_EQ(p.server->stats().layerRegistrations, transport() == kTransportRead ? 3u : 0u);
  EXPECT_EQ(p.server->stats().recordsServedTcp, transport() == kTransportTcp ? n + 1 : 0u);
}

TEST_P(ExpertPeerTest, ArenaNcclRegisteredIsNotRegisteredAgain) {
  Peer p;
  StartPeer(&p);
  Client c;
  ASSERT_TRUE(MakeDomain(1, &c.domain).ok());
  c.cache = std::make_unique<fabric::RegistrationCache>(*c.domain);
  ASSERT_TRUE(c.domain->CreateWorker(&c.worker).ok());
  c.arena.assign(4 * m_.recordStride, 0);
  // What NCCL's regMr did first: the whole buffer, every right.
  const fabric::Region* nccl = nullptr;
  ASSERT_TRUE(c.cache->Acquire(c.arena.data(), c.arena.size(), fabric::kAccessAll, fabric::MemoryKind::kHost, &nccl).ok());
  ClientOptions o;
  o.transport = transport();
  // The arena is a slice inside NCCL's buffer.
  ASSERT_TRUE(ExpertClient::Open(p.address(), o, *c.cache, c.worker.get(), c.arena.data() + m_.recordStride,
                                 2 * m_.recordStride, &c.client).ok());
  EXPECT_EQ(c.client->arenaRegion(), nccl);
  EXPECT_EQ(c.cache->stats().registrations, 1u);
  EXPECT_EQ(c.cache->stats().reuses, 1u);
  // Offsets are the arena's: slot 1 of the arena is byte 2*stride of the buffer.
  ASSERT_TRUE(c.client->Fetch(2, 3, m_.recordStride).ok());
  EXPECT_EQ(std::string(c.arena.data() + 2 * m_.recordStride, m_.recordStride), testing::ExpectedRecord(m_, 2, 3));
  EXPECT_EQ(ExpertErrcOf(c.client->Fetch(0, 0, 2 * m_.recordStride)), ExpertErrc::kOutOfRange);
  c.client.reset();
  EXPECT_EQ(c.cache->stats().live, 1u);  // NCCL's count stays
  ASSERT_TRUE(c.cache->Release(nccl).ok());
}

TEST_P(ExpertPeerTest, ArenaRegisteredBeforeIsReusedByEveryClient) {
  // One RegistrationCache of the client's Domain, as NCCL's regMr and the tiers share
  // it: a buffer registered first (every right), then two clients (this test's
  // transport and TCP) whose arenas lie inside it, and a third whose arena sticks out.
  Peer p;
  StartPeer(&p);
  Client c;
  ASSERT_TRUE(MakeDomain(1, &c.domain).ok());
  c.cache = std::make_unique<fabric::RegistrationCache>(*c.domain);
  ASSERT_TRUE(c.domain->CreateWorker(&c.worker).ok());
  c.arena.assign(8 * m_.recordStride, 0);
  const fabric::Region* first = nullptr;
  ASSERT_TRUE(c.cache->Acquire(c.arena.data(), 6 * m_.recordStride, fabric::kAccessAll, fabric::MemoryKind::kHost, &first).ok());
  ASSERT_EQ(c.cache->stats().registrations, 1u);
  ClientOptions o;
  o.transport = transport();
  o.timeoutMs = 5000;
  std::unique_ptr<ExpertClient> a, b, out;
  ASSERT_TRUE(ExpertClient::Open(p.address(), o, *c.cache, c.worker.get(), c.arena.data(), 2 * m_.recordStride, &a).ok());
  o.transport = kTransportTcp;
  ASSERT_TRUE(ExpertClient::Open(p.address(), o, *c.cache, nullptr, c.arena.data() + 3 * m_.recordStride,
                                 3 * m_.recordStride, &b).ok());
  EXPECT_EQ(a->arenaRegion(), first);
  EXPECT_EQ(b->arenaRegion(), first);
  fabric::RegistrationCache::Stats st = c.cache->stats();
  EXPECT_EQ(st.registrations, 1u);  // no second Domain::Register, so nothing pinned twice
  EXPECT_EQ(st.reuses, 2u);
  EXPECT_EQ(st.live, 1u);
  EXPECT_EQ(c.cache->References(first), 3u);
  // Both land where they should through the reused Region.
  ASSERT_TRUE(a->Fetch(1, 2, m_.recordStride).ok());
  ASSERT_TRUE(b->Fetch(2, 4, 2 * m_.recordStride).ok());
  EXPECT_EQ(std::string(c.arena.data() + m_.recordStride, m_.recordStride), testing::ExpectedRecord(m_, 1, 2));
  EXPECT_EQ(std::string(c.arena.data() + 5 * m_.recordStride, m_.recordStride), testing::ExpectedRecord(m_, 2, 4));
  // An arena that reaches past the registered range is registered on its own.
  o.transport = transport();
  ASSERT_TRUE(ExpertClient::Open(p.address(), o, *c.cache, c.worker.get(), c.arena.data() + 5 * m_.recordStride,
                                 3 * m_.recordStride, &out).ok());
  EXPECT_NE(out->arenaRegion(), first);
  EXPECT_EQ(c.cache->stats().registrations, 2u);
  // Closing the clients gives back their counts; the first owner's stays.
  a.reset();
  b.reset();
  out.reset();
  EXPECT_EQ(c.cache->stats().live, 1u);
  EXPECT_EQ(c.cache->References(first), 1u);
  ASSERT_TRUE(c.cache->Release(first).ok());
  EXPECT_EQ(c.cache->stats().live, 0u);
}

TEST_P(ExpertPeerTest, ChecksumVerificationCanBeSwitchedOff) {
  Peer p;
  StartPeer(&p);
  // Corrupt one byte of expert 2 of layer index 0 after the peer opened the store;
  // keep the mtime so even the TCP peer's identity check does not see it.
  const std::string f = dir_ + "/layer-0001.bin";
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(2 * m_.recordStride + 5));
    io.put(static_cast<char>('\x7f' ^ testing::ExpectedRecord(m_, 0, 2)[5]));
  }
  timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), times, 0), 0);
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 1, transport()).ok());
  Status s = c.client->Fetch(0, 2, 0);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kChecksumMismatch) << s.message();
  c.client->SetVerifyChecksums(false);
  ASSERT_TRUE(c.client->Fetch(0, 2, 0).ok());
  EXPECT_NE(std::string(c.arena.data(), m_.recordStride), testing::ExpectedRecord(m_, 0, 2));
  EXPECT_TRUE(c.client->Fetch(0, 3, 0).ok());
}

TEST_P(ExpertPeerTest, OutOfRangeIsRefusedBeforeAnythingMoves) {
  Peer p;
  StartPeer(&p);
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 2, transport()).ok());
  const Status pastLayers = c.client->Fetch(3, 0, 0);
  EXPECT_EQ(ExpertErrcOf(pastLayers), ExpertErrc::kOutOfRange);
  // Model layer 3 is index 1 here: the refusal says how indices map (new-user trial).
  EXPECT_NE(pastLayers.message().find("layer indices 0.. are the model's layers 1, 3, 5"), std::string::npos)
      << pastLayers.message();
  EXPECT_EQ(ExpertErrcOf(c.client->Fetch(0, 6, 0)), ExpertErrc::kOutOfRange);
  EXPECT_EQ(ExpertErrcOf(c.client->Fetch(0, 0, m_.recordStride + 1)), ExpertErrc::kOutOfRange);
  // A slot off the store's alignment (256 here) would misalign every tensor: refused,
  // naming aligned offsets either side (new-user trial: accepted silently).
  const Status unaligned = c.client->Fetch(1, 4, 300);
  EXPECT_EQ(ExpertErrcOf(unaligned), ExpertErrc::kInvalidArgument) << unaligned.message();
  EXPECT_NE(unaligned.message().find("arena slot at 300 (layer index 1 expert 4) is not a multiple of the store's "
                                     "alignment 256 (its tensors' offsets are; 256 or 512 would do"),
            std::string::npos)
      << unaligned.message();
  for (uint64_t i = 0; i < 2 * m_.recordStride; ++i) ASSERT_EQ(c.arena[i], '\x5a') << "byte " << i;
  // The client still works afterwards.
  EXPECT_TRUE(c.client->Fetch(2, 5, m_.recordStride).ok());
}

TEST_P(ExpertPeerTest, OverlappingSlotsAreRefusedBeforeAnythingMoves) {
  Peer p;
  StartPeer(&p);
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 3, transport()).ok());
  const uint64_t stride = m_.recordStride;
  // Record 2 starts 256 bytes (one alignment) into record 0's slot: it would overwrite
  // record 0's tail.
  const std::vector<RecordRequest> batch{{0, 0, 0}, {0, 3, 2 * stride}, {0, 1, 256}};
  Status s = c.client->FetchBatch(batch);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("record 0 (layer index 0 expert 0, arena slot at 0) and record 2 (layer index 0 expert 1, "
                             "arena slot at 256) overlap"),
            std::string::npos)
      << s.message();
  // The same slot twice overlaps too; nothing landed, and the client still works.
  EXPECT_EQ(ExpertErrcOf(c.client->FetchBatch(std::vector<RecordRequest>{{0, 2, stride}, {1, 2, stride}})),
            ExpertErrc::kInvalidArgument);
  for (uint64_t i = 0; i < 3 * stride; ++i) ASSERT_EQ(c.arena[i], '\x5a') << "byte " << i;
  ASSERT_TRUE(c.client->FetchBatch(std::vector<RecordRequest>{{0, 0, 0}, {0, 1, stride}, {0, 3, 2 * stride}}).ok());
  EXPECT_EQ(std::string(c.arena.data(), stride), testing::ExpectedRecord(m_, 0, 0));
  EXPECT_EQ(std::string(c.arena.data() + stride, stride), testing::ExpectedRecord(m_, 0, 1));
  EXPECT_EQ(std::string(c.arena.data() + 2 * stride, stride), testing::ExpectedRecord(m_, 0, 3));
}

TEST(ExpertSlots, DisjointSlotsPassAndTheFirstOverlapInArenaOrderIsNamed) {
  EXPECT_TRUE(CheckDisjointSlots({}, 64).ok());
  const std::vector<RecordRequest> apart{{0, 1, 128}, {0, 2, 0}, {0, 3, 64}};
  EXPECT_TRUE(CheckDisjointSlots(apart, 64).ok());
  const std::vector<RecordRequest> close{{0, 1, 128}, {0, 2, 0}, {0, 3, 191}, {0, 4, 63}};
  Status s = CheckDisjointSlots(close, 64);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kInvalidArgument);
  // In arena order 0, 63, 128, 191: slots 0 and 63 (records 1 and 3) overlap first.
  EXPECT_NE(s.message().find("record 1 (layer index 0 expert 2, arena slot at 0) and record 3 (layer index 0 "
                             "expert 4, arena slot at 63) overlap"),
            std::string::npos)
      << s.message();
}

TEST_P(ExpertPeerTest, StoreChangedUnderThePeerIsNamed) {
  Peer p;
  StartPeer(&p, 0, true, /*storeCheckIntervalMs=*/0);  // the test runs the peer's check itself
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 1, transport()).ok());
  ASSERT_TRUE(c.client->Fetch(0, 1, 0).ok());
  // Rewrite bytes of expert 1's record in place (same size): the file's mtime moves.
  {
    std::fstream f(dir_ + "/layer-0001.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(m_.recordStride + 10));
    f.write("XXXX", 4);
  }
  Status s = c.client->Fetch(0, 1, 0);
  if (transport() == kTransportTcp) {
    // TCP: the peer checks the file before every pread, and says what changed.
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
    EXPECT_NE(s.message().find("modified in place"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("size"), std::string::npos) << s.message();
  } else {
    // READ: the peer serves the copy it loaded, so until it looks the record is the
    // manifest's, whole (never the rewritten bytes); once it looks it withdraws.
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(std::string(c.arena.data(), m_.recordStride), testing::ExpectedRecord(m_, 0, 1));
    EXPECT_EQ(ExpertErrcOf(p.server->CheckStore()), ExpertErrc::kStoreChanged);
    EXPECT_EQ(p.server->stats().withdrawals, 1u);
    s = c.client->Fetch(0, 1, 0);
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
    // One prefix (it read "expert STORE_CHANGED: expert STORE_CHANGED: ...").
    const std::string prefix = "expert STORE_CHANGED: ";
    EXPECT_EQ(s.message().rfind(prefix, 0), 0u) << s.message();
    EXPECT_EQ(s.message().find(prefix, 1), std::string::npos) << s.message();
    // The next fetch names its own request, then the failure that stopped the client.
    const Status next = c.client->Fetch(0, 2, 0);
    EXPECT_EQ(ExpertErrcOf(next), ExpertErrc::kStoreChanged) << next.message();
    EXPECT_EQ(next.message().rfind("expert STORE_CHANGED: fetch of layer index 0 expert 2: not sent, this client "
                                   "stopped at an earlier failure (",
                                   0),
              0u)
        << next.message();
    EXPECT_EQ(next.message().find(prefix, 1), std::string::npos) << next.message();
    // Close after the failure does not report it again.
    EXPECT_TRUE(c.client->Close().ok());
  }
  // A new connection is refused over READ too (the peer re-checks sizes and mtimes).
  Client c3;
  s = OpenClient(p, &c3, 1, transport());
  if (transport() == kTransportRead) {
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  } else {
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(ExpertErrcOf(c3.client->Fetch(0, 1, 0)), ExpertErrc::kStoreChanged);
  }
}

TEST_P(ExpertPeerTest, LayerFileTruncatedUnderThePeerIsStoreChanged) {
  Peer p;
  StartPeer(&p);
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 1, transport()).ok());
  ASSERT_TRUE(c.client->Fetch(1, 5, 0).ok());
  ASSERT_EQ(::truncate((dir_ + "/layer-0003.bin").c_str(), static_cast<off_t>(m_.recordStride)), 0);
  if (transport() == kTransportRead) {
    // The peer notices within ~100 ms and withdraws its registrations before any
    // Read touches the truncated mapping (waited for here: the test never races it).
    for (int i = 0; i < 500 && p.server->stats().withdrawals == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(p.server->stats().withdrawals, 1u);
  }
  Status s = c.client->Fetch(1, 5, 0);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  if (transport() == kTransportTcp) {
    EXPECT_NE(s.message().find("size " + std::to_string(m_.recordStride * m_.expertsPerLayer) + " -> " +
                               std::to_string(m_.recordStride)),
              std::string::npos)
        << s.message();
  }
}

TEST_P(ExpertPeerTest, TruncatedBeforeThePeerNoticesNeverCrashesIt) {
  // The peer's store check is held off (interval 0), so Reads of the part of a layer
  // file cut off by a truncation reach the peer before it withdraws anything: the
  // window a periodic check always leaves. Reading the file's mapping there raised
  // SIGBUS in the peer (this process); the peer serves its own copy instead.
  Peer p;
  StartPeer(&p, 0, true, /*storeCheckIntervalMs=*/0);
  Client c;
  ASSERT_TRUE(OpenClient(p, &c, 6, transport()).ok());
  ASSERT_TRUE(c.client->Fetch(2, 0, 0).ok());
  ASSERT_EQ(::truncate((dir_ + "/layer-0005.bin").c_str(), static_cast<off_t>(m_.recordStride / 2)), 0);
  std::vector<RecordRequest> batch;
  for (uint64_t e = 0; e < 6; ++e) batch.push_back({2, e, e * m_.recordStride});
  Status s = c.client->FetchBatch(batch);
  if (transport() == kTransportTcp) {
    // TCP: every request is checked and pread, so the change is named at once.
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  } else {
    // READ: the records are the ones the manifest describes, whole, or nothing.
    ASSERT_TRUE(s.ok()) << s.message();
    for (uint64_t e = 0; e < 6; ++e) {
      ASSERT_EQ(std::string(c.arena.data() + e * m_.recordStride, m_.recordStride), testing::ExpectedRecord(m_, 2, e));
    }
    // Once the peer looks, it names the change and withdraws; the client's next
    // fetch fails with the same cause, and so does a new READ client.
    Status check = p.server->CheckStore();
    EXPECT_EQ(ExpertErrcOf(check), ExpertErrc::kStoreChanged) << check.message();
    s = c.client->FetchBatch(batch);
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
    Client late;
    s = OpenClient(p, &late, 1, transport());
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  }
  // The peer is alive and still answers: a TCP client gets the named error.
  Client tcp;
  ASSERT_TRUE(OpenClient(p, &tcp, 1, kTransportTcp).ok());
  EXPECT_EQ(ExpertErrcOf(tcp.client->Fetch(2, 1, 0)), ExpertErrc::kStoreChanged);
  EXPECT_TRUE(tcp.client->Fetch(0, 1, 0).ok());  // other layers are untouched
}

TEST_P(ExpertPeerTest, TruncatedMidBatchFailsNamedNeverPartial) {
  // Batches back to back over all 18 records while another thread truncates layer
  // index 1's file after the first batch; the peer checks every 10 ms. Every batch is
  // either Ok with every record byte-identical, or fails with STORE_CHANGED; one fails
  // within the bound, and the peer survives.
  Peer p;
  StartPeer(&p, 0, true, /*storeCheckIntervalMs=*/10);
  Client c;
  const uint64_t n = m_.layers.size() * m_.expertsPerLayer;
  ASSERT_TRUE(OpenClient(p, &c, n, transport()).ok());
  std::vector<RecordRequest> batch;
  for (uint64_t i = 0; i < n; ++i) batch.push_back({static_cast<uint32_t>(i % 3), i / 3, i * m_.recordStride});
  std::atomic<int> done{0};
  std::thread cutter([&] {
    while (done.load() == 0) std::this_thread::yield();
    (void)::truncate((dir_ + "/layer-0003.bin").c_str(), static_cast<off_t>(m_.recordStride + 100));
  });
  Status s = Status::Ok();
  int okBatches = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.ok() && std::chrono::steady_clock::now() < deadline) {
    std::fill(c.arena.begin(), c.arena.end(), '\x5a');
    s = c.client->FetchBatch(batch);
    if (!s.ok()) break;
    ++okBatches;
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::string(c.arena.data() + i * m_.recordStride, m_.recordStride),
                testing::ExpectedRecord(m_, i % 3, i / 3)) << "batch " << okBatches << " record " << i;
    }
    done.store(1);
  }
  done.store(1);
  cutter.join();
  EXPECT_GE(okBatches, 1);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  // The peer lives on and names the change to a new client too.
  Client again;
  s = OpenClient(p, &again, 1, transport());
  if (transport() == kTransportRead) {
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kStoreChanged) << s.message();
  } else {
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(ExpertErrcOf(again.client->Fetch(1, 2, 0)), ExpertErrc::kStoreChanged);
  }
}

TEST_P(ExpertPeerTest, PeerGoneMidBatchIsPeerLost) {
  Peer p;
  StartPeer(&p);
  Client c;
  const uint64_t n = 400;
  ASSERT_TRUE(OpenClient(p, &c, n, transport()).ok());
  std::vector<RecordRequest> batch;
  for (uint64_t i = 0; i < n; ++i) batch.push_back({static_cast<uint32_t>(i % 3), i % 6, i * m_.recordStride});
  // Batches back to back; the peer goes away (sockets closed, registrations gone)
  // once the first batch is in, so a later batch is cut short whatever the speed
  // (on verbs the peer's CPU serves no byte, so there is nothing to watch on its side).
  std::atomic<int> done{0};
  std::thread killer([&] {
    while (done.load() == 0) std::this_thread::yield();
    p.server->Stop();
    p.worker.reset();
  });
  Status s = Status::Ok();
  for (int i = 0; i < 10000 && s.ok(); ++i) {
    s = c.client->FetchBatch(batch);
    if (s.ok()) done.fetch_add(1);
  }
  done.fetch_add(1);
  killer.join();
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPeerLost) << s.message();
  // Failed for good: a later fetch says the same, never a stale success.
  EXPECT_EQ(ExpertErrcOf(c.client->Fetch(0, 0, 0)), ExpertErrc::kPeerLost);
}

TEST_P(ExpertPeerTest, AdmissionCapRefusesAtConnect) {
  Peer p;
  // TCP: each connection pins one stride; READ: the store is registered once.
  const uint64_t cap = transport() == kTransportTcp ? 2 * m_.recordStride : 3 * m_.LayerFileBytes();
  StartPeer(&p, cap);
  Client a, b, over;
  ASSERT_TRUE(OpenClient(p, &a, 1, transport()).ok());
  ASSERT_TRUE(OpenClient(p, &b, 1, transport()).ok());
  if (transport() == kTransportTcp) {
    Status s = OpenClient(p, &over, 1, transport());
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kAdmissionRefused) << s.message();
    EXPECT_NE(s.message().find("RAILYARD_EXPERT_PIN_CAP"), std::string::npos);
    // Closing one gives its share back.
    ASSERT_TRUE(a.client->Close().ok());
    a.client.reset();
    Status again = Status::Ok();
    for (int i = 0; i < 200; ++i) {
      Client retry;
      again = OpenClient(p, &retry, 1, transport());
      if (again.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(again.ok()) << again.message();
  } else {
    // A peer whose store does not fit its cap refuses every READ client.
    Peer small;
    StartPeer(&small, m_.LayerFileBytes());
    Status s = OpenClient(small, &over, 1, transport());
    EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kAdmissionRefused) << s.message();
  }
  EXPECT_EQ(b.client->Fetch(0, 0, 0).ok(), true);
  if (transport() == kTransportRead) {
    // Registered once for both, and kept once they close (a READ client that comes back
    // finds them). A tcp client the cap would refuse gets them released: no READ client
    // uses them (new-user trial: they stayed charged for the daemon's life, and later
    // clients were refused under a cap no connection used).
    EXPECT_EQ(p.server->stats().layerRegistrations, 3u);
    EXPECT_EQ(p.server->ledger().used(), 3 * m_.LayerFileBytes());
    ASSERT_TRUE(a.client->Close().ok());
    ASSERT_TRUE(b.client->Close().ok());
    Status admitted = Status::Ok();
    for (int i = 0; i < 200; ++i) {  // until the peer's threads for a and b have ended
      Client tcp;
      admitted = OpenClient(p, &tcp, 1, kTransportTcp);
      if (admitted.ok()) {
        EXPECT_EQ(p.server->stats().idleReleases, 1u);
        EXPECT_EQ(p.server->ledger().used(), m_.recordStride);
        EXPECT_TRUE(tcp.client->Fetch(1, 2, 0).ok());
        EXPECT_EQ(std::string(tcp.arena.data(), m_.recordStride), testing::ExpectedRecord(m_, 1, 2));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(admitted.ok()) << admitted.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ExpertPeerTest,
                         ::testing::Values(std::make_tuple(kTransportTcp, Fabric::kTcp1Rail),
                                           std::make_tuple(kTransportRead, Fabric::kTcp1Rail),
                                           std::make_tuple(kTransportRead, Fabric::kTcp2Rails),
                                           std::make_tuple(kTransportRead, Fabric::kVerbs)),
                         [](const auto& param_info) {
                           const Fabric f = std::get<1>(param_info.param);
                           return std::string(TransportName(std::get<0>(param_info.param))) +
                                  (f == Fabric::kVerbs ? "_verbs" : f == Fabric::kTcp2Rails ? "_2rails" : "_1rail");
                         });

/// A TCP-only peer (no fabric Domain) over a store of 1 layer x 2 experts written
/// under `dir`, started with `so`.
void StartSmallTcpPeer(const std::string& dir, const ServerOptions& so, std::unique_ptr<ExpertServer>* server) {
  const Manifest m = testing::SmallManifest(1, 2, 16);
  ASSERT_TRUE(testing::WritePatternStore(dir, m).ok());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir, false, &store).ok());
  ASSERT_TRUE(ExpertServer::Start(std::move(store), nullptr, nullptr, so, server).ok());
}

/// Connects to the peer on `port` and reads its Hello and manifest (5 s receive
/// timeout); OK when they came, *fd the connection either way (-1 if none).
Status ReadHelloAndManifest(uint16_t port, int* fd) {
  RY_RETURN_IF_ERROR(WireConnect("127.0.0.1", port, 2000, fd));
  (void)SetSocketTimeouts(*fd, 5000);
  HelloHeader h{};
  RY_RETURN_IF_ERROR(WireRecv(*fd, &h, sizeof h, "hello"));
  std::string text(h.manifestBytes, '\0');
  return WireRecv(*fd, text.data(), text.size(), "manifest");
}

// C API trial: a read handle whose first fetch came 12 s after its open failed
// PEER_LOST: its TCP Endpoint sends its hello only when first progressed, and the peer
// closes a connection whose hello has not come in RAILYARD_ACCEPT_TIMEOUT_MS. Open now
// brings the fabric connection up (a zero-byte Read): the peer's Worker holds the
// connection when Open returns, and a fetch long after the peer's hello timeout (here
// 200 ms, the wait four times that) lands.
TEST(ExpertPeer, AReadHandleMayWaitPastThePeersHelloTimeoutBeforeItsFirstFetch) {
  TempDir tmp;
  const std::string dir = tmp.path + "/store";
  const Manifest m = testing::SmallManifest(1, 2, 1000);
  ASSERT_TRUE(testing::WritePatternStore(dir, m).ok());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir, true, &store).ok());
  fabric::tcp::TcpOptions po;
  po.rails = {{"lo", "127.0.0.1", 10000}};
  po.timeoutMs = 5000;
  po.helloTimeoutMs = 200;
  std::unique_ptr<fabric::Domain> peerDomain;
  std::unique_ptr<fabric::Worker> peerWorker;
  ASSERT_TRUE(fabric::tcp::CreateTcpDomain(po, &peerDomain).ok());
  ASSERT_TRUE(peerDomain->CreateWorker(&peerWorker).ok());
  ServerOptions so;
  so.timeoutMs = 5000;
  std::unique_ptr<ExpertServer> server;
  ASSERT_TRUE(ExpertServer::Start(std::move(store), peerDomain.get(), peerWorker.get(), so, &server).ok());
  Client c;
  ASSERT_TRUE(testing::LoopbackDomain(false, 5000, &c.domain).ok());
  c.cache = std::make_unique<fabric::RegistrationCache>(*c.domain);
  ASSERT_TRUE(c.domain->CreateWorker(&c.worker).ok());
  c.arena.assign(m.recordStride, '\x5a');
  ClientOptions o;
  o.transport = kTransportRead;
  o.timeoutMs = 5000;
  Status s = ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), o, *c.cache, c.worker.get(),
                                c.arena.data(), c.arena.size(), &c.client);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(peerWorker->stats().peerConnections, 1u) << "the open returned before its fabric connection was up";
  std::this_thread::sleep_for(std::chrono::milliseconds(4 * po.helloTimeoutMs));  // the scenario: an idle handle
  s = c.client->Fetch(0, 1, 0);
  EXPECT_TRUE(s.ok()) << s.message();
  server.reset();
}

// Hostile-peer probe: 256 clients of one host that chose a transport and went idle shut
// every other host out. One address may hold at most maxConnectionsPerSource; the next
// from it is refused at accept, saying so, while the store has room for others.
TEST(ExpertPeer, OneAddressHoldsAtMostItsShareOfTheConnections) {
  TempDir tmp;
  ServerOptions so;
  so.maxConnections = 8;
  so.maxConnectionsPerSource = 2;
  std::unique_ptr<ExpertServer> server;
  ASSERT_NO_FATAL_FAILURE(StartSmallTcpPeer(tmp.path + "/s", so, &server));
  test_support::LogCapture capture;
  int fds[3] = {-1, -1, -1};
  ASSERT_TRUE(ReadHelloAndManifest(server->port(), &fds[0]).ok());
  ASSERT_TRUE(ReadHelloAndManifest(server->port(), &fds[1]).ok());
  EXPECT_FALSE(ReadHelloAndManifest(server->port(), &fds[2]).ok())
      << "a third connection from 127.0.0.1 was served with 2 per address";
  bool named = false;
  for (const std::string& l : capture.lines()) {
    named |= l.find("expert store: refused a client from 127.0.0.1:") != std::string::npos &&
             l.find("2 clients of that address connected already (at most 2 from one address") != std::string::npos;
  }
  EXPECT_TRUE(named) << "the refusal did not say it was the address's share";
  for (int fd : fds) ::close(fd);
}

/// A tcp-transport client from 127.0.0.2 that completes its handshake (hello, manifest,
/// choice, the store's OK) and then sits idle; *fd its connection.
void IdleTcpClientFromDotTwo(uint16_t port, int* fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(*fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000002);
  ASSERT_EQ(::bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(0x7f000001);
  ASSERT_EQ(::connect(*fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  (void)SetSocketTimeouts(*fd, 5000);
  HelloHeader h{};
  ASSERT_TRUE(WireRecv(*fd, &h, sizeof h, "hello").ok());
  std::string text(h.manifestBytes, '\0');
  ASSERT_TRUE(WireRecv(*fd, text.data(), text.size(), "manifest").ok());
  ChooseMessage choose{};
  choose.transport = kTransportTcp;
  ASSERT_TRUE(WireSend(*fd, &choose, sizeof choose, "choice").ok());
  ReplyHeader r{};
  ASSERT_TRUE(WireRecv(*fd, &r, sizeof r, "choice reply").ok());
  ASSERT_EQ(r.errc, 0);
}

// Hostile-peer probe: clients from 4 addresses x 64 that chose a transport and went
// idle held every seat for as long as they liked. When the store is full, a newcomer
// from another address takes the seat of the oldest idle client of the address holding
// the most: here 127.0.0.2 holds 2 of 3, so 127.0.0.1's second client closes .2's
// older one, and both of .1's clients fetch.
TEST(ExpertPeer, AFullStoreClosesAnIdleClientOfTheAddressHoldingTheMost) {
  TempDir tmp;
  const Manifest m = testing::SmallManifest(1, 2, 16);
  ServerOptions so;
  so.maxConnections = 3;
  so.maxConnectionsPerSource = 3;
  std::unique_ptr<ExpertServer> server;
  ASSERT_NO_FATAL_FAILURE(StartSmallTcpPeer(tmp.path + "/s", so, &server));
  test_support::LogCapture capture;
  int raw[2] = {-1, -1};
  for (int& fd : raw) ASSERT_NO_FATAL_FAILURE(IdleTcpClientFromDotTwo(server->port(), &fd));
  std::unique_ptr<fabric::Domain> domain;
  ASSERT_TRUE(testing::LoopbackDomain(false, 5000, &domain).ok());
  fabric::RegistrationCache cache(*domain);
  std::vector<char> arena(2 * m.recordStride);
  ClientOptions o;
  o.transport = kTransportTcp;
  o.timeoutMs = 5000;
  const std::string peer = "127.0.0.1:" + std::to_string(server->port());
  std::unique_ptr<ExpertClient> c[2];
  ASSERT_TRUE(ExpertClient::Open(peer, o, cache, nullptr, arena.data(), m.recordStride, &c[0]).ok());
  Status second;
  for (int tries = 0; tries < 200; ++tries) {  // until .2's clients wait idle (they just got their replies)
    second = ExpertClient::Open(peer, o, cache, nullptr, arena.data() + m.recordStride, m.recordStride, &c[1]);
    if (second.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(second.ok()) << second.message();
  char byte;
  EXPECT_EQ(::recv(raw[0], &byte, 1, 0), 0) << "the oldest idle client of 127.0.0.2 is still open";
  EXPECT_EQ(::recv(raw[1], &byte, 1, MSG_DONTWAIT), -1) << "127.0.0.2's younger client was closed too";
  EXPECT_EQ(errno, EAGAIN);
  bool named = false;
  for (const std::string& l : capture.lines()) {
    named |= l.find("expert store: 3 clients connected (at most 3): closed an idle one from 127.0.0.2:") !=
                 std::string::npos &&
             l.find("the address holding the most, for a new one from 127.0.0.1:") != std::string::npos;
  }
  EXPECT_TRUE(named) << "the eviction was not logged";
  EXPECT_TRUE(c[0]->Fetch(0, 1, 0).ok());
  EXPECT_TRUE(c[1]->Fetch(0, 0, 0).ok());
  for (int fd : raw) ::close(fd);
  c[0].reset();
  c[1].reset();
  server.reset();
}

// Idle clients (a Hello read, no transport chosen) hold their slots only until the
// handshake timeout, and a client refused over maxConnections is logged naming its
// address (hostile-peer probe: 256 idle clients shut every new one out for 30 s,
// silently).
TEST(ExpertPeer, IdleClientsGoAtTheHandshakeTimeoutAndRefusalsAreNamed) {
  TempDir tmp;
  const Manifest m = testing::SmallManifest(1, 2, 16);
  ServerOptions so;
  so.maxConnections = 2;
  so.handshakeTimeoutMs = 1500;
  std::unique_ptr<ExpertServer> server;
  ASSERT_NO_FATAL_FAILURE(StartSmallTcpPeer(tmp.path + "/s", so, &server));
  test_support::LogCapture capture;
  auto hello = [&](int* fd) { return ReadHelloAndManifest(server->port(), fd); };
  int idle[2] = {-1, -1};
  ASSERT_TRUE(hello(&idle[0]).ok());
  ASSERT_TRUE(hello(&idle[1]).ok());
  int third = -1;
  EXPECT_FALSE(hello(&third).ok());  // closed before its Hello: over the limit
  ::close(third);
  {
    // A client refused so is told what closing before the hello means (trial: PEER_LOST only).
    std::unique_ptr<fabric::Domain> domain;
    ASSERT_TRUE(testing::LoopbackDomain(false, 5000, &domain).ok());
    fabric::RegistrationCache cache(*domain);
    std::vector<char> arena(m.recordStride);
    ClientOptions o;
    o.transport = kTransportTcp;
    o.timeoutMs = 5000;
    std::unique_ptr<ExpertClient> refused;
    const Status r = ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), o, cache, nullptr, arena.data(),
                                        arena.size(), &refused);
    EXPECT_EQ(ExpertErrcOf(r), ExpertErrc::kPeerLost) << r.message();
    // (A reset when the store closed before reading the client's transport choice.)
    EXPECT_NE(r.message().find("before its hello: an expert store does so when it already serves its most clients "
                               "at once"),
              std::string::npos)
        << r.message();
  }
  bool named = false;
  for (const std::string& l : capture.lines()) {
    named |= l.rfind("WARN expert store: refused a client from 127.0.0.1:", 0) == 0 &&
             l.find("2 clients connected already (at most 2") != std::string::npos;
  }
  EXPECT_TRUE(named);
  // The idle ones are dropped at the handshake timeout: their sockets close.
  for (int fd : idle) {
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0) << "an idle client was not dropped";  // blocks up to 5 s (SO_RCVTIMEO)
    ::close(fd);
  }
  // ... and a new client is served again (the slots are free once their threads finish).
  Status got;
  for (int i = 0; i < 100; ++i) {
    int fd = -1;
    got = hello(&fd);
    ::close(fd);
    if (got.ok()) break;
  }
  EXPECT_TRUE(got.ok()) << got.message();
}

TEST(ExpertPeer, UnknownTransportByteAndHostileHello) {
  TempDir tmp;
  const Manifest m = testing::SmallManifest(1, 2, 16);
  ASSERT_TRUE(testing::WritePatternStore(tmp.path + "/s", m).ok());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(tmp.path + "/s", false, &store).ok());
  std::unique_ptr<ExpertServer> server;
  ASSERT_TRUE(ExpertServer::Start(std::move(store), nullptr, nullptr, ServerOptions{}, &server).ok());
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(testing::LoopbackDomain(false, 2000, &d).ok());
  fabric::RegistrationCache cache(*d);
  std::vector<char> arena(4096);
  std::unique_ptr<ExpertClient> c;
  ClientOptions o;
  o.transport = 7;
  Status s = ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), o, cache, nullptr, arena.data(), arena.size(), &c);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kUnknownTransport) << s.message();
  // READ against a peer that serves no fabric: also a named refusal.
  std::unique_ptr<fabric::Worker> w;
  ASSERT_TRUE(d->CreateWorker(&w).ok());
  o.transport = kTransportRead;
  s = ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), o, cache, w.get(), arena.data(), arena.size(), &c);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kUnknownTransport) << s.message();
  EXPECT_EQ(cache.stats().live, 0u);  // nothing stays registered after a refusal
  // An arena that cannot hold one record is refused at open, naming both sizes.
  o.transport = kTransportTcp;
  s = ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), o, cache, nullptr, arena.data(), 15, &c);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("the arena of 15 bytes cannot hold one record (stride " + std::to_string(m.recordStride)),
            std::string::npos)
      << s.message();
  EXPECT_EQ(c, nullptr);

  // A raw request for an out-of-range record gets a named error reply from the peer itself.
  int fd = -1;
  uint64_t payload = 0;
  auto openTcp = [&] {  // a raw tcp-transport connection, its handshake done
    ASSERT_TRUE(WireConnect("127.0.0.1", server->port(), 2000, &fd).ok());
    HelloHeader h{};
    ASSERT_TRUE(WireRecv(fd, &h, sizeof h, "hello").ok());
    std::string text(h.manifestBytes, '\0');
    ASSERT_TRUE(WireRecv(fd, text.data(), text.size(), "manifest").ok());
    ChooseMessage ch{};
    ch.transport = kTransportTcp;
    ASSERT_TRUE(WireSend(fd, &ch, sizeof ch, "choose").ok());
    ASSERT_TRUE(ReadReply(fd, "peer", &payload).ok());
  };
  ASSERT_NO_FATAL_FAILURE(openTcp());
  RequestMessage rq{};
  rq.op = kOpFetch;
  rq.layer = 0;
  rq.expert = 1ull << 40;
  ASSERT_TRUE(WireSend(fd, &rq, sizeof rq, "request").ok());
  s = ReadReply(fd, "peer", &payload);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kOutOfRange) << s.message();
  // Reserved bytes set: refused, naming them, and the connection ends (hostile-peer
  // probe: a fetch with them 0xffffff was served).
  rq.expert = 1;
  std::memset(rq.reserved, 0xff, sizeof rq.reserved);
  ASSERT_TRUE(WireSend(fd, &rq, sizeof rq, "request").ok());
  s = ReadReply(fd, "peer", &payload);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kProtocol) << s.message();
  EXPECT_NE(s.message().find("has reserved bytes that are not zero"), std::string::npos) << s.message();
  ::close(fd);
  ASSERT_NO_FATAL_FAILURE(openTcp());
  std::memset(rq.reserved, 0, sizeof rq.reserved);
  rq.op = 99;
  ASSERT_TRUE(WireSend(fd, &rq, sizeof rq, "request").ok());
  EXPECT_EQ(ExpertErrcOf(ReadReply(fd, "peer", &payload)), ExpertErrc::kProtocol);
  ::close(fd);

  // A "peer" that announces a manifest over the cap is refused before it is read.
  uint16_t fakePort = 0;
  const int ls = ListenOnLoopback(&fakePort);
  ASSERT_GE(ls, 0);
  std::thread fake([&] {
    int cfd = ::accept(ls, nullptr, nullptr);
    HelloHeader big{kHelloMagic, kWireVersion, 0, static_cast<uint32_t>(kMaxManifestBytes + 1)};
    (void)::send(cfd, &big, sizeof big, MSG_NOSIGNAL);
    char b;
    (void)::recv(cfd, &b, 1, 0);
    ::close(cfd);
  });
  o.transport = kTransportTcp;
  s = ExpertClient::Open("127.0.0.1:" + std::to_string(fakePort), o, cache, nullptr, arena.data(), arena.size(), &c);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kManifestTooLarge) << s.message();
  fake.join();
  ::close(ls);
}

// A peer whose kernel accepts the connection but whose process never answers (SIGSTOPped,
// wedged): the open fails once its hello does not come within the timeout, and closes
// without the polite shutdown, whose reply would cost a second timeout (new-user trial:
// 6.2 s with RAILYARD_TIMEOUT_MS=3000), saying what the silence may mean. The peer's side
// of the connection then reads the client's close and not one byte before it.
TEST(ExpertPeer, ASilentPeerFailsTheOpenAndIsSentOnlyTheTransportChoice) {
  std::unique_ptr<fabric::Domain> d;
  ASSERT_TRUE(testing::LoopbackDomain(false, 2000, &d).ok());
  fabric::RegistrationCache cache(*d);
  std::vector<char> arena(4096);
  uint16_t port = 0;
  const int ls = ListenOnLoopback(&port);  // never accepted until the open has returned
  ASSERT_GE(ls, 0);
  ClientOptions o;
  o.transport = kTransportTcp;
  o.timeoutMs = 200;
  std::unique_ptr<ExpertClient> c;
  Status s = ExpertClient::Open("127.0.0.1:" + std::to_string(port), o, cache, nullptr, arena.data(), arena.size(), &c);
  EXPECT_EQ(ExpertErrcOf(s), ExpertErrc::kPeerLost) << s.message();
  EXPECT_NE(s.message().find("hello: peer silent (timeout)"), std::string::npos) << s.message();
  // ... and says what such silence means (new-user trial: an expert client pointed at a
  // snapshot port, which waits for its client to speak, said only "peer silent").
  EXPECT_NE(s.message().find("the peer is frozen or overloaded, or this port is not an expert store's"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(c, nullptr);
  const int cfd = ::accept(ls, nullptr, nullptr);
  ASSERT_GE(cfd, 0);
  // Only its transport choice, which goes out before the hello is read (a snapshot
  // peer refuses those bytes at once), and no request.
  uint8_t buf[256];
  size_t got = 0;
  for (ssize_t n; (n = ::recv(cfd, buf + got, sizeof buf - got, 0)) > 0;) got += static_cast<size_t>(n);  // until FIN
  ASSERT_EQ(got, sizeof(ChooseMessage)) << "the client sent more than its transport choice to a peer that failed its open";
  EXPECT_EQ(buf[0], kTransportTcp);
  EXPECT_EQ(cache.stats().live, 0u);
  ::close(cfd);
  ::close(ls);
}

}  // namespace
}  // namespace railyard::expert
