// railyard-info: prints the rails of this host (or of a fixture) as Railyard sees them:
// netdev, RDMA device:port, PCI function, NUMA node, physical port, speed, PCIe link,
// addresses, state and nearest GPU, plus every skipped candidate with its reason.
//
//   railyard-info                 # live machine, table
//   railyard-info -v --json       # with GID tables, as JSON
//   railyard-info --sysfs tests/fixtures/sysfs-spark --hwloc-xml tests/fixtures/hwloc/spark.xml
//
// Rails follow the plugin's fabric rule (proxy::SelectFabricRails): a port that carries a
// default route is not a rail unless the filter names it exactly. A fixture has no addresses,
// so --sysfs keeps interfaces without one. Loopback is shown (row LO) while RAILYARD_SOCKET_IFNAME
// is unset: the tiers' TCP rail. RAILYARD_CLUSTER_KEY_FILE is always checked ("Cluster key").
// "Mode" says fabric mode, verbs or plain TCP and which NCCL comms the plugin's init would
// take (runtime::ChoosesFabricComms, the plugin's own rule).
// Exit status: 0 ok, 1 discovery failed, the cluster key file is unusable or the plugin's
// init would fail on the rails (RAILYARD_FABRIC=on with none), 2 usage.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "env/config.h"
#include "env/device_list_syntax.h"
#include "env/log.h"
#include "proxy/nccl/nccl_records.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/comms_choice.h"
#include "proxy/verbs/ib_ports.h"
#include "tools/common/cli_parse.h"
#include "tools/railyard-info/section.h"
#include "topology/discovery.h"
#include "topology/cluster_key.h"
#include "topology/graph_json.h"
#include "topology/interface_filter.h"
#include "topology/loopback_rail.h"
#include "topology/netdev.h"

namespace railyard::info {
namespace {

using nlohmann::json;
using topology::Rail;

std::string Or(const std::string& s, const char* fallback = "-") { return s.empty() ? fallback : s; }

std::string SpeedText(const Rail& r) {
  if (!r.speedMbps) return "?";
  if (*r.speedMbps % 1000 == 0) return std::to_string(*r.speedMbps / 1000) + "G";
  return std::to_string(*r.speedMbps) + "M";
}

std::string PcieText(const Rail& r) {
  const auto& p = r.pcie;
  if (!p.currentWidth && !p.currentSpeed) return "-";
  std::ostringstream s;
  s << "x" << (p.currentWidth ? std::to_string(*p.currentWidth) : "?");
  if (p.maxWidth && p.currentWidth && *p.maxWidth != *p.currentWidth) s << "/x" << *p.maxWidth;
  if (p.currentSpeed) s << " " << std::fixed << std::setprecision(1) << *p.currentSpeed << "GT/s";
  if (p.degraded()) s << " (!)";
  return s.str();
}

std::string StateText(const Rail& r) {
  std::string s = r.up ? "up" : "down";
  if (r.running) s += ",running";
  if (r.carrier.has_value() && !*r.carrier) s += ",no-carrier";
  if (!r.rdmaPortState.empty() && r.rdmaPortState != "ACTIVE") s += ",rdma-" + r.rdmaPortState;
  return s;
}

std::string AddressesText(const Rail& r) {
  std::string s;
  for (const auto& a : r.addresses) {
    if (a.linkLocal) continue;  // shown with -v only
    s += (s.empty() ? "" : " ") + a.address + "/" + std::to_string(a.prefixLen);
  }
  return s.empty() ? "-" : s;
}

json RailToJson(const Rail& r) {
  json addrs = json::array();
  for (const auto& a : r.addresses) {
    addrs.push_back({{"family", a.family == AF_INET ? "ipv4" : "ipv6"},
                     {"address", a.address},
                     {"prefix_len", a.prefixLen},
                     {"link_local", a.linkLocal}});
  }
  json gids = json::array();
  for (const auto& g : r.gids) {
    gids.push_back({{"index", g.index}, {"gid", g.text}, {"type", g.type}, {"ndev", g.ndev}, {"ip", g.ip},
                    {"ipv4_mapped", g.ipv4Mapped}, {"link_local", g.linkLocal}});
  }
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {
      {"netdev", r.netdev},
      {"ifindex", r.ifIndex},
      {"mac", r.mac},
      {"mtu", r.mtu},
      {"speed_mbps", opt(r.speedMbps)},
      {"addresses", addrs},
      {"up", r.up},
      {"running", r.running},
      {"carrier", opt(r.carrier)},
      {"operstate", r.operState},
      {"physical_port", r.physicalPort},
      {"physical_port_source", r.physicalPortSource},
      {"phys_port_name", r.physPortName},
      {"rdma_device", r.rdmaDevice},
      {"rdma_port", r.rdmaPort},
      {"rdma_port_state", r.rdmaPortState},
      {"link_layer", r.linkLayer},
      {"gids", gids},
      {"pci_path", r.pciPath},
      {"pci_bus_id", r.pciBusId},
      {"pci_function", r.pciFunction},
      {"pcie",
       {{"current_width", opt(r.pcie.currentWidth)},
        {"max_width", opt(r.pcie.maxWidth)},
        {"current_speed_gts", opt(r.pcie.currentSpeed)},
        {"max_speed_gts", opt(r.pcie.maxSpeed)},
        {"degraded", r.pcie.degraded()},
        {"hwloc_link_gbps", r.hwlocLinkSpeedGBps}}},
      {"numa_node", r.numaNode},
      {"nearest_gpu", r.nearestGpu},
      {"warnings", r.warnings},
  };
}

/// What the loopback row means (text and JSON "role").
std::string LoopbackRole(const InfoContext& ctx) {
  if (!ctx.loopbackIsSocketDevice) return topology::LoopbackRailRule();
  if (topology::InterfaceFilter::Parse(ctx.options.ifnameFilter).automatic()) {
    return topology::LoopbackRailRule() + "; also the plugin's TCP device here (no other interface qualifies)";
  }
  return topology::LoopbackRailRule() + "; also the plugin's TCP device outside fabric mode (" +
         ctx.options.ifnameFilterSource + "='" + ctx.options.ifnameFilter + "' selects it)";
}

/// "rails": one row per rail, in the spirit of `nvidia-smi topo -m`'s NIC legend.
class RailsSection : public SectionPrinter {
 public:
  std::string name() const override { return "rails"; }

  void PrintText(const InfoContext& ctx, std::ostream& out) const override {
    out << "Rails (" << ctx.rails.size() << ")\n";
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"", "Netdev", "RDMA", "PCI", "NUMA", "Port", "Speed", "PCIe", "Addresses", "State", "GPU"});
    auto rowOf = [](const std::string& label, const Rail& r, const std::string& netdev) {
      return std::vector<std::string>{label, netdev,
                                      r.rdmaDevice.empty() ? "-" : r.rdmaDevice + ":" + std::to_string(r.rdmaPort),
                                      Or(r.pciBusId), r.numaNode < 0 ? "-" : std::to_string(r.numaNode),
                                      r.physicalPort < 0 ? "?" : std::to_string(r.physicalPort), SpeedText(r),
                                      PcieText(r), AddressesText(r), StateText(r), Or(r.nearestGpu, "none")};
    };
    for (std::size_t i = 0; i < ctx.rails.size(); ++i) rows.push_back(rowOf("NIC" + std::to_string(i), ctx.rails[i], ctx.rails[i].netdev));
    if (ctx.loopback != nullptr) rows.push_back(rowOf("LO", *ctx.loopback, ctx.loopback->netdev + " (loopback)"));
    std::vector<std::size_t> width(rows[0].size(), 0);
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
      }
      out << "  " << line << "\n";
    }
    out << "\n  Port: physical (QSFP) port, 0-based; ? = unknown (a virtual netdev such as a veth).\n"
           "  PCIe: trained width/max width, GT/s per lane; (!) = trained below its maximum.\n"
           "  GPU: nearest GPU in hwloc's tree.\n";
    if (ctx.loopback != nullptr) {
      out << "  LO: " << LoopbackRole(ctx) << ".\n";
    }
    for (std::size_t i = 0; i < ctx.rails.size(); ++i) {
      const Rail& r = ctx.rails[i];
      if (!ctx.verbose) continue;
      out << "\n  NIC" << i << " " << r.netdev << ": mac " << Or(r.mac) << ", mtu " << r.mtu << ", operstate "
          << Or(r.operState) << ", physical port from " << Or(r.physicalPortSource) << ", pci "
          << Or(r.pciPath) << ", hwloc link " << r.hwlocLinkSpeedGBps << " GB/s\n";
      for (const auto& a : r.addresses) {
        out << "    addr " << a.address << "/" << a.prefixLen << (a.linkLocal ? " (link-local)" : "") << "\n";
      }
      for (const auto& g : r.gids) {
        out << "    gid " << std::setw(3) << g.index << "  " << g.text << "  " << std::setw(7) << Or(g.type, "?")
            << "  " << Or(g.ndev) << "  " << g.ip << "\n";
      }
    }
    bool first = true;
    for (std::size_t i = 0; i < ctx.rails.size(); ++i) {
      for (const auto& w : ctx.rails[i].warnings) {
        out << (first ? "\n" : "") << "  WARNING NIC" << i << ": " << w << "\n";
        first = false;
      }
    }
    out << "\n";
  }

  json ToJson(const InfoContext& ctx) const override {
    json a = json::array();
    for (const Rail& r : ctx.rails) a.push_back(RailToJson(r));
    return a;
  }
};

/// "skipped": every candidate that is not a rail, with the reason.
class SkippedSection : public SectionPrinter {
 public:
  std::string name() const override { return "skipped"; }

  void PrintText(const InfoContext& ctx, std::ostream& out) const override {
    out << "Skipped (" << ctx.skipped.size() << ")\n";
    for (const std::string& s : ctx.skipped) out << "  " << s << "\n";
    out << "\n";
  }

  json ToJson(const InfoContext& ctx) const override {
    json a = json::array();
    for (const std::string& s : ctx.skipped) {
      const auto colon = s.find(": ");
      a.push_back({{"name", s.substr(0, colon)}, {"reason", colon == std::string::npos ? "" : s.substr(colon + 2)}});
    }
    return a;
  }
};

/// "loopback": the loopback interface when RAILYARD_SOCKET_IFNAME is unset (its row is in
/// the rails table, marked LO); null otherwise.
class LoopbackSection : public SectionPrinter {
 public:
  std::string name() const override { return "loopback"; }
  void PrintText(const InfoContext&, std::ostream&) const override {}  // a row of the rails table
  json ToJson(const InfoContext& ctx) const override {
    if (ctx.loopback == nullptr) return nullptr;
    json j = RailToJson(*ctx.loopback);
    j["role"] = LoopbackRole(ctx);
    j["plugin_tcp_device"] = ctx.loopbackIsSocketDevice;
    return j;
  }
};

/// "cluster_key": RAILYARD_CLUSTER_KEY_FILE and whether it loads (a missing, unreadable,
/// world-accessible or too short file is said here, and railyard-info then exits 1).
class ClusterKeySection : public SectionPrinter {
 public:
  std::string name() const override { return "cluster_key"; }
  void PrintText(const InfoContext& ctx, std::ostream& out) const override {
    if (ctx.keyFile.empty()) {
      out << "Cluster key: none (RAILYARD_CLUSTER_KEY_FILE is unset: nothing is authenticated, every host on "
             "a rail is trusted)\n\n";
    } else if (!ctx.keyError.empty()) {
      out << "Cluster key: UNUSABLE: " << ctx.keyError << "\n\n";
    } else {
      out << "Cluster key: " << ctx.keyFile << " (fingerprint " << ctx.keyFingerprint << ")\n\n";
    }
  }
  json ToJson(const InfoContext& ctx) const override {
    if (ctx.keyFile.empty()) return {{"file", nullptr}, {"usable", false}, {"error", nullptr}};
    return {{"file", ctx.keyFile},
            {"usable", ctx.keyError.empty()},
            {"error", ctx.keyError.empty() ? json(nullptr) : json(ctx.keyError)},
            {"fingerprint", ctx.keyError.empty() ? json(ctx.keyFingerprint) : json(nullptr)}};
  }
};

/// "mode": fabric mode, verbs mode or plain TCP, and which NCCL comms
/// (runtime::ChoosesFabricComms, the rule the plugin's init applies), as the plugin's
/// init would choose them here.
class ModeSection : public SectionPrinter {
 public:
  std::string name() const override { return "mode"; }
  void PrintText(const InfoContext& ctx, std::ostream& out) const override {
    if (ctx.fabricSetting.empty()) return;
    out << "Mode: " << Mode(ctx) << "\nNCCL comms: " << Comms(ctx) << "\n\n";
  }
  json ToJson(const InfoContext& ctx) const override {
    if (ctx.fabricSetting.empty()) return nullptr;
    const bool fails = !ctx.initError.empty();
    return {{"fabric_setting", ctx.fabricSetting},
            {"fabric_mode", !fails && FabricMode(ctx)},
            {"fabric_rails", ctx.fabricRails},
            {"fabric_why_none", ctx.fabricWhyNone.empty() ? json(nullptr) : json(ctx.fabricWhyNone)},
            {"init_error", fails ? json(ctx.initError) : json(nullptr)},
            {"rdma_ports", ctx.rdmaPorts},
            {"socket_devices", ctx.socketDevices},
            {"comms_setting", ctx.commsSetting},
            {"comms", fails ? json(nullptr) : json(ctx.fabricComms ? "fabric" : "legacy")},
            {"comms_reason", fails ? json(nullptr) : json(ctx.commsReason)}};
  }

 private:
  static bool FabricMode(const InfoContext& ctx) { return ctx.fabricSetting != "off" && ctx.fabricRails > 0; }
  static std::string Mode(const InfoContext& ctx) {
    const std::string set = " (RAILYARD_FABRIC=" + ctx.fabricSetting + ")";
    if (!ctx.initError.empty()) return "none: the plugin's init fails: " + ctx.initError;
    const std::string rdma = ", " + std::to_string(ctx.rdmaPorts) + " usable RDMA port(s)";
    if (FabricMode(ctx)) {
      // The fabric comms' listen handle carries at most this many cabled rails (new-user
      // trial: a mesh host of 8 failed at listen while this said nothing).
      const size_t fits = (proxy::nccl::kHandleAddressBytes - 16) / 8;
      const std::string tooMany =
          ctx.fabricComms && ctx.fabricRails > fits
              ? "; note: an NCCL listen handle carries at most " + std::to_string(fits) +
                    " cabled rails, so listen fails once more than that are cabled (narrow RAILYARD_SOCKET_IFNAME, "
                    "the same for railyardd and every rank, or set RAILYARD_COMMS=legacy)"
              : "";
      return "fabric mode over " + std::to_string(ctx.fabricRails) + " rail(s)" + rdma + set + tooMany;
    }
    const std::string plain = ctx.rdmaPorts > 0 ? "verbs" : "plain TCP";
    // Which interfaces carry it (new-user trial: the plain TCP mode never said).
    std::string devices;
    for (const auto& d : ctx.socketDevices) devices += (devices.empty() ? "" : ", ") + d;
    const std::string over =
        ctx.rdmaPorts == 0 && !devices.empty() ? "; its TCP devices: " + devices : "";
    if (ctx.fabricSetting == "off") return plain + ": fabric mode off" + rdma + set + over;
    // Why none before the devices (new-user trial: "its TCP devices: eth0: eth0: carries
    // a default route" read as if eth0 were left out).
    return plain + ": no fabric rail" + (ctx.fabricWhyNone.empty() ? "" : " (" + ctx.fabricWhyNone + ")") + rdma + set +
           over;
  }
  static std::string Comms(const InfoContext& ctx) {
    if (!ctx.initError.empty()) return "none (init fails)";
    // The reason names RAILYARD_COMMS itself when the setting decided.
    const bool named = ctx.commsReason.rfind("RAILYARD_COMMS=", 0) == 0;
    const std::string why =
        " (" + (named ? ctx.commsReason : "RAILYARD_COMMS=" + ctx.commsSetting + "; " + ctx.commsReason) + ")";
    return ctx.commsName + why;
  }
};

/// The report, in order.
/// Neighbours, shape and routes: the cabling graph from this host's point of view.
class CablingSection : public SectionPrinter {
 public:
  std::string name() const override { return "cabling"; }
  void PrintText(const InfoContext& ctx, std::ostream& out) const override {
    if (ctx.graph == nullptr) {
      out << "Cabling: not listened ("
          << (ctx.notListened.empty() ? "a fixture, no rails, or --listen-ms 0" : ctx.notListened) << ")\n\n";
      return;
    }
    out << topology::GraphToText(*ctx.graph, ctx.self);
    if (ctx.graph->Hosts().size() <= 1) {
      // New-user trial: "single, 1 hosts" alone did not say that nothing was heard.
      out << "  (no other host heard in " << ctx.listenedMs
          << " ms: no neighbour runs railyardd or a rank on its rails, or no cable is up; a longer --listen-ms "
             "waits longer)\n";
    }
    out << "\n";
  }
  nlohmann::json ToJson(const InfoContext& ctx) const override {
    if (ctx.graph == nullptr) return nullptr;
    return topology::GraphToJson(*ctx.graph, ctx.self);
  }
};

std::vector<std::unique_ptr<SectionPrinter>> MakeSections() {
  std::vector<std::unique_ptr<SectionPrinter>> sections;
  sections.push_back(std::make_unique<RailsSection>());
  sections.push_back(std::make_unique<LoopbackSection>());
  sections.push_back(std::make_unique<SkippedSection>());
  sections.push_back(std::make_unique<ClusterKeySection>());
  sections.push_back(std::make_unique<ModeSection>());
  sections.push_back(std::make_unique<CablingSection>());  // neighbours, shape, routes
  return sections;
}

int Run(int argc, char** argv) {
  CLI::App app{"railyard-info: the rails Railyard discovers on this host (or in a fixture)"};
  topology::DiscoveryOptions options;
  bool asJson = false;
  bool verbose = false;
  bool ifnameGiven = false;
  std::string ifname;
  std::string debug;
  app.add_flag("--json", asJson, "Print JSON instead of tables");
  app.add_flag("-v,--verbose", verbose, "Also print GID tables, addresses and details");
  app.add_option("--sysfs", options.sysfsRoot, "sysfs root to read (a fixture directory); addresses are then "
                                               "not taken from the live machine, so interfaces without one are "
                                               "kept (as with --include-no-address)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_option("--hwloc-xml", options.hwlocXml, "hwloc XML topology to use instead of the live one")
      ->check(CLI::ExistingFile);  // a missing file is a bad flag (exit 2), as --sysfs's directory
  app.add_flag("--no-hwloc", options.disableHwloc, "Do not use hwloc (no nearest GPU; NUMA from sysfs)");
  app.add_option("--ifname", ifname,
                 "Rail filter, RAILYARD_SOCKET_IFNAME grammar (default: RAILYARD_SOCKET_IFNAME from the "
                 "environment; NCCL_SOCKET_IFNAME chooses NCCL's bootstrap network, not the rails)")
      ->each([&](const std::string&) { ifnameGiven = true; });
  app.add_flag("--include-down", options.includeDown, "Keep interfaces that are down");
  app.add_flag("--include-no-address", options.includeNoAddress, "Keep interfaces without an IP address");
  app.add_flag("--include-link-local", options.includeLinkLocal, "Keep interfaces with only link-local addresses");
  int listenMs = 1500;
  app.add_option("--listen-ms", listenMs,
                 "Listen this long for the cabling protocol on the rails and print neighbours, shape "
                 "and routes (0 = off; needs railyardd or the plugin running on the other hosts)")
      ->check(tools::InRange(0, 600000))
      ->capture_default_str();
  app.add_option("--debug", debug, "stderr log level: NONE, VERSION, WARN, INFO, TRACE (default RAILYARD_DEBUG)");
  app.footer(
      "Exit status:\n"
      "  0  the rails were listed, and the plugin's init would start with this environment\n"
      "  1  the plugin's init would fail here (the Mode section says why), or the cluster key\n"
      "     file is unusable\n"
      "  2  bad flags, or a RAILYARD_* variable (or --ifname) that is malformed");
  if (std::optional<int> exitNow = tools::ParseCommandLine(app, argc, argv, "railyard-info")) return *exitNow;

  if (!debug.empty()) {
    auto level = log::ParseLevelName(debug);
    if (!level) {
      std::cerr << "railyard-info: --debug '" << debug << "': expected NONE, VERSION, WARN, INFO or TRACE\n";
      return 2;
    }
    log::SetStderrLevel(*level);
  }
  options.skipDefaultRoute = true;  // the plugin's rule: an uplink is not a rail
  const env::Config* envConfig = nullptr;
  const Status envStatus = env::Load(&envConfig);
  if (ifnameGiven) {
    if (Status fs = env::CheckDeviceListSyntax(ifname, "--ifname"); !fs.ok()) {
      std::cerr << "railyard-info: " << fs.message() << "\n";
      return 2;
    }
    options.ifnameFilter = ifname;
    options.ifnameFilterSource = "--ifname";
  } else {
    if (!envStatus.ok()) {
      std::cerr << "railyard-info: " << envStatus.message() << "\n";
      return 2;
    }
    options.ifnameFilter = envConfig->railIfname;
  }
  // The cluster key is checked whatever else runs: a missing or unreadable key file is
  // reported (section "cluster_key", stderr, exit 1), never passed over in silence.
  std::string keyFile, keyError, keyFingerprint;
  std::shared_ptr<const topology::ClusterKey> clusterKey;
  if (envStatus.ok()) {
    keyFile = envConfig->clusterKeyFile;
    if (Status ks = topology::LoadClusterKey(keyFile, &clusterKey); !ks.ok()) {
      keyError = ks.message();
      std::cerr << "railyard-info: " << keyError << "\n";
    } else if (clusterKey != nullptr) {
      keyFingerprint = clusterKey->Fingerprint();
    }
  }
  std::error_code ec;
  if (std::filesystem::canonical(options.sysfsRoot, ec) != "/sys") {
    // New-user trial: --sysfs /tmp listed no rail and exited 0, as if the host had none.
    if (!std::filesystem::is_directory(options.sysfsRoot + "/class/net", ec)) {
      std::cerr << "railyard-info: --sysfs " << options.sysfsRoot
                << ": not a sysfs tree (no class/net directory; a fixture needs class/net, and class/infiniband "
                   "for RDMA ports)\n";
      return 2;
    }
    options.interfaces = std::vector<topology::NetDevice>{};  // a fixture: no live addresses
    options.includeNoAddress = true;  // so "no address" means "unknown", not "not a rail"
  }

  std::vector<Rail> rails;
  std::vector<std::string> skipped;
  Status s = topology::DiscoverRails(options, &rails, &skipped);
  if (!s.ok()) {
    std::cerr << "railyard-info: " << s.message() << "\n";
    // A --hwloc-xml hwloc cannot read is a bad flag (2), as a missing one is.
    return s.code() == Code::kInvalidUsage && !options.hwlocXml.empty() ? 2 : 1;
  }
  // The port NCCL_SOCKET_IFNAME names is NCCL's bootstrap network, never a rail, as the
  // plugin and railyardd decide (proxy::SelectFabricRails); the table says the same
  // (new-user trial: with NCCL_SOCKET_IFNAME=mgmt0 it listed mgmt0 as a rail).
  if (envStatus.ok()) {
    const std::string bootstrap = proxy::BootstrapIfname(options.ifnameFilter, envConfig->socketIfname);
    for (auto it = rails.begin(); it != rails.end();) {
      if (std::string why = proxy::BootstrapRailSkipReason(it->netdev, bootstrap); !why.empty()) {
        skipped.push_back(std::move(why));
        it = rails.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Loopback is never a fabric rail (topology/loopback_rail.h), but while
  // RAILYARD_SOCKET_IFNAME is unset it is the TCP rail of the expert and snapshot
  // tiers: shown (row LO) instead of "skipped".
  std::vector<Rail> loopbackRails;
  bool loopbackIsSocketDevice = false;
  if (!options.interfaces && topology::InterfaceFilter::Parse(options.ifnameFilter).automatic()) {
    for (auto it = skipped.begin(); it != skipped.end(); ++it) {
      std::string loName;
      if (!topology::IsLoopbackSkipReason(*it, &loName)) continue;
      topology::DiscoveryOptions lo = options;
      lo.ifnameFilter = "=" + loName;
      if (topology::DiscoverRails(lo, &loopbackRails, nullptr).ok() && loopbackRails.size() == 1) {
        skipped.erase(it);
        std::vector<topology::NetDevice> socketDevices;
        if (topology::SelectSocketDevices("", &socketDevices).ok()) {
          loopbackIsSocketDevice = !socketDevices.empty() &&
                                   std::all_of(socketDevices.begin(), socketDevices.end(),
                                               [](const topology::NetDevice& d) { return d.loopback; });
        }
      } else {
        loopbackRails.clear();
      }
      break;
    }
  }
  // Loopback the filter names (RAILYARD_SOCKET_IFNAME=lo) is still never a fabric rail
  // (the plugin's fabric mode refuses it), though outside fabric mode it is the TCP
  // transport's device: the LO row, not a numbered rail (new-user trial: "Rails (1) NIC0
  // lo" while the plugin said "lo: loopback, never a fabric rail").
  for (auto it = rails.begin(); it != rails.end();) {
    if (options.interfaces || !topology::IsLoopbackInterface(it->netdev, false)) {
      ++it;
      continue;
    }
    if (loopbackRails.empty()) {
      loopbackRails.push_back(*it);
      std::vector<topology::NetDevice> socketDevices;
      if (topology::SelectSocketDevices(options.ifnameFilter, &socketDevices).ok()) {
        loopbackIsSocketDevice = !socketDevices.empty() &&
                                 std::all_of(socketDevices.begin(), socketDevices.end(),
                                             [](const topology::NetDevice& d) { return d.loopback; });
      }
    }
    it = rails.erase(it);
  }
  InfoContext ctx{options, rails, skipped, verbose};
  ctx.loopback = loopbackRails.empty() ? nullptr : &loopbackRails.front();
  ctx.loopbackIsSocketDevice = loopbackIsSocketDevice;
  ctx.keyFile = keyFile;
  ctx.keyError = keyError;
  ctx.keyFingerprint = keyFingerprint;
  // Where the plugin's init would fail (RAILYARD_FABRIC=on with no rail, no socket
  // interface, RAILYARD_TRANSPORT=verbs without an RDMA port: runtime::NetRuntime's
  // init, the same rules), it is said here and the exit is 1, not a table that looks
  // fine (bad-input trials: railyard-info exited 0 where the plugin refused to start).
  std::string initError;
  // The fabric rails as the plugin's fabric mode selects them, once: the Mode section
  // and the cabling listen below both use them (live machine, valid environment).
  const bool live = envStatus.ok() && !options.interfaces;
  std::vector<proxy::FabricRail> fabricRails;
  std::string whyNone;
  Status railStatus = Status::Ok();
  if (live) {
    railStatus = proxy::SelectFabricRails(options.ifnameFilter, envConfig->defaultSpeedMbps, &fabricRails, &whyNone,
                                          options.ifnameFilterSource,
                                          proxy::BootstrapIfname(options.ifnameFilter, envConfig->socketIfname));
  }
  if (live) {
    ctx.fabricSetting = envConfig->fabric;
    ctx.commsSetting = envConfig->comms;
    const bool selects = envConfig->fabric != "off";  // RAILYARD_FABRIC=off: the plugin takes no rail
    const Status fs = selects ? railStatus : Status::Ok();
    ctx.fabricRails = selects ? fabricRails.size() : 0;
    ctx.fabricWhyNone = selects ? whyNone : "";
    // The plugin's init reads RAILYARD_SOCKET_IFNAME (NCCL_SOCKET_IFNAME while ours is
    // unset) for its socket devices; with --ifname this is what that filter would give.
    const std::string socketFilter = ifnameGiven ? options.ifnameFilter : envConfig->socketIfname;
    std::vector<topology::NetDevice> socketDevices;
    const Status ss = topology::SelectSocketDevices(socketFilter, &socketDevices);
    std::string whyNoPort;  // as the plugin's ChooseTransport says it
    if (envConfig->transport != "tcp") {
      std::unique_ptr<proxy::verbs::IbPorts> ports;
      std::vector<std::string> skippedPorts;
      const Status ps = proxy::verbs::IbPorts::Open(*envConfig, &ports, &skippedPorts);
      if (ps.ok() && ports != nullptr) ctx.rdmaPorts = ports->size();
      if (!ps.ok()) whyNoPort = ": " + ps.message();
      for (const auto& k : skippedPorts) whyNoPort += "; " + k;
      if (ps.ok() && skippedPorts.empty()) whyNoPort = " (no RDMA device)";
    }
    if (!ss.ok()) {
      initError = ss.message();
    } else if (socketDevices.empty()) {
      initError = "no network device is usable" + (socketFilter.empty() ? std::string() : " ('" + socketFilter + "')");
    } else if (!fs.ok()) {
      initError = "fabric rails: " + fs.message();
    } else if (ctx.fabricRails == 0 && envConfig->fabric == "on") {
      initError = topology::FabricOnWithoutRailText(options.ifnameFilterSource, whyNone);
    } else if (envConfig->transport == "verbs" && ctx.rdmaPorts == 0) {
      initError = "RAILYARD_TRANSPORT=verbs: no usable RDMA port" + whyNoPort;
    }
    if (!initError.empty()) {
      std::cerr << "railyard-info: the plugin's init would fail here: " << initError
                << (ifnameGiven ? " (with RAILYARD_SOCKET_IFNAME set to the --ifname value)" : "") << "\n";
      ctx.initError = initError;
    }
    // The comms, by the plugin's own rule over the same facts (proxy/runtime/comms_choice.h).
    runtime::CommsFacts facts;
    facts.comms = envConfig->comms;
    facts.fabricMode = ctx.fabricRails > 0;
    facts.rdma = ctx.rdmaPorts > 0;
    facts.verbsMode = facts.rdma && !facts.fabricMode;
    facts.ipv4Devices = !socketDevices.empty() &&
                        std::all_of(socketDevices.begin(), socketDevices.end(),
                                    [](const topology::NetDevice& d) { return d.family() == AF_INET; });
    for (const auto& d : socketDevices) ctx.socketDevices.push_back(d.name);
    ctx.fabricComms = runtime::ChoosesFabricComms(facts);
    ctx.commsReason = runtime::CommsChoiceReason(facts);
    ctx.commsName = runtime::CommsName(facts);
  }
  std::unique_ptr<proxy::Router> router;
  topology::ClusterGraph graph;
  if (listenMs <= 0) {
    ctx.notListened = "--listen-ms 0";
  } else if (options.interfaces) {
    ctx.notListened = "a fixture: --sysfs";
  } else if (!keyError.empty()) {
    ctx.notListened = "the cluster key is unusable (see Cluster key)";
  } else {  // live machine only
    const env::Config* config = envConfig;
    if (!envStatus.ok()) {
      ctx.notListened = envStatus.message();
    } else if (!railStatus.ok()) {
      ctx.notListened = "rail selection failed: " + railStatus.message();
    } else if (fabricRails.empty()) {
      // The table's rails may include loopback (named by the filter); the cabling protocol
      // runs only on fabric rails (IPv4, not loopback, no default route unless named exactly).
      std::string why = whyNone;
      for (const Rail& r : rails) {  // table rails SelectFabricRails drops without a reason
        if (topology::IsLoopbackInterface(r.netdev, false) && why.find(topology::LoopbackSkipReason(r.netdev)) == std::string::npos) {
          why += (why.empty() ? "" : "; ") + topology::LoopbackSkipReason(r.netdev);
        }
      }
      ctx.notListened = "no fabric rail: " + (why.empty() ? std::string("none found") : why);
    } else {
      proxy::RouterOptions fo;
      fo.hostName = config->hostName;
      if (fo.hostName.empty()) {
        char buf[256] = {};
        gethostname(buf, sizeof buf - 1);
        fo.hostName = buf;
      }
      fo.agent.port = static_cast<uint16_t>(config->discoveryPort);
      fo.agent.intervalMs = config->discoveryIntervalMs;
      fo.agent.deadIntervalMs = config->discoveryDeadMs;
      fo.agent.key = clusterKey;
      if (Status rs = proxy::Router::Start(fabricRails, fo, &router); !rs.ok()) {
        ctx.notListened = "the cabling agent did not start: " + rs.message();
      } else {
        // Wake on every graph change; return once listenMs has passed.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(listenMs);
        while (std::chrono::steady_clock::now() < until) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
              until - std::chrono::steady_clock::now());
          router->Agent().WaitFor([](const topology::ClusterGraph&, uint64_t) { return false; },
                                  static_cast<int>(std::max<int64_t>(1, left.count())));
        }
        graph = router->Agent().Graph();
        ctx.graph = &graph;
        ctx.listenedMs = listenMs;
        ctx.self = router->HostId();
      }
    }
  }
  const auto sections = MakeSections();
  if (asJson) {
    json doc = {{"sysfs", options.sysfsRoot}, {"hwloc_xml", options.hwlocXml}, {"filter", options.ifnameFilter}};
    for (const auto& section : sections) doc[section->name()] = section->ToJson(ctx);
    std::cout << topology::DumpJson(doc, 2) << "\n";
  } else {
    for (const auto& section : sections) section->PrintText(ctx, std::cout);
  }
  return keyError.empty() && initError.empty() ? 0 : 1;
}

}  // namespace
}  // namespace railyard::info

int main(int argc, char** argv) { return railyard::info::Run(argc, argv); }
