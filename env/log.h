// Logging: through the logger NCCL hands to init, or to stderr for standalone tools.
#pragma once

#include <cstdarg>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace railyard::log {

/// Levels, numerically equal to NCCL's ncclDebugLogLevel (src/include/nccl_common.h):
/// NONE 0, VERSION 1, WARN 2, INFO 3, ABORT 4, TRACE 5.
enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kAbort = 4, kTrace = 5 };

/// Subsystem flags, equal to NCCL's (nccl_common.h): INIT 0x1, NET 0x10, ENV 0x80, ...
enum Subsys : unsigned long {
  kInit = 0x1,
  kP2p = 0x4,
  kNet = 0x10,
  kGraph = 0x20,
  kEnv = 0x80,
  kProxy = 0x400,
  kAll = ~0ul,
};

/// NCCL's logger signature (ncclDebugLogger_t, nccl_common.h).
using NcclLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                            const char* fmt, ...);

/// Parses a level name as RAILYARD_DEBUG spells it: NONE, VERSION, WARN, INFO or
/// TRACE, compared case-insensitively, with no surrounding whitespace. ABORT is
/// not accepted (it is an NCCL-internal level). Returns nullopt for anything else.
std::optional<Level> ParseLevelName(std::string_view name);

/// The upper-case name of `level` ("WARN", ...); "UNKNOWN" for values outside the enum.
const char* LevelName(Level level);

/// Routes every later message to `logger` (the function NCCL passes to init).
/// nullptr restores the stderr sink. Thread-safe.
void SetNcclLogger(NcclLogger logger);

/// Sets the stderr sink's threshold (messages above `level` are dropped).
/// The default comes from RAILYARD_DEBUG, read with getenv at first use (not through
/// env::Load(), which itself logs); unset, empty or malformed means kWarn.
/// Tools may call this after parsing flags. Thread-safe.
void SetStderrLevel(Level level);

/// True when a message at `level` would be emitted by the stderr sink, or always
/// when an NCCL logger or a test sink is installed (NCCL filters by NCCL_DEBUG itself).
/// kNone is never enabled.
bool Enabled(Level level);

/// Test hook: while `sink` is non-empty, every message (at any level, regardless of
/// the stderr threshold and of an installed NCCL logger) goes to `sink` instead of
/// the normal sinks, already formatted and without file/line. An empty function
/// restores normal routing. Thread-safe; `sink` may be called from any thread.
void SetSinkForTesting(std::function<void(Level, const std::string&)> sink);

/// printf-style message. `file`/`line` identify the call site. With an NCCL logger
/// installed, the logger is called as logger(level, subsys, basename(file), line,
/// "%s", message), so NCCL_DEBUG / NCCL_DEBUG_SUBSYS filter it. Otherwise, when
/// `level` <= the stderr threshold (kAbort counts as kWarn), one line
/// "railyard LEVEL [pid N] file:line message" goes to stderr in a single fprintf.
/// kNone is never emitted. Thread-safe.
void Write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace railyard::log

/// WARN lines carry every subsystem bit, as NCCL's own WARN does: NCCL drops a line
/// whose flags miss NCCL_DEBUG_SUBSYS's mask at every level, WARN included, and its
/// default mask (INIT,BOOTSTRAP,ENV) would hide a WARN flagged NET (review: the plugin's
/// warnings were invisible inside NCCL unless NCCL_DEBUG_SUBSYS named NET).
#define RY_WARN(...) ::railyard::log::Write(::railyard::log::Level::kWarn, ::railyard::log::kAll, __FILE__, __LINE__, __VA_ARGS__)
#define RY_INFO(subsys, ...) ::railyard::log::Write(::railyard::log::Level::kInfo, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define RY_TRACE(subsys, ...) ::railyard::log::Write(::railyard::log::Level::kTrace, (subsys), __FILE__, __LINE__, __VA_ARGS__)
