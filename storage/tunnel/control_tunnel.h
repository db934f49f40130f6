// ControlTunnel: carries the storage tiers' TCP control connections (the expert
// peer's manifest/status requests, the snapshot handshake and paging calls) as
// records over fabric Endpoints, so a client reaches a peer with no cable to it
// through the same relayed route (proxy/fabric/relay, CableSetDomain) as the
// one-sided data, and both fail together when a relay on it dies.
//
// Two sides, each one object with its own Worker of the caller's Domain and one
// thread (started by Dial/Accept, joined by the destructor):
//   - Dial: listens on 127.0.0.1 (an ephemeral port, LocalAddress()); every local
//     connection to it becomes one tunnel to the Accept side whose Worker address
//     was given. The tier's client connects there as it would to the peer itself
//     (ExpertClient::Open("127.0.0.1:P"), SnapshotClient host/port), unchanged.
//   - Accept: every tunnel a Dial side opens becomes one TCP connection to the one
//     local control port it was built for (the tier server's); a peer cannot make it
//     connect anywhere else. Its WorkerAddress() is what dialers are given.
//
// Per tunnel: one Endpoint each way (the acceptor connects back to the address the
// Open record names), records in order (tunnel_wire.h), and a credit window: a side
// sends at most `windowBytes` the other has not yet written to its socket, so neither
// buffers more than that. A side that sends past the window, a record for a tunnel it
// does not own or a malformed record is counted and its tunnel closed (or the record
// dropped); nothing a peer sends is used before it is checked. An Endpoint error
// (a relay killed, the peer gone, a timeout) closes the tunnel's socket at once,
// so the tier's client sees its control connection end (PEER_LOST), and the error's
// text (naming peer, relay and sequence) is logged and kept in lastError().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/worker.h"

namespace railyard::storage::tunnel {

/// Settings of a ControlTunnel side.
struct TunnelOptions {
  size_t maxTunnels = 64;           ///< tunnels open at once; more Opens are refused (kClose)
  /// Accept side: tunnels one peer (Event::peer of its Opens) may hold at once, so that
  /// one hostile or runaway peer cannot take every tunnel of maxTunnels from the others.
  size_t maxTunnelsPerPeer = 8;
  uint64_t windowBytes = 1 << 20;   ///< stream bytes in flight per direction per tunnel
  size_t maxRecordsInFlight = 16;   ///< posted Sends per tunnel not yet done
  /// Dial side: what logs and lastError() call the Accept side, as the user named it
  /// ("host:h2 (via relay h1)", plugin/tier_route.h); "" = "the peer".
  std::string peerName;
  /// Accept side: what its one local control port serves, in the refusal a dialer is
  /// sent when it cannot be reached ("railyardd's expert store"); "" = its address.
  std::string targetName;
};

/// Counters, for tests and logs.
struct TunnelStats {
  uint64_t opened = 0;      ///< tunnels opened (dial: local connections; accept: Opens taken)
  uint64_t closed = 0;      ///< tunnels ended, any way
  uint64_t failed = 0;      ///< tunnels ended by an Endpoint error
  uint64_t refused = 0;     ///< Opens refused (limit, unreachable target, bad address)
  uint64_t strays = 0;      ///< records for no tunnel of this side, or from another peer
  uint64_t malformed = 0;   ///< records Decode refused, or past the credit window
  uint64_t bytesIn = 0;     ///< stream bytes received from the fabric
  uint64_t bytesOut = 0;    ///< stream bytes sent over the fabric
};

/// See file comment.
class ControlTunnel {
 public:
  /// The dialing side: tunnels to the Accept side at `remote` (a Worker address of
  /// `domain`'s kind, peer data: validated by Worker::Connect). SystemError when the
  /// local listener cannot be bound; errors of Domain::CreateWorker.
  static Status Dial(fabric::Domain& domain, std::vector<uint8_t> remote, TunnelOptions options,
                     std::unique_ptr<ControlTunnel>* out);
  /// The accepting side: every tunnel becomes a connection to `targetHost`:`targetPort`
  /// (IPv4). InvalidArgument for a bad address; errors of Domain::CreateWorker.
  static Status Accept(fabric::Domain& domain, const std::string& targetHost, uint16_t targetPort,
                       TunnelOptions options, std::unique_ptr<ControlTunnel>* out);
  /// Stops the thread, closes every tunnel's socket, drops the Endpoints and Worker.
  ~ControlTunnel();
  ControlTunnel(const ControlTunnel&) = delete;
  ControlTunnel& operator=(const ControlTunnel&) = delete;

  /// Dial: "127.0.0.1:PORT", where the tier's client connects. Accept: "".
  std::string LocalAddress() const;
  /// This side's Worker address (Accept: what dialers are given).
  const std::vector<uint8_t>& WorkerAddress() const { return address_; }
  TunnelStats stats() const;
  /// The last Endpoint error or refusal, "" if none.
  std::string lastError() const;

  struct Tunnel;  ///< one tunnel's state (control_tunnel.cc)

 private:
  enum class Side { kDial, kAccept };
  ControlTunnel(Side side, TunnelOptions options);
  void Run();
  bool Pump(Tunnel& t);
  void OnRecord(uint64_t peer, std::span<const uint8_t> bytes);
  void SendRecord(Tunnel& t, int type, uint64_t value, std::vector<uint8_t> payload);
  void Fail(Tunnel& t, const std::string& why, bool endpointError);
  void AcceptLocal();
  void Reap();

  Side side_;
  TunnelOptions options_;
  std::unique_ptr<fabric::Worker> worker_;
  std::vector<uint8_t> address_;
  std::vector<uint8_t> remote_;  ///< dial: the acceptor's address
  std::string targetHost_;       ///< accept: the one local control port
  uint16_t targetPort_ = 0;
  int listenFd_ = -1;            ///< dial: the loopback listener
  uint16_t listenPort_ = 0;
  std::vector<std::unique_ptr<Tunnel>> tunnels_;
  std::map<uint64_t, uint64_t> cookieTunnel_;  ///< posted Send -> its tunnel's id
  uint64_t nextCookie_ = 1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;  ///< guards stats_ and lastError_
  TunnelStats stats_;
  std::string lastError_;
};

}  // namespace railyard::storage::tunnel
