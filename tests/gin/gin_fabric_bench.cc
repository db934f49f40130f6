// gin_fabric_bench: put bandwidth of GinComm::Put against the fabric's raw
// Endpoint::Write, same process, same run, same loopback TCP Domain settings.
// Two ranks in one process, one thread each (each thread is its Worker's one
// polling thread); rank 0 posts `iters` operations of each size with up to 8 in
// flight and waits for them; rank 1 only progresses. Prints one row per size:
// bytes, raw Write GB/s, GIN put GB/s, ratio. Not a test (timing is noisy): run by
// hand for docs/benchmarks.md.
//   gin_fabric_bench [maxBytes=16M] [iters=50]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/gin/gin_comm.h"

using namespace railyard;
using Clock = std::chrono::steady_clock;

namespace {

struct Side {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<gin::GinComm> comm;
  uint8_t handle[gin::kHandleBytes];
};

void Die(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (16u << 20);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  constexpr size_t kInFlight = 8;
  Side s[2];
  for (auto& x : s) {
    fabric::tcp::TcpOptions o;
    o.rails = {fabric::RailInfo{"lo", "127.0.0.1", 10000}};
    Die(fabric::tcp::CreateTcpDomain(o, &x.domain), "domain");
    x.cache = std::make_unique<fabric::RegistrationCache>(*x.domain);
    Die(x.domain->CreateWorker(&x.worker), "worker");
    Die(gin::PackHandle(x.worker->Address(), x.handle), "handle");
  }
  std::vector<const uint8_t*> hs = {s[0].handle, s[1].handle};
  std::vector<char> buf[2] = {std::vector<char>(maxBytes, 1), std::vector<char>(maxBytes, 0)};
  uint64_t win[2] = {0, 0};
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::thread peer([&] {
    Die(gin::GinComm::Connect({}, *s[1].cache, *s[1].worker, hs, 1, &s[1].comm), "connect 1");
    Die(s[1].comm->RegisterWindow(buf[1].data(), maxBytes, fabric::MemoryKind::kHost, 0, &win[1]), "reg 1");
    phase = 1;
    while (!stop) (void)s[1].comm->Progress();
  });
  Die(gin::GinComm::Connect({}, *s[0].cache, *s[0].worker, hs, 0, &s[0].comm), "connect 0");
  Die(s[0].comm->RegisterWindow(buf[0].data(), maxBytes, fabric::MemoryKind::kHost, 0, &win[0]), "reg 0");
  while (phase.load() != 1) std::this_thread::yield();

  // The raw fabric: a second Endpoint from rank 0's Worker to rank 1's, and the
  // region rank 1's window lives in (its key, from rank 1's cache).
  std::unique_ptr<fabric::Endpoint> raw;
  Die(s[0].worker->Connect(s[1].worker->Address(), &raw), "raw connect");
  const fabric::Region* src = nullptr;
  const fabric::Region* dst = nullptr;
  Die(s[0].cache->Acquire(buf[0].data(), maxBytes, fabric::kAccessAll, fabric::MemoryKind::kHost, &src), "src");
  Die(s[1].cache->Acquire(buf[1].data(), maxBytes, fabric::kAccessAll, fabric::MemoryKind::kHost, &dst), "dst");
  const fabric::RemoteKey key = dst->Key();

  std::printf("# gin_fabric_bench: 2 ranks in one process, TCP fabric on 127.0.0.1, %d ops per size, %zu in flight\n",
              iters, kInFlight);
  std::printf("# %10s %12s %12s %12s %12s %8s\n", "bytes", "raw us/op", "GIN us/op", "raw GB/s", "GIN GB/s",
              "GIN/raw");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 4) {
    // Raw Write: events come back from rank 0's Worker, which GinComm also polls;
    // run the raw loop with the Worker to itself (GinComm idle meanwhile).
    auto t0 = Clock::now();
    size_t posted = 0, done = 0;
    std::vector<fabric::Event> ev;
    uint64_t cookie = 1ull << 60;
    while (done < size_t(iters)) {
      while (posted < size_t(iters) && posted - done < kInFlight) {
        Die(raw->Write(fabric::LocalSlice{src, 0, bytes}, key, key.base, cookie++), "raw write");
        ++posted;
      }
      ev.clear();
      s[0].worker->Progress(&ev);
      for (auto& e : ev) {
        if (e.kind == fabric::EventKind::kDone && e.cookie >= (1ull << 60)) ++done;
        if (e.kind == fabric::EventKind::kError) Die(e.error.ToStatus(), "raw event");
      }
    }
    const double rawUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    // GIN put through GinComm.
    t0 = Clock::now();
    std::vector<gin::Request*> reqs;
    int gposted = 0, gdone = 0;
    while (gdone < iters) {
      while (gposted < iters && reqs.size() < kInFlight) {
        gin::Request* r = nullptr;
        Die(s[0].comm->Put(0, win[0], bytes, 0, win[0], 1, &r), "put");
        reqs.push_back(r);
        ++gposted;
      }
      for (size_t i = 0; i < reqs.size();) {
        bool d = false;
        Die(s[0].comm->Test(reqs[i], &d), "test");
        if (d) {
          reqs[i] = reqs.back();
          reqs.pop_back();
          ++gdone;
        } else {
          ++i;
        }
      }
    }
    const double ginUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    const double rawBw = double(bytes) * iters / rawUs / 1e3;
    const double ginBw = double(bytes) * iters / ginUs / 1e3;
    std::printf("  %10zu %12.1f %12.1f %12.3f %12.3f %8.2f\n", bytes, rawUs / iters, ginUs / iters, rawBw, ginBw,
                ginBw / rawBw);
    std::fflush(stdout);
  }
  stop = true;
  peer.join();
  (void)s[0].cache->Release(src);
  (void)s[1].cache->Release(dst);
  raw.reset();
  s[0].comm.reset();
  s[1].comm.reset();
  return 0;
}
