// Railyard's configuration: one table of every RAILYARD_* variable, parsed once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "env/log.h"
#include "env/status.h"

namespace railyard::env {

/// The resolved configuration. Every field corresponds to one row of the
/// variable table (env/variables.cc); docs/configuration.md is generated from it.
struct Config {
  /// RAILYARD_SOCKET_IFNAME (falls back to NCCL_SOCKET_IFNAME): NCCL_SOCKET_IFNAME
  /// grammar; empty = automatic choice (non-loopback interfaces that are up, else lo).
  std::string socketIfname;
  /// The fabric-mode rail filter: RAILYARD_SOCKET_IFNAME's own value, never the
  /// NCCL_SOCKET_IFNAME alias (that one chooses NCCL's bootstrap network); "" = automatic.
  std::string railIfname;
  /// RAILYARD_NSOCKS: data sockets per connection (1..64).
  int nsocks = 0;
  /// RAILYARD_NTHREADS: helper threads per connection that drive the data sockets (1..16).
  int nthreads = 0;
  /// RAILYARD_CHUNK_BYTES: bytes per striped chunk of a large message.
  std::size_t chunkBytes = 0;
  /// RAILYARD_TIMEOUT_MS: a request that makes no progress for this long fails (ms).
  int timeoutMs = 0;
  /// RAILYARD_ACCEPT_TIMEOUT_MS: an accepted socket must send its hello, and a
  /// connection gain its next socket, within this time (ms).
  int acceptTimeoutMs = 0;
  /// RAILYARD_ACCEPT_MAX_PENDING: most sockets a listen comm holds before their
  /// connection is complete.
  int acceptMaxPending = 0;
  /// RAILYARD_DEFAULT_SPEED_MBPS: speed reported when sysfs does not know it (Mbps).
  int defaultSpeedMbps = 0;
  /// RAILYARD_DEBUG: stderr log threshold for standalone tools.
  log::Level debug = log::Level::kWarn;
  /// RAILYARD_HOST_NAME: name this host reports to peers; empty = gethostname().
  std::string hostName;
  /// RAILYARD_DISCOVERY_PORT: UDP port of the cabling protocol (1..65535).
  int discoveryPort = 0;
  /// RAILYARD_DISCOVERY_INTERVAL_MS: hello and re-flood period (ms).
  int discoveryIntervalMs = 0;
  /// RAILYARD_DISCOVERY_DEAD_MS: a neighbour unheard this long is gone (ms).
  int discoveryDeadMs = 0;
  /// RAILYARD_CLUSTER_KEY_FILE: path of the cluster's shared secret; empty = no
  /// authentication (topology/cluster_key.h).
  std::string clusterKeyFile;
  /// RAILYARD_FABRIC: "auto", "on" or "off" (see docs/configuration.md).
  std::string fabric;
  /// RAILYARD_RELAY_PORT: TCP port of relays (1..65535).
  int relayPort = 0;
  int fabricRelayPort = 0;  ///< RAILYARD_FABRIC_RELAY_PORT: the fabric Forwarder's port on every rail
  /// RAILYARD_FABRIC_RELAY_VERBS_PORT: the Forwarder's verbs bootstrap port on RDMA cables (0: none)
  int fabricRelayVerbsPort = 0;
  int tierTunnelPort = 0;   ///< RAILYARD_TIER_TUNNEL_PORT: railyardd's expert tunnel (+1: snapshot) on every rail
  /// RAILYARD_RELAY_BUFFER_BYTES: per direction per relayed socket.
  std::size_t relayBufferBytes = 0;
  /// RAILYARD_RELAY_DRAIN_MS: how long railyardd's relay carries sockets in flight after SIGTERM (ms).
  int relayDrainMs = 0;
  /// RAILYARD_RELAY_IDLE_MS: a relayed socket must deliver its relay record and hello within this (ms).
  int relayIdleMs = 0;
  /// RAILYARD_RELAY_MAX_PER_PEER: most sockets one relay carries from one source address.
  int relayMaxPerPeer = 0;
  /// RAILYARD_TRANSPORT: "auto", "verbs" or "tcp" (see docs/configuration.md).
  std::string transport;
  /// RAILYARD_COMMS: "auto" (the NCCL comms over proxy/fabric in plain TCP mode and in
  /// verbs mode), "fabric" (proxy/fabric in TCP and verbs mode) or
  /// "legacy" (the per-transport comms of proxy/tcp and proxy/verbs everywhere).
  std::string comms;
  /// RAILYARD_FABRIC_TCP_RELAY: "splice" (fabric Endpoints over TCP to a host with no
  /// cable go through the socket relay at RAILYARD_RELAY_PORT, which splices them on)
  /// or "forwarder" (through the fabric relay's Forwarders at RAILYARD_FABRIC_RELAY_PORT).
  std::string fabricTcpRelay;
  // --- verbs (RoCE) transport: proxy/verbs/ -----------------------------------------
  /// RAILYARD_HCA (falls back to NCCL_IB_HCA): RDMA devices/ports, NCCL_IB_HCA grammar;
  /// a prefix never matches a longer number ("mlx5_1" does not select "mlx5_11").
  /// Empty = every device. See proxy/verbs/hca_filter.h.
  std::string hca;
  /// RAILYARD_GID_INDEX (NCCL_IB_GID_INDEX): GID index to use; -1 = automatic choice.
  int gidIndex = 0;
  /// RAILYARD_ROCE_VERSION (NCCL_IB_ROCE_VERSION_NUM): preferred RoCE version (1 or 2).
  int roceVersion = 0;
  /// RAILYARD_ADDR_FAMILY (NCCL_IB_ADDR_FAMILY): AF_INET or AF_INET6 (the <sys/socket.h> value).
  int addrFamily = 0;
  /// RAILYARD_ADDR_RANGE (NCCL_IB_ADDR_RANGE): CIDR the chosen GID must fall in; empty = any.
  std::string addrRange;
  /// RAILYARD_TC (NCCL_IB_TC): GRH traffic class 0..255; -1 = the init trafficClass, else 0.
  int trafficClass = 0;
  /// RAILYARD_SL (NCCL_IB_SL): service level 0..15; -1 = the init trafficClass, else 0.
  int serviceLevel = 0;
  /// RAILYARD_IB_TIMEOUT (NCCL_IB_TIMEOUT): QP ACK timeout exponent (4.096 us x 2^n).
  int ibTimeout = 0;
  /// RAILYARD_IB_RETRY_CNT (NCCL_IB_RETRY_CNT): QP retry count.
  int ibRetryCnt = 0;
  /// RAILYARD_QPS_PER_CONN (NCCL_IB_QPS_PER_CONNECTION): data QPs per connection and device.
  int qpsPerConn = 0;
  /// RAILYARD_IB_USE_INLINE (NCCL_IB_USE_INLINE): 1 = protocol records go inline.
  int ibUseInline = 0;
  // --- fabric layer striping: proxy/fabric/stripe_scheduler.h ----------------------
  /// RAILYARD_STRIPE_THRESHOLD_BYTES: fabric ops above this are striped over the rails.
  std::size_t stripeThresholdBytes = 0;
  /// RAILYARD_STRIPE_CHUNK_BYTES: most bytes per fabric chunk.
  std::size_t stripeChunkBytes = 0;
  /// RAILYARD_STRIPE_CHUNKS_PER_RAIL: fabric chunks in flight per rail (1..1024).
  int stripeChunksPerRail = 0;
  /// RAILYARD_EXPERT_PIN_CAP: bytes an expert store peer may pin for all its clients (0 = no cap).
  std::size_t expertPinCapBytes = 0;
  /// RAILYARD_SWAP_DIR: directory of the snapshot tier's swap files (paging arenas);
  /// empty = none (a paging arena then refuses to start).
  std::string swapDir;
  /// RAILYARD_SWAP_SYNC: 1 = every committed snapshot blob is written through to the
  /// swap file and fdatasync'ed, and survives a restart; 0 = the swap is a cache only.
  int swapSync = 0;
  /// RAILYARD_XXH3_KERNEL: "auto" (the widest the CPU runs), "avx512", "avx2", "sse2" or
  /// "portable" (the build's own target: SSE2 on x86-64, NEON on aarch64): the tiers' XXH3-64.
  std::string xxh3Kernel;

  // --- CollNet collectives: proxy/collectives/coll_comm.h --------------------------
  /// RAILYARD_COLLNET_CHUNK_BYTES: bytes of one pipelined ring chunk (one staging slot).
  std::size_t collnetChunkBytes = 0;
  /// RAILYARD_COLLNET_SLOTS: staging slots per stream (chunks in flight).
  int collnetSlots = 0;
  /// RAILYARD_COLLNET_SMALL_BYTES: allreduces up to this size run one-shot (0 = never).
  std::size_t collnetSmallBytes = 0;
  /// RAILYARD_COLLNET_SHAPE: "auto", "ring", "chain" or "mesh".
  std::string collnetShape;
};

/// One row of the variable table.
struct Variable {
  const char* name;        ///< e.g. "RAILYARD_NSOCKS"
  const char* type;        ///< "int", "bytes", "string", "level"
  const char* defaultValue;///< as written in the docs
  const char* unit;        ///< "ms", "Mbps", "bytes", "" ...
  const char* ncclAlias;   ///< NCCL's own variable honoured when ours is unset, or nullptr
  const char* doc;         ///< one line
  /// "int"/"bytes": smallest accepted value (inclusive). Unused for other types.
  std::int64_t minValue = 0;
  /// "int"/"bytes": largest accepted value (inclusive). Unused for other types.
  std::int64_t maxValue = 0;
  /// Parses a non-empty `value` of this variable and stores it in its Config
  /// field. `source` is the name the value came from (ours or the NCCL alias),
  /// used in error messages. Fails with InvalidUsage naming `source`, the value
  /// and what was expected. The default of every row is applied through this same
  /// function with `defaultValue`, so the table is the only list of defaults.
  Status (*apply)(const Variable& var, const char* source, std::string_view value,
                  Config* out) = nullptr;
  /// "string"/"enum" rows: the accepted values as the docs show them ("auto, on, off"); a
  /// "bytes" row may give its own range text (docs and errors). Others derive theirs.
  const char* accepted = nullptr;
};

/// The table, in documentation order.
std::span<const Variable> Variables();

/// Parses a decimal integer (an optional leading '-', then digits only: no '+', no
/// whitespace) for `var` within [var.minValue, var.maxValue].
/// Errors: InvalidUsage "`source`='value': expected ..." naming the range.
Status ParseIntValue(const Variable& var, const char* source, std::string_view value,
                     std::int64_t* out);

/// Like ParseIntValue but accepts one optional suffix K, M or G (either case),
/// meaning 2^10, 2^20, 2^30: "512K" = 524288. Overflow and range are checked
/// after scaling. Errors: InvalidUsage naming `source`, the value and the range.
Status ParseBytesValue(const Variable& var, const char* source, std::string_view value,
                       std::int64_t* out);

/// A level name as log::ParseLevelName accepts (NONE, VERSION, WARN, INFO, TRACE,
/// any case). Errors: InvalidUsage naming `source`, the value and the accepted names.
Status ParseLevelValue(const Variable& var, const char* source, std::string_view value,
                       log::Level* out);

/// Levenshtein edit distance (insert, delete, substitute each cost 1) between
/// two strings; used to suggest the nearest known variable for a misspelt one.
std::size_t EditDistance(std::string_view a, std::string_view b);

/// The known variable a misspelt `name` most likely means: the same name in another case,
/// the Railyard name of an NCCL variable written with RAILYARD_ (RAILYARD_IB_HCA ->
/// RAILYARD_HCA), a known name `name` extends (RAILYARD_DEBUG_LEVEL -> RAILYARD_DEBUG),
/// else the nearest by case-insensitive EditDistance (first in table order on ties) when
/// at most half of the part after RAILYARD_ differs; nullptr when none is close.
const Variable* NearestVariable(std::string_view name);

/// Checks the values that depend on each other, after every variable was parsed:
/// RAILYARD_DISCOVERY_DEAD_MS must be larger than RAILYARD_DISCOVERY_INTERVAL_MS (else a
/// neighbour is declared gone between two hellos); a RAILYARD_ADDR_RANGE must be of the
/// RAILYARD_ADDR_FAMILY family (IPv4 range with AF_INET, IPv6 with AF_INET6; NCCL 2.28.9
/// ignores a mismatched range with a WARN, Railyard refuses it). Errors: InvalidUsage naming both
/// variables and their values. Parse() calls it.
Status CheckCombinations(const Config& config);

/// The names of every RAILYARD_* variable present in the process environment
/// (read from `environ`), in environment order; what Load() passes to Parse().
std::vector<std::string> RailyardNamesInEnvironment();

/// Looks up a variable's value; the default reads the process environment.
using Lookup = std::function<std::optional<std::string>(const char* name)>;

/// Parses every variable through `lookup`. An empty value counts as unset.
/// A malformed or out-of-range value fails with InvalidUsage naming the variable.
/// `names` lists every RAILYARD_* name present (for the unknown-name warning);
/// each unknown one gets a WARN naming the nearest known variable (names that do
/// not start with "RAILYARD_" are ignored). For a variable with an NCCL alias, our
/// name wins when set; otherwise a non-empty alias value is used (as NCCL itself
/// would read it). Every value taken from the environment is logged at INFO/ENV.
/// On failure `*out` is left unchanged; the first failing variable (table order)
/// is reported.
Status Parse(const Lookup& lookup, std::span<const std::string> names, Config* out);

/// The process configuration, parsed from the environment on first use
/// (thread-safe, once; lookup = getenv, names = RailyardNamesInEnvironment()).
/// Returns the parse error on every call if it failed (not logged here: the caller
/// reports it, once); `*out` is then unchanged.
/// On success `*out` points at a process-lifetime Config.
Status Load(const Config** out);

/// Markdown for docs/configuration.md, generated from Variables(): a title, a
/// table (name, type, default, unit, accepted range, NCCL alias, description) and
/// notes on empty values, suffixes and precedence. Deterministic; the unit test
/// config_doc_test compares it with the committed file.
std::string RenderMarkdown();

}  // namespace railyard::env
