#include "tools/railyard-perf/nccl_logger.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

namespace railyard::perf {

namespace {

/// The log level asked for: NCCL_DEBUG as NCCL reads it, else RAILYARD_DEBUG (the
/// standalone tools' variable: a user of this tool sets it and expected it to count,
/// new-user trial); null when neither is set.
const char* DebugLevel() {
  const char* v = std::getenv("NCCL_DEBUG");
  if (v != nullptr && *v != '\0') return v;
  v = std::getenv("RAILYARD_DEBUG");
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

namespace {

std::atomic<int> gRank{-1};
std::mutex gWarnMu;
std::string gFirstWarn;  // guarded by gWarnMu
bool gHaveWarn = false;  // guarded by gWarnMu

int Threshold() {
  static const int level = [] {
    const char* v = DebugLevel();
    if (v == nullptr) return int(NCCL_LOG_WARN);
    if (strcasecmp(v, "VERSION") == 0) return int(NCCL_LOG_VERSION);
    if (strcasecmp(v, "WARN") == 0) return int(NCCL_LOG_WARN);
    if (strcasecmp(v, "INFO") == 0) return int(NCCL_LOG_INFO);
    if (strcasecmp(v, "TRACE") == 0) return int(NCCL_LOG_TRACE);
    if (strcasecmp(v, "ABORT") == 0) return int(NCCL_LOG_WARN);
    return int(NCCL_LOG_NONE);
  }();
  return level;
}

/// The subsystems whose lines (WARN, INFO, TRACE) are shown: NCCL_DEBUG_SUBSYS as NCCL reads
/// it (a comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY,
/// NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL, any case; a leading '^' shows all but
/// those; unknown names add nothing; set but empty: none), read once. Unset: all of
/// them, unlike NCCL's default (INIT,BOOTSTRAP,ENV), which would hide the plugin's NET
/// lines (a tool that exists to watch a plugin shows them; new-user trial: the variable
/// was ignored).
unsigned long SubsystemMask() {
  static const unsigned long mask = [] {
    const char* v = std::getenv("NCCL_DEBUG_SUBSYS");
    if (v == nullptr) return static_cast<unsigned long>(NCCL_ALL);  // set but empty: none, as NCCL
    static constexpr std::pair<const char*, unsigned long> kNames[] = {
        {"INIT", NCCL_INIT},   {"COLL", NCCL_COLL},         {"P2P", NCCL_P2P},     {"SHM", NCCL_SHM},
        {"NET", NCCL_NET},     {"GRAPH", NCCL_GRAPH},       {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},
        {"ALLOC", NCCL_ALLOC}, {"CALL", NCCL_CALL},         {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS},
        {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},   {"PROFILE", NCCL_PROFILE}, {"RAS", NCCL_RAS},
        {"ALL", static_cast<unsigned long>(NCCL_ALL)}};
    const bool invert = *v == '^';
    std::string list(invert ? v + 1 : v);
    unsigned long named = 0;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string name = list.substr(at, comma - at);
      for (const auto& [n, bit] : kNames) {
        if (strcasecmp(n, name.c_str()) == 0) named |= bit;
      }
      at = comma + 1;
    }
    return invert ? ~named : named;
  }();
  return mask;
}

const char* LevelName(ncclDebugLogLevel level) {
  switch (level) {
    case NCCL_LOG_WARN: return "WARN";
    case NCCL_LOG_INFO: return "INFO";
    case NCCL_LOG_TRACE: return "TRACE";
    case NCCL_LOG_VERSION: return "VERSION";
    case NCCL_LOG_ABORT: return "ABORT";
    default: return "";
  }
}

}  // namespace

bool InfoLogging(unsigned long subsys) {
  const char* dbg = DebugLevel();
  return dbg != nullptr && (strcasecmp(dbg, "INFO") == 0 || strcasecmp(dbg, "TRACE") == 0) &&
         (subsys & SubsystemMask()) != 0;
}

void SetLoggerRank(int rank) { gRank.store(rank); }

std::string TakeFirstWarn() {
  std::lock_guard<std::mutex> lock(gWarnMu);
  gHaveWarn = false;
  return std::exchange(gFirstWarn, std::string());
}

void NcclLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                const char* fmt, ...) {
  const bool warn = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT;
  // ABORT is always shown; NCCL also prints aborts regardless of the level. Every other
  // line goes through the subsystem filter, WARN included, as in NCCL (whose own WARN
  // lines, and Railyard's, carry every subsystem bit).
  const bool filtered = level != NCCL_LOG_ABORT && (flags & SubsystemMask()) == 0;
  const bool shown = level == NCCL_LOG_ABORT || (level != NCCL_LOG_NONE && int(level) <= Threshold() && !filtered);
  if (!shown && !warn) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  (void)std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (warn) {
    std::lock_guard<std::mutex> lock(gWarnMu);
    if (!gHaveWarn) {
      gFirstWarn = msg;
      gHaveWarn = true;
    }
  }
  if (!shown) return;
  char host[64] = "?";
  (void)gethostname(host, sizeof(host) - 1);
  const int rank = gRank.load();
  const std::string r = rank >= 0 ? std::to_string(rank) : "?";
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT) {
    std::fprintf(stderr, "%s:%d:%ld [%s] %s:%d NCCL %s %s\n", host, int(getpid()), long(syscall(SYS_gettid)),
                 r.c_str(), file ? file : "?", line, LevelName(level), msg);
  } else {
    std::fprintf(stderr, "%s:%d:%ld [%s] NCCL %s %s\n", host, int(getpid()), long(syscall(SYS_gettid)), r.c_str(),
                 LevelName(level), msg);
  }
}

}  // namespace railyard::perf
