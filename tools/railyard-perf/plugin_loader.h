// Finds, opens and initialises a net plugin exactly as NCCL 2.28.9 does
// (fact sheet §1.1–§1.4), minus NCCL's internal IB/Socket fallbacks, which
// railyard-perf does not have.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "env/status.h"
#include "tools/railyard-perf/net_adapter.h"

namespace railyard::perf {

/// The library NCCL opens when NCCL_NET_PLUGIN is unset.
inline constexpr const char* kDefaultPluginLib = "libnccl-net.so";
/// Most external entries NCCL keeps from a comma list (16 slots minus IB and Socket).
inline constexpr int kMaxExternalPlugins = 14;

/// One entry of the NCCL_NET_PLUGIN list, resolved to what dlopen will be asked.
struct PluginCandidate {
  std::string entry;                ///< the entry as written
  std::vector<std::string> tries;   ///< dlopen arguments in order (the fallback only if the first fails)
  bool staticPlugin = false;        ///< entry is a prefix of STATIC_PLUGIN: dlopen(NULL), tries is empty
};

/// The whole NCCL_NET_PLUGIN value, resolved.
struct PluginSpec {
  bool isDefault = false;                   ///< the value was unset (or empty): libnccl-net.so
  bool none = false;                        ///< "none" (any case): no external plugin at all
  std::vector<PluginCandidate> candidates;  ///< in list order, at most kMaxExternalPlugins
  std::vector<std::string> notes;           ///< entries skipped (too long, beyond the 14th), for INFO logs
};

/// NCCL's rules: unset/empty → {libnccl-net.so}; "none" (case-insensitive) →
/// none; else split on ',', empty entries dropped, entries of 255+ characters
/// skipped, at most 14 kept. Each entry is dlopen'ed as written; if that fails
/// and the entry has no '/' and is not "lib*.so", "libnccl-net-<entry>.so" is
/// tried next. An entry that is a case-insensitive prefix of "STATIC_PLUGIN"
/// means dlopen(NULL) (symbols from the executable).
PluginSpec ResolvePluginValue(const std::optional<std::string>& value);

/// The `-- railyard-perf convenience --` fallback paths tried when the value was
/// the default and nothing loaded: <exeDir>/../lib and <exeDir>/../../lib
/// (install and build-tree layouts) + libnccl-net-railyard.so.
std::vector<std::string> ConvenienceFallbacks(const std::string& exeDir);

/// Directory of the running executable (from /proc/self/exe), "" if unknown.
std::string ExecutableDir();

/// A plugin that loaded, initialised and passed NCCL's checks. Owns the library
/// handle and the ctx: call Close() (finalize + dlclose) when done.
struct OpenedNet {
  std::unique_ptr<Net> net;     ///< version-agnostic calls
  void* ctx = nullptr;          ///< from init
  void* lib = nullptr;          ///< dlopen handle
  std::string entry;            ///< the NCCL_NET_PLUGIN entry that won ("" for the convenience fallback)
  std::string path;             ///< what dlopen was given (or the resolved file when known)
  std::string symbol;           ///< e.g. "ncclNetPlugin_v11"
  int ndev = 0;                 ///< devices() result (> 0)
  bool convenienceFallback = false;  ///< loaded by the railyard-perf fallback, not NCCL's rules

  /// Empty (nothing loaded).
  OpenedNet() = default;
  /// Takes over `other`'s library and ctx.
  OpenedNet(OpenedNet&& other) noexcept;
  /// Closes this one, then takes over `other`'s library and ctx.
  OpenedNet& operator=(OpenedNet&& other) noexcept;
  /// Close().
  ~OpenedNet();
  /// finalize(ctx) then dlclose. Idempotent. Returns finalize's result.
  ncclResult_t Close();
};

/// Inputs of OpenNetPlugin.
struct OpenRequest {
  std::optional<std::string> value;   ///< NCCL_NET_PLUGIN / --plugin (nullopt = unset)
  std::optional<std::string> netName; ///< NCCL_NET: only a plugin whose `name` matches (any case) is used
  uint64_t commId = 0;                ///< passed to v11 init (NCCL passes the comm hash)
  ncclDebugLogger_t logger = nullptr; ///< passed to init
  std::string exeDir;                 ///< for ConvenienceFallbacks; "" disables them
  /// Testing aid (--net-version): 6..11 = look only for ncclNetPlugin_v<N>, to
  /// exercise a plugin's older tables. 0 = NCCL's rule: the newest one found.
  int onlyVersion = 0;
  /// Where `value` came from, as the error names it: "NCCL_NET_PLUGIN" or "--plugin".
  std::string source = "NCCL_NET_PLUGIN";
};

/// Tries the candidates in order as NCCL's ncclNetInit does: open (§1.2), find
/// the newest of ncclNetPlugin_v11.._v6 (§1.3; v5 and older are reported
/// unsupported), skip a name that NCCL_NET rejects, call init; on init failure
/// or devices() <= 0 call finalize anyway (v11, as NCCL does), close and move
/// on; check getProperties(0).netDeviceType is HOST. The first candidate that
/// passes wins. Every step is appended to `log` (one line each). Fails with
/// InvalidUsage when nothing qualifies: "no usable net plugin (<source>='<value>')", then
/// one line per entry of the list, in order, naming the entry once and every file
/// dlopen was asked for it ("'foo': not found: tried foo, libnccl-net-foo.so ..."), or
/// why the library that opened was not used; then a hint naming the Railyard plugin
/// beside this railyard-perf when there is one.
Status OpenNetPlugin(const OpenRequest& req, OpenedNet* out, std::vector<std::string>* log);

/// Prints OpenNetPlugin's step `log` ("railyard-perf: rank R: ...") as NCCL would: only
/// with NCCL_DEBUG=INFO or TRACE, and on rank 0 when the plugin was found by the
/// convenience fallback (`net.convenienceFallback`: the user should know which file ran).
/// A failure's message already names every entry and file tried.
void PrintOpenLog(const std::vector<std::string>& log, const OpenedNet& net, int rank);

}  // namespace railyard::perf
