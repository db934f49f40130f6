#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/<target>_fuzz.cc) with clang, libFuzzer,
# ASan and UBSan in their own build directory, then runs each for a bounded time
# on its committed corpus and regression inputs.
#
#   tests/fuzz/run.sh [target ...]        (default: every target)
#
# RAILYARD_FUZZ_SECONDS    seconds per target (default 60)
# RAILYARD_FUZZ_TOTAL_SECONDS  instead: target-seconds for the whole run, divided
#                          evenly among the targets run (at least 5 s each), so
#                          adding a target does not add time (tools/test.sh: 95)
# RAILYARD_FUZZ_BUILD_DIR  build directory (default build-fuzz in the source tree)
# RAILYARD_FUZZ_PARALLEL   targets run at once (default: the number of CPUs)
# RAILYARD_FUZZ_BUILD_ONLY=1  build the targets and exit (tools/test.sh builds them
#                          early, in the background; the later run finds them built)
# RAILYARD_FUZZ_LINKER_FLAGS  extra link flags of the fuzz targets (tools/test.sh:
#                          -fuse-ld=lld where installed)
# RAILYARD_FUZZ_DEBUG_FLAGS  debug-info flags of the fuzz build (default -g; tools/test.sh
#                          passes -g1, line tables only, for CI time)
# Inputs the fuzzers add go to $build/fuzz-work/<target>/ (never into the source
# tree); a crash or a failed check is saved as $build/findings/<target>/crash-*
# (replay it with `$build/tests/fuzz/<target>_fuzz FILE`; to keep it as a regression
# case copy it to tests/fuzz/regressions/<target>/). Exit status 1 when any target
# found something, 2 when the build failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RAILYARD_FUZZ_BUILD_DIR:-$root/build-fuzz}
secs=${RAILYARD_FUZZ_SECONDS:-60}
parallel=${RAILYARD_FUZZ_PARALLEL:-$(nproc)}
all=(handle records control chunk_stream listener relay_record qp_record cabling graph_json
     nccl_records relay_wire gin_wire coll_wire snapshot_wire expert_manifest tcp_frame verbs_wire
     cable_address relay_reply)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")
if [ -n "${RAILYARD_FUZZ_TOTAL_SECONDS:-}" ]; then
  [[ $RAILYARD_FUZZ_TOTAL_SECONDS =~ ^[0-9]+$ ]] || { echo "fuzz: RAILYARD_FUZZ_TOTAL_SECONDS must be a whole number of seconds" >&2; exit 2; }
  secs=$((RAILYARD_FUZZ_TOTAL_SECONDS / ${#targets[@]}))
  ((secs >= 5)) || secs=5
fi
[[ $secs =~ ^[0-9]+$ ]] && ((secs > 0)) || { echo "fuzz: RAILYARD_FUZZ_SECONDS must be a positive whole number" >&2; exit 2; }
cc=$(command -v clang-14 || command -v clang) || { echo "fuzz: clang not found (tools/scripts/install-deps.sh installs clang-14)" >&2; exit 2; }
cxx=$(command -v clang++-14 || command -v clang++)

dbg=${RAILYARD_FUZZ_DEBUG_FLAGS:--g}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $dbg -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 $dbg -DNDEBUG" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DRAILYARD_FUZZ=ON \
      ${RAILYARD_FUZZ_LINKER_FLAGS:+-DCMAKE_EXE_LINKER_FLAGS="$RAILYARD_FUZZ_LINKER_FLAGS"} >/dev/null || exit 2
bins=()
for t in "${targets[@]}"; do bins+=("${t}_fuzz"); done
cmake --build "$build" -j"$(nproc)" --target "${bins[@]}" || exit 2
[ "${RAILYARD_FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

run_one() {
  local t=$1 work="$build/fuzz-work/$1" found="$build/findings/$1"
  mkdir -p "$work" "$found"
  # Seeds and fixed regressions start the corpus; open-* regressions (bugs not
  # fixed yet, tests/fuzz/README.md) are left out, the fuzzer may find them anyway.
  find "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t" -maxdepth 1 -type f \
       ! -name 'open-*' -exec cp -f -t "$work" {} + 2>/dev/null
  local maxlen=4096
  case $t in chunk_stream|graph_json|records|expert_manifest) maxlen=16384 ;; esac
  "$build/tests/fuzz/${t}_fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$found/" \
      "$work" >"$build/findings/$t.log" 2>&1
  echo $? >"$build/findings/$t.rc"
}

mkdir -p "$build/findings"
for t in "${targets[@]}"; do
  rm -f "$build/findings/$t.rc"
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n; done
  run_one "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  rc=$(cat "$build/findings/$t.rc" 2>/dev/null || echo 99)
  stats=$(grep -E '^stat::(number_of_executed_units|new_units_added)' "$build/findings/$t.log" |
          sed 's/^stat:://; s/number_of_executed_units/runs/; s/new_units_added/new inputs/' | tr -s ' ' | paste -sd, -)
  if [ "$rc" != 0 ]; then
    status=1
    echo "fuzz: $t FAILED (exit $rc), inputs in $build/findings/$t/, log $build/findings/$t.log:" >&2
    grep -m4 -E '==ERROR|FUZZ_CHECK failed|terminate called|what\(\)|SUMMARY' "$build/findings/$t.log" | sed 's/^/  /' >&2
  else
    echo "fuzz: $t ok in ${secs}s ($stats)"
  fi
done
exit $status
