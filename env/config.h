// Railyard's configuration: one table of every RAILYARD_* variable, parsed once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "env/log.h"
#include "env/status.h"

namespace railyard::env {

/// The resolved configuration. Every field corresponds to one row of the
/// variable table (env/variables.cc); docs/configuration.md is generated from it.
struct Config {
  /// RAILYARD_SOCKET_IFNAME (falls back to NCCL_SOCKET_IFNAME): NCCL_SOCKET_IFNAME
  /// grammar; empty = automatic choice (non-loopback interfaces that are up, else lo).
  std::string socketIfname;
  /// RAILYARD_NSOCKS: data sockets per connection (1..64).
  int nsocks = 0;
  /// RAILYARD_NTHREADS: helper threads per connection that drive the data sockets (1..16).
  int nthreads = 0;
  /// RAILYARD_CHUNK_BYTES: bytes per striped chunk of a large message.
  std::size_t chunkBytes = 0;
  /// RAILYARD_TIMEOUT_MS: a request that makes no progress for this long fails (ms).
  int timeoutMs = 0;
  /// RAILYARD_DEFAULT_SPEED_MBPS: speed reported when sysfs does not know it (Mbps).
  int defaultSpeedMbps = 0;
  /// RAILYARD_DEBUG: stderr log threshold for standalone tools.
  log::Level debug = log::Level::kWarn;
};

/// One row of the variable table.
struct Variable {
  const char* name;        ///< e.g. "RAILYARD_NSOCKS"
  const char* type;        ///< "int", "bytes", "string", "level"
  const char* defaultValue;///< as written in the docs
  const char* unit;        ///< "ms", "Mbps", "bytes", "" ...
  const char* ncclAlias;   ///< NCCL's own variable honoured when ours is unset, or nullptr
  const char* doc;         ///< one line
};

/// The table, in documentation order.
std::span<const Variable> Variables();

/// Looks up a variable's value; the default reads the process environment.
using Lookup = std::function<std::optional<std::string>(const char* name)>;

/// Parses every variable through `lookup`. An empty value counts as unset.
/// A malformed or out-of-range value fails with InvalidUsage naming the variable.
/// `names` lists every RAILYARD_* name present (for the unknown-name warning);
/// each unknown one gets a WARN naming the nearest known variable.
Status Parse(const Lookup& lookup, std::span<const std::string> names, Config* out);

/// The process configuration, parsed from the environment on first use
/// (thread-safe, once). Returns the parse error on every call if it failed.
Status Load(const Config** out);

/// Markdown for docs/configuration.md, generated from Variables().
std::string RenderMarkdown();

}  // namespace railyard::env
