// The C++ wrapper (include/railyard/snapshot.hpp) over the C API (plugin/snapshot_api.cc,
// compiled in) against an in-process snapshot server whose arenas and the client's
// staging share the process's fabric lease (plugin/snapshot_runtime.h):
// ListSnapshotArenas returns every arena with its kind, mode and sizes (a server with
// more arenas than the first ask holds is asked again; an unreachable peer throws the C
// API's code); batches give each blob's result; the C API's messages name its own calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
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
    char tmpl[] = "/tmp/railyard-snapshot-wrapper-XXXXXX";  // the paging arenas' swap files
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    o.swapDir = dir;
    Status s = storage::snapshot::SnapshotServer::Start(*cache, *worker, o, &server);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  std::string dir;
  ~Server() {
    server.reset();  // before its Worker
    worker.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

storage::snapshot::ArenaSpec Paging(const std::string& kind, uint64_t blob, uint64_t slots) {
  storage::snapshot::ArenaSpec a;
  a.kind = kind;
  a.mode = storage::snapshot::Mode::kPaging;
  a.blobBytes = blob;
  a.slots = slots;
  return a;
}

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

// railyard_snapshot_put_batch/_get_batch through Snapshot::PutBatch/GetBatch: ten
// blobs through a 4-slot arena and back by content, an absent key found 0; a batch with
// a wrong-size blob throws 4 naming it: that blob's result is 4, the others'
// RAILYARD_SNAPSHOT_NOT_ATTEMPTED.
TEST(SnapshotWrapper, BatchesGiveEachBlobsResult) {
  constexpr uint64_t kBlob = 64 * 1024;
  Server srv;
  ASSERT_NO_FATAL_FAILURE(srv.Start({Paging("kv", kBlob, 4)}));
  Snapshot s("127.0.0.1", srv.server->port(), "kv", RAILYARD_SNAPSHOT_PAGING, 4 * kBlob, kBlob);
  std::vector<std::vector<unsigned char>> data(10, std::vector<unsigned char>(kBlob));
  std::vector<railyard_snapshot_blob_t> blobs(10);
  for (size_t i = 0; i < blobs.size(); ++i) {
    std::fill(data[i].begin(), data[i].end(), static_cast<unsigned char>(i + 1));
    blobs[i] = {100 + i, data[i].data(), kBlob, -7, -7};
  }
  s.PutBatch(blobs);
  for (const railyard_snapshot_blob_t& b : blobs) EXPECT_EQ(b.result, 0) << b.key;
  for (auto& d : data) std::fill(d.begin(), d.end(), 0);
  blobs.push_back({999, data[0].data(), kBlob, -7, -7});
  blobs[0].data = nullptr;  // key 100 is not asked for again: 999 (absent) takes its buffer
  blobs.erase(blobs.begin());
  s.GetBatch(blobs);
  for (size_t i = 0; i + 1 < blobs.size(); ++i) {
    EXPECT_EQ(blobs[i].result, 0) << blobs[i].key;
    EXPECT_EQ(blobs[i].found, 1) << blobs[i].key;
    EXPECT_EQ(data[i + 1][0], i + 2) << blobs[i].key;
    EXPECT_EQ(data[i + 1][kBlob - 1], i + 2) << blobs[i].key;
  }
  EXPECT_EQ(blobs.back().found, 0);
  EXPECT_EQ(blobs.back().result, 0);
  EXPECT_EQ(data[0][0], 0) << "an absent key's buffer was written";
  blobs[3].bytes = kBlob / 2;
  try {
    s.PutBatch(blobs);
    ADD_FAILURE() << "a batch with a half-size blob was accepted";
  } catch (const SnapshotError& e) {
    EXPECT_EQ(e.code(), 4);
    EXPECT_STREQ(e.what(),
                 "snapshot put batch: blob 3 (key 104) has 32768 bytes; kind 'kv' holds blobs of 65536 bytes "
                 "(nothing of the batch was sent)");
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    EXPECT_EQ(blobs[i].result, i == 3 ? 4 : RAILYARD_SNAPSHOT_NOT_ATTEMPTED) << blobs[i].key;
  }
}

// The snapshot client names its C++ calls; the C API says its own names instead
// (new-user trial: "use WriteAt" reached C callers).
TEST(SnapshotWrapper, TheCApiNamesItsOwnCalls) {
  constexpr uint64_t kBlob = 4096;
  Server srv;
  ASSERT_NO_FATAL_FAILURE(srv.Start({Raw("raw", kBlob, 2), Paging("kv", kBlob, 2)}));
  railyard_snapshot_t* raw = nullptr;
  ASSERT_EQ(railyard_snapshot_connect("127.0.0.1", srv.server->port(), "raw", RAILYARD_SNAPSHOT_RAW, 2 * kBlob, kBlob,
                                      &raw),
            0)
      << railyard_snapshot_last_error();
  std::vector<unsigned char> b(kBlob);
  EXPECT_EQ(railyard_snapshot_put(raw, 1, b.data(), kBlob), 5);
  EXPECT_STREQ(railyard_snapshot_last_error(), "railyard_snapshot_put on raw kind 'raw' (use railyard_snapshot_write_at)");
  railyard_snapshot_blob_t one = {1, b.data(), kBlob, 0, 0};
  EXPECT_EQ(railyard_snapshot_get_batch(raw, &one, 1), 5);
  EXPECT_STREQ(railyard_snapshot_last_error(),
               "railyard_snapshot_get_batch on raw kind 'raw' (use railyard_snapshot_read_at)");
  railyard_snapshot_close(raw);
  railyard_snapshot_t* kv = nullptr;
  ASSERT_EQ(railyard_snapshot_connect("127.0.0.1", srv.server->port(), "kv", RAILYARD_SNAPSHOT_PAGING, 2 * kBlob, kBlob,
                                      &kv),
            0);
  EXPECT_EQ(railyard_snapshot_write_at(kv, 0, b.data(), kBlob), 5);
  EXPECT_STREQ(railyard_snapshot_last_error(), "railyard_snapshot_write_at on paging kind 'kv' (use railyard_snapshot_put)");
  railyard_snapshot_close(kv);
  // A failed connect leaves *out NULL, as railyard_expert_open does (it was left as it
  // was: a caller closing it unconditionally freed garbage; C API trial).
  railyard_snapshot_t* bad = reinterpret_cast<railyard_snapshot_t*>(uintptr_t{1});
  EXPECT_EQ(railyard_snapshot_connect("127.0.0.1", srv.server->port(), "nosuchkind", RAILYARD_SNAPSHOT_PAGING, 2 * kBlob,
                                      kBlob, &bad),
            5);
  EXPECT_EQ(bad, nullptr);
  bad = reinterpret_cast<railyard_snapshot_t*>(uintptr_t{1});
  EXPECT_EQ(railyard_snapshot_connect("127.0.0.1", srv.server->port(), "kv", 7, 2 * kBlob, kBlob, &bad), 4);
  EXPECT_EQ(bad, nullptr);
}

}  // namespace
}  // namespace railyard
