// The exported C API and its C++ wrapper (include/railyard/expert.hpp), linked
// against libnccl-net-railyard.so as a user would, against an in-process peer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "railyard/expert.hpp"
#include "railyard/railyard.h"
#include "storage/expert/expert_server.h"
#include "tests/expert/expert_test_util.h"

namespace railyard::expert {
namespace {

TEST(ExpertCApi, WrapperFetchesAndNamesErrors) {
  testing::TempDir tmp;
  const Manifest m = testing::SmallManifest(2, 3, 2000);
  ASSERT_TRUE(testing::WritePatternStore(tmp.path + "/s", m).ok());
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(tmp.path + "/s", false, &store).ok());
  std::unique_ptr<fabric::Domain> d;
  std::unique_ptr<fabric::Worker> w;
  ASSERT_TRUE(testing::LoopbackDomain(false, 5000, &d).ok());
  ASSERT_TRUE(d->CreateWorker(&w).ok());
  std::unique_ptr<ExpertServer> server;
  ServerOptions o;
  o.pinCapBytes = 1 << 30;
  ASSERT_TRUE(ExpertServer::Start(std::move(store), d.get(), w.get(), o, &server).ok());
  const std::string peer = "127.0.0.1:" + std::to_string(server->port());

  for (int transport : {RAILYARD_EXPERT_TRANSPORT_TCP, RAILYARD_EXPERT_TRANSPORT_READ}) {
    std::vector<char> arena(6 * m.recordStride);
    railyard::ExpertConnection c(peer, arena.data(), arena.size(), transport);
    const railyard_expert_layout l = c.Layout();
    EXPECT_EQ(l.layers, 2u);
    EXPECT_EQ(l.experts_per_layer, 3u);
    EXPECT_EQ(l.record_stride, m.recordStride);
    EXPECT_EQ(nlohmann::json::parse(c.ManifestJson())["model_id"], "test/tiny-moe");
    std::vector<railyard_expert_record> batch;
    for (uint32_t i = 0; i < 6; ++i) batch.push_back({i / 3, 0, i % 3, (5 - i) * m.recordStride});
    c.FetchBatch(batch);
    for (uint32_t i = 0; i < 6; ++i) {
      EXPECT_EQ(std::string(arena.data() + (5 - i) * m.recordStride, m.recordStride), testing::ExpectedRecord(m, i / 3, i % 3));
    }
    try {
      c.Fetch(0, 3, 0);
      ADD_FAILURE() << "expert 3 of 3 fetched";
    } catch (const railyard::ExpertException& e) {
      EXPECT_EQ(e.code(), RAILYARD_EXPERT_EOUT_OF_RANGE);
      EXPECT_EQ(e.name(), "OUT_OF_RANGE");
      EXPECT_NE(std::string(e.what()).find("expert 3"), std::string::npos) << e.what();
    }
    c.Close();
  }
  // Bad arguments and an unreachable peer, through the plain C functions.
  railyard_expert* h = nullptr;
  char buf[64];
  EXPECT_EQ(railyard_expert_open(peer.c_str(), 9, 1, buf, sizeof buf, &h), RAILYARD_EXPERT_EINVALID_ARGUMENT);
  EXPECT_EQ(railyard_expert_open(nullptr, 1, 1, buf, sizeof buf, &h), RAILYARD_EXPERT_EINVALID_ARGUMENT);
  server->Stop();
  EXPECT_EQ(railyard_expert_open(peer.c_str(), 1, 1, buf, sizeof buf, &h), RAILYARD_EXPERT_EPEER_LOST);
  EXPECT_EQ(h, nullptr);
  EXPECT_STREQ(railyard_expert_error_name(RAILYARD_EXPERT_ECHECKSUM_MISMATCH), "CHECKSUM_MISMATCH");
  EXPECT_STREQ(railyard_expert_error_name(999), "UNKNOWN");
  EXPECT_STREQ(railyard_expert_error_name(15), "UNKNOWN");  // the packer's own cause: no C return value
  EXPECT_STREQ(railyard_expert_error_name(-1), "UNKNOWN");
  EXPECT_NE(std::string(railyard_expert_last_error()), "");  // the failed open's
  EXPECT_EQ(railyard_expert_close(nullptr), 0);
  EXPECT_STREQ(railyard_expert_last_error(), "") << "a successful close(NULL) clears it, as every successful call";
}

// Peer strings neither tier can dial are refused as such, before any resolver sees them
// (new-user trial: "[::1]:7000" and "a:7000:5" were "cannot resolve peer host").
TEST(ExpertCApi, PeerStringsTheTiersCannotDialAreRefusedUnresolved) {
  char arena[64];
  for (const char* peer : {"[::1]:7000", "127.0.0.1:7000:5", "::1:7000"}) {
    railyard_expert* h = nullptr;
    EXPECT_EQ(railyard_expert_open(peer, RAILYARD_EXPERT_TRANSPORT_TCP, 1, arena, sizeof arena, &h),
              RAILYARD_EXPERT_EINVALID_ARGUMENT)
        << peer;
    EXPECT_EQ(h, nullptr);
    EXPECT_NE(std::string(railyard_expert_last_error()).find("holds ':' or brackets"), std::string::npos)
        << railyard_expert_last_error();
  }
  for (const char* host : {"::1", "[::1]"}) {
    railyard_snapshot_t* s = nullptr;
    EXPECT_EQ(railyard_snapshot_connect(host, 7000, "kv", RAILYARD_SNAPSHOT_RAW, 4096, 4096, &s), 4) << host;
    EXPECT_EQ(s, nullptr);
    EXPECT_NE(std::string(railyard_snapshot_last_error()).find("holds ':' or brackets"), std::string::npos)
        << railyard_snapshot_last_error();
  }
}

}  // namespace
}  // namespace railyard::expert
