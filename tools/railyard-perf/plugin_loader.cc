#include "tools/railyard-perf/plugin_loader.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tools/railyard-perf/nccl_logger.h"

namespace railyard::perf {
namespace {

constexpr const char* kStaticPlugin = "STATIC_PLUGIN";
/// The reason TryOpen records for a file dlopen did not find (OpenNetPlugin groups them).
const std::string kNotFound = "\x01not found: ";

bool EqualsIgnoreCase(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

/// NCCL: the value, compared over its own length, is a prefix of STATIC_PLUGIN.
bool IsStaticPlugin(const std::string& entry) {
  return !entry.empty() && entry.size() <= std::strlen(kStaticPlugin) &&
         strncasecmp(entry.c_str(), kStaticPlugin, entry.size()) == 0;
}

bool IsLibSo(const std::string& e) {
  return e.size() >= 6 && e.compare(0, 3, "lib") == 0 && e.compare(e.size() - 3, 3, ".so") == 0;
}

PluginCandidate Resolve(const std::string& entry) {
  PluginCandidate c;
  c.entry = entry;
  if (IsStaticPlugin(entry)) {
    c.staticPlugin = true;
    return c;
  }
  c.tries.push_back(entry);
  if (entry.find('/') == std::string::npos && !IsLibSo(entry)) {
    c.tries.push_back("libnccl-net-" + entry + ".so");
  }
  return c;
}

/// Which symbol was found, newest first.
struct Found {
  std::unique_ptr<Net> net;
  std::string symbol;
  const void* table = nullptr;
};

Found FindNetSymbol(void* lib, int onlyVersion) {
  Found f;
  auto want = [&](int v) { return onlyVersion == 0 || onlyVersion == v; };
  if (auto* t = static_cast<const ncclNet_v11_t*>(want(11) ? dlsym(lib, "ncclNetPlugin_v11") : nullptr)) {
    f = {WrapNetV11(t), "ncclNetPlugin_v11", t};
  } else if (auto* t10 = static_cast<const ncclNet_v10_t*>(want(10) ? dlsym(lib, "ncclNetPlugin_v10") : nullptr)) {
    f = {WrapNetV10(t10), "ncclNetPlugin_v10", t10};
  } else if (auto* t9 = static_cast<const ncclNet_v9_t*>(want(9) ? dlsym(lib, "ncclNetPlugin_v9") : nullptr)) {
    f = {WrapNetV9(t9), "ncclNetPlugin_v9", t9};
  } else if (auto* t8 = static_cast<const ncclNet_v8_t*>(want(8) ? dlsym(lib, "ncclNetPlugin_v8") : nullptr)) {
    f = {WrapNetV8(t8), "ncclNetPlugin_v8", t8};
  } else if (auto* t7 = static_cast<const ncclNet_v7_t*>(want(7) ? dlsym(lib, "ncclNetPlugin_v7") : nullptr)) {
    f = {WrapNetV7(t7), "ncclNetPlugin_v7", t7};
  } else if (auto* t6 = static_cast<const ncclNet_v6_t*>(want(6) ? dlsym(lib, "ncclNetPlugin_v6") : nullptr)) {
    f = {WrapNetV6(t6), "ncclNetPlugin_v6", t6};
  }
  return f;
}

std::string OldSymbols(void* lib) {
  std::string old;
  for (const char* s : {"ncclNetPlugin_v5", "ncclNetPlugin_v4", "ncclNetPlugin_v3", "ncclNetPlugin_v2"}) {
    if (dlsym(lib, s) != nullptr) old += (old.empty() ? "" : ", ") + std::string(s);
  }
  return old;
}

std::string LibraryFile(const void* addr, const std::string& fallback) {
  Dl_info info{};
  if (addr != nullptr && dladdr(addr, &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0') {
    return info.dli_fname;
  }
  return fallback;
}

/// Init + checks for one opened library. On failure closes the library (after
/// finalize for v11) and returns the reason.
Status InitOne(const OpenRequest& req, OpenedNet* o, std::vector<std::string>* log) {
  Net& net = *o->net;
  const std::string who = o->path + " (" + o->symbol + ", name \"" + net.name() + "\")";
  if (req.netName && !EqualsIgnoreCase(*req.netName, net.name())) {
    return InvalidUsage(who + ": skipped, NCCL_NET=" + *req.netName + " does not match its name");
  }
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  void* ctx = nullptr;
  (void)TakeFirstWarn();  // only what this init says counts
  const ncclResult_t ri = net.init(&ctx, req.commId, &config, req.logger);
  o->ctx = ctx;
  if (ri != ncclSuccess) {
    // The plugin's first WARN is the reason (e.g. a malformed RAILYARD_* variable).
    const std::string warn = req.logger == NcclLogger ? TakeFirstWarn() : std::string();
    const ncclResult_t rf = net.finalize(ctx);  // NCCL calls finalize even after a failed init
    o->ctx = nullptr;
    // finalize's result only when it too failed (new-user trial: "returned ncclSuccess"
    // at the end of the error read like a second error).
    return InvalidUsage(who + ": init failed: " + ResultName(ri) + " (" + std::to_string(int(ri)) + ")" +
                        (warn.empty() ? std::string() : ": " + warn) +
                        (rf == ncclSuccess ? std::string() : std::string("; finalize after it failed too: ") + ResultName(rf)));
  }
  int ndev = 0;
  const ncclResult_t rd = net.devices(&ndev);
  if (rd != ncclSuccess || ndev <= 0) {
    const ncclResult_t rf = net.finalize(ctx);
    o->ctx = nullptr;
    return InvalidUsage(who + ": devices() " +
                        (rd != ncclSuccess ? std::string("failed: ") + ResultName(rd) + " (" + std::to_string(int(rd)) + ")"
                                           : "reported " + std::to_string(ndev) + " devices") +
                        "; finalize returned " + ResultName(rf));
  }
  ncclNetProperties_v11_t props;
  const ncclResult_t rp = net.getProperties(0, &props);
  const bool hostOk = rp == ncclSuccess && props.netDeviceType == NCCL_NET_DEVICE_HOST;
  if (!hostOk) {
    const ncclResult_t rf = net.finalize(ctx);
    o->ctx = nullptr;
    std::string why = rp != ncclSuccess ? std::string("getProperties(0) failed: ") + ResultName(rp)
                                        : "getProperties(0).netDeviceType = " + std::to_string(int(props.netDeviceType)) +
                                              (props.netDeviceType == NCCL_NET_DEVICE_UNPACK
                                                   ? " (UNPACK needs GPU memory; railyard-perf drives host memory only)"
                                                   : " (NCCL requires HOST = 0)");
    return InvalidUsage(who + ": " + why + "; finalize returned " + ResultName(rf));
  }
  o->ndev = ndev;
  log->push_back("NET/Plugin: using " + who + ", " + std::to_string(ndev) + " device(s)");
  return Status::Ok();
}

/// dlopen + symbol lookup for one dlopen argument (nullptr = the executable).
/// Returns true when a library opened (whether or not it qualified): NCCL does
/// not try an entry's fallback name once the first name has opened.
bool TryOpen(const char* name, const std::string& entry, const OpenRequest& req, OpenedNet* out,
             std::vector<std::string>* log, std::vector<std::string>* reasons, bool* won) {
  *won = false;
  const std::string shown = name ? name : "<executable> (STATIC_PLUGIN)";
  dlerror();
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    const std::string msg = err ? err : "unknown dlopen error";
    const bool notFound = msg.find("No such file") != std::string::npos ||
                          msg.find("cannot open shared object file") != std::string::npos;
    log->push_back(notFound ? "NET/Plugin: Could not find: " + shown : "NET/Plugin: dlopen(" + shown + ") failed: " + msg);
    // dlerror() starts with the name it was given: say it once.
    const std::string text = msg.rfind(shown + ": ", 0) == 0 ? msg.substr(shown.size() + 2) : msg;
    reasons->push_back(notFound ? kNotFound + shown : shown + ": " + text);
    return false;
  }
  Found f = FindNetSymbol(lib, req.onlyVersion);
  if (!f.net) {
    const std::string old = OldSymbols(lib);
    const std::string sym = req.onlyVersion ? "ncclNetPlugin_v" + std::to_string(req.onlyVersion)
                                            : std::string("ncclNetPlugin_v11/_v10/_v9/_v8/_v7/_v6");
    const std::string why = shown + ": external network plugin is unsupported: no " + sym + " symbol" +
                            (old.empty() ? std::string() : " (found only " + old + "; NCCL 2.28.9 loads v6 or newer)");
    log->push_back("NET/Plugin: " + why);
    reasons->push_back(why);
    if (name != nullptr) dlclose(lib);
    return true;
  }
  OpenedNet o;
  o.net = std::move(f.net);
  o.lib = lib;
  o.entry = entry;
  o.symbol = f.symbol;
  o.path = name ? LibraryFile(f.table, name) : "<executable>";
  log->push_back("NET/Plugin: loaded " + o.path + " via " + shown + ", symbol " + o.symbol);
  Status s = InitOne(req, &o, log);
  if (!s.ok()) {
    log->push_back("NET/Plugin: " + s.message());
    reasons->push_back(s.message());
    o.ctx = nullptr;
    o.Close();
    return true;
  }
  *out = std::move(o);
  *won = true;
  return true;
}

}  // namespace

PluginSpec ResolvePluginValue(const std::optional<std::string>& value) {
  PluginSpec spec;
  if (!value || value->empty()) {
    spec.isDefault = true;
    spec.candidates.push_back(Resolve(kDefaultPluginLib));
    return spec;
  }
  if (EqualsIgnoreCase(*value, "none")) {
    spec.none = true;
    return spec;
  }
  std::size_t start = 0;
  while (start <= value->size()) {
    std::size_t comma = value->find(',', start);
    if (comma == std::string::npos) comma = value->size();
    const std::string entry = value->substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) continue;
    if (entry.size() >= 255) {
      spec.notes.push_back("NET/Plugin: skipping an entry of " + std::to_string(entry.size()) +
                           " characters (NCCL ignores entries of 255 or more)");
      continue;
    }
    if (int(spec.candidates.size()) >= kMaxExternalPlugins) {
      spec.notes.push_back("NET/Plugin: ignoring '" + entry + "': NCCL keeps at most " +
                           std::to_string(kMaxExternalPlugins) + " external plugins");
      continue;
    }
    spec.candidates.push_back(Resolve(entry));
  }
  if (spec.candidates.empty()) {  // e.g. ",,": nothing usable, behave as unset
    spec.isDefault = true;
    spec.candidates.push_back(Resolve(kDefaultPluginLib));
  }
  return spec;
}

std::vector<std::string> ConvenienceFallbacks(const std::string& exeDir) {
  if (exeDir.empty()) return {};
  std::vector<std::string> out;
  for (const char* rel : {"/../lib/libnccl-net-railyard.so", "/../../lib/libnccl-net-railyard.so"}) {
    const std::string path = exeDir + rel;
    char resolved[PATH_MAX];
    out.push_back(realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path);
  }
  return out;
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string path(buf, std::size_t(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

OpenedNet::OpenedNet(OpenedNet&& o) noexcept { *this = std::move(o); }

OpenedNet& OpenedNet::operator=(OpenedNet&& o) noexcept {
  if (this != &o) {
    Close();
    net = std::move(o.net);
    ctx = std::exchange(o.ctx, nullptr);
    lib = std::exchange(o.lib, nullptr);
    entry = std::move(o.entry);
    path = std::move(o.path);
    symbol = std::move(o.symbol);
    ndev = o.ndev;
    convenienceFallback = o.convenienceFallback;
  }
  return *this;
}

OpenedNet::~OpenedNet() { Close(); }

ncclResult_t OpenedNet::Close() {
  ncclResult_t r = ncclSuccess;
  if (net && ctx != nullptr) r = net->finalize(ctx);
  ctx = nullptr;
  net.reset();  // before dlclose: the adapter points into the library
  if (lib != nullptr && path != "<executable>") dlclose(lib);
  lib = nullptr;
  return r;
}

Status OpenNetPlugin(const OpenRequest& req, OpenedNet* out, std::vector<std::string>* log) {
  const PluginSpec spec = ResolvePluginValue(req.value);
  for (const auto& n : spec.notes) log->push_back(n);
  if (spec.none) {
    return InvalidUsage(
        req.source + "=none selects no external plugin; NCCL would use its internal IB/Socket "
        "transports, but railyard-perf has none: name a plugin (e.g. NCCL_NET_PLUGIN=railyard)");
  }
  std::vector<std::string> reasons;   // what TryOpen said, all candidates
  std::vector<std::string> perEntry;  // one line per candidate, for the error
  std::vector<size_t> perEntryFound;  // per candidate: files found and refused (init failed, bad table)
  // One line for a candidate: its entry once, and every file dlopen was asked for it.
  auto summarize = [&](const PluginCandidate& c, size_t from) {
    std::vector<std::string> missing, other;
    for (size_t i = from; i < reasons.size(); ++i) {
      (reasons[i].rfind(kNotFound, 0) == 0 ? missing : other).push_back(reasons[i].substr(
          reasons[i].rfind(kNotFound, 0) == 0 ? kNotFound.size() : 0));
    }
    // A file that was found and failed (init failed, bad table) comes first: it is the
    // cause; the names dlopen did not find follow, as "also not found".
    std::string line = "'" + c.entry + "': ";
    for (size_t i = 0; i < other.size(); ++i) line += (i ? "; " : "") + other[i];
    if (!missing.empty()) {
      line += other.empty() ? "not found: tried " : "; also not found: ";
      for (size_t i = 0; i < missing.size(); ++i) line += (i ? ", " : "") + missing[i];
      const bool bare = std::any_of(missing.begin(), missing.end(), [](const std::string& m) { return m.find('/') == std::string::npos; });
      if (bare && other.empty()) {
        const char* ld = std::getenv("LD_LIBRARY_PATH");
        line += std::string(" (dlopen searched LD_LIBRARY_PATH=") + (ld && *ld ? ld : "<unset>") +
                ", the ldconfig cache, /lib and /usr/lib)";
      }
    }
    perEntry.push_back(line);
    perEntryFound.push_back(other.size());
  };
  for (const auto& c : spec.candidates) {
    bool won = false;
    const size_t from = reasons.size();
    if (c.staticPlugin) {
      (void)TryOpen(nullptr, c.entry, req, out, log, &reasons, &won);
      if (won) return Status::Ok();
      summarize(c, from);
      continue;
    }
    for (const auto& name : c.tries) {
      if (TryOpen(name.c_str(), c.entry, req, out, log, &reasons, &won)) break;  // opened: no fallback name
    }
    if (won) return Status::Ok();
    summarize(c, from);
  }
  if (spec.isDefault) {
    for (const auto& path : ConvenienceFallbacks(req.exeDir)) {
      if (access(path.c_str(), R_OK) != 0) continue;
      // Unset, empty, or only commas: NCCL reads the last two as unset too (ResolvePluginValue).
      const std::string as = !req.value ? req.source + " is unset"
                                        : req.source + "='" + *req.value + "' names no plugin (read as unset, as NCCL does)";
      log->push_back("NET/Plugin: " + as + " and " + std::string(kDefaultPluginLib) +
                     " did not load; railyard-perf convenience (NCCL itself does not do this): trying " + path);
      bool won = false;
      const size_t from = reasons.size();
      (void)TryOpen(path.c_str(), "", req, out, log, &reasons, &won);
      if (won) {
        out->convenienceFallback = true;
        return Status::Ok();
      }
      PluginCandidate fallback;
      fallback.entry = path + " (railyard-perf's fallback)";
      summarize(fallback, from);
      break;
    }
  }
  const auto initFailed = std::find_if(reasons.begin(), reasons.end(), [](const std::string& r) {
    return r.find(": init failed: ") != std::string::npos;
  });
  const bool loadedButFailed = initFailed != reasons.end();
  const std::string setting =
      req.source + "=" + (req.value ? "'" + *req.value + "'" : std::string("<unset>: NCCL opens ") + kDefaultPluginLib);
  // A plugin that loaded and failed its init is the news, not the names that were not found.
  std::string msg = loadedButFailed ? "net plugin init failed (" + setting + "): " + *initFailed
                                    : "no usable net plugin (" + setting + "):";
  // One candidate whose one found file is the init failure of the headline: its line
  // would only repeat it (new-user trial: with -np 2 the same cause was printed four
  // times), the names dlopen did not find meaning nothing once a file loaded. Several
  // candidates, or other files refused too: each line says what it was.
  if (!loadedButFailed || perEntry.size() != 1 || perEntryFound.front() > 1) {
    if (loadedButFailed) msg += "\n  every candidate:";
    for (const auto& r : perEntry) msg += "\n  - " + r;
  }
  for (const auto& n : spec.notes) msg += "\n  - " + n;
  std::string beside;  // the Railyard plugin of this build or install, when it is there
  for (const auto& path : ConvenienceFallbacks(req.exeDir)) {
    if (access(path.c_str(), R_OK) == 0) {
      beside = path;
      break;
    }
  }
  const bool netNameSkipped = std::any_of(reasons.begin(), reasons.end(), [](const std::string& r) {
    return r.find(": skipped, NCCL_NET=") != std::string::npos;
  });
  if (netNameSkipped && req.netName) {
    // The plugin was found and skipped by name: the setting to change is NCCL_NET, not
    // NCCL_NET_PLUGIN (new-user trial: the hint repeated the NCCL_NET_PLUGIN in use).
    msg += "\n  hint: NCCL_NET='" + *req.netName + "' makes NCCL use only a network of that name; unset it, or "
           "set it to the plugin's name (NCCL_NET=Railyard for Railyard)";
  } else if (loadedButFailed) {
    msg += "\n  hint: the library loaded but its init() failed; its first WARN (quoted after the "
           "result) and the WARN lines above say why (often a malformed RAILYARD_* variable)";
  } else if (!beside.empty()) {
    msg += "\n  hint: the Railyard plugin beside this railyard-perf is " + beside + ": " + req.source + "=" + beside +
           ", or NCCL_NET_PLUGIN=railyard with LD_LIBRARY_PATH=" + beside.substr(0, beside.rfind('/'));
  } else {
    msg += "\n  hint: NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH=<build>/lib railyard-perf ... (NCCL opens "
           "libnccl-net-<name>.so for a name, or the file a path names)";
  }
  return InvalidUsage(msg);
}

void PrintOpenLog(const std::vector<std::string>& log, const OpenedNet& net, int rank) {
  if (!InfoLogging(NCCL_INIT | NCCL_NET) && !(net.convenienceFallback && rank == 0)) return;
  for (const auto& l : log) std::fprintf(stderr, "railyard-perf: rank %d: %s\n", rank, l.c_str());
}

}  // namespace railyard::perf
