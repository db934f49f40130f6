// The snapshot tests' harness: a serving process (railyard-snapshot-peer, or
// railyardd --snapshot-only) started and killed by the test, and a client side (a
// fabric Domain of the test's transport (snapshot_transport.h), its Worker, RegistrationCache and SnapshotClient).
// Waits are bounded polls of a condition, never sleeps.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "storage/snapshot/snapshot_client.h"

namespace railyard::storage::snapshot::testing {

/// A serving process. Killed (SIGKILL) on destruction if still running.
class PeerProcess {
 public:
  ~PeerProcess();
  /// Starts `argv[0]` with the rest and waits (10 s at most) for its "port N" line
  /// (railyardd prints "snapshot-port N"). False with *why on failure; *exitCode gets
  /// the exit status when it exited before printing (77 = cannot mount a tmpfs).
  bool Start(const std::vector<std::string>& argv, std::string* why, int* exitCode = nullptr);
  /// Sends `sig`; with SIGSTOP returns once the peer is stopped (waitpid WUNTRACED);
  /// with SIGKILL/SIGTERM also reaps it.
  void Signal(int sig);
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdinFd_ = -1;
  int stdoutFd_ = -1;
  uint16_t port_ = 0;
};

/// A client process side: Domain, Worker, cache, client (destroyed in that order reversed).
struct ClientSide {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::Worker> worker;
  std::unique_ptr<fabric::RegistrationCache> cache;
  std::unique_ptr<SnapshotClient> client;
  ~ClientSide();
  /// Builds the Domain/Worker/cache and connects with `options` (port, kind, sizes).
  Status Connect(const ClientOptions& options, int fabricTimeoutMs = 10000);
};

/// The path of the peer binary (built beside the tests).
std::string PeerBinary();
/// Fills `n` bytes with a pattern of `seed`.
void Fill(uint8_t* p, size_t n, uint64_t seed);
/// Index of the first byte of p[0, n) differing from the pattern of `seed`, or -1.
int64_t Mismatch(const uint8_t* p, size_t n, uint64_t seed);
/// Polls `done` until it holds or 30 s pass (a condition of the test, polled; a
/// regression fails the test rather than hanging it). True when it held.
template <typename F>
bool WaitUntil(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}
/// A fresh directory under $TMPDIR (removed by the caller's RemoveTree).
std::string MakeTempDir();
void RemoveTree(const std::string& dir);

}  // namespace railyard::storage::snapshot::testing
