// A client of one tier dialing the other tier's port, through both C APIs as a user
// would: each fails at once with an error that names the tier the port serves (C API
// trial: railyard_expert_open on a snapshot port waited 30 s, then said PROTOCOL or
// PEER_LOST by which side's timeout came first). Both servers in this process, with
// 60 s timeouts: a wait for either would outlast the test's ctest TIMEOUT.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "railyard/railyard.h"
#include "storage/expert/expert_server.h"
#include "storage/snapshot/snapshot_server.h"
#include "tests/expert/expert_test_util.h"

namespace railyard {
namespace {

constexpr int kLongMs = 60000;

TEST(TierPortMixup, EachTiersClientNamesTheOtherTiersPortAtOnce) {
  // An expert store.
  expert::testing::TempDir tmp;
  const expert::Manifest m = expert::testing::SmallManifest(1, 2, 1000);
  ASSERT_TRUE(expert::testing::WritePatternStore(tmp.path + "/s", m).ok());
  std::unique_ptr<expert::Store> store;
  ASSERT_TRUE(expert::Store::Open(tmp.path + "/s", false, &store).ok());
  std::unique_ptr<fabric::Domain> d;
  std::unique_ptr<fabric::Worker> expertWorker, snapshotWorker;
  ASSERT_TRUE(expert::testing::LoopbackDomain(false, kLongMs, &d).ok());
  ASSERT_TRUE(d->CreateWorker(&expertWorker).ok());
  ASSERT_TRUE(d->CreateWorker(&snapshotWorker).ok());
  std::unique_ptr<expert::ExpertServer> expertServer;
  expert::ServerOptions eo;
  eo.pinCapBytes = 1 << 30;
  eo.timeoutMs = kLongMs;
  eo.handshakeTimeoutMs = kLongMs;
  ASSERT_TRUE(expert::ExpertServer::Start(std::move(store), d.get(), expertWorker.get(), eo, &expertServer).ok());
  // A snapshot peer with one raw arena.
  fabric::RegistrationCache cache(*d);
  storage::snapshot::ServerOptions so;
  so.arenas = {storage::snapshot::ArenaSpec{"kv", storage::snapshot::Mode::kRaw, 4096, 4}};
  so.timeoutMs = kLongMs;
  std::unique_ptr<storage::snapshot::SnapshotServer> snapshotServer;
  ASSERT_TRUE(storage::snapshot::SnapshotServer::Start(cache, *snapshotWorker, so, &snapshotServer).ok());

  const std::string snapshotPeer = "127.0.0.1:" + std::to_string(snapshotServer->port());
  std::vector<char> arena(4 * m.recordStride);
  for (int transport : {RAILYARD_EXPERT_TRANSPORT_TCP, RAILYARD_EXPERT_TRANSPORT_READ}) {
    railyard_expert* h = reinterpret_cast<railyard_expert*>(&arena);  // not left as it was
    EXPECT_EQ(railyard_expert_open(snapshotPeer.c_str(), transport, 1, arena.data(), arena.size(), &h),
              RAILYARD_EXPERT_EPROTOCOL);
    EXPECT_EQ(h, nullptr);
    const std::string why = railyard_expert_last_error();
    EXPECT_NE(why.find("is a snapshot peer's port"), std::string::npos) << why;
    EXPECT_NE(why.find(snapshotPeer), std::string::npos) << why;
  }

  railyard_snapshot_t* s = reinterpret_cast<railyard_snapshot_t*>(&arena);
  EXPECT_EQ(railyard_snapshot_connect("127.0.0.1", expertServer->port(), "kv", RAILYARD_SNAPSHOT_RAW, 4 * 4096, 4096, &s),
            6);
  EXPECT_EQ(s, nullptr);
  const std::string why = railyard_snapshot_last_error();
  EXPECT_NE(why.find("is an expert store's port"), std::string::npos) << why;

  // Both still serve their own clients: the other tier's was only refused.
  railyard_snapshot_t* good = nullptr;
  ASSERT_EQ(railyard_snapshot_connect("127.0.0.1", snapshotServer->port(), "kv", RAILYARD_SNAPSHOT_RAW, 4 * 4096, 4096,
                                      &good),
            0)
      << railyard_snapshot_last_error();
  railyard_snapshot_close(good);
  railyard_expert* e = nullptr;
  const std::string expertPeer = "127.0.0.1:" + std::to_string(expertServer->port());
  ASSERT_EQ(railyard_expert_open(expertPeer.c_str(), RAILYARD_EXPERT_TRANSPORT_TCP, 1, arena.data(), arena.size(), &e),
            RAILYARD_EXPERT_OK)
      << railyard_expert_last_error();
  EXPECT_EQ(railyard_expert_close(e), 0);
}

}  // namespace
}  // namespace railyard
