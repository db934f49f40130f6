// railyard-snapshot-bench: put/get GB/s of the snapshot tier on loopback, for the
// benchmark section of docs/benchmarks.md (tools/bench/snapshot.sh runs it beside the
// raw TCP pump and the swap disk's dd speed, in the same run).
//
//   railyard-snapshot-bench --swap-dir DIR [--sizes 1M,4M,16M,64M] [--iters N] [--chunk-bytes 1M]
//
// For each blob size, two serving processes (railyard-snapshot-peer):
//  - resident: RAILYARD_SWAP_SYNC off, 4 slots; puts overwrite two keys (no
//    eviction), gets read them back: network + copies only; then the same with the
//    caller's buffers registered first ("_registered": no staging copy);
//  - faulted: SYNC on (write-through, so evictions write nothing), 4 slots, 8 blobs;
//    each timed get faults a blob from the swap file, whose pages are first dropped
//    from the page cache (posix_fadvise DONTNEED), so the bytes come from the disk.
// Every phase but the first puts runs twice: one call per blob, then the same blobs in
// one batch ("_batch": SnapshotClient::PutBatch/GetBatch, two blobs in flight). Then
// "put_4clients" and "put_sync_4clients": four clients (threads, a connection each)
// putting blobs of their own keys at once into the resident and the sync peer, the
// GB/s of all of them together; then "get_faulted_4clients": the four get the
// write-through blobs back at once, faulted from the disk.
// One JSON object per line: {"size", "phase", "gbps", "iters"}. Content is checked.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/snapshot/snapshot_harness.h"

using namespace railyard;
using namespace railyard::storage::snapshot;
using namespace railyard::storage::snapshot::testing;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t ParseSize(const std::string& s) {
  uint64_t n = std::strtoull(s.c_str(), nullptr, 10);
  if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) n <<= 20;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) n <<= 10;
  return n;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "snapshot-bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(std::string(what) + ": " + s.message());
}

void Report(uint64_t size, const char* phase, double bytes, double secs, int iters) {
  std::printf("{\"size\": %llu, \"phase\": \"%s\", \"gbps\": %.3f, \"iters\": %d}\n",
              static_cast<unsigned long long>(size), phase, bytes / secs / 1e9, iters);
  std::fflush(stdout);
}

/// `dir`/`name`, made when missing (a usage error when it cannot be).
std::string PhaseDir(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    Die("cannot make " + path + ": " + std::strerror(errno));
  }
  return path;
}

uint64_t gChunkBytes = 1 << 20;  ///< --chunk-bytes
int gBatchDepth = ClientOptions{}.batchDepth;  ///< --batch-depth

ClientOptions Options(uint16_t port, uint64_t size, uint64_t slots) {
  ClientOptions o;
  o.port = port;
  o.kind = "bench";
  o.blobBytes = size;
  o.arenaBytes = size * slots;
  o.mover.chunkBytes = gChunkBytes;
  o.mover.chunksPerRail = 4;
  o.batchDepth = gBatchDepth;
  return o;
}

/// `count` blobs alternating between keys 0 (from `a`) and 1 (from `b`), as the
/// one-by-one resident loops move them.
std::vector<BatchBlob> Alternating(int count, uint8_t* a, uint8_t* b, uint64_t size) {
  std::vector<BatchBlob> v(count);
  for (int i = 0; i < count; ++i) v[i] = {static_cast<uint64_t>(i % 2), i % 2 ? b : a, size};
  return v;
}

/// `clients` clients at once, each with its own connection, putting `each` blobs of
/// its own keys (`size` bytes of `data`, keys from 1000 up) into the arena at `port`
/// (`slots` slots, at least `clients`); the seconds from the first put to the last.
/// Dies on any failure; one blob of each client is read back and checked.
double ConcurrentPuts(uint16_t port, uint64_t size, uint64_t slots, int clients, int each, const uint8_t* data,
                      uint64_t seed) {
  std::vector<std::unique_ptr<ClientSide>> sides;
  for (int t = 0; t < clients; ++t) {
    sides.push_back(std::make_unique<ClientSide>());
    Check(sides.back()->Connect(Options(port, size, slots)), "connect");
  }
  std::vector<Status> results(clients);
  std::vector<std::thread> threads;
  const double t0 = Now();
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < each && results[t].ok(); ++k) {
        results[t] = sides[t]->client->Put(1000 * (t + 1) + k, data, size);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const double secs = Now() - t0;
  std::vector<uint8_t> back(size);
  for (int t = 0; t < clients; ++t) {
    Check(results[t], "concurrent put");
    bool found = false;
    Check(sides[t]->client->Get(1000 * (t + 1) + each - 1, back.data(), size, &found), "get");
    if (!found || Mismatch(back.data(), size, seed) != -1) Die("a concurrent put's blob came back wrong");
  }
  return secs;
}

/// `clients` clients at once, each with its own connection, getting back the `each`
/// blobs ConcurrentPuts stored for it (checked against `seed`); the seconds from the
/// first get to the last, and in *faulted how many of the gets the peer faulted from
/// its swap file.
double ConcurrentGets(uint16_t port, uint64_t size, uint64_t slots, int clients, int each, uint64_t seed,
                      uint64_t* faulted) {
  std::vector<std::unique_ptr<ClientSide>> sides;
  for (int t = 0; t < clients; ++t) {
    sides.push_back(std::make_unique<ClientSide>());
    Check(sides.back()->Connect(Options(port, size, slots)), "connect");
  }
  std::vector<Status> results(clients);
  std::vector<std::vector<uint8_t>> back(clients, std::vector<uint8_t>(size));
  std::vector<std::thread> threads;
  const double t0 = Now();
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < each && results[t].ok(); ++k) {
        bool found = false;
        results[t] = sides[t]->client->Get(1000 * (t + 1) + k, back[t].data(), size, &found);
        if (results[t].ok() && (!found || Mismatch(back[t].data(), size, seed) != -1)) {
          results[t] = Status(Code::kInternalError, "a concurrent get's blob came back wrong");
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const double secs = Now() - t0;
  *faulted = 0;
  for (int t = 0; t < clients; ++t) {
    Check(results[t], "concurrent get");
    *faulted += sides[t]->client->faultedGets();
  }
  return secs;
}

/// One PutBatch or GetBatch, dying on any blob's failure.
void RunBatch(SnapshotClient& c, bool put, std::vector<BatchBlob>& batch) {
  Check(put ? c.PutBatch(batch) : c.GetBatch(batch), put ? "put batch" : "get batch");
  for (const BatchBlob& b : batch) {
    if (!put && !b.found) Die("get batch: key " + std::to_string(b.key) + " not found");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, sizes = "1M,4M,16M,64M";
  int iters = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--swap-dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--sizes" && i + 1 < argc) sizes = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--chunk-bytes" && i + 1 < argc) gChunkBytes = ParseSize(argv[++i]);
    else if (a == "--batch-depth" && i + 1 < argc) gBatchDepth = std::atoi(argv[++i]);
    else Die("usage: railyard-snapshot-bench --swap-dir DIR [--sizes 1M,4M,16M,64M] [--iters N] [--chunk-bytes 1M] "
             "[--batch-depth 2]");
  }
  if (dir.empty() || iters < 1) Die("--swap-dir is required; --iters >= 1");
  if (gChunkBytes < 4096 || gChunkBytes > (64ull << 20)) Die("--chunk-bytes: 4K..64M");
  if (gBatchDepth < 1 || gBatchDepth > kMaxBatchDepth) Die("--batch-depth: 1.." + std::to_string(kMaxBatchDepth));
  // The arenas hold twice the batch depth (a batch uses at most half the slots).
  const uint64_t residentSlots = std::max(4, 2 * gBatchDepth), faultedSlots = residentSlots;
  std::stringstream ss(sizes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const uint64_t size = ParseSize(item);
    if (size == 0) Die("--sizes: '" + item + "' is not a size (N, NK or NM, above 0)");
    std::vector<uint8_t> a(size), b(size), back(size);
    Fill(a.data(), size, 1);
    Fill(b.data(), size, 2);
    // Each phase has a swap directory of its own: a swap file kept by a sync arena
    // (the faulted phase) is refused by the next size's arena without --sync.
    const std::string residentDir = PhaseDir(dir, item + "-resident");
    const std::string faultedDir = PhaseDir(dir, item + "-faulted");
    {  // resident
      PeerProcess peer;
      std::string why;
      if (!peer.Start({PeerBinary(), "--arena", "kind=bench,mode=paging,blob=" + std::to_string(size) + ",slots=" + std::to_string(residentSlots),
                       "--swap-dir", residentDir},
                      &why)) {
        Die(why);
      }
      ClientSide c;
      Check(c.Connect(Options(peer.port(), size, residentSlots)), "connect");
      Check(c.client->Put(0, a.data(), size), "put");
      Check(c.client->Put(1, b.data(), size), "put");
      double t0 = Now();
      for (int i = 0; i < iters; ++i) Check(c.client->Put(i % 2, i % 2 ? b.data() : a.data(), size), "put");
      Report(size, "put_resident", double(size) * iters, Now() - t0, iters);
      bool found = false;
      t0 = Now();
      for (int i = 0; i < iters; ++i) Check(c.client->Get(i % 2, back.data(), size, &found), "get");
      Report(size, "get_resident", double(size) * iters, Now() - t0, iters);
      if (!found || Mismatch(back.data(), size, (iters - 1) % 2 + 1) != -1) Die("resident get returned wrong bytes");
      // The same blobs in one batch each way (two in flight: SnapshotClient::PutBatch).
      std::vector<BatchBlob> batch = Alternating(iters, a.data(), b.data(), size);
      t0 = Now();
      RunBatch(*c.client, true, batch);
      Report(size, "put_resident_batch", double(size) * iters, Now() - t0, iters);
      batch = Alternating(iters, back.data(), back.data(), size);
      std::memset(back.data(), 0, size);
      t0 = Now();
      RunBatch(*c.client, false, batch);
      Report(size, "get_resident_batch", double(size) * iters, Now() - t0, iters);
      if (Mismatch(back.data(), size, (iters - 1) % 2 + 1) != -1) Die("resident batch get returned wrong bytes");
      // The same with the caller's buffers registered first (as NCCL's regMr would
      // have): moved straight from and into them, no staging copy.
      const fabric::Region* regs[3] = {};
      uint8_t* bufs[3] = {a.data(), b.data(), back.data()};
      for (int i = 0; i < 3; ++i) {
        Check(c.cache->Acquire(bufs[i], size, fabric::kAccessLocal, fabric::MemoryKind::kHost, &regs[i]), "register");
      }
      const uint64_t direct0 = c.client->mover().directMoves();
      std::memset(back.data(), 0, size);
      t0 = Now();
      for (int i = 0; i < iters; ++i) Check(c.client->Put(i % 2, i % 2 ? b.data() : a.data(), size), "put");
      Report(size, "put_resident_registered", double(size) * iters, Now() - t0, iters);
      t0 = Now();
      for (int i = 0; i < iters; ++i) Check(c.client->Get(i % 2, back.data(), size, &found), "get");
      Report(size, "get_resident_registered", double(size) * iters, Now() - t0, iters);
      if (!found || Mismatch(back.data(), size, (iters - 1) % 2 + 1) != -1) Die("registered get returned wrong bytes");
      batch = Alternating(iters, a.data(), b.data(), size);
      t0 = Now();
      RunBatch(*c.client, true, batch);
      Report(size, "put_resident_registered_batch", double(size) * iters, Now() - t0, iters);
      batch = Alternating(iters, back.data(), back.data(), size);
      std::memset(back.data(), 0, size);
      t0 = Now();
      RunBatch(*c.client, false, batch);
      Report(size, "get_resident_registered_batch", double(size) * iters, Now() - t0, iters);
      if (Mismatch(back.data(), size, (iters - 1) % 2 + 1) != -1) Die("registered batch get returned wrong bytes");
      if (c.client->mover().directMoves() - direct0 != 4ull * iters) Die("registered buffers were staged");
      for (const fabric::Region* r : regs) Check(c.cache->Release(r), "release");
      const int each = std::max(2, iters / 4);
      Report(size, "put_4clients", double(size) * 4 * each, ConcurrentPuts(peer.port(), size, residentSlots, 4, each, a.data(), 1),
             4 * each);
    }
    {  // faulted from swap
      // 4 slots (or twice --batch-depth: a batch keeps at most half of them in flight),
      // twice as many blobs, got in turn.
      PeerProcess peer;
      std::string why;
      if (!peer.Start({PeerBinary(), "--arena", "kind=bench,mode=paging,blob=" + std::to_string(size) + ",slots=" + std::to_string(faultedSlots),
                       "--swap-dir", faultedDir, "--sync"},
                      &why)) {
        Die(why);
      }
      ClientSide c;
      Check(c.Connect(Options(peer.port(), size, faultedSlots)), "connect");
      const int blobs = static_cast<int>(2 * faultedSlots);
      std::vector<std::vector<uint8_t>> blob(blobs, std::vector<uint8_t>(size));
      std::vector<BatchBlob> batch(blobs);
      for (int k = 0; k < blobs; ++k) {
        Fill(blob[k].data(), size, 100 + k);
        batch[k] = {static_cast<uint64_t>(k), blob[k].data(), size};
      }
      double t0 = Now();
      for (int k = 0; k < blobs; ++k) Check(c.client->Put(k, blob[k].data(), size), "put");
      Report(size, "put_sync_writethrough", double(size) * blobs, Now() - t0, blobs);
      t0 = Now();
      RunBatch(*c.client, true, batch);  // the same blobs again, in one batch
      Report(size, "put_sync_writethrough_batch", double(size) * blobs, Now() - t0, blobs);
      const std::string path = faultedDir + "/railyard-snapshot-bench.swap";
      const int fd = ::open(path.c_str(), O_RDONLY);
      // Keys 0, 1, ... in turn: 8 blobs through 4 slots (LRU), so the key asked for is
      // never resident and every get faults; the swap file's pages are dropped from
      // the page cache first (before each get, or before each batch of the 8 keys,
      // each read once).
      const int rounds = std::max(1, (iters + blobs - 1) / blobs);
      const uint64_t faults0 = c.client->faultedGets();
      double secs = 0;
      for (int i = 0; i < rounds * blobs; ++i) {
        const int k = i % blobs;
        if (fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        bool found = false;
        const double t = Now();
        Check(c.client->Get(k, back.data(), size, &found), "get");
        secs += Now() - t;
        if (!found || Mismatch(back.data(), size, 100 + k) != -1) Die("faulted get returned wrong bytes");
      }
      Report(size, "get_faulted", double(size) * rounds * blobs, secs, rounds * blobs);
      secs = 0;
      for (int r = 0; r < rounds; ++r) {
        for (auto& d : blob) std::memset(d.data(), 0, size);
        if (fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        const double t = Now();
        RunBatch(*c.client, false, batch);
        secs += Now() - t;
        for (int k = 0; k < blobs; ++k) {
          if (Mismatch(blob[k].data(), size, 100 + k) != -1) Die("faulted batch get returned wrong bytes");
        }
      }
      if (fd >= 0) ::close(fd);
      Report(size, "get_faulted_batch", double(size) * rounds * blobs, secs, rounds * blobs);
      if (c.client->faultedGets() - faults0 != 2ull * rounds * blobs) {
        Die("only " + std::to_string(c.client->faultedGets() - faults0) + " of " + std::to_string(2 * rounds * blobs) +
            " gets were faulted");
      }
      const int each = std::max(2, iters / 4);
      Report(size, "put_sync_4clients", double(size) * 4 * each,
             ConcurrentPuts(peer.port(), size, faultedSlots, 4, each, blob[0].data(), 100), 4 * each);
      // The same blobs back, four clients at once, the swap file's pages dropped first:
      // all but the few still resident are faulted from the disk.
      {
        const int sfd = ::open(path.c_str(), O_RDONLY);
        if (sfd >= 0) {
          ::posix_fadvise(sfd, 0, 0, POSIX_FADV_DONTNEED);
          ::close(sfd);
        }
      }
      uint64_t faulted4 = 0;
      const double secs4 = ConcurrentGets(peer.port(), size, faultedSlots, 4, each, 100, &faulted4);
      Report(size, "get_faulted_4clients", double(size) * 4 * each, secs4, 4 * each);
      if (faulted4 + faultedSlots < 4ull * each) Die("only " + std::to_string(faulted4) + " concurrent gets were faulted");
    }
  }
  return 0;
}
