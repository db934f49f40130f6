// Settings of one TCP connection, resolved from the configuration table.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace railyard::proxy {

class RankSource;

/// Per-connection TCP transport settings (see docs/configuration.md).
struct TcpOptions {
  int nsocks = 4;                   ///< data sockets per connection (RAILYARD_NSOCKS)
  int nthreads = 2;                 ///< helper threads per comm (RAILYARD_NTHREADS)
  size_t chunkBytes = 8u << 20;     ///< largest chunk of a striped message (RAILYARD_CHUNK_BYTES)
  size_t minChunkBytes = 64 * 1024; ///< smallest chunk once a message is striped
  int timeoutMs = 30000;            ///< no-progress limit of a request (RAILYARD_TIMEOUT_MS)
  /// Listener only: an accepted socket must deliver its whole hello, and a
  /// connection gain its next socket, within this time, else its sockets are
  /// closed (RAILYARD_ACCEPT_TIMEOUT_MS).
  int acceptTimeoutMs = 10000;
  /// Listener only: most sockets one listen comm holds before their connection is
  /// complete; beyond it new sockets wait in the kernel's backlog
  /// (RAILYARD_ACCEPT_MAX_PENDING).
  int maxPendingSockets = 256;
  std::string device;               ///< rail (interface) name, for error messages
  /// This process's rank in the comm's communicator (errors name it; sends note it);
  /// NULL: the process-wide guess (LocalRank). Accepted comms share their listener's.
  std::shared_ptr<RankSource> rank;
  /// Listener only: also accept control-only connections (the verbs handshake) while
  /// nsocks > 0; fabric mode with the verbs transport takes both kinds on one port.
  bool acceptControlOnly = false;
};

}  // namespace railyard::proxy
