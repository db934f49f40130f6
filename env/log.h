// Logging: through the logger NCCL hands to init, or to stderr for standalone tools.
#pragma once

#include <cstdarg>

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

/// Routes every later message to `logger` (the function NCCL passes to init).
/// nullptr restores the stderr sink. Thread-safe.
void SetNcclLogger(NcclLogger logger);

/// Sets the stderr sink's threshold (messages above `level` are dropped).
/// The default comes from RAILYARD_DEBUG; tools may call this after parsing flags.
void SetStderrLevel(Level level);

/// True when a message at `level` would be emitted by the stderr sink, or always
/// when an NCCL logger is installed (NCCL filters by NCCL_DEBUG itself).
bool Enabled(Level level);

/// printf-style message. `file`/`line` identify the call site.
void Write(Level level, unsigned long subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace railyard::log

#define RY_WARN(...) ::railyard::log::Write(::railyard::log::Level::kWarn, ::railyard::log::kNet, __FILE__, __LINE__, __VA_ARGS__)
#define RY_INFO(subsys, ...) ::railyard::log::Write(::railyard::log::Level::kInfo, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define RY_TRACE(subsys, ...) ::railyard::log::Write(::railyard::log::Level::kTrace, (subsys), __FILE__, __LINE__, __VA_ARGS__)
