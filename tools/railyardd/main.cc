// railyardd: Railyard's per-host service. It discovers the cabling (hello and
// flooding on every rail, see topology/cabling_agent.h) and, when it runs, is the
// host's relay for connections between hosts with no cable (proxy/relay). With
// --snapshot-arena it also serves the snapshot tier's arenas (tools/railyardd/
// snapshot_serve.h; --snapshot-only serves nothing else). Serving either with discovery,
// it also serves them to clients naming this host "host:NAME" through the fabric's
// relays (tools/railyardd/tier_tunnels.h), once the cabling graph has settled.
//
// Serve mode prints the graph (JSON, or --text) each time what it says changes
// (hosts, names, rail-links; not a mere refresh; at most once a second, the latest
// graph then), and one stderr line each time the cluster's shape changes.
//
// Test and inspection mode: --wait-hosts N prints the graph as JSON once N hosts
// are known and the graph has been stable for --settle-ms, lingers --linger-ms so
// slower peers converge too, and exits 0 (1 on --timeout-ms).
#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "env/config.h"
#include "env/device_list_syntax.h"
#include "env/log.h"
#include "plugin/expert_domain.h"
#include "plugin/tier_route.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/process_domain.h"
#include "proxy/fabric/relay/seat_forwarder.h"
#include "proxy/relay/relay_seat.h"
#include "proxy/relay/relay_service.h"
#include "storage/expert/expert_server.h"
#include "tools/railyardd/rail_watch.h"
#include "storage/expert/expert_wire.h"
#include "topology/cabling_agent.h"
#include "topology/cluster_key.h"
#include "topology/graph_json.h"
#include "topology/loopback_rail.h"
#include "topology/netdev.h"
#include "topology/utf8_name.h"
#include "tools/railyardd/snapshot_serve.h"
#include "tools/railyardd/tier_tunnels.h"
#include "tools/common/cli_parse.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string SystemHostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

/// True when two graphs say the same: hosts, their names and the rail-links.
bool SameGraph(const railyard::topology::ClusterGraph& x, const railyard::topology::ClusterGraph& y) {
  if (x.Hosts() != y.Hosts() || x.Links() != y.Links()) return false;
  for (uint64_t h : x.Hosts()) {
    if (x.HostName(h) != y.HostName(h)) return false;
  }
  return true;
}

/// The expert store's control port when --expert-listen names none.
constexpr uint16_t kDefaultExpertPort = 29431;

/// Where the expert store's control socket binds, from --expert-listen (`listen`, "" when
/// the flag is absent) and the expert Domain's rails:
///   ""       the first rail's IPv4 address (the interfaces --ifname or RAILYARD_SOCKET_IFNAME name), or
///            127.0.0.1 when there is none (the variable unset: the Domain is loopback only),
///            port 29431: never every interface unasked;
///   ":P"     that same address, port P (0: ephemeral);
///   "A:P"    A and P as given; 0.0.0.0 is how an operator asks for every interface.
/// `why` says which rule chose the address, for the "listening on" line, naming
/// `filterSource` ("RAILYARD_SOCKET_IFNAME" or "--ifname") and its value `filter` as
/// what chose the rails.
/// InvalidArgument naming the flag for a malformed value.
railyard::Status ResolveExpertListen(const std::string& listen, const railyard::fabric::Domain& domain,
                                     const std::string& filter, const std::string& filterSource, std::string* address,
                                     uint16_t* port, std::string* why) {
  std::string rail;
  for (const railyard::fabric::RailInfo& r : domain.rails()) {
    if (!r.address.empty()) {
      rail = r.address;
      break;
    }
  }
  const std::string safe = rail.empty() ? "127.0.0.1" : rail;
  // New-user trial: "--ifname is unset or names only lo" was said of --ifname '^eth0'.
  const std::string loopbackWhy = filter.empty() ? "loopback: " + filterSource + " is unset"
                                                 : "loopback: " + filterSource + " '" + filter + "' leaves only lo";
  const std::string safeWhy =
      safe.rfind("127.", 0) == 0 ? loopbackWhy : "the first rail's address (" + filterSource + ")";
  const std::string widen = "; --expert-listen 0.0.0.0:PORT serves every interface";
  if (listen.empty()) {
    *address = safe;
    *port = kDefaultExpertPort;
    *why = safeWhy + widen;
    return railyard::Status::Ok();
  }
  std::string host;
  if (!railyard::expert::ParseHostPort(listen.front() == ':' ? safe + listen : listen, &host, port, /*allowZero=*/true).ok()) {
    return railyard::InvalidArgument("--expert-listen '" + listen + "': expected IPv4ADDRESS:PORT or :PORT (port 0..65535, 0: any)");
  }
  if (listen.front() == ':') {
    *address = safe;
    *why = safeWhy + widen;
    return railyard::Status::Ok();
  }
  *address = host;
  *why = *address == "0.0.0.0" ? "every interface, as --expert-listen asks" : "--expert-listen";
  return railyard::Status::Ok();
}

/// Opens the store in `dir`, creates the expert tier's Domain (on cfg.railIfname's
/// interfaces, which `filterSource` set) and Worker and starts serving where
/// ResolveExpertListen(listen) says; prints where to stderr.
railyard::Status StartExpertStore(const railyard::env::Config& cfg, const std::string& filterSource,
                                  const std::string& dir, const std::string& listen,
                                  bool verify, std::unique_ptr<railyard::fabric::Domain>* domain,
                                  std::unique_ptr<railyard::fabric::Worker>* worker,
                                  std::unique_ptr<railyard::expert::ExpertServer>* server) {
  using namespace railyard;
  expert::ServerOptions o;
  o.pinCapBytes = cfg.expertPinCapBytes;
  o.timeoutMs = cfg.timeoutMs;
  std::unique_ptr<expert::Store> store;
  RY_RETURN_IF_ERROR(expert::Store::Open(dir, verify, &store));
  const expert::Manifest m = store->manifest();
  RY_RETURN_IF_ERROR(plugin::CreateExpertDomain(cfg, domain));
  std::string why;
  RY_RETURN_IF_ERROR(ResolveExpertListen(listen, **domain, cfg.railIfname, filterSource, &o.listenAddress, &o.port, &why));
  RY_RETURN_IF_ERROR((*domain)->CreateWorker(worker));
  const uint64_t storeBytes = store->TotalBytes();
  RY_RETURN_IF_ERROR(expert::ExpertServer::Start(std::move(store), domain->get(), worker->get(), o, server));
  // A cap that can never admit a client is said at start, not at every refusal (new-user trial).
  if (o.pinCapBytes > 0 && o.pinCapBytes < m.recordStride) {
    std::fprintf(stderr, "railyardd: warning: RAILYARD_EXPERT_PIN_CAP=%llu is below one record stride (%llu bytes): "
                         "every expert client will be refused\n",
                 static_cast<unsigned long long>(o.pinCapBytes), static_cast<unsigned long long>(m.recordStride));
  } else if (o.pinCapBytes > 0 && o.pinCapBytes < storeBytes) {
    std::fprintf(stderr, "railyardd: warning: RAILYARD_EXPERT_PIN_CAP=%llu is below the store's %llu bytes: read clients "
                         "will be refused (tcp clients pin one record stride each)\n",
                 static_cast<unsigned long long>(o.pinCapBytes), static_cast<unsigned long long>(storeBytes));
  }
  std::fprintf(stderr, "railyardd: expert store %s (%s: %zu layer%s x %llu experts, %llu-byte records) listening on %s:%u (%s)\n",
               dir.c_str(), m.modelId.c_str(), m.layers.size(), m.layers.size() == 1 ? "" : "s",
               static_cast<unsigned long long>(m.expertsPerLayer),
               static_cast<unsigned long long>(m.recordStride), o.listenAddress.c_str(), (*server)->port(), why.c_str());
  return Status::Ok();
}

/// Run's answer when the rails changed under a serving daemon: main starts the binary
/// again on them (tools/railyardd/rail_watch.h).
constexpr int kRestartOnNewRails = -1;

/// railyardd itself: an exit status, or kRestartOnNewRails once everything it started
/// has stopped.
int Run(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  const int rc = Run(argc, argv);
  if (rc != kRestartOnNewRails) return rc;
  if (g_stop) return 0;  // SIGTERM/SIGINT during the drain: stop, do not start again
  // Everything Run started is stopped and closed (its sockets, the seat, the threads):
  // the same binary, the same arguments, the same pid (a systemd unit keeps tracking it).
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "railyardd: cannot restart itself on the new rails: execv failed: %s\n", std::strerror(errno));
  return 2;
}

namespace {

int Run(int argc, char** argv) {
  using namespace railyard;
  CLI::App app{"railyardd: Railyard per-host service (cabling discovery, relaying)"};
  // A flag given twice takes its last value, as railyard-perf's do (new-user trial: one
  // tool refused what the other took); --snapshot-arena still collects every one.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string ifname, hostName;
  topology::AgentOptions agent;
  int waitHosts = 0, settleMs = 500, lingerMs = 1000, timeoutMs = 20000;
  bool text = false, noRelay = false;
  uint16_t relayPort = 0;
  std::string expertStore, expertListen;  // "": ResolveExpertListen's safe default
  bool expertOnly = false, expertVerify = false;
  app.add_option("--ifname", ifname, "rail filter in NCCL_SOCKET_IFNAME grammar, for the fabric and the tiers alike (default RAILYARD_SOCKET_IFNAME)");
  app.add_option("--host-name", hostName, "name this host reports (default RAILYARD_HOST_NAME, else the host name)");
  app.add_option("--port", agent.port, "UDP port of the cabling protocol")->check(tools::InRange(1, 65535));
  app.add_option("--interval-ms", agent.intervalMs, "hello period (ms)")->check(tools::InRange(10, 60000));
  app.add_option("--dead-ms", agent.deadIntervalMs, "neighbour timeout (ms)")->check(tools::InRange(30, 600000));
  app.add_option("--wait-hosts", waitHosts,
                 "print the graph once this many hosts are known, then exit (0 = serve, printing every change)")
      ->check(tools::InRange(0, 4096));
  app.add_option("--settle-ms", settleMs, "with --wait-hosts: graph unchanged this long (ms)")
      ->check(tools::InRange(0, 600000));
  app.add_option("--linger-ms", lingerMs, "with --wait-hosts: keep serving this long after printing (ms)")
      ->check(tools::InRange(0, 600000));
  app.add_option("--timeout-ms", timeoutMs, "with --wait-hosts: give up after (ms)")->check(tools::InRange(1, 3600000));
  app.add_flag("--text", text, "print the graph as text instead of JSON");
  app.add_option("--relay-port", relayPort, "TCP port of the relay (default RAILYARD_RELAY_PORT)")
      ->check(tools::InRange(1, 65535));
  tools::SnapshotFlags snapshot;
  bool snapshotOnly = false;
  app.add_option("--snapshot-arena", snapshot.arenas,
                 "serve a snapshot arena: kind=NAME,mode=raw|paging,blob=BYTES,slots=N (raw: max=BYTES instead of "
                 "slots lets the first client size it; repeat for several kinds; paging arenas swap to RAILYARD_SWAP_DIR)");
  app.add_option("--snapshot-address", snapshot.address, "IPv4 address of the snapshot control port (default: the first rail's, or 127.0.0.1 with no rail: --ifname and RAILYARD_SOCKET_IFNAME unset)");
  app.add_option("--snapshot-port", snapshot.port, "TCP port of the snapshot control channel (default: ephemeral; either way stdout gets the line `snapshot-port N` for scripts to read, before the graph, and stderr the address and port for people)")
      ->check(tools::InRange(0, 65535));  // a range, not CLI11's bare "could not be converted" (new-user trial)
  std::string swapDir;
  app.add_option("--swap-dir", swapDir, "directory of the paging arenas' swap files: sets RAILYARD_SWAP_DIR (the flag wins; "
                 "errors name the variable)");
  app.add_flag("--snapshot-only", snapshotOnly, "serve the snapshot arenas (and the --expert-store, when given) with no "
               "discovery and no relay");
  app.add_flag("--no-relay", noRelay, "discover only; do not relay (with --wait-hosts: an inspection run, which takes no daemon seat)");
  app.add_option("--expert-store", expertStore, "serve the expert store in this directory (railyard-pack builds one)");
  app.add_option("--expert-listen", expertListen, "with --expert-store: IPv4 ADDRESS:PORT of its control socket, or :PORT (port 0: any). Default: the "
                 "first rail's address (--ifname, else RAILYARD_SOCKET_IFNAME), 127.0.0.1 when neither is set, port 29431; "
                 "0.0.0.0:PORT serves every interface. Stdout gets one line, `expert-port N`, for scripts");
  app.add_flag("--expert-only", expertOnly, "with --expert-store: serve the store (and the --snapshot-arena ones, when "
               "given) with no discovery, no relay and no daemon seat");
  app.add_flag("--expert-verify", expertVerify, "with --expert-store: check every record's checksum before serving");
  app.footer(
      "Exit status: 0 stopped by SIGTERM/SIGINT/SIGHUP (serve), or the graph printed (--wait-hosts); 1 --wait-hosts\n"
      "timed out or was interrupted (the graph so far is printed); 2 usage or configuration error (a bad flag or\n"
      "RAILYARD_* value, an unusable cluster key, an expert store that cannot be served, another railyardd on\n"
      "this host); 3 no rail: no port qualifies now (at boot the rails' addresses may come later: the systemd\n"
      "unit starts it again).");
  if (std::optional<int> exitNow = tools::ParseCommandLine(app, argc, argv, "railyardd")) return *exitNow;

  if (Status s = env::CheckDeviceListSyntax(ifname, "--ifname"); !s.ok()) {
    std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
    return 2;
  }
  // Before the configuration is read, which every arena (and the tier tunnel's) takes it from.
  if (!swapDir.empty()) ::setenv("RAILYARD_SWAP_DIR", swapDir.c_str(), 1);
  const env::Config* cfg = nullptr;
  if (Status s = env::Load(&cfg); !s.ok()) {
    std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
    return 2;
  }
  log::SetStderrLevel(cfg->debug);
  {
    const bool given = !hostName.empty();
    const std::string raw = given ? hostName : cfg->hostName.empty() ? SystemHostName() : cfg->hostName;
    const std::string what = given ? "--host-name" : cfg->hostName.empty() ? "the system host name" : "RAILYARD_HOST_NAME";
    bool truncated = false;
    if (Status s = topology::CheckLocalName(raw, what, &hostName, &truncated); !s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
      return 2;
    }
    if (truncated) {
      std::fprintf(stderr, "railyardd: %s is longer than %zu bytes; peers see it as '%s'\n", what.c_str(),
                   topology::kMaxHostNameBytes, hostName.c_str());
    }
  }
  if (Status s = topology::LoadClusterKey(cfg->clusterKeyFile, &agent.key); !s.ok()) {
    std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
    return 2;
  }
  if (app.count("--port") == 0) agent.port = static_cast<uint16_t>(cfg->discoveryPort);
  if (app.count("--interval-ms") == 0) agent.intervalMs = cfg->discoveryIntervalMs;
  if (app.count("--dead-ms") == 0) agent.deadIntervalMs = cfg->discoveryDeadMs;
  if (agent.deadIntervalMs <= agent.intervalMs) {  // as env::CheckCombinations, for the flags
    std::fprintf(stderr, "railyardd: the neighbour timeout (--dead-ms / RAILYARD_DISCOVERY_DEAD_MS = %d) must be "
                         "larger than the hello period (--interval-ms / RAILYARD_DISCOVERY_INTERVAL_MS = %d)\n",
                 agent.deadIntervalMs, agent.intervalMs);
    return 2;
  }
  if (relayPort != 0) {
    // The flag stands for RAILYARD_RELAY_PORT: the same rule that every rail port is its
    // own (new-user trial: --relay-port 29519, the fabric relay's port, was taken, and
    // the fabric relay then failed to bind, blaming "another process").
    env::Config withFlag = *cfg;
    withFlag.relayPort = relayPort;
    if (Status s = env::CheckCombinations(withFlag); !s.ok()) {
      std::fprintf(stderr, "railyardd: --relay-port %u (it stands for RAILYARD_RELAY_PORT): %s\n", relayPort,
                   s.message().c_str());
      return 2;
    }
  }
  // Flags that need another flag are refused first, before the rails are looked at.
  if (waitHosts == 0) {
    // --settle-ms, --linger-ms and --timeout-ms shape only a --wait-hosts run (new-user
    // trial: they were ignored without a word, where --expert-listen alone is refused).
    for (const char* flag : {"--settle-ms", "--linger-ms", "--timeout-ms"}) {
      if (app.count(flag) > 0) {
        std::fprintf(stderr, "railyardd: %s needs --wait-hosts N\n", flag);
        return 2;
      }
    }
  }
  if (app.count("--expert-store") > 1) {  // took the last one silently (new-user trial)
    std::fprintf(stderr,
                 "railyardd: --expert-store given %zu times: one daemon serves one expert store (run another "
                 "railyardd --expert-only with its own --expert-listen port for a second)\n",
                 app.count("--expert-store"));
    return 2;
  }
  if (app.count("--expert-listen") > 0 && expertListen.empty()) {  // it meant the default, silently (new-user trial)
    std::fprintf(stderr, "railyardd: --expert-listen needs ADDRESS:PORT or :PORT (leave it out for the default)\n");
    return 2;
  }
  if (expertStore.empty() && (expertOnly || expertVerify || app.count("--expert-listen") > 0)) {
    // --expert-listen / --expert-verify alone used to be ignored without a word.
    std::fprintf(stderr, "railyardd: %s needs --expert-store DIR\n",
                 expertOnly ? "--expert-only" : expertVerify ? "--expert-verify" : "--expert-listen");
    return 2;
  }
  if (snapshot.arenas.empty() && (snapshotOnly || app.count("--snapshot-port") > 0 || app.count("--snapshot-address") > 0)) {
    // --snapshot-port / --snapshot-address alone used to be ignored without a word (new-user trial).
    std::fprintf(stderr, "railyardd: %s needs at least one --snapshot-arena\n",
                 snapshotOnly ? "--snapshot-only" : app.count("--snapshot-port") > 0 ? "--snapshot-port" : "--snapshot-address");
    return 2;
  }
  if (!swapDir.empty()) {
    // (New-user trial: a --swap-dir, even one that does not exist, was taken without a
    // word where no arena would ever use it.)
    bool paging = false;
    for (const std::string& arenaText : snapshot.arenas) {
      storage::snapshot::ArenaSpec spec;
      paging |= storage::snapshot::ParseArenaSpec(arenaText, &spec).ok() && spec.mode == storage::snapshot::Mode::kPaging;
    }
    if (!paging) {
      std::fprintf(stderr, "railyardd: warning: --swap-dir %s has no effect: no --snapshot-arena is a paging one "
                   "(mode=paging), and only those swap\n", swapDir.c_str());
    }
  }
  if (expertOnly || snapshotOnly) {
    // A tier served alone runs no discovery and no relay: their flags would be ignored
    // without a word (new-user trial), so they are refused. --ifname is not among them:
    // it chooses the tiers' rails too.
    for (const char* flag : {"--host-name", "--port", "--interval-ms", "--dead-ms", "--wait-hosts",
                             "--settle-ms", "--linger-ms", "--timeout-ms", "--text", "--relay-port", "--no-relay"}) {
      if (app.count(flag) > 0) {
        std::fprintf(stderr, "railyardd: %s has no effect with %s (a tier served alone runs no discovery and no relay)\n",
                     flag, expertOnly ? "--expert-only" : "--snapshot-only");
        return 2;
      }
    }
  }
  if (waitHosts > 0 && settleMs >= timeoutMs) {
    // The graph could never be unchanged for --settle-ms before the deadline (it used to
    // be reported settled when the deadline cut the wait short).
    std::fprintf(stderr, "railyardd: --settle-ms %d%s must be less than --timeout-ms %d%s\n", settleMs,
                 app.count("--settle-ms") > 0 ? "" : " (the default)", timeoutMs,
                 app.count("--timeout-ms") > 0 ? "" : " (the default)");
    return 2;
  }
  {
    // Every TCP port this daemon will listen on is its own: the relay's, the snapshot
    // control channel's and the expert store's (new-user trial: the same port given to
    // two of them failed later with "address in use", blaming another process).
    struct Port {
      const char* what;
      unsigned port;
    };
    std::vector<Port> ports;
    if (!expertOnly && !snapshotOnly && !noRelay) {
      ports.push_back({"the relay port", relayPort != 0 ? relayPort : static_cast<unsigned>(cfg->relayPort)});
      ports.push_back({"the fabric relay port (RAILYARD_FABRIC_RELAY_PORT)", static_cast<unsigned>(cfg->fabricRelayPort)});
    }
    if (!snapshot.arenas.empty() && snapshot.port != 0) ports.push_back({"--snapshot-port", snapshot.port});
    if (!expertStore.empty() && !expertListen.empty()) {
      const size_t colon = expertListen.rfind(':');
      const unsigned long p = colon == std::string::npos ? 0 : std::strtoul(expertListen.c_str() + colon + 1, nullptr, 10);
      if (p > 0 && p <= 65535) ports.push_back({"--expert-listen", static_cast<unsigned>(p)});
    }
    for (size_t i = 0; i < ports.size(); ++i) {
      for (size_t j = i + 1; j < ports.size(); ++j) {
        if (ports[i].port == ports[j].port) {
          std::fprintf(stderr, "railyardd: %s and %s are both TCP port %u; give each its own\n", ports[i].what,
                       ports[j].what, ports[i].port);
          return 2;
        }
      }
    }
  }
  // The rails, before any listener is announced: without one the daemon (neither --expert-only
  // nor --snapshot-only) stops, and a "listening on" line printed first read as if it served.
  std::vector<proxy::FabricRail> rails;
  const std::string railFilter = ifname.empty() ? cfg->railIfname : ifname;
  const std::string railFilterSource = ifname.empty() ? "RAILYARD_SOCKET_IFNAME" : "--ifname";
  // The interfaces as they are before the rails are chosen: a change from here on is
  // taken by a restart (tools/railyardd/rail_watch.h).
  tools::RailWatch railWatch(railFilter, railFilterSource, cfg->defaultSpeedMbps,
                             proxy::BootstrapIfname(railFilter, cfg->socketIfname));
  if ((expertOnly || snapshotOnly) && !ifname.empty()) {
    // A tier served alone takes its rails from --ifname too: one that names no IPv4
    // interface is said in its own words (new-user trial: the tier's Domain blamed
    // RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, which nobody had set).
    std::vector<topology::NetDevice> devs;
    Status s = topology::SelectSocketDevices(ifname, &devs, "/sys", "--ifname");
    if (s.ok() && runtime::TcpRailsOf(devs, 1, 0).empty()) {
      s = InvalidUsage("--ifname '" + ifname + "' names no interface with an IPv4 address");
    }
    // Over verbs (RAILYARD_TRANSPORT=verbs, or auto on a host with RDMA ports) the
    // tiers' rails are the ports', which --ifname does not choose: said, not refused
    // (review: an IPv6-only ib0 served over verbs before this check).
    if (!s.ok() && cfg->transport != "tcp") {
      std::fprintf(stderr, "railyardd: warning: %s (the tiers use --ifname only over TCP: RAILYARD_TRANSPORT=%s)\n",
                   s.message().c_str(), cfg->transport.c_str());
    } else if (!s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
      return 2;
    }
  }
  if (!expertOnly && !snapshotOnly) {
    std::string whyNone;  // rails follow RAILYARD_SOCKET_IFNAME (or --ifname), never NCCL_SOCKET_IFNAME
    if (Status s = proxy::SelectFabricRails(railFilter, cfg->defaultSpeedMbps, &rails, &whyNone, railFilterSource,
                                            proxy::BootstrapIfname(railFilter, cfg->socketIfname));
        !s.ok()) {
      std::fprintf(stderr, "railyardd: rail discovery failed: %s\n", s.message().c_str());
      return 2;
    }
    if (rails.empty()) {
      // A host with no cable may still serve a tier (a single-machine trial): say how.
      std::string hint;
      if (!expertStore.empty() || !snapshot.arenas.empty()) {
        const bool both = !expertStore.empty() && !snapshot.arenas.empty();
        hint = std::string("; to serve only the ") +
               (both ? "expert store and snapshot arenas" : !expertStore.empty() ? "expert store" : "snapshot arenas") +
               " without cabling discovery or relaying, add " +
               (both ? "--expert-only --snapshot-only" : !expertStore.empty() ? "--expert-only" : "--snapshot-only");
      }
      std::fprintf(stderr, "railyardd: no rail (%s): %s%s\n",
                   topology::FabricRailRequirement(ifname.empty() ? "RAILYARD_SOCKET_IFNAME" : "--ifname").c_str(),
                   whyNone.c_str(), hint.c_str());
      return 3;  // not 2: it may be only that the rails' addresses are not up yet (new-user trial)
    }
  }
  // One railyardd per host (per network namespace), relaying or not: a second one is
  // refused here, naming the first, before it binds anything. An inspection run
  // (--wait-hosts with --no-relay) serves nothing, so it takes no seat and may run
  // beside the daemon (it speaks on the cabling port as any process of the host does).
  // The seat is keyed by the discovery port, and its name says so: it used to read
  // "railyard-seat:railyardd:29517" beside "relay listening on port 29518", two ports for one relay.
  // Claimed before the tiers start (new-user trial: a second daemon announced "listening
  // on" for its expert store, then was refused). A tier served alone takes no seat.
  const bool inspectOnly = waitHosts > 0 && noRelay;
  std::unique_ptr<proxy::RelaySeat> daemonSeat;
  if (Status s = inspectOnly || expertOnly || snapshotOnly ? Status::Ok() : proxy::RelaySeat::Claim("railyardd:discovery-port-" + std::to_string(agent.port), proxy::RelaySeat::Role::kDaemon,
                                         [](std::vector<proxy::Fd>*) { return Status::Ok(); }, &daemonSeat);
      !s.ok()) {
    std::fprintf(stderr, "railyardd: %s%s\n", s.message().c_str(),
                 waitHosts > 0 ? "; to print the graph beside it, add --no-relay (an inspection run takes no seat)" : "");
    return 2;
  }
  // The tiers take their rails (and default listen address) from the same filter as
  // the fabric's: --ifname stood for RAILYARD_SOCKET_IFNAME everywhere but there, and a
  // store served with --ifname alone listened on loopback (new-user trial).
  env::Config tierCfg = *cfg;
  tierCfg.railIfname = railFilter;
  // The expert store (storage/expert/expert_server.h), served beside the rest or alone.
  std::unique_ptr<fabric::Domain> expertDomain;
  std::unique_ptr<fabric::Worker> expertWorker;
  std::unique_ptr<expert::ExpertServer> expertServer;
  if (!expertStore.empty()) {
    if (Status s = StartExpertStore(tierCfg, railFilterSource, expertStore, expertListen, expertVerify, &expertDomain, &expertWorker, &expertServer);
        !s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
      return 2;
    }
    // For scripts, as "snapshot-port N" below (`--expert-listen :0` takes any port).
    std::printf("expert-port %u\n", expertServer->port());
    std::fflush(stdout);
  }
  // Snapshot arenas: started before discovery and after the expert store (a store that
  // cannot be served fails before "snapshot-port N" is announced: new-user trial).
  // "snapshot-port N" (and "expert-port N" above), the lines railyardd writes to stdout
  // besides the graph, are for scripts (documented in --help and the README); stderr
  // says the same for people.
  std::unique_ptr<tools::SnapshotService> snapshotService;
  if (!snapshot.arenas.empty()) {
    if (Status s = tools::SnapshotService::Start(snapshot, tierCfg, &snapshotService); !s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());  // it says "snapshot: "
      return 2;
    }
    std::printf("snapshot-port %u\n", snapshotService->port());
    std::fflush(stdout);
    std::fprintf(stderr, "railyardd: snapshot arenas on %s:%u\n", snapshotService->address().c_str(),
                 snapshotService->port());
    // What a restart found (new-user trial: the count of recovered blobs was only logged at INFO).
    for (const std::string& line : snapshotService->ArenaReport()) std::fprintf(stderr, "railyardd: %s\n", line.c_str());
  }
  if (expertOnly || snapshotOnly) {  // a tier (or both) served alone
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    std::signal(SIGHUP, OnSignal);  // a closed terminal or SSH session stops it cleanly (new-user trial: rc 129)
    while (!g_stop) ::poll(nullptr, 0, 100);
    if (expertServer) expertServer->Stop();
    return 0;
  }
  proxy::RouterOptions fo;
  fo.hostName = hostName;
  fo.agent = agent;
  fo.relayPort = relayPort != 0 ? relayPort : static_cast<uint16_t>(cfg->relayPort);
  if (Status s = topology::LoadClusterKey(cfg->clusterKeyFile, &fo.clusterKey); !s.ok()) {
    std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
    return 2;
  }
  std::unique_ptr<proxy::Router> router;
  if (Status s = proxy::Router::Start(rails, fo, &router); !s.ok()) {
    std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
    return 2;
  }
  std::unique_ptr<proxy::RelayService> relay;
  if (!noRelay) {
    proxy::RelayOptions ro;
    ro.port = fo.relayPort;
    ro.bufferBytes = cfg->relayBufferBytes;
    ro.role = proxy::RelaySeat::Role::kDaemon;  // takes the relay over from a rank process
    ro.drainMs = cfg->relayDrainMs;
    ro.idleMs = cfg->relayIdleMs;
    ro.maxPerPeer = cfg->relayMaxPerPeer;
    ro.fixedListenerPorts = {static_cast<uint16_t>(cfg->tierTunnelPort), static_cast<uint16_t>(cfg->tierTunnelPort + 1)};
    if (Status s = proxy::RelayService::Start(router.get(), ro, &relay); !s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
      return 2;
    }
  }
  // The fabric relay (relayed fabric Endpoints) serves while the relay above holds the seat.
  // Serving a tier, the host's RDMA ports are opened once, here, for the tiers' data
  // Domain and the Forwarder's verbs ports both (else the Forwarder opens its own).
  tools::TierTunnelFlags tierFlags{expertStore, expertVerify, snapshot.arenas};
  const bool wantTiers = !tierFlags.expertStore.empty() || !tierFlags.snapshotArenas.empty();
  std::shared_ptr<proxy::verbs::IbPorts> ib = wantTiers ? plugin::OpenTierRdmaPorts(*cfg, "railyardd") : nullptr;
  std::unique_ptr<fabric::relay::ForwarderHost> forwarder;
  if (relay != nullptr) {
    if (Status s = fabric::relay::StartSeatForwarder(*router, *relay, *cfg, -1, &forwarder, ib); !s.ok()) {
      std::fprintf(stderr, "railyardd: %s\n", s.message().c_str());
      return 2;
    }
  }
  const topology::CablingAgent* cabling = &router->Agent();
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGHUP, OnSignal);
  // Answers a second railyardd (it is refused, told this one's pid).
  std::atomic<bool> seatStop{false};
  std::thread seatThread([&] {
    while (daemonSeat && !seatStop.load() && !g_stop) {
      std::vector<pollfd> fds;
      for (int fd : daemonSeat->WatchFds()) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
      for (const pollfd& p : fds) {
        proxy::RelaySeat::Change c;
        if (p.revents != 0) (void)daemonSeat->OnReadable(p.fd, &c);
      }
    }
  });
  struct Joiner {
    std::thread& t;
    std::atomic<bool>& stop;
    ~Joiner() {
      stop.store(true);
      t.join();
    }
  } joiner{seatThread, seatStop};

  auto print = [&](const topology::ClusterGraph& g) {
    const std::string out = text ? topology::GraphToText(g, cabling->HostId())
                                 : topology::DumpJson(topology::GraphToJson(g, cabling->HostId()), 2) + "\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  };

  if (waitHosts > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || g_stop) {
        const size_t known = cabling->Graph().Hosts().size();
        std::fprintf(stderr, "railyardd: %s knows %zu of %d hosts after %d ms%s\n", hostName.c_str(), known, waitHosts,
                     timeoutMs,
                     known >= static_cast<size_t>(waitHosts) ? ", but the graph did not stay unchanged for --settle-ms" : "");
        print(cabling->Graph());
        return 1;
      }
      const uint64_t v = cabling->Version();
      const bool enough = cabling->Graph().Hosts().size() >= static_cast<size_t>(waitHosts);
      // Settled: enough hosts and no change for settleMs (woken early by any change). With
      // less than settleMs left the wait cannot prove that: it runs out, and the deadline
      // branch above reports it.
      if (enough && settleMs <= left &&
          !cabling->WaitFor([&](const topology::ClusterGraph&, uint64_t now) { return now != v; }, settleMs)) {
        print(cabling->Graph());
        break;
      }
      if (enough && settleMs > left) {
        cabling->WaitFor([&](const topology::ClusterGraph&, uint64_t) { return g_stop != 0; }, static_cast<int>(left));
        continue;
      }
      if (!enough) {
        cabling->WaitFor([&](const topology::ClusterGraph& g, uint64_t) { return g.Hosts().size() >= static_cast<size_t>(waitHosts); },
                         static_cast<int>(std::min<long>(left, 1000)));
      }
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(lingerMs);
    while (!g_stop && std::chrono::steady_clock::now() < until) {
      cabling->WaitFor([](const topology::ClusterGraph&, uint64_t) { return g_stop != 0; }, 100);
    }
    return 0;
  }

  // The rails, checked every 2 s: one gained or changed restarts the daemon on them, but
  // not one serving a tier (a restart would drop its clients, and a cache-only swap's
  // blobs): that one says to restart it.
  railWatch.Running(rails);
  bool railChangeSaid = false;
  auto nextRailCheck = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool restart = false;
  uint64_t seen = 0;
  bool printed = false;
  // The graph is printed at most once a second, the latest then (hostile-peer probe: a
  // flood of made-up records reprinted the whole graph 85 times in 15 s, 400 KB).
  bool changed = false;
  auto lastPrint = std::chrono::steady_clock::time_point{};
  topology::ClusterGraph last;
  std::string lastShape;
  // The tier tunnels (host:NAME clients, through relays): started here, once, when the
  // agent has settled with a neighbour; their Workers take later cables as they come up.
  std::unique_ptr<tools::TierTunnels> tiers;
  bool tiersFailed = false;
  size_t tierCables = 0;
  while (!g_stop) {
    if (wantTiers && !tiers && !tiersFailed && cabling->Settled() &&
        !cabling->Graph().Neighbours(cabling->HostId()).empty()) {
      tierCables = cabling->Graph().Neighbours(cabling->HostId()).size();
      if (Status s = tools::TierTunnels::Start(*cfg, *router, rails, tierFlags, ib, &tiers); !s.ok()) {
        std::fprintf(stderr, "railyardd: tier tunnels not served (host:NAME clients cannot reach this host): %s\n",
                     s.message().c_str());
        tiersFailed = true;
      } else {
        std::fprintf(stderr, "railyardd: tier tunnels: %s, over %zu cable%s\n", tiers->summary().c_str(), tierCables,
                     tierCables == 1 ? "" : "s");
      }
    }
    if (std::chrono::steady_clock::now() >= nextRailCheck) {
      nextRailCheck = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      std::string what;
      if (!railChangeSaid && railWatch.Changed(&what)) {
        if (wantTiers) {
          std::fprintf(stderr, "railyardd: the rails changed (%s): restart railyardd to take them (not restarted "
                               "automatically while it serves %s: a restart drops their clients)\n",
                       what.c_str(), !tierFlags.expertStore.empty() ? "an expert store" : "snapshot arenas");
          railChangeSaid = true;
        } else {
          std::fprintf(stderr, "railyardd: the rails changed (%s): restarting on them (relays in flight drain first, "
                               "up to RAILYARD_RELAY_DRAIN_MS)\n", what.c_str());
          restart = true;
          break;
        }
      }
    }
    // The signal handler cannot wake WaitFor: poll g_stop every 100 ms so SIGTERM
    // takes effect at once.
    cabling->WaitFor([&](const topology::ClusterGraph&, uint64_t now) { return now != seen || g_stop; }, 100);
    if (cabling->Version() != seen) {
      seen = cabling->Version();
      changed = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!changed || now - lastPrint < std::chrono::seconds(1)) continue;
    changed = false;
    const topology::ClusterGraph g = cabling->Graph();
    if (printed && SameGraph(g, last)) continue;
    lastPrint = now;
    print(g);
    if (tiers && g.Neighbours(cabling->HostId()).size() > tierCables) {
      tierCables = g.Neighbours(cabling->HostId()).size();
      std::fprintf(stderr, "railyardd: a cable came up after the tier tunnels started: they take it (%zu cables now)\n",
                   tierCables);
    }
    // The shape line again whenever the shape or its host count changes (new-user trial:
    // a host count that changed under the same shape left the last line stale).
    const std::string shape = std::string(topology::ShapeName(g.DeriveShape())) + ", " + topology::HostCountText(g);
    if (shape != lastShape) {
      std::fprintf(stderr, "railyardd: %s: cluster shape %s%s%s\n", hostName.c_str(), shape.c_str(),
                   lastShape.empty() ? "" : " (was ", lastShape.empty() ? "" : (lastShape + ")").c_str());
      lastShape = shape;
    }
    last = g;
    printed = true;
  }
  if (relay) {
    // SIGTERM/SIGINT: accept no new relayed socket nor fabric relay route, carry the
    // ones in flight for up to RAILYARD_RELAY_DRAIN_MS (both together), then exit.
    // The Forwarder stops opening first: the seat RelayService::Stop gives up would
    // otherwise drop it with its routes.
    const auto drainEnd = std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg->relayDrainMs);
    if (forwarder) forwarder->BeginDrain();
    const int left = relay->Stop(cfg->relayDrainMs);
    if (left > 0) {
      std::fprintf(stderr, "railyardd: closed %d relayed sockets still open after %d ms (RAILYARD_RELAY_DRAIN_MS)\n",
                   left, cfg->relayDrainMs);
    }
    if (forwarder) {
      const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(drainEnd - std::chrono::steady_clock::now());
      const size_t routes = forwarder->Drain(static_cast<int>(std::max<int64_t>(0, rest.count())));
      if (routes > 0) {
        std::fprintf(stderr, "railyardd: closed %zu fabric relay routes still open after %d ms (RAILYARD_RELAY_DRAIN_MS)\n",
                     routes, cfg->relayDrainMs);
      }
      // What the fabric relay carried (its Forwarder now; one rebuilt on a cabling
      // change starts again from zero).
      const fabric::relay::ForwarderStats st = forwarder->stats();
      std::fprintf(stderr,
                   "railyardd: fabric relay: %llu routes opened, %llu refused, %llu failed; %llu slots, %llu bytes "
                   "forwarded; RDMA ports facing %zu cables\n",
                   static_cast<unsigned long long>(st.routesOpened), static_cast<unsigned long long>(st.routesRefused),
                   static_cast<unsigned long long>(st.routesFailed), static_cast<unsigned long long>(st.slotsForwarded),
                   static_cast<unsigned long long>(st.bytesForwarded), forwarder->VerbsNeighbours().size());
    }
  }
  return restart ? kRestartOnNewRails : 0;
}

}  // namespace

