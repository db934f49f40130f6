// The expert peer: serves one Store to clients over the control protocol of
// expert_wire.h. railyardd --expert-store DIR starts one; tests start it in-process.
//
// Threads (started by Start, joined by Stop/the destructor): one accepting, one per
// client connection (blocking I/O, socket timeouts), and one progressing the fabric
// Worker that serves the clients' Reads of the peer's copies of the layer files (explicit progress:
// the TCP transport serves remote reads from Progress; on verbs the HCA does and the
// CPU touches no record byte).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "proxy/fabric/worker.h"
#include "storage/expert/pin_ledger.h"
#include "storage/expert/served_layers.h"
#include "storage/expert/store.h"

namespace railyard::expert {

/// Options of an ExpertServer.
struct ServerOptions {
  std::string listenAddress = "127.0.0.1";  ///< IPv4 address the control socket binds
  uint16_t port = 0;                        ///< 0: an ephemeral port (see ExpertServer::port())
  uint64_t pinCapBytes = 0;                 ///< RAILYARD_EXPERT_PIN_CAP (0: no cap)
  int timeoutMs = 30000;                    ///< a client silent mid-message this long is dropped
  /// A client must choose its transport within this time of its Hello, else it is
  /// dropped: an idle connection holds a slot of maxConnections for this long at most
  /// (hostile-peer probe: 256 idle clients shut every new one out for timeoutMs).
  int handshakeTimeoutMs = 10000;
  size_t maxConnections = 256;              ///< connections served at once; more are refused
  /// Connections served at once from one IPv4 source address; more from it are refused
  /// (hostile-peer probe: 256 clients of one host that chose a transport and went idle
  /// shut every other host out for as long as they stayed).
  size_t maxConnectionsPerSource = 64;
  /// How often (ms) the progress thread checks, while layers are registered for READ,
  /// that the layer files still match the Store (CheckStore). 0: never (tests call
  /// CheckStore themselves).
  int storeCheckIntervalMs = 100;
};

/// Counters, for tests and logs.
struct ServerStats {
  uint64_t accepted = 0;         ///< connections that got a Hello
  uint64_t refused = 0;          ///< connections refused (admission, transport, limits)
  uint64_t recordsServedTcp = 0; ///< records sent over the control socket
  uint64_t shutdowns = 0;        ///< polite shutdowns answered
  uint64_t layerRegistrations = 0; ///< Domain::Register calls for layer files (once per layer)
  uint64_t withdrawals = 0;        ///< times the layer registrations were withdrawn (store changed)
  uint64_t idleReleases = 0;       ///< times they were released, no READ client connected, for a tcp client's pin
};

class ExpertServer {
 public:
  /// Starts serving `store`. `domain` and `worker` (both may be null: then only the TCP
  /// transport is offered and a READ choice is refused with UNKNOWN_TRANSPORT) must
  /// outlive the server; `worker` must be a Worker of `domain`, and this server's
  /// progress thread is then the only thread that polls it.
  /// SYSTEM when the control socket cannot be bound.
  static Status Start(std::unique_ptr<Store> store, fabric::Domain* domain, fabric::Worker* worker,
                      const ServerOptions& options, std::unique_ptr<ExpertServer>* out);
  ~ExpertServer();

  /// The bound control port.
  uint16_t port() const { return port_; }
  const Store& store() const { return *store_; }
  ServerStats stats() const;
  const PinLedger& ledger() const { return ledger_; }
  /// Stops accepting, closes every connection and joins every thread. Idempotent.
  void Stop();
  /// What the progress thread runs every options.storeCheckIntervalMs: when a layer
  /// file no longer matches (Store::CheckLayer: size, mtime, inode), withdraws the
  /// layer registrations, so READ clients' later Reads fail (STORE_CHANGED) and new
  /// READ clients are refused. Returns the change found (Ok when none, or when no
  /// layers are registered). Thread-safe.
  Status CheckStore();
  /// The answer to a READ client's kOpStatus: CheckStore's, or STORE_CHANGED when the
  /// registrations were withdrawn before; Ok while the layers are served.
  Status ServingStatus();

 private:
  ExpertServer(std::unique_ptr<Store> store, fabric::Domain* domain, fabric::Worker* worker, const ServerOptions& o);
  void AcceptLoop();
  void ProgressLoop();
  /// One client connection on its own thread: Hello, transport choice, requests; `source`
  /// is its address ("ip:port"), named in every log line about it.
  void Serve(int fd, uint64_t id, const std::string& source, uint32_t sourceIp, std::atomic<int>& phase);
  Status ServeTcp(int fd, const std::string& who, std::atomic<int>& phase);
  Status ServeReadControl(int fd, const std::string& who, std::atomic<int>& phase);
  /// Waits, idle (`phase` kIdle), for the client's next request: Ok when one has come,
  /// *stopped when the server stops, PEER_LOST when MakeRoom closed it meanwhile.
  Status AwaitRequest(int fd, const std::string& who, std::atomic<int>& phase, bool* stopped);
  /// At maxConnections, a client from `sourceIp` (`source` for the log) arrives: closes an
  /// idle connection of the address holding the most (fabric::AdmitIdle) and says true,
  /// or false when none may go (the new one is refused). Under mu_.
  bool MakeRoom(uint32_t sourceIp, const std::string& source);
  Status SendReply(int fd, Status s, const void* payload, uint64_t payloadBytes, const std::string& who);
  /// Loads every layer file into the peer's own read-only copy and registers it once
  /// (remote read; served_layers.h says why a copy); charges the ledger. Counts the caller
  /// as a READ client (readClients_, under mu_). The registrations outlive the READ
  /// clients (a client that comes back finds them), until ReleaseIdleLayers.
  Status EnsureLayersRegistered(const std::string& who, std::vector<std::vector<uint8_t>>* keys);
  /// With no READ client connected, deregisters the layer files and gives their bytes
  /// back to the ledger; true when it did. A tcp client the ledger refused asks it
  /// (new-user trial: the registrations of READ clients long gone stayed charged, and
  /// later tcp clients were refused under a cap nobody used).
  bool ReleaseIdleLayers();

  std::unique_ptr<Store> store_;
  fabric::Domain* domain_;
  fabric::Worker* worker_;
  ServerOptions options_;
  PinLedger ledger_;
  int listenFd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptThread_, progressThread_;

  mutable std::mutex mu_;
  ServerStats stats_;
  struct ConnThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<ConnThread> connThreads_;  ///< finished ones are joined at the next accept
  /// Where a connection's thread is: kIdle while it waits for a request between others
  /// (MakeRoom may then take it to kEvicted and shut its socket), else kBusy.
  enum Phase : int { kBusy, kIdle, kEvicted };
  /// A connection being served, in the order accepted (its fd stays open while listed).
  struct LiveConnection {
    int fd = -1;
    uint32_t sourceIp = 0;
    std::string source;  ///< "ip:port", for the log
    std::shared_ptr<std::atomic<int>> phase;
  };
  std::vector<LiveConnection> liveConns_;  ///< (mu_)
  size_t live_ = 0;
  std::map<uint32_t, size_t> perSource_;  ///< live connections by source IPv4 address (mu_)
  uint64_t refusedAtAccept_ = 0;  ///< over maxConnections, for the rate-limited WARN (mu_)
  uint64_t evictedAtAccept_ = 0;  ///< idle clients closed for new ones, for the rate-limited WARN (mu_)
  uint64_t refusedClients_ = 0;   ///< clients refused after their Hello, for the rate-limited WARN (mu_)
  std::atomic<int> readClients_{0};
  std::unique_ptr<ServedLayers> served_;  ///< set while the layers are registered for READ
};

}  // namespace railyard::expert
