// Rail discovery; see discovery.h.
#include "topology/discovery.h"

#include <arpa/inet.h>
#include <hwloc.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "env/log.h"
#include "topology/interface_filter.h"
#include "topology/loopback_rail.h"

namespace railyard::topology {
namespace {

/// Logs `w` at WARN once per process: railyard-info and the plugin's fabric mode run
/// discovery more than once (new-user trial: the same warning twice on stderr). The
/// rail still carries it in Rail::warnings every time.
void WarnOnce(const std::string& w) {
  static std::mutex mu;
  static std::set<std::string> warned;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    first = warned.insert(w).second;
  }
  if (first) RY_WARN("%s", w.c_str());
}

constexpr unsigned long kLogSubsys = log::kNet | log::kInit;

// --- small sysfs readers --------------------------------------------------

// First line of a sysfs file, trailing whitespace removed; nullopt when the file is
// missing or the read fails (sysfs returns EINVAL for e.g. speed of a down link).
std::optional<std::string> ReadLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  if (!std::getline(in, text) && text.empty()) return std::nullopt;
  if (in.bad()) return std::nullopt;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::optional<long long> ParseInt(std::string_view text, int base = 10) {
  if (base == 16 && (text.starts_with("0x") || text.starts_with("0X"))) text.remove_prefix(2);
  if (text.empty()) return std::nullopt;
  long long value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<long long> ReadInt(const std::string& path, int base = 10) {
  auto line = ReadLine(path);
  if (!line) return std::nullopt;
  return ParseInt(*line, base);
}

// Entry names of a directory, sorted; empty when it does not exist.
std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Numeric entry names of a directory, sorted numerically.
std::vector<int> ListNumericDir(const std::string& path) {
  std::vector<int> out;
  for (const std::string& n : ListDir(path)) {
    auto v = ParseInt(n);
    if (v && *v >= 0 && *v <= INT_MAX) out.push_back(static_cast<int>(*v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool SafeName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos;
}

// "0000:01:00.0" -> (domain, bus, device, function); nullopt when not a bus id.
std::optional<std::tuple<unsigned, unsigned, unsigned, unsigned>> ParseBusId(const std::string& s) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4) return std::nullopt;
  return std::make_tuple(domain, bus, dev, fn);
}

// --- RDMA (class/infiniband) ------------------------------------------------

struct RdmaPort {
  std::string device;
  int port = 0;
  std::string state;      // "ACTIVE"
  std::string linkLayer;  // "Ethernet" / "InfiniBand"
  std::vector<Gid> gids;
  bool used = false;
};

std::vector<Gid> ReadGids(const std::string& portDir, const std::string& linkLayer) {
  std::vector<Gid> gids;
  for (int index : ListNumericDir(portDir + "/gids")) {
    const std::string i = std::to_string(index);
    auto text = ReadLine(portDir + "/gids/" + i);
    if (!text) continue;  // unreadable entry
    Gid g;
    g.index = index;
    if (!ParseGidText(*text, &g.raw)) {
      RY_TRACE(kLogSubsys, "%s/gids/%s: unparsable GID '%s'", portDir.c_str(), i.c_str(), text->c_str());
      continue;
    }
    if (std::all_of(g.raw.begin(), g.raw.end(), [](std::uint8_t b) { return b == 0; })) continue;  // hole
    g.text = *text;
    std::string type = ReadLine(portDir + "/gid_attrs/types/" + i).value_or("");  // EINVAL in containers
    if (type == "IB/RoCE v1") type = linkLayer == "InfiniBand" ? "IB" : "RoCE v1";
    g.type = type;
    g.ndev = ReadLine(portDir + "/gid_attrs/ndevs/" + i).value_or("");
    in6_addr a6;
    std::memcpy(&a6, g.raw.data(), sizeof(a6));
    g.ipv4Mapped = IN6_IS_ADDR_V4MAPPED(&a6);
    g.linkLocal = IN6_IS_ADDR_LINKLOCAL(&a6);
    char buf[INET6_ADDRSTRLEN] = {};
    if (g.ipv4Mapped) {
      inet_ntop(AF_INET, g.raw.data() + 12, buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
    }
    g.ip = buf;
    gids.push_back(std::move(g));
  }
  return gids;
}

std::vector<RdmaPort> ReadRdmaPorts(const std::string& sysfsRoot) {
  std::vector<RdmaPort> ports;
  const std::string base = sysfsRoot + "/class/infiniband/";
  for (const std::string& dev : ListDir(base)) {
    for (int p : ListNumericDir(base + dev + "/ports")) {
      const std::string dir = base + dev + "/ports/" + std::to_string(p);
      RdmaPort rp;
      rp.device = dev;
      rp.port = p;
      std::string state = ReadLine(dir + "/state").value_or("");  // "4: ACTIVE"
      if (auto colon = state.find(':'); colon != std::string::npos) {
        state = state.substr(colon + 1);
        state.erase(0, state.find_first_not_of(' '));
      }
      rp.state = state;
      rp.linkLayer = ReadLine(dir + "/link_layer").value_or("");
      rp.gids = ReadGids(dir, rp.linkLayer);
      ports.push_back(std::move(rp));
    }
  }
  return ports;
}

// Cross-check of the sysfs view with libibverbs; informational only.
void CrossCheckIbverbs(const std::vector<RdmaPort>& ports) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::set<std::string> verbs;
  if (list != nullptr) {
    for (int i = 0; i < n; ++i) {
      if (const char* name = ibv_get_device_name(list[i])) verbs.insert(name);
    }
    ibv_free_device_list(list);
  }
  std::set<std::string> sys;
  for (const RdmaPort& p : ports) sys.insert(p.device);
  RY_INFO(kLogSubsys, "ibverbs lists %zu RDMA device(s), sysfs %zu", verbs.size(), sys.size());
  for (const std::string& d : sys) {
    if (!verbs.count(d)) RY_INFO(kLogSubsys, "RDMA device %s is in sysfs but not in ibv_get_device_list", d.c_str());
  }
  for (const std::string& d : verbs) {
    if (!sys.count(d)) RY_INFO(kLogSubsys, "RDMA device %s is in ibv_get_device_list but not in sysfs", d.c_str());
  }
}

// --- hwloc ------------------------------------------------------------------

class Hwloc {
 public:
  Hwloc() = default;
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;
  ~Hwloc() {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
  }

  // Loads the live topology (xml empty) or an XML file, keeping every I/O object.
  Status Load(const std::string& xml) {
    if (hwloc_topology_init(&topo_) != 0) {
      topo_ = nullptr;
      return SystemError("hwloc_topology_init failed");
    }
    hwloc_topology_set_type_filter(topo_, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_set_type_filter(topo_, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    hwloc_topology_set_type_filter(topo_, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (!xml.empty() && hwloc_topology_set_xml(topo_, xml.c_str()) != 0) {
      int err = errno;
      return InvalidUsage("hwloc cannot use XML topology '" + xml + "': " + std::strerror(err));
    }
    if (hwloc_topology_load(topo_) != 0) {
      int err = errno;
      if (xml.empty()) return SystemError(std::string("hwloc_topology_load (live) failed: ") + std::strerror(err));
      return InvalidUsage("hwloc cannot load XML topology '" + xml + "': " + std::strerror(err));
    }
    loaded_ = true;
    return Status::Ok();
  }

  bool loaded() const { return loaded_; }

  // The PCI device for a bus id, else the PCI ancestor of an OS device named
  // `netdev` or `rdma`; nullptr when hwloc knows none of them.
  hwloc_obj_t FindPci(const std::string& busId, const std::string& netdev, const std::string& rdma) const {
    if (!busId.empty()) {
      if (hwloc_obj_t o = hwloc_get_pcidev_by_busidstring(topo_, busId.c_str())) return o;
    }
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo_, nullptr); os != nullptr;
         os = hwloc_get_next_osdev(topo_, os)) {
      if (os->name == nullptr) continue;
      if (os->name != netdev && (rdma.empty() || os->name != rdma)) continue;
      for (hwloc_obj_t p = os->parent; p != nullptr; p = p->parent) {
        if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
      }
    }
    return nullptr;
  }

  // NUMA node (OS index) of the non-I/O ancestor when its nodeset holds one node.
  int NumaNode(hwloc_obj_t obj) const {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo_, obj);
    if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
    return hwloc_bitmap_first(anc->nodeset);
  }

  // The GPU that shares the closest common ancestor with `obj` (fewest hops up from
  // obj); ties: CUDA, then NVML, then other GPU OS devices, then PCI-only GPUs, then name.
  std::string NearestGpu(hwloc_obj_t obj) const {
    std::vector<hwloc_obj_t> up;
    for (hwloc_obj_t p = obj; p != nullptr; p = p->parent) up.push_back(p);
    std::tuple<std::size_t, int, std::string> best{SIZE_MAX, INT_MAX, ""};
    auto consider = [&](hwloc_obj_t cand, int pref, const std::string& name) {
      for (hwloc_obj_t p = cand; p != nullptr; p = p->parent) {
        auto it = std::find(up.begin(), up.end(), p);
        if (it == up.end()) continue;
        auto key = std::make_tuple(static_cast<std::size_t>(it - up.begin()), pref, name);
        if (key < best) best = key;
        return;
      }
    };
    std::set<hwloc_obj_t> pciWithGpuOsdev;
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo_, nullptr); os != nullptr;
         os = hwloc_get_next_osdev(topo_, os)) {
      const auto t = os->attr->osdev.type;
      if (os->name == nullptr || (t != HWLOC_OBJ_OSDEV_GPU && t != HWLOC_OBJ_OSDEV_COPROC)) continue;
      const std::string name = os->name;
      const char* sub = os->subtype;
      int pref = 2;
      if ((sub != nullptr && std::strcmp(sub, "CUDA") == 0) || name.starts_with("cuda")) {
        pref = 0;
      } else if ((sub != nullptr && std::strcmp(sub, "NVML") == 0) || name.starts_with("nvml")) {
        pref = 1;
      }
      consider(os, pref, name);
      if (os->parent != nullptr && os->parent->type == HWLOC_OBJ_PCI_DEVICE) pciWithGpuOsdev.insert(os->parent);
    }
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo_, nullptr); pci != nullptr;
         pci = hwloc_get_next_pcidev(topo_, pci)) {
      const auto& a = pci->attr->pcidev;
      const bool display = (a.class_id >> 8) == 0x03;
      const bool gpuVendor = a.vendor_id == 0x10de || a.vendor_id == 0x1002;
      if (!(a.class_id == 0x0302 || (display && gpuVendor)) || pciWithGpuOsdev.count(pci)) continue;
      char id[32];
      std::snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.func);
      consider(pci, 3, id);
    }
    return std::get<0>(best) == SIZE_MAX ? std::string() : std::get<2>(best);
  }

 private:
  hwloc_topology_t topo_ = nullptr;
  bool loaded_ = false;
};

// --- per-interface collection ------------------------------------------------

struct IfFlags {
  bool known = false;
  bool up = false;
  bool running = false;
  bool loopback = false;
};

std::string FormatLink(std::optional<int> width, std::optional<double> speed) {
  std::string s = width ? "x" + std::to_string(*width) : std::string("x?");
  char buf[32];
  if (speed) {
    std::snprintf(buf, sizeof(buf), " %.1f GT/s", *speed);
  } else {
    std::snprintf(buf, sizeof(buf), " ? GT/s");
  }
  return s + buf;
}

// Why the interface counts as down; "" when it is up.
std::string DownReason(const Rail& r) {
  if (!r.up) return "down (interface not up)";
  if (r.operState == "down" || r.operState == "lowerlayerdown" || r.operState == "notpresent") {
    return "down (operstate " + r.operState + ")";
  }
  if (r.carrier.has_value() && !*r.carrier) return "down (no carrier)";
  if (!r.running) return "down (not running)";
  if (!r.rdmaDevice.empty() && !r.rdmaPortState.empty() && r.rdmaPortState != "ACTIVE") {
    return "down (RDMA port " + r.rdmaDevice + ":" + std::to_string(r.rdmaPort) + " is " + r.rdmaPortState + ")";
  }
  return "";
}

void Skip(bool log, std::vector<std::string>* skipped, const std::string& name, const std::string& reason) {
  if (log) RY_INFO(kLogSubsys, "rail candidate %s skipped: %s", name.c_str(), reason.c_str());
  if (skipped != nullptr) skipped->push_back(name + ": " + reason);
}

}  // namespace

bool ParseGidText(const std::string& text, std::array<std::uint8_t, 16>* out) {
  if (text.size() != 39) return false;
  std::array<std::uint8_t, 16> raw{};
  for (int group = 0; group < 8; ++group) {
    const std::size_t at = static_cast<std::size_t>(group) * 5;
    if (group < 7 && text[at + 4] != ':') return false;
    auto v = ParseInt(std::string_view(text).substr(at, 4), 16);
    if (!v || *v < 0 || *v > 0xffff) return false;
    for (std::size_t k = at; k < at + 4; ++k) {
      if (!std::isxdigit(static_cast<unsigned char>(text[k]))) return false;
    }
    raw[static_cast<std::size_t>(group) * 2] = static_cast<std::uint8_t>(*v >> 8);
    raw[static_cast<std::size_t>(group) * 2 + 1] = static_cast<std::uint8_t>(*v & 0xff);
  }
  *out = raw;
  return true;
}

std::optional<double> ParsePcieSpeed(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin || v <= 0) return std::nullopt;
  std::string_view rest(end);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.starts_with("GT/s")) return std::nullopt;
  return v;
}

Status DiscoverRails(const DiscoveryOptions& options, std::vector<Rail>* rails,
                     std::vector<std::string>* skipped) {
  const std::string& sysfs = options.sysfsRoot;
  const bool live = RealPath(sysfs) == "/sys";

  // Addresses and flags.
  std::vector<NetDevice> listed;
  if (options.interfaces) {
    listed = *options.interfaces;
  } else {
    RY_RETURN_IF_ERROR(ListNetDevices(&listed, sysfs));
  }
  std::map<std::string, std::vector<const NetDevice*>> byName;
  for (const NetDevice& d : listed) byName[d.name].push_back(&d);
  std::set<std::string> names;
  for (const std::string& n : ListDir(sysfs + "/class/net")) {
    if (SafeName(n)) names.insert(n);
  }
  for (const auto& [n, v] : byName) names.insert(n);

  // RDMA ports and the netdev -> port map.
  std::vector<RdmaPort> ports = ReadRdmaPorts(sysfs);
  if (live && options.crossCheckIbverbs) CrossCheckIbverbs(ports);
  std::map<std::string, std::size_t> portOf;  // netdev -> index in ports
  for (std::size_t i = 0; i < ports.size(); ++i) {
    for (const Gid& g : ports[i].gids) {
      if (!g.ndev.empty() && !portOf.count(g.ndev)) portOf[g.ndev] = i;
    }
  }
  {
    std::set<std::string> devices;
    for (const RdmaPort& p : ports) devices.insert(p.device);
    for (const std::string& dev : devices) {
      for (const std::string& nd : ListDir(sysfs + "/class/infiniband/" + dev + "/device/net")) {
        if (portOf.count(nd)) continue;
        // One port: that one. Several: dev_port + 1 when such a port exists, else the first.
        std::size_t first = SIZE_MAX, chosen = SIZE_MAX;
        const auto devPort = ReadInt(sysfs + "/class/net/" + nd + "/dev_port");
        for (std::size_t i = 0; i < ports.size(); ++i) {
          if (ports[i].device != dev) continue;
          if (first == SIZE_MAX) first = i;
          if (devPort && ports[i].port == *devPort + 1) chosen = i;
        }
        if (chosen == SIZE_MAX) chosen = first;
        if (chosen != SIZE_MAX) portOf[nd] = chosen;
      }
    }
  }

  // hwloc.
  Hwloc hw;
  if (!options.disableHwloc) {
    if (!options.hwlocXml.empty()) {
      RY_RETURN_IF_ERROR(hw.Load(options.hwlocXml));
    } else if (live) {
      Status s = hw.Load("");
      if (!s.ok()) RY_WARN("rail discovery continues without hwloc: %s", s.message().c_str());
    } else {
      RY_INFO(kLogSubsys, "hwloc not used: sysfs root %s is not the live /sys and no hwloc XML was given",
              sysfs.c_str());
    }
  }

  const InterfaceFilter filter = InterfaceFilter::Parse(options.ifnameFilter);
  std::set<std::string> uplinks;
  if (options.skipDefaultRoute) {
    if (options.defaultRouteInterfaces) {
      uplinks = *options.defaultRouteInterfaces;
    } else if (live) {
      uplinks = DefaultRouteInterfaces();
    }
  }
  std::vector<Rail> out;
  for (const std::string& name : names) {
    const std::string dir = sysfs + "/class/net/" + name;
    Rail r;
    r.netdev = name;

    IfFlags flags;
    auto addrs = byName.find(name);
    if (addrs != byName.end()) {
      const NetDevice& d = *addrs->second.front();
      flags = {true, d.up, d.running, d.loopback};
      r.ifIndex = d.ifIndex;
      for (const NetDevice* a : addrs->second) {
        RailAddress ra;
        ra.family = a->family();
        ra.address = a->addrString;
        ra.prefixLen = a->prefixLen;
        ra.linkLocal = a->linkLocal;
        ra.sockaddr = a->addr;
        r.addresses.push_back(std::move(ra));
      }
    }
    r.operState = ReadLine(dir + "/operstate").value_or("");
    if (auto c = ReadInt(dir + "/carrier")) r.carrier = *c != 0;
    if (!flags.known) {
      if (auto f = ReadInt(dir + "/flags", 16)) {
        flags.known = true;
        flags.up = (*f & IFF_UP) != 0;
        flags.loopback = (*f & IFF_LOOPBACK) != 0;
        // sysfs flags do not carry IFF_RUNNING (dev_get_flags computes it from the carrier).
        flags.running = flags.up && r.carrier.value_or(r.operState == "up" || r.operState == "unknown");
      }
    }
    r.up = flags.up;
    r.running = flags.running;
    if (r.ifIndex == 0) {
      if (auto idx = ReadInt(dir + "/ifindex"); idx && *idx > 0 && *idx <= INT_MAX) r.ifIndex = static_cast<int>(*idx);
    }
    r.mac = ReadLine(dir + "/address").value_or("");
    if (auto mtu = ReadInt(dir + "/mtu"); mtu && *mtu > 0 && *mtu <= INT_MAX) r.mtu = static_cast<int>(*mtu);
    r.speedMbps = ReadSpeedMbps(name, sysfs);

    // PCI function.
    r.pciPath = ReadPciPath(name, sysfs);
    std::string pciFnDir;  // sysfs directory of the PCI function
    if (!r.pciPath.empty()) {
      // The PCI function is the device itself or, for virtio-net ("<fn>/virtio2") and
      // similar, its nearest ancestor named like a bus id.
      for (std::filesystem::path fn = r.pciPath; fn.has_filename(); fn = fn.parent_path()) {
        std::string base = fn.filename().string();
        std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
        if (auto id = ParseBusId(base)) {
          r.pciBusId = base;
          r.pciFunction = static_cast<int>(std::get<3>(*id));
          pciFnDir = fn.string();
          break;
        }
      }
    }
    if (!pciFnDir.empty()) {
      const std::string& p = pciFnDir;
      if (auto w = ReadInt(p + "/current_link_width"); w && *w > 0 && *w <= 64) r.pcie.currentWidth = static_cast<int>(*w);
      if (auto w = ReadInt(p + "/max_link_width"); w && *w > 0 && *w <= 64) r.pcie.maxWidth = static_cast<int>(*w);
      if (auto s = ReadLine(p + "/current_link_speed")) r.pcie.currentSpeed = ParsePcieSpeed(*s);
      if (auto s = ReadLine(p + "/max_link_speed")) r.pcie.maxSpeed = ParsePcieSpeed(*s);
    }

    // Physical port.
    r.physPortName = ReadLine(dir + "/phys_port_name").value_or("");
    const auto devPort = ReadInt(dir + "/dev_port");
    std::optional<long long> ppn;
    if (r.physPortName.size() > 1 && r.physPortName[0] == 'p') ppn = ParseInt(std::string_view(r.physPortName).substr(1));
    if (ppn && *ppn >= 0 && *ppn <= INT_MAX) {
      r.physicalPort = static_cast<int>(*ppn);
      r.physicalPortSource = "phys_port_name";
    } else if (devPort && *devPort > 0 && *devPort <= INT_MAX) {
      r.physicalPort = static_cast<int>(*devPort);
      r.physicalPortSource = "dev_port";
    } else if (r.pciFunction >= 0) {
      r.physicalPort = r.pciFunction;
      r.physicalPortSource = "pci function";
    } else if (devPort && *devPort == 0 && std::filesystem::exists(dir + "/device")) {
      // dev_port 0 names a port only on a bus device: a virtual netdev (veth, bridge) has
      // no "device" link and always reads 0, which is no port at all (unknown, -1).
      r.physicalPort = 0;
      r.physicalPortSource = "dev_port";
    }

    // RDMA.
    if (auto it = portOf.find(name); it != portOf.end()) {
      RdmaPort& p = ports[it->second];
      p.used = true;
      r.rdmaDevice = p.device;
      r.rdmaPort = p.port;
      r.rdmaPortState = p.state;
      r.linkLayer = p.linkLayer;
      r.gids = p.gids;
    }

    // hwloc locality, then sysfs NUMA as the fallback.
    if (hw.loaded()) {
      if (hwloc_obj_t pci = hw.FindPci(r.pciBusId, name, r.rdmaDevice)) {
        const auto& a = pci->attr->pcidev;
        r.hwlocLinkSpeedGBps = a.linkspeed;
        if (r.pciBusId.empty()) {
          char id[32];
          std::snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.func);
          r.pciBusId = id;
          r.pciFunction = a.func;
        }
        r.numaNode = hw.NumaNode(pci);
        r.nearestGpu = hw.NearestGpu(pci);
      }
    }
    if (r.numaNode < 0 && !pciFnDir.empty()) {
      if (auto n = ReadInt(pciFnDir + "/numa_node"); n && *n >= 0 && *n <= INT_MAX) r.numaNode = static_cast<int>(*n);
    }

    // Skip rules.
    const bool explicitlyMatched = !filter.automatic() && !filter.list().exclude && filter.Matches(name);
    // Loopback: a table row only when the filter names it; never a fabric rail
    // (SelectFabricRails drops it), one wording (topology/loopback_rail.h).
    if (IsLoopbackInterface(name, flags.loopback) && !explicitlyMatched) {
      Skip(options.logRails, skipped, name, LoopbackRailRule());  // "<name>: " + the rule: LoopbackSkipReason(name)
      continue;
    }
    if (!filter.Matches(name)) {
      Skip(options.logRails, skipped, name, "filtered out by " + options.ifnameFilterSource + "='" + filter.text() + "'");
      continue;
    }
    if (uplinks.count(name) != 0) {
      if (!filter.NamesExactly(name)) {
        Skip(options.logRails, skipped, name,
             "carries a default route (an uplink, not a cable; a rail only when " +
                 options.ifnameFilterSource + " names it exactly: '=" + name + "')");
        continue;
      }
      r.carriesDefaultRoute = true;
      std::string w = name + " carries a default route (an uplink), but " + options.ifnameFilterSource +
                      "='" + filter.text() + "' names it exactly, so it is a rail: cabling hellos "
                      "(UDP broadcasts) go out on it and its network sees them";
      WarnOnce(w);
      r.warnings.push_back(std::move(w));
    }
    // A down interface without an address (an idle ifb0, say) is skipped for both, in one
    // text: railyard-info's table (down skipped) and the fabric's rail list (down kept,
    // so skipped for the address) used to give it two different reasons.
    const std::string down = DownReason(r);
    if (!down.empty() && r.addresses.empty() && (!options.includeDown || !options.includeNoAddress)) {
      Skip(options.logRails, skipped, name, down + " and no address");
      continue;
    }
    if (!down.empty() && !options.includeDown) {
      Skip(options.logRails, skipped, name, down);
      continue;
    }
    if (r.addresses.empty() && !options.includeNoAddress) {
      Skip(options.logRails, skipped, name, "no address");
      continue;
    }
    const bool routable = std::any_of(r.addresses.begin(), r.addresses.end(),
                                      [](const RailAddress& a) { return !a.linkLocal; });
    if (!r.addresses.empty() && !routable && !options.includeLinkLocal) {
      Skip(options.logRails, skipped, name, "only link-local addresses (169.254/16, fe80::/10)");
      continue;
    }

    if (r.pcie.degraded()) {
      std::string w = "PCIe link of " + name + " (" + r.pciBusId + ") trained at " +
                      FormatLink(r.pcie.currentWidth, r.pcie.currentSpeed) + ", below its maximum " +
                      FormatLink(r.pcie.maxWidth, r.pcie.maxSpeed);
      WarnOnce(w);
      r.warnings.push_back(std::move(w));
    }
    out.push_back(std::move(r));
  }

  for (const RdmaPort& p : ports) {
    if (!p.used) Skip(options.logRails, skipped, p.device + ":" + std::to_string(p.port), "no network interface");
  }

  std::sort(out.begin(), out.end(), [](const Rail& a, const Rail& b) {
    auto ka = ParseBusId(a.pciBusId), kb = ParseBusId(b.pciBusId);
    if (ka.has_value() != kb.has_value()) return ka.has_value();
    if (ka && *ka != *kb) return *ka < *kb;
    return a.netdev < b.netdev;
  });
  for (std::size_t i = 0; options.logRails && i < out.size(); ++i) {
    const Rail& r = out[i];
    RY_INFO(kLogSubsys, "rail %zu: %s rdma=%s:%d pci=%s numa=%d port=%d speed=%d gpu=%s", i, r.netdev.c_str(),
            r.rdmaDevice.empty() ? "-" : r.rdmaDevice.c_str(), r.rdmaPort,
            r.pciBusId.empty() ? "-" : r.pciBusId.c_str(), r.numaNode, r.physicalPort, r.speedMbps.value_or(-1),
            r.nearestGpu.empty() ? "none" : r.nearestGpu.c_str());
  }
  *rails = std::move(out);
  return Status::Ok();
}

}  // namespace railyard::topology
