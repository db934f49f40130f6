// The snapshot tier over the fake in-process fabric transport (server and client
// in one process, each on its own Domain): the tier's code is written against the
// fabric interface, not against TCP. Paging round trips past the arena and raw
// mode, checked by content.
#include <gtest/gtest.h>

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

TEST(SnapshotFake, PagingAndRawRoundTripsOverTheFakeTransport) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  FakeSide server, client;
  server.Make();
  client.Make();
  constexpr uint64_t kBlob = 64 * 1024;
  ServerOptions so;
  so.arenas = {ArenaSpec{"kv", Mode::kPaging, kBlob, 4}, ArenaSpec{"raw", Mode::kRaw, kBlob, 4}};
  so.swapDir = dir;
  std::unique_ptr<SnapshotServer> srv;
  ASSERT_TRUE(SnapshotServer::Start(*server.cache, *server.worker, so, &srv).ok());
  {
    ClientOptions o;
    o.port = srv->port();
    o.kind = "kv";
    o.blobBytes = kBlob;
    o.arenaBytes = 4 * kBlob;
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
  RemoveTree(dir);
}

}  // namespace
}  // namespace railyard::storage::snapshot::testing
