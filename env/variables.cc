// The variable table: the single source of names, types, defaults, ranges,
// aliases and docs for every RAILYARD_* variable. Parsing (config.cc), defaults
// and docs/configuration.md all come from here.
#include <cctype>
#include <cstdint>
#include <limits>

#include "env/config.h"

namespace railyard::env {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

// One `apply` per Config field: parse with the typed parser, then store.
Status ApplySocketIfname(const Variable&, const char*, std::string_view value, Config* out) {
  // Kept verbatim: the NCCL_SOCKET_IFNAME grammar does not trim whitespace
  // (topology/interface_filter.h validates it).
  out->socketIfname = std::string(value);
  return Status::Ok();
}

template <int Config::*Field>
Status ApplyInt(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseIntValue(var, source, value, &v));
  out->*Field = static_cast<int>(v);
  return Status::Ok();
}

Status ApplyChunkBytes(const Variable& var, const char* source, std::string_view value,
                       Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseBytesValue(var, source, value, &v));
  out->chunkBytes = static_cast<std::size_t>(v);
  return Status::Ok();
}

Status ApplyHostName(const Variable&, const char*, std::string_view value, Config* out) {
  out->hostName = std::string(value);
  return Status::Ok();
}

Status ApplyFabric(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "on" && v != "off") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' is not one of auto, on, off (" +
                        var.name + ")");
  }
  out->fabric = v;
  return Status::Ok();
}

Status ApplyRelayBuffer(const Variable& var, const char* source, std::string_view value,
                        Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseBytesValue(var, source, value, &v));
  out->relayBufferBytes = static_cast<std::size_t>(v);
  return Status::Ok();
}

Status ApplyDebug(const Variable& var, const char* source, std::string_view value, Config* out) {
  return ParseLevelValue(var, source, value, &out->debug);
}

const Variable kVariables[] = {
    {"RAILYARD_SOCKET_IFNAME", "string", "", "", "NCCL_SOCKET_IFNAME",
     "Interfaces for the TCP transport, in NCCL_SOCKET_IFNAME syntax (comma list of "
     "prefixes; leading ^ excludes, = matches exact names); empty = automatic (up, "
     "non-loopback interfaces with a routable address, except docker*/virbr*; else lo).",
     0, 0, &ApplySocketIfname},
    {"RAILYARD_NSOCKS", "int", "4", "", nullptr,
     "Data sockets per connection.", 1, 64, &ApplyInt<&Config::nsocks>},
    {"RAILYARD_NTHREADS", "int", "2", "", nullptr,
     "Helper threads per connection that drive the data sockets.", 1, 16,
     &ApplyInt<&Config::nthreads>},
    {"RAILYARD_CHUNK_BYTES", "bytes", "524288", "bytes", nullptr,
     "Bytes per striped chunk of a large message; accepts K, M, G suffixes (powers of 1024).",
     4096, kGiB, &ApplyChunkBytes},
    {"RAILYARD_TIMEOUT_MS", "int", "30000", "ms", nullptr,
     "A request that makes no progress for this long fails.", 1, kIntMax,
     &ApplyInt<&Config::timeoutMs>},
    {"RAILYARD_DEFAULT_SPEED_MBPS", "int", "10000", "Mbps", nullptr,
     "Speed reported for an interface whose sysfs speed is unknown (NCCL's socket "
     "transport uses 10000 too).",
     1, kIntMax, &ApplyInt<&Config::defaultSpeedMbps>},
    {"RAILYARD_DEBUG", "level", "WARN", "", nullptr,
     "Stderr log threshold for standalone tools: NONE, VERSION, WARN, INFO or TRACE "
     "(any case). Inside NCCL, NCCL_DEBUG and NCCL_DEBUG_SUBSYS decide instead.",
     0, 0, &ApplyDebug},
    {"RAILYARD_HOST_NAME", "string", "", "", nullptr,
     "Name this host reports to its peers in the cabling graph, railyard-info and error "
     "messages; empty = the system host name.",
     0, 0, &ApplyHostName},
    {"RAILYARD_DISCOVERY_PORT", "int", "29517", "", nullptr,
     "UDP port of the cabling protocol (hellos and link-state records on every rail); "
     "the same on every host.",
     1, 65535, &ApplyInt<&Config::discoveryPort>},
    {"RAILYARD_DISCOVERY_INTERVAL_MS", "int", "100", "ms", nullptr,
     "Period of cabling hellos and of re-flooding what a host knows.", 10, 60000,
     &ApplyInt<&Config::discoveryIntervalMs>},
    {"RAILYARD_DISCOVERY_DEAD_MS", "int", "1000", "ms", nullptr,
     "A neighbour, or a host's link-state record, unheard this long is taken as gone "
     "(a cut cable, a dead host).",
     30, 600000, &ApplyInt<&Config::discoveryDeadMs>},
    {"RAILYARD_FABRIC", "enum", "auto", "", nullptr,
     "Fabric mode: the host's rails become one device that reaches every host, over "
     "the cable when there is one and through relays otherwise. auto = on when the "
     "selected interfaces include rails (IPv4, not loopback, no default route), "
     "off = one device per interface with direct connections only, on = required.",
     0, 0, &ApplyFabric},
    {"RAILYARD_RELAY_PORT", "int", "29518", "", nullptr,
     "TCP port of the relay (railyardd, or a process using the plugin) on every host.",
     1, 65535, &ApplyInt<&Config::relayPort>},
    {"RAILYARD_RELAY_BUFFER_BYTES", "bytes", "1M", "bytes", nullptr,
     "Buffering per direction per relayed socket: the most a relay holds for a slow "
     "receiver before it stops reading from the sender.",
     65536, kGiB, &ApplyRelayBuffer},
};

}  // namespace

std::span<const Variable> Variables() { return kVariables; }

}  // namespace railyard::env
