// railyard-perf: nccl-tests style benchmark that drives an NCCL net plugin
// through its ABI as NCCL 2.28.9 does. See README.md in this directory.
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "tools/railyard-perf/bootstrap.h"
#include "tools/railyard-perf/launcher.h"
#include "tools/railyard-perf/options.h"
#include "tools/railyard-perf/patterns.h"
#include "tools/railyard-perf/plugin_loader.h"
#include "tools/railyard-perf/report.h"
#include "tools/railyard-perf/runner.h"

using namespace railyard::perf;

namespace {

/// --rank/--nranks/--root: this process is one rank of a multi-host run.
int RunMultiHost(const Options& opts) {
  alarm(unsigned(opts.timeoutSec) + 5);  // hard stop should the deadline checks not be reached
  std::string host;
  int port = 0;
  (void)ParseHostPort(opts.root, &host, &port);  // validated by ParseOptions
  const Deadline deadline = DeadlineIn(opts.timeoutSec);
  Bootstrap boot;
  railyard::Status s;
  if (opts.rank == 0) {
    Listener l;
    s = ListenTcp(host, port, &l);
    if (s.ok() && opts.nranks > 1) {  // one line, as the joining ranks say theirs
      std::fprintf(stderr, "railyard-perf: rank 0: waiting for %d rank(s) to join at %s; until the -T limit (%d s)\n",
                   opts.nranks - 1, opts.root.c_str(), opts.timeoutSec);
    }
    if (s.ok()) s = Bootstrap::CreateRoot(l.fd, opts.nranks, deadline, &boot);
  } else {
    s = Bootstrap::Join(host, port, opts.rank, opts.nranks, deadline, &boot);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "railyard-perf: rank %d: %s\n", opts.rank, s.message().c_str());
    // Ranks started with different --rank/--nranks are bad options (exit 2, as --help says).
    return s.code() == railyard::Code::kInvalidUsage ? kExitUsage : kExitError;
  }
  return RunRank(opts, boot);
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  bool exitNow = false;
  if (railyard::Status s = ParseOptions(argc, argv, &opts, &exitNow); !s.ok()) {
    std::fprintf(stderr, "railyard-perf: %s\nRun with --help for more information.\n", s.message().c_str());
    return kExitUsage;
  }
  if (exitNow) return kExitOk;
  const int nranks = opts.np > 0 ? opts.np : opts.nranks;
  if (const std::string why = CheckRanks(opts.pattern, nranks); !why.empty()) {
    std::fprintf(stderr, "railyard-perf: %s\n", why.c_str());
    return kExitUsage;
  }
  if (const std::string note = SizeNote(opts); !note.empty() && (opts.np > 0 || opts.rank == 0)) {
    std::fprintf(stderr, "railyard-perf: note: %s\n", note.c_str());
  }
  // Only rank 0 writes --json; find out now, not after the whole run.
  if (!opts.jsonPath.empty() && (opts.np > 0 || opts.rank == 0)) {
    if (railyard::Status s = CheckJsonWritable(opts.jsonPath); !s.ok()) {
      std::fprintf(stderr, "railyard-perf: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  // NCCL_NET_PLUGIN=none leaves NCCL with its internal transports only; we have none.
  const char* env = std::getenv("NCCL_NET_PLUGIN");
  const std::optional<std::string> value = opts.plugin ? opts.plugin : env ? std::optional<std::string>(env) : std::nullopt;
  if (ResolvePluginValue(value).none) {
    std::fprintf(stderr,
                 "railyard-perf: %s=%s selects no external net plugin. NCCL would fall back to its internal IB/Socket\n"
                 "transports, but railyard-perf has no transport of its own: name a plugin, e.g. NCCL_NET_PLUGIN=railyard\n",
                 opts.plugin ? "--plugin" : "NCCL_NET_PLUGIN", value->c_str());
    return kExitError;
  }
  if (opts.np == 0) return RunMultiHost(opts);

  // -np ranks all run on this host: keep their traffic on loopback unless the user
  // chose interfaces. RAILYARD_SOCKET_IFNAME chooses everything; NCCL_SOCKET_IFNAME chooses
  // the devices outside fabric mode only (never the rails), so with just NCCL's variable
  // the ranks run without fabric mode, as the plugin always did with it.
  auto unset = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr || *v == '\0';
  };
  // What railyard-perf put in the ranks' environment itself: a plugin message naming it
  // (e.g. "filtered out by RAILYARD_SOCKET_IFNAME='=lo'") is about that, not the user's setting.
  std::string injected;
  if (unset("RAILYARD_SOCKET_IFNAME")) {
    if (unset("NCCL_SOCKET_IFNAME")) {
      setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
      injected = "RAILYARD_SOCKET_IFNAME='=lo' (exactly the loopback interface lo)";
    } else if (unset("RAILYARD_FABRIC")) {
      setenv("RAILYARD_FABRIC", "off", 1);
      injected = "RAILYARD_FABRIC='off' (NCCL_SOCKET_IFNAME is set and chooses the devices; it never chooses rails)";
    }
  }

  const LaunchResult r = LaunchLocal(opts.np, opts.timeoutSec, [&](Bootstrap& boot) { return RunRank(opts, boot); });
  if (r.exitCode != 0) {
    std::fprintf(stderr, "railyard-perf: FAILED: %s\n", r.message.c_str());
    // Only when a rank's error is about the interfaces or names the variable -np set
    // (new-user trial: it came with every failed call, the parent not seeing its ranks'
    // errors); never for wrong data, a -T timeout or a signal.
    const std::string variable = injected.substr(0, injected.find('='));
    const bool aboutInterfaces =
        std::any_of(r.rankErrors.begin(), r.rankErrors.end(), [&](const std::string& e) {
          return e.find(variable) != std::string::npos || e.find("interface") != std::string::npos;
        });
    if (!injected.empty() && r.exitCode == kExitError && !r.timedOut && aboutInterfaces) {
      std::fprintf(stderr,
                   "railyard-perf: note: %s was set by railyard-perf -np for its local ranks, not taken from "
                   "your environment; set RAILYARD_SOCKET_IFNAME yourself to choose the interfaces\n",
                   injected.c_str());
    }
    return r.exitCode;
  }
  return kExitOk;
}
