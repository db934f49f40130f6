#!/usr/bin/env bash
# The README's second command (and CI's, through .ci/run): install the packages the
# build and the tests need (tools/scripts/install-deps.sh build test: the netns
# testbed, the soft-RoCE QEMU lanes, packaging and plot tests; it says what it
# installs), build with warnings as errors and run every test; unless
# RAILYARD_SKIP_LANE=1, run the verbs tests inside the soft-RoCE lanes. Then,
# unless RAILYARD_SKIP_SANITIZE=1, build again with -fsanitize=address,undefined
# and run the unit and conformance tests under it (fuzz_replay_test among them: every
# committed fuzz seed and regression input through its decoder, under ASan and UBSan).
# With RAILYARD_FUZZ=1, then run the libFuzzer targets too (tests/fuzz/run.sh, a clang
# build in <dir>-fuzz) for RAILYARD_FUZZ_TOTAL_SECONDS in all (default 95 here) or
# RAILYARD_FUZZ_SECONDS each. Not by default, for CI time: their clang tree (127
# build steps, about half of the background build CI waited 251-299 s for) and 5 s a
# target of exploration cost CI several minutes when CI came within a minute of 45
# (2669 s); the replay keeps every input found.
#
# It builds in its own directory, RAILYARD_TEST_BUILD_DIR (default build-test/;
# the sanitizer build next to it, <dir>-asan), so a developer's build/ (the one
# tools/setup.sh makes) is never reconfigured or rebuilt by it.
#
# For CI time (under 45 minutes), two things run in the background: the lanes'
# cache (kernel package, initramfs) is prepared while the host builds, and the
# sanitizer (and fuzz) builds run at the lowest CPU and I/O priority while the host
# tests run (those mostly wait on sockets and namespaces: about a third of the
# CPUs is used), with their output saved and printed once they are done. Nothing
# runs beside the soft-RoCE lanes, whose emulated RDMA is timing-sensitive: the
# builds under SCHED_IDLE beside the lanes were tried (2026-12-07) and the lanes took
# 697-721 + 415 s against 517 + 269 s alone, more than the wait they saved.
# RAILYARD_TEST_OVERLAP=0 runs every stage one after the other instead. Also for
# CI time, the test trees carry line tables only (-g1: file and line in every
# backtrace and sanitizer report, no variable info), which cuts the optimized
# host build by about a quarter (5.4 s -> 4.0 s on snapshot_units_test.cc);
# RAILYARD_TEST_DEBUG_FLAGS overrides it (-g for full debug info). The host test tree
# is optimized at -O1, not the release build's -O2 (tools/setup.sh): a third less
# compile time per file (cabling_agent.cc 9.2 s -> 6.2 s, fabric_ops_test.cc 7.1 s ->
# 4.7 s), about 190 s of CI's critical path; the sanitizer tree (-O0) and the fuzz
# tree (-O2) test other levels. RAILYARD_TEST_OPT_FLAGS overrides it (-O2).
# The host and sanitizer trees are unity builds (CMAKE_UNITY_BUILD: a library's files
# compiled eight to an object), which parses the shared headers once per eight files:
# the libraries' objects took 199 s of compile instead of 342, and CI's host build
# 414 s instead of 554 (clean clones on this 2-core VM). Names in a
# file's anonymous namespace must therefore differ from those of the other files of
# its library; the few files that cannot be batched say why
# (SKIP_UNITY_BUILD_INCLUSION, UNITY_BUILD OFF). RAILYARD_TEST_UNITY=0 turns it off.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RAILYARD_TEST_BUILD_DIR:-$root/build-test}
san="$build-asan"
fuzz_build=${RAILYARD_FUZZ_BUILD_DIR:-$build-fuzz}
jobs=$(nproc)
overlap=${RAILYARD_TEST_OVERLAP:-1}
lane=1; [ "${RAILYARD_SKIP_LANE:-0}" != 1 ] || lane=0
sanitize=1; [ "${RAILYARD_SKIP_SANITIZE:-0}" != 1 ] || sanitize=0
fuzz=0; [ "${RAILYARD_FUZZ:-0}" != 1 ] || fuzz=1
dbg=${RAILYARD_TEST_DEBUG_FLAGS:--g1}
opt=${RAILYARD_TEST_OPT_FLAGS:--O1}
unity=(-DCMAKE_UNITY_BUILD=ON); [ "${RAILYARD_TEST_UNITY:-1}" != 0 ] || unity=(-DCMAKE_UNITY_BUILD=OFF)
export RAILYARD_FUZZ_DEBUG_FLAGS=${RAILYARD_FUZZ_DEBUG_FLAGS:-$dbg}
"$root/tools/scripts/install-deps.sh" build test
# Every test tree links with lld where it is installed (install-deps' test group adds
# it): about 3x faster than ld.bfd per link (railyardd under ASan: 3.9 s -> 1.2 s).
lld=()
if command -v ld.lld >/dev/null; then
  lld=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
       -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
fi
export RAILYARD_FUZZ_LINKER_FLAGS=${RAILYARD_FUZZ_LINKER_FLAGS:-${lld:+-fuse-ld=lld}}

# The labels the sanitizer stage runs (below): ctest -L / -LE regexes.
san_labels='unit|conformance' san_exclude='^e2e$'
# The targets the sanitizer stage's tests run, read off the built host tree's test
# commands (the same tests): every executable under $build that a command names, the
# program or an argument (a script's tools), as its CMake target (the file's name; the
# plugin's lib<name>.so is <name>). What those programs load or start by a compiled-in
# path is their dependency in CMake (add_dependencies), so it is built too. For CI
# time: the whole sanitizer tree was the longest part of the run (benches, the netns
# and soft-RoCE lanes' helpers, the suites that run only unsanitized: a third of it).
sanitize_targets() {
  ctest --test-dir "$build" -N -V -L "$san_labels" -LE "$san_exclude" \
    | sed -n 's/^[0-9]*: Test command: //p' | tr ' ' '\n' | tr -d '"' \
    | while IFS= read -r p; do
        [[ $p == "$build"/* && -f $p && -x $p ]] || continue
        n=${p##*/}
        [[ $n == lib*.so ]] && n=${n#lib} && n=${n%.so}
        echo "$n"
      done | sort -u
}
# The sanitizer build (Debug, -fsanitize=address,undefined) and the fuzz build.
build_checked() {
  if ((sanitize)); then
    local targets=()
    cmake -S "$root" -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRAILYARD_WERROR=ON \
          -DRAILYARD_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG="$dbg" -DCMAKE_C_FLAGS_DEBUG="$dbg" "${lld[@]}" "${unity[@]}" >/dev/null
    mapfile -t targets < <(sanitize_targets)
    ((${#targets[@]} > 10)) || { echo "test.sh: found only ${#targets[@]} sanitizer targets in $build's tests" >&2; return 1; }
    echo "test.sh: the sanitizer tree builds the ${#targets[@]} targets its tests run" >&2
    cmake --build "$san" -j"$jobs" --target "${targets[@]}"
  fi
  if ((fuzz)); then
    RAILYARD_FUZZ_BUILD_ONLY=1 RAILYARD_FUZZ_BUILD_DIR="$fuzz_build" "$root/tests/fuzz/run.sh"
  fi
}
# Waits for a background job and prints its saved output; when FATAL is given and
# the job failed, exits with its status.
join() {  # PID LOG WHAT [fatal]
  local st=0
  wait "$1" || st=$?
  echo "test.sh: $3 (background) exited $st; its output:" >&2
  cat "$2" >&2
  if [ "${4:-}" = fatal ] && ((st != 0)); then exit "$st"; fi
  return 0
}
# A stage that fails ends the script (set -e): take the background jobs with it.
kill_tree() {  # PID: the process and everything under it
  local p
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$p"; done
  kill "$1" 2>/dev/null || true
}
trap 'for p in ${checked_pid:-} ${prep_pid:-}; do kill_tree "$p"; done' EXIT
mkdir -p "$build"
if ((overlap && lane)); then
  # A failure here is not final: run-verbs.sh prepares again (refreshing the
  # package lists once) and says LANE BROKEN if it still cannot.
  ( "$root/tests/lanes/rxe/lane.sh" -P && "$root/tests/lanes/rxe-ring/ring.sh" -P ) \
    >"$build/lane-prepare.log" 2>&1 &
  prep_pid=$!
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAILYARD_WERROR=ON \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt $dbg -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt $dbg -DNDEBUG" \
      "${lld[@]}" "${unity[@]}" >/dev/null
cmake --build "$build" -j"$jobs"
if ((overlap && (sanitize || fuzz))); then
  echo "test.sh: building the sanitizer and fuzz trees in the background at nice 19 (log: $build/checked-build.log)" >&2
  ( renice -n 19 -p "$BASHPID" >/dev/null; ionice -c3 -p "$BASHPID" 2>/dev/null || true; build_checked ) \
    >"$build/checked-build.log" 2>&1 &
  checked_pid=$!
fi
ctest --test-dir "$build" --output-on-failure -j1
if [ -n "${checked_pid:-}" ]; then
  echo "test.sh: host tests done; waiting for the background sanitizer/fuzz build" >&2
  join "$checked_pid" "$build/checked-build.log" "the sanitizer/fuzz build" fatal
  checked_pid=
fi
if [ -n "${prep_pid:-}" ]; then
  join "$prep_pid" "$build/lane-prepare.log" "the lanes' cache preparation"
  prep_pid=
fi

# The verbs tests skip on the bare host; this runs them for real inside the
# soft-RoCE lanes (QEMU guests with rdma_rxe). A lane that cannot start fails.
if ((lane)); then
  "$root/tests/lanes/run-verbs.sh" "$build"
fi

if ((sanitize)); then
  ((overlap)) || build_checked
  # The plugin is dlopen()ed by test processes that are not instrumented in the
  # same way; ASan must come first in the link map for those. Three at a time on
  # (CI's) 2 CPUs: the unit and conformance tests talk only over loopback (no netns
  # timing) and many of them wait on sockets or on their own timeouts; 1016/1016
  # passed at -j3 in 265 s, where -j2 took about 325 s.
  # Malloc stacks are unwound by frame pointers (ASan's default; the tree keeps them):
  # the DWARF unwinder (fast_unwind_on_malloc=0) made allocation-heavy tests up to 10x
  # slower (SocketHops 7 s -> 72 s) and this stage 441 s -> 347 s. It was there only
  # so that the suppression could name libhwloc under hwloc's PCI component, whose
  # leak (libpciaccess, dlclose()d) HWLOC_COMPONENTS=-pci now avoids: hwloc's linux
  # component still reads the PCI devices from sysfs.
  HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci} \
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
  LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$san" --output-on-failure -j$((jobs + 1)) -L "$san_labels" -LE "$san_exclude"
fi

# With RAILYARD_FUZZ=1: libFuzzer targets of every decoder of bytes from a peer or a
# cable, each for a bounded time on its committed corpus, in their own clang build
# (tests/fuzz/run.sh, tests/fuzz/README.md): RAILYARD_FUZZ_TOTAL_SECONDS=95 target-seconds
# in all, 5 s a target (run.sh's floor; 19 targets), two at a time, about 55 s;
# RAILYARD_FUZZ_SECONDS, when set, is per target instead. Self-contained: it needs
# nothing the stages above built. (CI ran it until it came within a minute of 45
# minutes; fuzz_replay_test, above, still replays every committed input.)
if ((fuzz)); then
  if [ -z "${RAILYARD_FUZZ_SECONDS:-}" ]; then export RAILYARD_FUZZ_TOTAL_SECONDS=${RAILYARD_FUZZ_TOTAL_SECONDS:-95}; fi
  RAILYARD_FUZZ_BUILD_DIR="$fuzz_build" "$root/tests/fuzz/run.sh"
fi
