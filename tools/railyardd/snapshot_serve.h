// railyardd's snapshot arenas (--snapshot-arena): a Worker of the process's snapshot
// Domain (plugin/snapshot_runtime.h) and the storage::snapshot::SnapshotServer on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/worker.h"
#include "storage/snapshot/snapshot_server.h"

namespace railyard::tools {

/// The daemon's snapshot flags.
struct SnapshotFlags {
  std::vector<std::string> arenas;  ///< --snapshot-arena specs (storage::snapshot::ParseArenaSpec)
  std::string address;              ///< --snapshot-address ("" = the first rail's IPv4 address, else 127.0.0.1)
  uint16_t port = 0;                ///< --snapshot-port (0 = ephemeral)
};

/// Running arenas; stopping = destroying.
class SnapshotService {
 public:
  /// Parses the specs, creates the Worker and starts the server with RAILYARD_SWAP_DIR,
  /// RAILYARD_SWAP_SYNC and RAILYARD_TIMEOUT_MS from `cfg`, on the rails cfg.railIfname
  /// names (railyardd puts its --ifname there). InvalidArgument naming a bad spec.
  /// Every error message starts with exactly one "snapshot: ".
  static Status Start(const SnapshotFlags& flags, const env::Config& cfg, std::unique_ptr<SnapshotService>* out);
  ~SnapshotService();
  uint16_t port() const { return server_->port(); }
  const std::string& address() const { return address_; }
  /// One line per arena for the daemon's start-up output: "snapshot kind 'kv' (paging,
  /// 64 slots of 1048576 bytes, swap in DIR, sync on): 12 committed blobs recovered, 1
  /// torn record dropped" (what a restart with RAILYARD_SWAP_SYNC=1 found, or "empty"),
  /// "snapshot kind 'r' (raw, 4 slots of 65536 bytes)".
  std::vector<std::string> ArenaReport() const;

 private:
  std::unique_ptr<fabric::Worker> worker_;
  std::unique_ptr<storage::snapshot::SnapshotServer> server_;
  std::string address_;
  storage::snapshot::ServerOptions options_;  ///< what the server was started with
};

}  // namespace railyard::tools
