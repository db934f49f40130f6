// The relay: carries sockets between hosts that have no cable. Runs in railyardd
// or, when railyardd is absent, in every process using the plugin in fabric mode
// (each binds the relay port with SO_REUSEPORT, so any of them can serve a socket).
//
// Each incoming socket starts with a RelayRecord. The relay plans the next leg
// (straight to the listener when cabled to its host, else to the next relay),
// forwards the record when another relay follows, and from then on copies bytes
// both ways through two bounded buffers: it reads from one side only while its
// buffer toward the other has room, so a slow receiver holds the sender back hop
// by hop (TCP's window is the credit). Chunks move on as soon as their bytes
// arrive: a relay never waits for a whole message.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>

#include "env/status.h"
#include "proxy/routing/router.h"
#include "proxy/socket.h"

namespace railyard::proxy {

/// Relay settings.
struct RelayOptions {
  uint16_t port = 29518;           ///< TCP port (same on every host)
  size_t bufferBytes = 1 << 20;    ///< per direction per socket: the bound on buffering
};

/// Checks the RelayRecord read off an incoming relay socket, before any route is
/// planned: magic and protocol version (CheckHeader's InvalidUsage), kind kRelay
/// (InvalidUsage "expected a relay record, got kind N"); then NUL-terminates
/// `rec->originName` in place. The relay refuses the socket with the message.
Status CheckRelayRecord(RelayRecord* rec);

/// One relay thread serving every relayed socket of this process.
class RelayService {
 public:
  /// Binds *:port (SO_REUSEADDR|SO_REUSEPORT) and starts the thread. `router` plans
  /// onward legs and must outlive the service. SystemError when the port cannot be bound.
  static Status Start(const Router* router, const RelayOptions& options,
                      std::unique_ptr<RelayService>* out);
  /// Stops the thread and closes every relayed socket (their ends see the break).
  ~RelayService();
  RelayService(const RelayService&) = delete;
  RelayService& operator=(const RelayService&) = delete;

  /// Sockets being relayed now (pairs), for diagnostics and tests.
  int Active() const { return active_.load(); }
  /// Bytes copied so far, both directions.
  uint64_t BytesRelayed() const { return bytes_.load(); }

 private:
  struct Leg;
  RelayService() = default;
  void Run();

  const Router* router_ = nullptr;
  RelayOptions options_;
  Fd listen_;
  int epoll_ = -1;
  int wake_ = -1;
  std::thread thread_;
  std::atomic<int> active_{0};
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace railyard::proxy
