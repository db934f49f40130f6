// railyard-perf's collective runs (-p allreduce | allgather | reducescatter): opens
// the net plugin as NCCL does (OpenNetPlugin), then its CollNet table (the newest of
// ncclCollNetPlugin_v12 / _v11), connects one collComm over all ranks (handles
// exchanged through the bootstrap), and times each size as nccl-tests does.
#pragma once

#include "tools/railyard-perf/bootstrap.h"
#include "tools/railyard-perf/options.h"

namespace railyard::perf {

/// Runs the collective benchmark as boot.rank() of boot.nranks(); rank 0 prints the
/// nccl-tests table. Returns an ExitCode (runner.h): a failed plugin call names the
/// call, the rank and the ncclResult_t; #wrong > 0 gives kExitWrongData.
int RunCollRank(const Options& opts, Bootstrap& boot);

}  // namespace railyard::perf
