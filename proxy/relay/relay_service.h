// The relay: carries sockets between hosts that have no cable. One process per host
// relays: railyardd when it runs there, else one rank process in fabric mode (the
// relay seat, relay_seat.h, decides and hands the relay port over whole; nobody
// shares it with SO_REUSEPORT, so a short-lived process never takes sockets it
// would drop).
//
// Each incoming socket starts with a RelayRecord and a Railyard hello. The relay
// checks both (relay_policy.h: only other hosts of the graph, over rails, only
// Railyard listeners and relays), plans the next leg (straight to the listener when
// cabled to its host, else to the next relay), forwards the record when another
// relay follows, and from then on copies bytes both ways through two bounded
// buffers, allocated on the first byte each way: it reads from one side only while
// its buffer toward the other has room, so a slow receiver holds the sender back hop
// by hop (TCP's window is the credit). Chunks move on as soon as their bytes arrive:
// a relay never waits for a whole message.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "env/status.h"
#include "proxy/relay/relay_seat.h"
#include "proxy/routing/router.h"
#include "proxy/socket.h"

namespace railyard::proxy {

/// Relay settings.
struct RelayOptions {
  uint16_t port = 29518;         ///< TCP port (same on every host)
  size_t bufferBytes = 1 << 20;  ///< per direction per socket: the bound on buffering
  /// Who is asking for the relay seat: railyardd (kDaemon) takes it from a rank
  /// process; a rank process (kRank) relays only while nobody else does.
  RelaySeat::Role role = RelaySeat::Role::kRank;
  int drainMs = 0;         ///< Stop from the destructor: carry sockets in flight this long (ms)
  int idleMs = 10000;      ///< a socket must send its relay record and hello (and its onward
                           ///< connect complete) within this (ms), else it is closed
  int maxPerPeer = 1024;   ///< most sockets carried or being set up per source IPv4 address
  /// Railyard listeners on fixed ports that relayed sockets may reach besides the
  /// ephemeral range (RelayScope::fixedListenerPorts): railyardd's tier tunnels
  /// (RAILYARD_TIER_TUNNEL_PORT and + 1).
  std::vector<uint16_t> fixedListenerPorts;
};

/// The first check of the RelayRecord (56 bytes) read off an incoming relay socket,
/// before its MAC is read: magic and protocol version (CheckHeader's InvalidUsage),
/// kind kRelay (InvalidUsage "expected a relay record, got kind N"). The relay
/// refuses the socket with the message; the record's flags then say whether a MAC
/// follows, and CheckRelayMac / CheckRelayRecord (relay_policy.h) judge the rest.
Status CheckRelayRecordHeader(const RelayRecord& rec);

/// One relay thread serving every relayed socket of this process.
class RelayService {
 public:
  /// Claims the relay seat for `options.port` (relay_seat.h) and starts the thread.
  /// Ok also when another process holds the seat: this one stands by (Relaying()
  /// false) and takes over when that process leaves. `router` plans onward legs and
  /// must outlive the service. InvalidUsage when `options.role` is kDaemon and
  /// another railyardd holds the seat; SystemError when the port cannot be bound.
  static Status Start(const Router* router, const RelayOptions& options,
                      std::unique_ptr<RelayService>* out);
  /// Stop(options.drainMs).
  ~RelayService();
  RelayService(const RelayService&) = delete;
  RelayService& operator=(const RelayService&) = delete;

  /// Stops accepting relayed sockets (the seat goes to a process standing by, if
  /// any, else the port closes), refuses the ones still being set up, carries the
  /// ones in flight until they end or `drainMs` (ms) passes, closes the rest with RST
  /// (their ends see the break) and stops the thread. Returns how many relayed
  /// sockets were still open at the deadline. Idempotent (later calls return 0).
  int Stop(int drainMs);

  /// Whether this process holds the relay seat now (accepts relayed sockets).
  bool Relaying() const { return relaying_.load(); }
  /// Who holds the seat, e.g. "railyardd (pid 123)", for logs.
  std::string SeatHolder() const;
  /// Sockets being relayed now (pairs), for diagnostics and tests.
  int Active() const { return active_.load(); }
  /// Sockets accepted and not yet relayed (waiting for their record or connect).
  int Pending() const { return pending_.load(); }
  /// Bytes of relay buffer allocated now, both directions of every socket.
  uint64_t BufferBytesHeld() const { return buffered_.load(); }
  /// Bytes copied so far, both directions.
  uint64_t BytesRelayed() const { return bytes_.load(); }

 private:
  struct Leg;
  RelayService() = default;
  void Run();
  void Watch(int fd, uint32_t tag, uint32_t events);
  void WatchSeat(bool on);
  void NoteSeat();

  const Router* router_ = nullptr;
  RelayOptions options_;
  std::unique_ptr<RelaySeat> seat_;
  int epoll_ = -1;
  int wake_ = -1;
  std::thread thread_;
  std::atomic<int> stopDrainMs_{-1};  ///< set by Stop before it wakes the thread
  std::atomic<int> leftAtStop_{0};
  std::mutex stopMu_;
  bool stopped_ = false;
  std::atomic<bool> relaying_{false};
  mutable std::mutex holderMu_;
  std::string holder_;
  std::atomic<int> active_{0};
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> buffered_{0};
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace railyard::proxy
