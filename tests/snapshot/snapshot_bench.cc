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
//  - faulted: SYNC on (write-through, so evictions write nothing), 2 slots, 8 blobs;
//    each timed get faults a blob from the swap file, whose pages are first dropped
//    from the page cache (posix_fadvise DONTNEED), so the bytes come from the disk.
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
#include <string>
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

ClientOptions Options(uint16_t port, uint64_t size, uint64_t slots) {
  ClientOptions o;
  o.port = port;
  o.kind = "bench";
  o.blobBytes = size;
  o.arenaBytes = size * slots;
  o.mover.chunkBytes = gChunkBytes;
  o.mover.chunksPerRail = 4;
  return o;
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
    else Die("usage: railyard-snapshot-bench --swap-dir DIR [--sizes 1M,4M,16M,64M] [--iters N] [--chunk-bytes 1M]");
  }
  if (dir.empty() || iters < 1) Die("--swap-dir is required; --iters >= 1");
  if (gChunkBytes < 4096 || gChunkBytes > (64ull << 20)) Die("--chunk-bytes: 4K..64M");
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
      if (!peer.Start({PeerBinary(), "--arena", "kind=bench,mode=paging,blob=" + std::to_string(size) + ",slots=4",
                       "--swap-dir", residentDir},
                      &why)) {
        Die(why);
      }
      ClientSide c;
      Check(c.Connect(Options(peer.port(), size, 4)), "connect");
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
      if (c.client->mover().directMoves() - direct0 != 2ull * iters) Die("registered buffers were staged");
      for (const fabric::Region* r : regs) Check(c.cache->Release(r), "release");
    }
    {  // faulted from swap
      PeerProcess peer;
      std::string why;
      if (!peer.Start({PeerBinary(), "--arena", "kind=bench,mode=paging,blob=" + std::to_string(size) + ",slots=2",
                       "--swap-dir", faultedDir, "--sync"},
                      &why)) {
        Die(why);
      }
      ClientSide c;
      Check(c.Connect(Options(peer.port(), size, 2)), "connect");
      const int blobs = 8;
      const double t0 = Now();
      for (int k = 0; k < blobs; ++k) {
        Fill(a.data(), size, 100 + k);
        Check(c.client->Put(k, a.data(), size), "put");
      }
      Report(size, "put_sync_writethrough", double(size) * blobs, Now() - t0, blobs);
      const std::string path = faultedDir + "/railyard-snapshot-bench.swap";
      const int fd = ::open(path.c_str(), O_RDONLY);
      double secs = 0;
      // Keys 0, 1, ... in turn: with 2 slots and 8 blobs, the key asked for is never one
      // of the two resident (the last two put, then the last two got), so every get faults.
      const int gets = std::max(blobs - 2, iters);
      for (int i = 0; i < gets; ++i) {
        const int k = i % blobs;
        if (fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        bool found = false;
        const double t = Now();
        Check(c.client->Get(k, back.data(), size, &found), "get");
        secs += Now() - t;
        if (!found || Mismatch(back.data(), size, 100 + k) != -1) Die("faulted get returned wrong bytes");
      }
      if (fd >= 0) ::close(fd);
      Report(size, "get_faulted", double(size) * gets, secs, gets);
    }
  }
  return 0;
}
