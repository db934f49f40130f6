// railyard-snapshot-peer (tests): a serving process for the snapshot tests, the
// same storage::snapshot::SnapshotServer that railyardd --snapshot-arena starts, on the
// test's fabric Domain (snapshot_transport.h: TCP on 127.0.0.1, or verbs). Prints "port N" on stdout once serving, and
// serves until stdin closes or SIGTERM.
//
//   railyard-snapshot-peer --arena kind=kv,mode=paging,blob=1M,slots=8 [--arena ...]
//                          [--swap-dir DIR] [--sync] [--tmpfs-bytes N]
//
// --tmpfs-bytes mounts a tmpfs of N bytes over --swap-dir in a private mount
// namespace of this process first (needs CAP_SYS_ADMIN; exits 77 when it cannot),
// so a test can fill the swap disk without touching the host's.
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "proxy/fabric/registration_cache.h"
#include "tests/snapshot/snapshot_transport.h"
#include "storage/snapshot/snapshot_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  using namespace railyard;
  storage::snapshot::ServerOptions so;
  std::string tmpfsBytes;
  int acceptTimeoutMs = 10000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--arena") {
      storage::snapshot::ArenaSpec spec;
      if (Status s = storage::snapshot::ParseArenaSpec(next(), &spec); !s.ok()) {
        std::fprintf(stderr, "snapshot-peer: %s\n", s.message().c_str());
        return 2;
      }
      so.arenas.push_back(spec);
    } else if (a == "--swap-dir") {
      so.swapDir = next();
    } else if (a == "--sync") {
      so.swapSync = true;
    } else if (a == "--timeout-ms") {
      so.timeoutMs = std::atoi(next().c_str());  // RAILYARD_TIMEOUT_MS of railyardd
    } else if (a == "--accept-timeout-ms") {
      acceptTimeoutMs = std::atoi(next().c_str());  // RAILYARD_ACCEPT_TIMEOUT_MS (TCP fabric)
    } else if (a == "--tmpfs-bytes") {
      tmpfsBytes = next();
    } else {
      std::fprintf(stderr, "snapshot-peer: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!tmpfsBytes.empty()) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", so.swapDir.c_str(), "tmpfs", 0, ("size=" + tmpfsBytes).c_str()) != 0) {
      std::fprintf(stderr, "snapshot-peer: cannot mount a tmpfs over %s: %s\n", so.swapDir.c_str(), std::strerror(errno));
      return 77;
    }
  }
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::Worker> worker;
  if (Status s = storage::snapshot::testing::MakeTestDomain(storage::snapshot::testing::Side::kPeer, 10000, &domain,
                                                                 acceptTimeoutMs);
      !s.ok()) {
    std::fprintf(stderr, "snapshot-peer: %s\n", s.message().c_str());
    return 1;
  }
  if (Status s = domain->CreateWorker(&worker); !s.ok()) {
    std::fprintf(stderr, "snapshot-peer: %s\n", s.message().c_str());
    return 1;
  }
  {
    fabric::RegistrationCache cache(*domain);
    std::unique_ptr<storage::snapshot::SnapshotServer> server;
    if (Status s = storage::snapshot::SnapshotServer::Start(cache, *worker, so, &server); !s.ok()) {
      std::fprintf(stderr, "snapshot-peer: %s\n", s.message().c_str());
      return 1;
    }
    std::signal(SIGTERM, OnSignal);
    std::signal(SIGINT, OnSignal);
    std::printf("port %u\n", server->port());
    std::fflush(stdout);
    while (!g_stop) {
      pollfd p{0, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char c;
        if (::read(0, &c, 1) <= 0) break;
      }
    }
    server.reset();
  }
  worker.reset();
  return 0;
}
