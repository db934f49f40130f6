// railyard::ListSnapshotArenas (include/railyard/snapshot.hpp) over the C API
// (railyard_snapshot_list, compiled in) against an in-process snapshot server whose
// arenas and the client's staging share the process's fabric lease
// (plugin/snapshot_runtime.h): every arena comes back with its kind, mode and sizes,
// a server with more arenas than the first ask holds is asked again, and an
// unreachable peer throws the C API's code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin/snapshot_runtime.h"
#include "railyard/snapshot.hpp"
#include "storage/snapshot/snapshot_server.h"

namespace railyard {
namespace {

struct Server {
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<storage::snapshot::SnapshotServer> server;

  void Start(const std::vector<storage::snapshot::ArenaSpec>& arenas) {
    ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
    fabric::Domain* domain = nullptr;
    fabric::RegistrationCache* cache = nullptr;
    ASSERT_TRUE(plugin::SnapshotFabric(&domain, &cache).ok());
    ASSERT_TRUE(domain->CreateWorker(&worker).ok());
    storage::snapshot::ServerOptions o;
    o.arenas = arenas;
    o.timeoutMs = 5000;
    Status s = storage::snapshot::SnapshotServer::Start(*cache, *worker, o, &server);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  ~Server() {
    server.reset();  // before its Worker
    worker.reset();
  }
};

storage::snapshot::ArenaSpec Raw(const std::string& kind, uint64_t blob, uint64_t slots, uint64_t max = 0) {
  storage::snapshot::ArenaSpec a;
  a.kind = kind;
  a.mode = storage::snapshot::Mode::kRaw;
  a.blobBytes = blob;
  a.slots = slots;
  a.maxBytes = max;
  return a;
}

/// The list keyed by kind (the peer lists its arenas in its own order).
std::map<std::string, railyard_snapshot_arena_t> ByKind(const std::vector<railyard_snapshot_arena_t>& list) {
  std::map<std::string, railyard_snapshot_arena_t> out;
  for (const railyard_snapshot_arena_t& a : list) out.emplace(a.kind, a);
  return out;
}

TEST(SnapshotListWrapper, ListsEveryArenaWithItsModeAndSizes) {
  Server srv;
  ASSERT_NO_FATAL_FAILURE(srv.Start({Raw("ssm", 4096, 16), Raw("kv.block-1", 8192, 0, 1 << 20)}));
  const std::vector<railyard_snapshot_arena_t> list = ListSnapshotArenas("127.0.0.1", srv.server->port());
  ASSERT_EQ(list.size(), 2u);
  const std::map<std::string, railyard_snapshot_arena_t> byKind = ByKind(list);
  ASSERT_EQ(byKind.count("ssm"), 1u);
  ASSERT_EQ(byKind.count("kv.block-1"), 1u);
  const railyard_snapshot_arena_t& ssm = byKind.at("ssm");
  EXPECT_EQ(ssm.mode, RAILYARD_SNAPSHOT_RAW);
  EXPECT_EQ(ssm.blob_bytes, 4096u);
  EXPECT_EQ(ssm.arena_bytes, 16u * 4096u);
  EXPECT_EQ(ssm.max_bytes, 0u);
  const railyard_snapshot_arena_t& kv = byKind.at("kv.block-1");
  EXPECT_EQ(kv.mode, RAILYARD_SNAPSHOT_RAW);
  EXPECT_EQ(kv.blob_bytes, 8192u);
  EXPECT_EQ(kv.arena_bytes, 0u) << "sized by its first client";
  EXPECT_EQ(kv.max_bytes, 1u << 20);
}

TEST(SnapshotListWrapper, MoreArenasThanTheFirstAskHoldsAreAllReturned) {
  std::vector<storage::snapshot::ArenaSpec> arenas;
  for (int i = 0; i < 11; ++i) arenas.push_back(Raw("a" + std::to_string(i), 4096 * uint64_t(i + 1), 2));
  Server srv;
  ASSERT_NO_FATAL_FAILURE(srv.Start(arenas));
  const auto list = ListSnapshotArenas("127.0.0.1", srv.server->port());
  ASSERT_EQ(list.size(), 11u) << "more than the 8 entries of the first ask";
  const auto byKind = ByKind(list);
  ASSERT_EQ(byKind.size(), 11u) << "a kind listed twice";
  for (int i = 0; i < 11; ++i) {
    const std::string kind = "a" + std::to_string(i);
    ASSERT_EQ(byKind.count(kind), 1u) << kind;
    EXPECT_EQ(byKind.at(kind).blob_bytes, 4096u * uint64_t(i + 1)) << kind;
    EXPECT_EQ(byKind.at(kind).arena_bytes, 2u * 4096u * uint64_t(i + 1)) << kind;
  }
}

TEST(SnapshotListWrapper, AnUnreachablePeerThrowsTheNetworkCode) {
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  try {
    (void)ListSnapshotArenas("127.0.0.1", 1);
    ADD_FAILURE() << "listed the arenas of port 1";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(e.code(), 2) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1"), std::string::npos) << e.what();
  }
}

TEST(SnapshotListWrapper, ANegativeMaxIsNamed) {
  railyard_snapshot_arena_t a[1];
  int n = 7;
  EXPECT_NE(railyard_snapshot_list("127.0.0.1", 1, a, -1, &n), 0);
  EXPECT_STREQ(railyard_snapshot_last_error(), "railyard_snapshot_list: max must be >= 0, got -1");
  EXPECT_EQ(n, 7);  // untouched
  EXPECT_NE(railyard_snapshot_list("127.0.0.1", 1, nullptr, 1, &n), 0);
  EXPECT_STREQ(railyard_snapshot_last_error(),
               "railyard_snapshot_list: host and count must not be NULL, out may be NULL only with max 0");
}

}  // namespace
}  // namespace railyard
