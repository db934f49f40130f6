// The snapshot tier's serving side (what railyardd starts): several arenas, each
// its own kind, mode, blob size and slot count, behind one TCP control port. Each
// arena is one Region registered through the RegistrationCache; clients write and
// read it with one-sided fabric operations that the server's Worker serves. Paging
// arenas are caches over a swap file in the swap directory (paging_arena.h).
//
// Threads: one accepting control connections, one per control connection, and one
// polling the Worker (it takes over the Worker: nobody else may call its Progress).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "env/status.h"
#include "env/log_budget.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"
#include "proxy/socket.h"
#include "storage/snapshot/paging_arena.h"
#include "storage/snapshot/snapshot_wire.h"

namespace railyard::storage::snapshot {

/// One arena the server offers.
struct ArenaSpec {
  std::string kind;         ///< 1..31 bytes of [A-Za-z0-9_.-], unique per server
  Mode mode = Mode::kPaging;
  uint64_t blobBytes = 0;   ///< bytes per blob, > 0
  uint64_t slots = 0;       ///< blobs the arena holds in memory (0: a raw arena the first client sizes)
  uint64_t maxBytes = 0;    ///< raw arenas sized by the client: the largest arena accepted
  uint64_t arenaBytes() const { return blobBytes * slots; }
};

/// Parses "kind=NAME,mode=raw|paging,blob=BYTES,slots=N" (BYTES with K/M/G
/// suffixes, powers of 1024); the order of the fields is free. A raw arena may
/// give "max=BYTES" instead of slots: the first client's handshake then sizes it
/// (slots x blob bytes, at most max) and later clients must ask for the same size.
/// InvalidArgument naming the field.
Status ParseArenaSpec(const std::string& text, ArenaSpec* out);

/// Options of a server.
struct ServerOptions {
  std::vector<ArenaSpec> arenas;       ///< at least one; kinds unique
  std::string address = "127.0.0.1";   ///< IPv4 address the control port binds
  uint16_t port = 0;                   ///< control port (0 = ephemeral)
  std::string swapDir;                 ///< RAILYARD_SWAP_DIR (needed by paging arenas)
  bool swapSync = false;               ///< RAILYARD_SWAP_SYNC
  int timeoutMs = 30000;               ///< control-socket send/receive timeout (RAILYARD_TIMEOUT_MS)
  /// Control connections served at once (each a thread; a client's handle keeps its
  /// connection while it rests). When full, a new client gets the seat of an idle one
  /// (between operations) from the address holding the most connections, unless it is
  /// that address (fabric::AdmitIdle); else it is closed at accept. Both logged.
  size_t maxConnections = 256;
  /// Control connections served at once from one IPv4 source address; more from it are
  /// closed at accept, logged (hostile-peer probe: 256 handles of one host resting idle
  /// shut every other host out for as long as they stayed).
  size_t maxConnectionsPerSource = 64;
  /// Memory the arenas may take together, bytes: 0 = this host's physical memory
  /// (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE). A test sets it to check the refusal.
  uint64_t memoryBytes = 0;
  /// Helper threads that hash a commit's slot with its connection thread (ChecksumPool),
  /// shared by the paging arenas; -1 = DefaultChecksumHelpers(hardware threads), 0 = none.
  int checksumHelpers = -1;
};

/// Refuses arenas that together need more than `memoryBytes` (0: the host's physical
/// memory): each arena's slots x blob bytes, or max= for a client-sized one, is memory the
/// server maps and writes, so arenas beyond it would end in the OOM killer (new-user trial:
/// slots=1000000 of 1 MiB on a 23 GiB host started, VSZ 1 TB). InvalidArgument naming each
/// arena's bytes and the memory. A paging arena's swap file is on disk and not counted.
Status CheckArenasFitMemory(const std::vector<ArenaSpec>& arenas, uint64_t memoryBytes);

/// See file comment.
class SnapshotServer {
 public:
  /// Maps and registers every arena, opens the paging arenas' swap files
  /// (rebuilding their index with swapSync), binds the control port and starts the
  /// threads. `cache` (over the Worker's Domain) and `worker` must outlive the server.
  /// InvalidArgument for bad specs or duplicate kinds; errors of SwapFile::Open,
  /// RegistrationCache::Acquire and the bind.
  static Status Start(fabric::RegistrationCache& cache, fabric::Worker& worker, ServerOptions options,
                      std::unique_ptr<SnapshotServer>* out);
  /// Stops the threads, closes every connection, deregisters and unmaps the arenas.
  ~SnapshotServer();

  uint16_t port() const { return port_; }
  /// Handshakes refused so far (bad magic, version, sizes, unknown kind): each WARNed
  /// at most once per 10 s. A connection closed before its first byte is not one.
  uint64_t refusedClients() const { return refusedClients_.load(); }
  /// Counters of paging arena `kind` (zeros for a raw or unknown kind).
  PagingStats Stats(const std::string& kind) const;
  /// A test seam: PagingArena::SetFaultReadSeen of paging arena `kind` (none for a raw
  /// or unknown kind). Set before clients use the arena.
  void SetFaultReadSeen(const std::string& kind, std::function<void(uint64_t key)> seen);

 private:
  struct Arena {
    std::mutex mu;  ///< guards spec.slots, memory and region of a client-sized arena
    ArenaSpec spec;
    uint8_t* memory = nullptr;
    const fabric::Region* region = nullptr;
    std::unique_ptr<PagingArena> paging;
    /// A client's own region over the memory failed to deregister: the device may
    /// still hold it, so the memory is never unmapped.
    std::atomic<bool> unrevoked{false};
  };
  struct Connection {
    proxy::Fd fd;
    std::string source;  ///< the client's address, "ip:port", named in the log
    uint32_t sourceIp = 0;  ///< the client's IPv4 address (network order), for maxConnectionsPerSource
    std::thread thread;
    std::atomic<bool> done{false};
    /// kIdle while Serve waits for a request holding nothing; the accept thread may then
    /// take it to kEvicted (and shut the socket) to make room (AdmitIdle), and Serve, on
    /// waking, ends the connection instead of reading a request.
    enum Phase : int { kBusy, kIdle, kEvicted };
    std::atomic<int> phase{kBusy};
  };

  SnapshotServer(fabric::RegistrationCache& cache, fabric::Worker& worker) : cache_(cache), worker_(worker) {}
  void AcceptLoop();
  void ProgressLoop();
  void Serve(Connection* c, uint64_t client);
  /// Reads and checks a client's handshake; a discovery request (Mode::kList) sets
  /// *listed and leaves *arena null, a connection closed before its first byte (a port
  /// probe) *closedEarly. *clientTimeoutMs: the control timeout the client gave (0: not
  /// said), for its kQueued interval.
  Status Handshake(int fd, Arena** arena, bool* listed, bool* closedEarly, uint32_t* clientTimeoutMs);
  /// The discovery answer (ArenaInfo list) for a Mode::kList handshake.
  std::vector<uint8_t> ArenaList();
  /// Maps and registers `a` (spec.slots set).
  Status Materialize(Arena& a);
  void ReapDone();
  /// The server holds maxConnections clients and one from `sourceIp` (`ip`, for the log)
  /// arrives: closes an idle client of the address holding the most (AdmitIdle) and
  /// says true, or false when none may go (the new one is refused). Under connMu_.
  bool MakeRoom(uint32_t sourceIp, const char* ip);

  fabric::RegistrationCache& cache_;
  fabric::Worker& worker_;
  ServerOptions options_;
  std::unique_ptr<ChecksumPool> checksums_;  ///< before arenas_: the arenas use it till they go
  std::map<std::string, std::unique_ptr<Arena>> arenas_;
  proxy::Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptThread_;
  std::thread progressThread_;
  std::mutex connMu_;
  std::vector<std::unique_ptr<Connection>> connections_;
  uint64_t nextClient_ = 1;
  std::atomic<uint64_t> refusedClients_{0};  ///< handshakes refused, for the rate-limited WARN
  uint64_t refusedAtAccept_ = 0;             ///< over maxConnections, for the rate-limited WARN (accept thread)
  uint64_t evictedAtAccept_ = 0;             ///< idle clients closed to make room, for the rate-limited WARN
  std::atomic<uint64_t> badReleases_{0};     ///< releases of unheld pins, for the rate-limited WARN
  std::atomic<uint64_t> droppedHolding_{0};  ///< clients gone mid-operation, for the rate-limited WARN
  /// WARNs a client can cause at will (the three counts above): the first, then at most
  /// one per 10 s each (new-user trial: "every 1024th" showed the first refusal and hid
  /// every later, different one). `logMu_` guards them: connection threads share them.
  std::mutex logMu_;
  log::LogBudget refusedLog_{1, std::chrono::seconds(10)};
  log::LogBudget badReleaseLog_{1, std::chrono::seconds(10)};
  log::LogBudget droppedLog_{1, std::chrono::seconds(10)};
  /// Counts one event of `count` and says whether to log it now (its budget's call).
  bool MayLog(std::atomic<uint64_t>& count, log::LogBudget& budget);
};

}  // namespace railyard::storage::snapshot
