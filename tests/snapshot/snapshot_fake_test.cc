// The snapshot tier over the fake in-process fabric transport (server and client
// in one process, each on its own Domain): the tier's code is written against the
// fabric interface, not against TCP. Paging round trips past the arena and raw
// mode, checked by content.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "proxy/fabric/fake/fake_transport.h"
#include "storage/snapshot/snapshot_client.h"
#include "storage/snapshot/snapshot_server.h"
#include "tests/snapshot/snapshot_harness.h"

namespace railyard::storage::snapshot::testing {
namespace {

struct FakeSide {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<fabric::RegistrationCache> cache;
  void Make() {
    ASSERT_TRUE(fabric::fake::CreateFakeDomain({}, &domain).ok());
    ASSERT_TRUE(domain->CreateWorker(&worker).ok());
    cache = std::make_unique<fabric::RegistrationCache>(*domain);
  }
};

/// A server and a client side on the fake transport, the server started with a fresh
/// swap directory (removed at the end, after the server stops).
struct FakeServer {
  std::string dir;
  FakeSide server, client;
  std::unique_ptr<SnapshotServer> srv;
  void Start(ServerOptions so) {
    dir = MakeTempDir();
    ASSERT_FALSE(dir.empty());
    server.Make();
    client.Make();
    so.swapDir = dir;
    ASSERT_TRUE(SnapshotServer::Start(*server.cache, *server.worker, so, &srv).ok());
  }
  /// A client's options for the paging kind "kv" of `slots` blobs of `blob` bytes.
  ClientOptions Kv(uint64_t blob, uint64_t slots) const {
    ClientOptions o;
    o.port = srv->port();
    o.kind = "kv";
    o.blobBytes = blob;
    o.arenaBytes = slots * blob;
    return o;
  }
  ~FakeServer() {
    srv.reset();
    if (!dir.empty()) RemoveTree(dir);
  }
};

TEST(SnapshotFake, PagingAndRawRoundTripsOverTheFakeTransport) {
  constexpr uint64_t kBlob = 64 * 1024;
  FakeServer f;
  ServerOptions so;
  so.arenas = {ArenaSpec{"kv", Mode::kPaging, kBlob, 4}, ArenaSpec{"raw", Mode::kRaw, kBlob, 4}};
  ASSERT_NO_FATAL_FAILURE(f.Start(so));
  FakeSide& server = f.server;
  FakeSide& client = f.client;
  std::unique_ptr<SnapshotServer>& srv = f.srv;
  {
    ClientOptions o = f.Kv(kBlob, 4);
    o.mover.chunkBytes = 16 * 1024;
    std::unique_ptr<SnapshotClient> c;
    Status s = SnapshotClient::Connect(*client.cache, *client.worker, o, &c);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<uint8_t> b(kBlob);
    for (uint64_t k = 0; k < 12; ++k) {
      Fill(b.data(), kBlob, k);
      ASSERT_TRUE(c->Put(k, b.data(), kBlob).ok()) << k;
    }
    for (uint64_t k = 0; k < 12; ++k) {
      bool found = false;
      ASSERT_TRUE(c->Get(k, b.data(), kBlob, &found).ok()) << k;
      ASSERT_TRUE(found);
      EXPECT_EQ(Mismatch(b.data(), kBlob, k), -1) << k;
    }
    EXPECT_GE(srv->Stats("kv").evictions, 8u);
    EXPECT_GE(srv->Stats("kv").faults, 8u);
    o.kind = "raw";
    o.mode = Mode::kRaw;
    std::unique_ptr<SnapshotClient> r;
    ASSERT_TRUE(SnapshotClient::Connect(*client.cache, *client.worker, o, &r).ok());
    Fill(b.data(), kBlob, 42);
    ASSERT_TRUE(r->WriteAt(3 * kBlob, b.data(), kBlob).ok());
    std::fill(b.begin(), b.end(), 0);
    ASSERT_TRUE(r->ReadAt(3 * kBlob, b.data(), kBlob).ok());
    EXPECT_EQ(Mismatch(b.data(), kBlob, 42), -1);
    // Each client's staging buffer is one registration, taken through the cache.
    EXPECT_EQ(client.cache->stats().live, 2u);
  }
  srv.reset();
  EXPECT_EQ(server.cache->stats().live, 0u);
}

// Handles rest on their connections without a deadline, so the server caps how many it
// serves at once (each a thread): one over the cap is closed at accept and its connect
// fails; once a handle closes, a new one gets in (the finished connection is reaped).
TEST(SnapshotFake, ConnectionsOverTheCapAreRefusedAndAClosedOneMakesRoom) {
  constexpr uint64_t kBlob = 64 * 1024;
  FakeServer f;
  ServerOptions so;
  so.arenas = {ArenaSpec{"kv", Mode::kPaging, kBlob, 4}};
  so.maxConnections = 2;
  so.timeoutMs = 2000;
  ASSERT_NO_FATAL_FAILURE(f.Start(so));
  FakeSide& client = f.client;
  std::unique_ptr<SnapshotServer>& srv = f.srv;
  ClientOptions o = f.Kv(kBlob, 4);
  o.timeoutMs = 2000;
  std::unique_ptr<SnapshotClient> c[3];
  ASSERT_TRUE(SnapshotClient::Connect(*client.cache, *client.worker, o, &c[0]).ok());
  ASSERT_TRUE(SnapshotClient::Connect(*client.cache, *client.worker, o, &c[1]).ok());
  Status over = SnapshotClient::Connect(*client.cache, *client.worker, o, &c[2]);
  EXPECT_FALSE(over.ok()) << "a third connection was served with a cap of 2";
  c[1].reset();  // closes its connection: the server's thread for it ends
  Status again;
  for (int tries = 0; tries < 200; ++tries) {  // until the server has seen the close
    again = SnapshotClient::Connect(*client.cache, *client.worker, o, &c[2]);
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(again.ok()) << again.message();
  std::vector<uint8_t> b(kBlob);
  Fill(b.data(), kBlob, 9);
  EXPECT_TRUE(c[2]->Put(9, b.data(), kBlob).ok());
  c[0].reset();
  c[2].reset();
  srv.reset();
}

}  // namespace
}  // namespace railyard::storage::snapshot::testing
