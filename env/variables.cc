// The variable table: the single source of names, types, defaults, ranges,
// aliases and docs for every RAILYARD_* variable. Parsing (config.cc), defaults
// and docs/configuration.md all come from here.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include "env/config.h"
#include "env/device_list_syntax.h"
#include "env/log.h"

namespace railyard::env {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

/// CheckDeviceListSyntax for a device-list variable read from `source`. Railyard's own
/// name refuses a malformed list (InvalidUsage). NCCL's alias (NCCL_SOCKET_IFNAME,
/// NCCL_IB_HCA) keeps NCCL's reading of it: NCCL 2.28.9 runs with such a value, so a job
/// that runs on NCCL's own transports must not fail at this plugin's init; a WARN says
/// how it is read instead.
Status CheckDeviceListOf(const Variable& var, const char* source, std::string_view value) {
  Status s = CheckDeviceListSyntax(value, source);
  if (s.ok() || std::string_view(source) == var.name) return s;
  RY_WARN("%s; kept as NCCL reads it (set %s to override)", s.message().c_str(), var.name);
  return Status::Ok();
}

/// " (read as RAILYARD_X)" when `source` is another name for `var` (an NCCL_* alias),
/// "" when it is the variable itself (new-user trial: "RAILYARD_FABRIC='yes' is not one
/// of auto, on, off (RAILYARD_FABRIC)" named it twice).
std::string AliasNote(const Variable& var, const char* source) {
  return std::string_view(source) == var.name ? std::string() : " (read as " + std::string(var.name) + ")";
}

// One `apply` per Config field: parse with the typed parser, then store.
Status ApplySocketIfname(const Variable& var, const char* source, std::string_view value, Config* out) {
  // NCCL's forms only (env/device_list_syntax.h: "^" alone, "^=", "eth0,^docker" refused);
  // kept verbatim: the NCCL_SOCKET_IFNAME grammar does not trim whitespace
  // (topology/interface_filter.h warns of it).
  RY_RETURN_IF_ERROR(CheckDeviceListOf(var, source, value));
  out->socketIfname = std::string(value);
  // Fabric-mode rails follow RAILYARD_SOCKET_IFNAME only: NCCL_SOCKET_IFNAME is how NCCL
  // users choose NCCL's own bootstrap network (often the management port), not the cables.
  if (std::string_view(source) == var.name) out->railIfname = std::string(value);
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

template <std::size_t Config::*Field>
Status ApplyBytes(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseBytesValue(var, source, value, &v));
  out->*Field = static_cast<std::size_t>(v);
  return Status::Ok();
}

// RAILYARD_COLLNET_CHUNK_BYTES: a byte count in range that is also a multiple of 8 (a chunk
// holds whole 8-byte elements, the widest NCCL type); refused here, not rounded down later.
Status ApplyCollnetChunkBytes(const Variable& var, const char* source, std::string_view value,
                              Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseBytesValue(var, source, value, &v));
  if (v % 8 != 0) {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' (" + std::to_string(v) +
                        " bytes) is not a multiple of 8: a chunk holds whole 8-byte elements" + AliasNote(var, source));
  }
  out->collnetChunkBytes = static_cast<std::size_t>(v);
  return Status::Ok();
}

Status ApplyNothing(const Variable&, const char*, std::string_view, Config*) { return Status::Ok(); }

Status ApplyHostName(const Variable&, const char*, std::string_view value, Config* out) {
  out->hostName = std::string(value);
  return Status::Ok();
}

Status ApplyClusterKeyFile(const Variable&, const char*, std::string_view value, Config* out) {
  // The file itself is checked where it is loaded (topology/cluster_key.h).
  out->clusterKeyFile = std::string(value);
  return Status::Ok();
}

Status ApplyFabric(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "on" && v != "off") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' is not one of auto, on, off" + AliasNote(var, source));
  }
  out->fabric = v;
  return Status::Ok();
}

Status ApplyTransport(const Variable& var, const char* source, std::string_view value,
                      Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "verbs" && v != "tcp") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) +
                        "' is not one of auto, verbs, tcp" + AliasNote(var, source));
  }
  out->transport = v;
  return Status::Ok();
}

Status ApplyCollnetShape(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "ring" && v != "chain" && v != "mesh") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) +
                        "' is not one of auto, ring, chain, mesh" + AliasNote(var, source));
  }
  out->collnetShape = v;
  return Status::Ok();
}

Status ApplyComms(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "fabric" && v != "legacy") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' is not one of auto, fabric, legacy" + AliasNote(var, source));
  }
  out->comms = v;
  return Status::Ok();
}

Status ApplyFabricTcpRelay(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "splice" && v != "forwarder") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' is not one of splice, forwarder" + AliasNote(var, source));
  }
  out->fabricTcpRelay = v;
  return Status::Ok();
}

Status ApplyRelayBuffer(const Variable& var, const char* source, std::string_view value,
                        Config* out) {
  std::int64_t v = 0;
  RY_RETURN_IF_ERROR(ParseBytesValue(var, source, value, &v));
  out->relayBufferBytes = static_cast<std::size_t>(v);
  return Status::Ok();
}

Status ApplyHca(const Variable& var, const char* source, std::string_view value, Config* out) {
  // NCCL's forms only, like RAILYARD_SOCKET_IFNAME (env/device_list_syntax.h); kept
  // verbatim (proxy/verbs/hca_filter.h parses it).
  RY_RETURN_IF_ERROR(CheckDeviceListOf(var, source, value));
  out->hca = std::string(value);
  return Status::Ok();
}

Status ApplyAddrFamily(const Variable& var, const char* source, std::string_view value,
                       Config* out) {
  // NCCL 2.28.9 (net_ib.cc envIbAddrFamily) compares exactly and silently takes
  // AF_INET for anything else; Railyard rejects anything else.
  if (value == "AF_INET") {
    out->addrFamily = AF_INET;
  } else if (value == "AF_INET6") {
    out->addrFamily = AF_INET6;
  } else {
    return InvalidUsage(std::string(source) + "='" + std::string(value) +
                        "' is not one of AF_INET, AF_INET6" + AliasNote(var, source));
  }
  return Status::Ok();
}

Status ApplyAddrRange(const Variable& var, const char* source, std::string_view value,
                      Config* out) {
  // "<numeric address>/<bits>", bits within the family's width. NCCL 2.28.9
  // (envIbAddrRange) ignores a malformed range with an INFO line; Railyard rejects it.
  if (value.empty()) {  // the default: any address
    out->addrRange.clear();
    return Status::Ok();
  }
  auto bad = [&] {
    return InvalidUsage(std::string(source) + "='" + std::string(value) +
                        "' is not a CIDR such as 10.0.0.0/16 or fd00::/8" + AliasNote(var, source));
  };
  const std::size_t slash = value.find('/');
  if (slash == std::string_view::npos) return bad();
  const std::string addr(value.substr(0, slash));
  const std::string_view bitsText = value.substr(slash + 1);
  int bits = 0;
  auto [ptr, ec] = std::from_chars(bitsText.data(), bitsText.data() + bitsText.size(), bits);
  if (bitsText.empty() || bitsText.size() > 3 || !std::isdigit(static_cast<unsigned char>(bitsText[0])) ||
      ec != std::errc() ||
      ptr != bitsText.data() + bitsText.size()) {
    return bad();
  }
  unsigned char buf[16];
  if (inet_pton(AF_INET, addr.c_str(), buf) == 1) {
    if (bits > 32) return bad();
  } else if (inet_pton(AF_INET6, addr.c_str(), buf) == 1) {
    if (bits > 128) return bad();
  } else {
    return bad();
  }
  out->addrRange = std::string(value);
  return Status::Ok();
}

Status ApplyXxh3Kernel(const Variable& var, const char* source, std::string_view value, Config* out) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v != "auto" && v != "avx512" && v != "avx2" && v != "sse2" && v != "portable") {
    return InvalidUsage(std::string(source) + "='" + std::string(value) + "' is not one of " + var.accepted +
                        AliasNote(var, source));
  }
  out->xxh3Kernel = v;
  return Status::Ok();
}

Status ApplySwapDir(const Variable&, const char*, std::string_view value, Config* out) {
  out->swapDir = std::string(value);
  return Status::Ok();
}

Status ApplyDebug(const Variable& var, const char* source, std::string_view value, Config* out) {
  return ParseLevelValue(var, source, value, &out->debug);
}

const Variable kVariables[] = {
    {"RAILYARD_SOCKET_IFNAME", "string", "", "", "NCCL_SOCKET_IFNAME",
     "Interfaces, in NCCL_SOCKET_IFNAME syntax (comma list of prefixes; leading ^ excludes, "
     "= matches exact names, in the order ^=; an empty value, or a one-character name such as x, = automatic (NCCL ignores values under 2 characters); "
     "a ^, = or ^= with no name after it, and a ^ or = inside the list, are refused in this variable; read from the NCCL alias they are kept as NCCL reads them, with a WARN). In fabric mode it "
     "chooses the rails among the IPv4 ports that are not loopback: a port that carries a "
     "default route is a rail only when named exactly (=eth0, with a warning), and "
     "NCCL_SOCKET_IFNAME is NOT used for rails (it chooses NCCL's bootstrap network, e.g. "
     "mgmt0): while this variable is unset, the ports NCCL_SOCKET_IFNAME names (not an ^ list) "
     "are never rails, even when only two hosts speak on them. Outside fabric mode (RAILYARD_FABRIC=off, or auto without rails) it chooses "
     "the TCP transport's devices, and NCCL_SOCKET_IFNAME is honoured when it is unset; "
     "automatic = up, non-loopback interfaces with a routable address, except "
     "docker*/virbr*; else lo.",
     0, 0, &ApplySocketIfname, "NCCL_SOCKET_IFNAME syntax"},
    {"RAILYARD_NSOCKS", "int", "2", "", nullptr,
     "Data sockets per connection (the fabric's TCP transport: per rail of an Endpoint). "
     "2 moved more than 4 at every size from 1 MiB on a 2-core host (docs/benchmarks.md, "
     "\"TCP defaults\"); more may pay on hosts with many cores and fast NICs.",
     1, 64, &ApplyInt<&Config::nsocks>},
    {"RAILYARD_NTHREADS", "int", "2", "", nullptr,
     "Helper threads per connection that move the data when the calling thread stops calling "
     "isend/irecv/test for 1 ms (the calling thread moves it otherwise).", 1, 16,
     &ApplyInt<&Config::nthreads>},
    {"RAILYARD_CHUNK_BYTES", "bytes", "8388608", "bytes", nullptr,
     "TCP transport: bytes per striped chunk of a large message (a message is spread over the "
     "sockets chunk by chunk); accepts K, M, G suffixes (powers of 1024).",
     4096, kGiB, &ApplyChunkBytes},
    {"RAILYARD_TIMEOUT_MS", "int", "30000", "ms", nullptr,
     "A request that makes no progress for this long fails. Over the fabric comms' verbs "
     "transport (verbs mode, fabric mode's cable set; not RAILYARD_COMMS=legacy) a connection "
     "also fails when the peer's host stops answering its bootstrap TCP connection for about "
     "this long with nothing under way: a dead host, or a cut of the link that connection runs "
     "on (verbs mode: the RAILYARD_SOCKET_IFNAME interface; the cable set: the cable's first "
     "rail); unless an RDMA completion of that connection came within this long (a saturated "
     "link starves the probes: a WARN, and the connection goes on, watched instead by an RDMA "
     "probe every half of this long while idle). A refused connect (nothing listens yet: a "
     "peer or relay still starting) is dialed again for up to this long, over TCP and verbs "
     "alike. Fabric mode over the fabric comms also waits up to this long at a process's first "
     "init for a first cable neighbour: a host that never hears one (a single-host job, a rail "
     "cabled to nothing that runs Railyard) waits all of it (RAILYARD_FABRIC=off on a single "
     "host, or RAILYARD_COMMS=legacy, avoid it). A snapshot arena's daemon (railyardd "
     "--snapshot-arena) keeps a client's handle open however long it rests between "
     "operations, but drops one that stops for this long in the middle of one (a put "
     "allocated and not committed, a get not yet read), giving its slots back; a put or get "
     "that finds every slot of a paging arena taken by other clients is queued there for one, "
     "first come first served, up to twice this, the daemon telling the client it is queued "
     "every quarter of the shorter of this and the client's own RAILYARD_TIMEOUT_MS (which the "
     "client sends at connect; every 10 ms to 1 s): the client waits while it hears that, and "
     "takes a daemon silent for its own RAILYARD_TIMEOUT_MS as stopped.", 1, kIntMax,
     &ApplyInt<&Config::timeoutMs>},
    {"RAILYARD_ACCEPT_TIMEOUT_MS", "int", "10000", "ms", nullptr,
     "Listener: a socket must deliver its connection record (hello) within this time of "
     "being accepted, and a connection must gain its next socket within it, else its "
     "sockets are closed (strays, idle floods and half-open connections hold nothing for long).",
     10, kIntMax, &ApplyInt<&Config::acceptTimeoutMs>},
    {"RAILYARD_ACCEPT_MAX_PENDING", "int", "256", "", nullptr,
     "Listener: most sockets one listen comm holds before their connection is complete; "
     "further ones wait in the kernel's listen backlog until the timeout frees room.",
     66, 1048576, &ApplyInt<&Config::acceptMaxPending>},
    {"RAILYARD_DEFAULT_SPEED_MBPS", "int", "10000", "Mbps", nullptr,
     "Speed reported for an interface whose sysfs speed is unknown (NCCL's socket "
     "transport uses 10000 too).",
     1, kIntMax, &ApplyInt<&Config::defaultSpeedMbps>},
    {"RAILYARD_DEBUG", "level", "WARN", "", nullptr,
     "Stderr log threshold for standalone tools: NONE, VERSION, WARN, INFO or TRACE "
     "(any case). Inside NCCL, NCCL_DEBUG and NCCL_DEBUG_SUBSYS decide instead; "
     "railyard-perf, which loads the plugin as NCCL does, takes NCCL_DEBUG and this "
     "one when NCCL_DEBUG is unset.",
     0, 0, &ApplyDebug},
    {"RAILYARD_HOST_NAME", "string", "", "", nullptr,
     "Name this host reports to its peers in the cabling graph, railyard-info and error "
     "messages; empty = the system host name.",
     0, 0, &ApplyHostName, "any name"},
    {"RAILYARD_DISCOVERY_PORT", "int", "29517", "", nullptr,
     "UDP port of the cabling protocol (hellos and link-state records on every rail); "
     "the same on every host.",
     1, 65535, &ApplyInt<&Config::discoveryPort>},
    {"RAILYARD_DISCOVERY_INTERVAL_MS", "int", "100", "ms", nullptr,
     "Period of cabling hellos and of re-flooding what a host knows.", 10, 60000,
     &ApplyInt<&Config::discoveryIntervalMs>},
    {"RAILYARD_DISCOVERY_DEAD_MS", "int", "1000", "ms", nullptr,
     "A neighbour, or a host's link-state record, unheard this long is taken as gone "
     "(a cut cable, a dead host). With the fabric comms (fabric mode's default over TCP "
     "rails), once init heard a first neighbour (RAILYARD_TIMEOUT_MS) it waits once more, up "
     "to 3 times this in all and never past RAILYARD_TIMEOUT_MS from its start, for every rail "
     "that is no shared segment to hear its own, so the first listens' addresses hold every "
     "cable; a rail with nobody on it costs that wait at every first init.",
     30, 600000, &ApplyInt<&Config::discoveryDeadMs>},
    {"RAILYARD_CLUSTER_KEY_FILE", "string", "", "", nullptr,
     "File holding the cluster's shared secret (the same file on every host; at least 32 "
     "bytes, e.g. from `openssl rand -hex 32`; not readable by others: chmod 600). With it, "
     "every cabling hello and link-state record and every relay record carries an "
     "HMAC-SHA256 and one without a valid MAC is refused; empty = nothing is "
     "authenticated and every host on a rail is trusted.",
     0, 0, &ApplyClusterKeyFile, "a file path"},
    {"RAILYARD_FABRIC", "enum", "auto", "", nullptr,
     "Fabric mode: the host's rails become one device that reaches every host, over "
     "the cable when there is one and through relays otherwise. auto = on when the "
     "host has rails (IPv4, not loopback, no default route, chosen by "
     "RAILYARD_SOCKET_IFNAME, never by NCCL_SOCKET_IFNAME), "
     "off = one device per interface with direct connections only, on = required.",
     0, 0, &ApplyFabric, "auto, on, off"},
    {"RAILYARD_RELAY_PORT", "int", "29518", "", nullptr,
     "TCP port of the relay (railyardd, or a process using the plugin) on every host; the same "
     "value on every host (not checked: a connect through a relay that listens elsewhere fails "
     "CONNECT_FAILED naming the address it dialed).",
     1, 65535, &ApplyInt<&Config::relayPort>},
    {"RAILYARD_FABRIC_RELAY_PORT", "int", "29519", "", nullptr,
     "TCP port the fabric relay (the Forwarder of relayed fabric Endpoints, run by the "
     "process holding the host's relay seat) listens on, on every rail of every host. "
     "Sources reach a relay only there, and only the seat's holder binds it.",
     1, 65535, &ApplyInt<&Config::fabricRelayPort>},
    {"RAILYARD_FABRIC_TCP_RELAY", "enum", "splice", "", nullptr,
     "How a fabric Endpoint over TCP reaches a host it has no cable to: splice = its sockets go "
     "through the socket relay of the hosts between (RAILYARD_RELAY_PORT), which reads each "
     "socket's relay record, connects onward and copies bytes both ways, so the target checks "
     "every frame as on a cable; forwarder = through the Forwarders at RAILYARD_FABRIC_RELAY_PORT, "
     "which take each operation whole and write it on (slots and credits). Routes over RDMA "
     "ports always go through the Forwarders' verbs ports. A route whose relays would not land "
     "on the target's cable (a tie broken the other way) uses the Forwarders. Set the same value "
     "on every host. A mismatch is not checked at connect: where the two ends' routes differ in "
     "number (a ring's opposite host: the Forwarders spread a peer's ops over both ring "
     "directions, a spliced route takes one) the comm fails at its first message, naming this "
     "variable; where a peer has one route each way (a chain) each direction goes its own host's "
     "way and the job runs (both seen on the netns lanes).",
     0, 0, &ApplyFabricTcpRelay, "splice, forwarder"},
    {"RAILYARD_FABRIC_RELAY_VERBS_PORT", "int", "29522", "", nullptr,
     "TCP port of the fabric relay's RDMA ports: on a cable whose rails are RDMA ports, the "
     "relay host's Forwarder also takes verbs routes, whose QPs are set up through a "
     "listener on the cable's first rail at this port (every leg of such a route is RDMA). "
     "0: the relay takes TCP routes only.",
     0, 65535, &ApplyInt<&Config::fabricRelayVerbsPort>},
    {"RAILYARD_TIER_TUNNEL_PORT", "int", "29520", "", nullptr,
     "TCP port, on every rail, of railyardd's storage-tier tunnels in fabric mode: a client "
     "naming its peer as host:NAME reaches the expert store there and the snapshot arenas "
     "at this port + 1, straight on a cable or through the fabric's relays.",
     1, 65534, &ApplyInt<&Config::tierTunnelPort>},
    {"RAILYARD_RELAY_BUFFER_BYTES", "bytes", "1M", "bytes", nullptr,
     "Buffering per direction per relayed socket: the most a relay holds for a slow "
     "receiver before it stops reading from the sender.",
     65536, kGiB, &ApplyRelayBuffer},
    {"RAILYARD_RELAY_DRAIN_MS", "int", "10000", "ms", nullptr,
     "On SIGTERM railyardd's relay accepts no new socket (its fabric relay Forwarder no new "
     "route) and carries the ones in flight this long, sockets and routes together, before it "
     "closes them (with RST) and exits; it exits as soon as they end. "
     "A rank process that relays closes its relayed sockets at finalize without waiting, and "
     "carries its fabric relay routes up to 2 s (at most this) until their sources close them.",
     0, 3600000, &ApplyInt<&Config::relayDrainMs>},
    {"RAILYARD_RELAY_IDLE_MS", "int", "10000", "ms", nullptr,
     "A socket accepted by a relay that has not sent its relay record and hello within "
     "this time is closed (it holds no buffer meanwhile).",
     100, 3600000, &ApplyInt<&Config::relayIdleMs>},
    {"RAILYARD_RELAY_MAX_PER_PEER", "int", "1024", "", nullptr,
     "Most sockets a relay carries (or is setting up) from one source address; one more is "
     "refused at once with a WARN and a reject record naming this variable (the dialer's error "
     "quotes it).",
     1, 1000000, &ApplyInt<&Config::relayMaxPerPeer>},
    {"RAILYARD_TRANSPORT", "enum", "auto", "", nullptr,
     "Data path: verbs = RDMA (RoCE v2 RC QPs over the ports RAILYARD_HCA selects; required), "
     "tcp = sockets only, auto = verbs when an RDMA port is usable, else tcp. In fabric mode "
     "verbs carries the peers on a cable of RDMA ports; relayed peers go over TCP through the "
     "socket relays with the older comms (the default there), over RDMA through the relay "
     "hosts' Forwarders with RAILYARD_COMMS=fabric. Connection setup always uses TCP sockets "
     "(RAILYARD_SOCKET_IFNAME).",
     0, 0, &ApplyTransport, "auto, verbs, tcp"},
    {"RAILYARD_COMMS", "enum", "auto", "", nullptr,
     "Which NCCL comms carry the traffic: fabric = the comms written once over the fabric's "
     "one-sided Endpoint (proxy/nccl: clear-to-send and data are Writes with immediate) in "
     "every mode: plain TCP mode, verbs mode (one verbs Domain per NCCL device) and fabric mode "
     "(RAILYARD_FABRIC: over the host's cable set, cabled peers straight over the cable's rails, "
     "the others relayed as RAILYARD_FABRIC_TCP_RELAY says: spliced through the socket relays by "
     "default; RDMA cables relayed through the Forwarders' verbs ports); legacy = the older "
     "comms of proxy/tcp and proxy/verbs (fabric mode: the socket relay's planned routes, "
     "relayed peers over TCP); auto = fabric, except in fabric mode on a host with any "
     "usable RDMA port (RAILYARD_HCA, RAILYARD_TRANSPORT not tcp; on a rail or not), which "
     "keeps the older comms: over RDMA the fabric comms pass every soft-RoCE ring test but "
     "ran at 0.46-0.81 of the older comms' speed there (docs/benchmarks.md). Both ends must "
     "use the same value: where hosts differ in RDMA ports, set fabric or legacy explicitly "
     "on every host. Plain TCP mode with a socket device that is not IPv4 keeps the older "
     "comms even with fabric (the fabric's TCP transport binds IPv4 only; a WARN says so). "
     "Init logs the choice and its reason at INFO (\"Railyard NCCL comms: ...\"); "
     "railyard-info's Mode section prints the same.",
     0, 0, &ApplyComms, "auto, fabric, legacy"},
    {"RAILYARD_HCA", "string", "", "", "NCCL_IB_HCA",
     "Verbs transport: RDMA devices and ports to use, in NCCL_IB_HCA syntax "
     "(comma list of name[:port]; leading ^ excludes, = matches exact names, in the order ^=; "
     "a ^, = or ^= with no name after it, a ^ or = inside the list, and a port that is not 1..255, are refused in this variable; read from the NCCL alias they are kept as NCCL reads them, with a WARN). Unlike NCCL, a "
     "prefix never matches a longer number: mlx5_1 selects mlx5_1 but not mlx5_11, while mlx5 "
     "selects every mlx5_N. Empty = every device with an active port and a usable GID.",
     0, 0, &ApplyHca, "NCCL_IB_HCA syntax (prefixes never match a longer number)"},
    {"RAILYARD_GID_INDEX", "int", "-1", "", "NCCL_IB_GID_INDEX",
     "Verbs transport: GID table index used as the QP source GID on every "
     "device; -1 = automatic per device (RoCE v2 with an IPv4-mapped address first). "
     "Indexes differ between hosts, so prefer automatic.",
     -1, 255, &ApplyInt<&Config::gidIndex>},
    {"RAILYARD_ROCE_VERSION", "int", "2", "", "NCCL_IB_ROCE_VERSION_NUM",
     "Verbs transport: RoCE version the automatic GID choice prefers.", 1, 2,
     &ApplyInt<&Config::roceVersion>},
    {"RAILYARD_ADDR_FAMILY", "enum", "AF_INET", "", "NCCL_IB_ADDR_FAMILY",
     "Verbs transport: address family the automatic GID choice prefers: "
     "AF_INET (IPv4-mapped GIDs) or AF_INET6 (native IPv6 GIDs).",
     0, 0, &ApplyAddrFamily, "AF_INET, AF_INET6"},
    {"RAILYARD_ADDR_RANGE", "string", "", "", "NCCL_IB_ADDR_RANGE",
     "Verbs transport: CIDR (e.g. 10.0.0.0/16 or fd00::/8, same family as "
     "RAILYARD_ADDR_FAMILY) the automatically chosen GID must fall in; empty = any address.",
     0, 0, &ApplyAddrRange, "a CIDR, e.g. 10.0.0.0/16"},
    {"RAILYARD_TC", "int", "-1", "", "NCCL_IB_TC",
     "Verbs transport: GRH traffic class of the QPs (RoCE: DSCP << 2); -1 = "
     "NCCL's per-communicator trafficClass when defined, else 0.",
     -1, 255, &ApplyInt<&Config::trafficClass>},
    {"RAILYARD_SL", "int", "-1", "", "NCCL_IB_SL",
     "Verbs transport: service level of the QPs; -1 = NCCL's "
     "per-communicator trafficClass when defined (and at most 15), else 0.",
     -1, 15, &ApplyInt<&Config::serviceLevel>},
    {"RAILYARD_IB_TIMEOUT", "int", "20", "exponent", "NCCL_IB_TIMEOUT",
     "Verbs transport: QP ACK timeout exponent: a retry after 4.096 us x "
     "2^value (20 = about 4.3 s); 0 = wait forever.",
     0, 31, &ApplyInt<&Config::ibTimeout>},
    {"RAILYARD_IB_RETRY_CNT", "int", "7", "", "NCCL_IB_RETRY_CNT",
     "Verbs transport: QP transport retry count before a send fails.", 0, 7,
     &ApplyInt<&Config::ibRetryCnt>},
    {"RAILYARD_QPS_PER_CONN", "int", "1", "", "NCCL_IB_QPS_PER_CONNECTION",
     "Verbs transport: data QPs per connection and device (the larger side's "
     "count is used, at most 128 in all).",
     1, 128, &ApplyInt<&Config::qpsPerConn>},
    {"RAILYARD_IB_USE_INLINE", "int", "1", "", "NCCL_IB_USE_INLINE",
     "Verbs transport: 1 = send protocol records (clear-to-send, completion) as inline "
     "data when the device allows it, 0 = always from a registered buffer.",
     0, 1, &ApplyInt<&Config::ibUseInline>},
    {"RAILYARD_STRIPE_THRESHOLD_BYTES", "bytes", "64K", "bytes", nullptr,
     "Fabric layer (proxy/fabric): a one-sided Write or Read of more bytes than this is cut "
     "into chunks striped over every rail of the endpoint, weighted by rail speed; smaller ones "
     "go whole on one rail. Accepts K, M, G suffixes.",
     0, kGiB, &ApplyBytes<&Config::stripeThresholdBytes>},
    {"RAILYARD_STRIPE_CHUNK_BYTES", "bytes", "512K", "bytes", nullptr,
     "Fabric layer: most bytes in one chunk of a Write or Read (any larger op is cut into "
     "chunks of this size, spread over the rails' sockets); accepts K, M, G suffixes. The verbs transport cuts Writes into "
     "chunks of at least 4 MiB (the port's max_msg_sz caps them) and Reads into chunks of at "
     "most 256 KiB.",
     4096, 64 * 1024 * 1024, &ApplyBytes<&Config::stripeChunkBytes>},
    {"RAILYARD_STRIPE_CHUNKS_PER_RAIL", "int", "4", "", nullptr,
     "Fabric layer: chunks queued on one rail and not yet sent, at most; further chunks wait "
     "for room (or take a faster rail). The verbs transport's bound for Write chunks is "
     "the larger of this and 64 (for Read chunks, this).",
     1, 1024, &ApplyInt<&Config::stripeChunksPerRail>},
    {"RAILYARD_LIB", "string", "", "", nullptr,
     "Path of libnccl-net-railyard.so for the Python binding (python/railyard/_lib.py "
     "loads it before the build directory and the loader path); the library itself ignores it.",
     0, 0, &ApplyNothing, "a path"},
    {"RAILYARD_EXPERT_PIN_CAP", "bytes", "16G", "bytes", nullptr,
     "Expert store peer (railyardd --expert-store): most bytes all client connections together "
     "may make it pin (the layer files registered for remote read, once, plus one record-sized "
     "buffer per TCP client); a connection that would go over is refused at connect with "
     "ADMISSION_REFUSED. 0 = no cap; at most 1048576G (1 PiB). Accepts K, M, G suffixes.",
     0, kGiB * 1024 * 1024, &ApplyBytes<&Config::expertPinCapBytes>,
     "0 (no cap) or 1..1125899906842624 bytes (1..1048576G, 1 PiB)"},
    {"RAILYARD_SWAP_DIR", "string", "", "", nullptr,
     "Snapshot tier (storage/snapshot): directory of the paging arenas' swap files "
     "(railyard-snapshot-<kind>.swap), on the serving host's local disk. Cold blobs are evicted "
     "there (least recently used first) and faulted back on get; a full disk fails the put that "
     "hit it. Empty = no swap: a paging arena refuses to start.",
     0, 0, &ApplySwapDir, "a directory path"},
    {"RAILYARD_SWAP_SYNC", "int", "0", "", nullptr,
     "Snapshot tier: 1 = a committed blob is written through to the swap file and fdatasync'ed "
     "before the put returns, and survives a restart of the serving process (the index is rebuilt "
     "from the file; records torn by a crash fail their checksum (XXH3-64) and are dropped, never "
     "served). 0 = the swap file is a cache only and starts empty; a swap file that an arena "
     "with 1 kept is refused (not emptied) until it is set to 1 again or the file is moved away, "
     "and a start with 1 empties a file only arenas with 0 kept (they do not tombstone removed blobs), "
     "whatever its blob size, and refuses one an arena with 1 kept for another blob size; "
     "a swap file of an older format is refused by either, naming its version (version 1, which cannot "
     "say which kept it; version 2 when a sync arena kept it: its checksums are of another kind), "
     "except a cache-only version-2 file, which either empties.",
     0, 1, &ApplyInt<&Config::swapSync>},
    {"RAILYARD_XXH3_KERNEL", "enum", "auto", "", nullptr,
     "Both tiers' checksum (XXH3-64, the same value from every kernel): the vector code that "
     "computes it. auto = the widest this CPU runs (AVX-512F, else AVX2, else the build's own: "
     "SSE2 on x86-64, NEON on aarch64); a named kernel the CPU cannot run is warned about and "
     "auto used. For a CPU that lowers its clock under AVX-512 (Skylake-SP) while other work "
     "shares its cores: avx2. The kernel in use is logged at INFO (RAILYARD_DEBUG=INFO).",
     0, 0, &ApplyXxh3Kernel, "auto, avx512, avx2, sse2, portable"},
    {"RAILYARD_COLLNET_CHUNK_BYTES", "bytes", "512K", "bytes", nullptr,
     "CollNet collectives: bytes of one pipelined ring chunk, the size of one staging slot "
     "(the same on every rank: connect checks it); a multiple of 8. Accepts K, M, G suffixes.",
     4096, 64 * 1024 * 1024, &ApplyCollnetChunkBytes},
    {"RAILYARD_COLLNET_SLOTS", "int", "8", "", nullptr,
     "CollNet collectives: staging slots per ring direction, i.e. chunks a rank may have in "
     "flight to its neighbour before credits return (the same on every rank).",
     2, 1024, &ApplyInt<&Config::collnetSlots>},
    {"RAILYARD_COLLNET_SMALL_BYTES", "bytes", "64K", "bytes", nullptr,
     "CollNet collectives: an allreduce of at most this many bytes runs one-shot (every rank's "
     "input travels to every rank along the cabling and each rank reduces them in rank order: the "
     "fewest latency steps); larger ones run the shape's algorithm. 0 = never one-shot. The same on "
     "every rank. Accepts K, M, G suffixes.",
     0, 512 * 1024 * 1024, &ApplyBytes<&Config::collnetSmallBytes>},
    {"RAILYARD_COLLNET_SHAPE", "enum", "auto", "", nullptr,
     "CollNet collectives: the cabling shape the algorithms follow. auto = from the connect "
     "handles: in fabric mode two ranks are cabled when each one's cabling agent lists the "
     "other's host as a neighbour; otherwise when a rail of each lies in one IPv4 subnet (the "
     "rails' own prefix lengths, TCP or verbs); every pair cabled is a mesh (direct "
     "reduce-scatter + all-gather), a cycle a ring (both directions, in cable order), a path a "
     "chain (pipelined both ways along it); auto falls back to a ring in rank order when the "
     "handles tell nothing, and in fabric mode when the ranks' own cables form no shape (ranks "
     "on hosts with no cable between them: the relays carry those hops). ring, chain, mesh "
     "force the shape in rank order. The same "
     "on every rank (connect checks it).",
     0, 0, &ApplyCollnetShape, "auto, ring, chain, mesh"},
};

}  // namespace

std::span<const Variable> Variables() { return kVariables; }

}  // namespace railyard::env
