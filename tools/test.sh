#!/usr/bin/env bash
# The README's second command (and CI's, through .ci/run): install the packages the
# build and the tests need (tools/scripts/install-deps.sh build test: the netns
# testbed, the soft-RoCE QEMU lanes, packaging and plot tests; it says what it
# installs), build with warnings as errors and run every test; unless
# RAILYARD_SKIP_LANE=1, run the verbs tests inside the soft-RoCE lanes. Then,
# unless RAILYARD_SKIP_SANITIZE=1, build again with -fsanitize=address,undefined
# and run the unit and conformance tests under it. Then, unless RAILYARD_SKIP_FUZZ=1,
# run the fuzz targets (tests/fuzz/run.sh, a clang build in <dir>-fuzz) for
# RAILYARD_FUZZ_TOTAL_SECONDS in all (default 270 here, for CI time) or
# RAILYARD_FUZZ_SECONDS each.
#
# It builds in its own directory, RAILYARD_TEST_BUILD_DIR (default build-test/;
# the sanitizer build next to it, <dir>-asan), so a developer's build/ (the one
# tools/setup.sh makes) is never reconfigured or rebuilt by it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RAILYARD_TEST_BUILD_DIR:-$root/build-test}
jobs=$(nproc)
"$root/tools/scripts/install-deps.sh" build test

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAILYARD_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j1

# The verbs tests skip on the bare host; this runs them for real inside the
# soft-RoCE lanes (QEMU guests with rdma_rxe). A lane that cannot start fails.
if [ "${RAILYARD_SKIP_LANE:-0}" != 1 ]; then
  "$root/tests/lanes/run-verbs.sh" "$build"
fi

if [ "${RAILYARD_SKIP_SANITIZE:-0}" != 1 ]; then
  san="$build-asan"
  cmake -S "$root" -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRAILYARD_WERROR=ON \
        -DRAILYARD_SANITIZE=ON >/dev/null
  cmake --build "$san" -j"$jobs"
  # The plugin is dlopen()ed by test processes that are not instrumented in the
  # same way; ASan must come first in the link map for those. Two at a time: the
  # unit and conformance tests talk only over loopback (no netns timing), and this
  # stage is CPU-bound under ASan (it passed 638/638 at -j2 on 2 cores).
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0} \
  LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$san" --output-on-failure -j2 -L 'unit|conformance' -LE '^e2e$'
fi

# libFuzzer targets of every decoder of bytes from a peer or a cable, each for a
# bounded time on its committed corpus, in their own clang build (tests/fuzz/run.sh,
# tests/fuzz/README.md). For CI time the run gets RAILYARD_FUZZ_TOTAL_SECONDS=270
# target-seconds in all (what 9 targets x 30 s took before there were 17),
# divided among the targets; RAILYARD_FUZZ_SECONDS, when set, is per target
# instead. Self-contained: it needs nothing the stages above built.
if [ "${RAILYARD_SKIP_FUZZ:-0}" != 1 ]; then
  if [ -z "${RAILYARD_FUZZ_SECONDS:-}" ]; then export RAILYARD_FUZZ_TOTAL_SECONDS=${RAILYARD_FUZZ_TOTAL_SECONDS:-270}; fi
  RAILYARD_FUZZ_BUILD_DIR=${RAILYARD_FUZZ_BUILD_DIR:-$build-fuzz} "$root/tests/fuzz/run.sh"
fi
