// The ncclDebugLogger_t railyard-perf hands to a plugin's init: prints like
// NCCL does ("host:pid:tid [rank] NCCL WARN ..."), filtered by NCCL_DEBUG, or by
// RAILYARD_DEBUG when NCCL_DEBUG is unset (a standalone tool's variable).
#pragma once

#include <string>

#include "plugin/abi/common.h"

namespace railyard::perf {

/// Sets the rank shown in every message (default -1: "[?]").
void SetLoggerRank(int rank);

/// True when NCCL_DEBUG (else RAILYARD_DEBUG) is INFO or TRACE (any case) and
/// NCCL_DEBUG_SUBSYS shows one of `subsys` (NCCL_INIT, NCCL_NET, ... bits of
/// plugin/abi/common.h): railyard-perf's own step lines go to stderr then, the loader's
/// log under NCCL_INIT | NCCL_NET (as NCCL logs its plugin loading), "timed iterations
/// start" under NCCL_NET (new-user trial: they showed whatever the variable said). The
/// level is read on every call, the subsystems once.
bool InfoLogging(unsigned long subsys);

/// The text of the first WARN (or ABORT) the logger got since the previous call, whether or
/// not NCCL_DEBUG showed it; "" when none. The loader takes it around a plugin's init() to
/// say why the init failed. Thread-safe.
std::string TakeFirstWarn();

/// The logger function. Threshold from NCCL_DEBUG, else RAILYARD_DEBUG (VERSION, WARN,
/// INFO, TRACE; NONE or anything else: nothing; default WARN), read once. Lines of
/// subsystems NCCL_DEBUG_SUBSYS leaves out are not shown, WARN included (as in NCCL;
/// unset: every subsystem, where NCCL shows only INIT,BOOTSTRAP,ENV). Thread-safe; writes
/// one line per call to stderr.
void NcclLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                const char* fmt, ...) __attribute__((format(printf, 5, 6)));

}  // namespace railyard::perf
