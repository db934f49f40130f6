#!/usr/bin/env bash
# run-verbs.sh BUILD_DIR - run the project's RDMA tests inside the soft-RoCE lanes.
#
#   stage 1  one QEMU guest with rdma_rxe, topology 2x2 (hosts h0/h1 x rails 0/1,
#            see rxe/README.md): `ctest -L verbs` on BUILD_DIR, inside the guest.
#   stage 2  a ring of 4 guests (rxe-ring/README.md): `ctest -L verbs-ring` in
#            every guest at once (SPMD). Runs only when BUILD_DIR has at least one
#            test with that label; otherwise says so and passes.
#            Labels are matched exactly (^verbs$, ^verbs-ring$): ctest -L takes a regex,
#            and plain `-L verbs` would also pick up the ring tests.
#
# Both stages prepare the shared cache first (/tmp/rxe-lab, or RXE_LAB_DIR): the
# Debian kernel package comes through `apt-get download`. Nothing is skipped
# quietly: if a lane cannot start (qemu or a package missing, the kernel download
# fails, the guest breaks) this prints a LANE BROKEN banner and exits non-zero.
#
# Exit status: 0 all passed; the failing ctest's status; 124 a stage timed out;
# 125 a lane could not run; 126 a ring guest's kernel oopsed in both tries; 2 usage.
# Environment: RAILYARD_LANE_TIMEOUT (seconds per stage, default 1200),
#              RXE_LAB_DIR, RXE_KERNEL_PKG (see rxe/lane.sh).
set -uo pipefail

here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
lane=$here/rxe/lane.sh
ring=$here/rxe-ring/ring.sh
timeout_s=${RAILYARD_LANE_TIMEOUT:-1200}
ring_guests=4

say() { echo "run-verbs: $*" >&2; }
banner() {  # STATUS WHAT
  {
    echo "########################################################################"
    echo "run-verbs: $2"
    echo "run-verbs: exit status $1"
    echo "########################################################################"
  } >&2
}
# A stage's status -> message and our exit status (the first failure wins).
judge() {  # STAGE STATUS
  case $2 in
    0) say "$1: passed" ;;
    126) banner 126 "$1: a guest KERNEL OOPSED twice (see the oops above)" ;;
    124) banner 124 "$1: TIMED OUT after ${timeout_s}s (RAILYARD_LANE_TIMEOUT)" ;;
    125) banner 125 "LANE BROKEN in $1: the lane could not run the tests (see the lines above)" ;;
    *) banner "$2" "$1: TESTS FAILED" ;;
  esac
  return "$2"
}

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
build=$(readlink -f "$1" 2>/dev/null || true)
if [[ -z $build || ! -f $build/CTestTestfile.cmake ]]; then
  banner 125 "LANE BROKEN: '$1' is not a configured build directory (no CTestTestfile.cmake)"
  exit 125
fi
[[ $timeout_s =~ ^[0-9]+$ ]] && ((timeout_s > 0)) || { say "bad RAILYARD_LANE_TIMEOUT '$timeout_s'"; exit 2; }

# Prepares a lane's cache (kernel .deb, modules, initramfs). When the download
# fails and we may refresh the package lists (root), refresh them once and retry.
prepare() {  # SCRIPT
  local t0=$SECONDS
  if "$1" -P >&2; then say "${1##*/} -P took $((SECONDS - t0))s"; return 0; fi
  if [[ $(id -u) = 0 ]]; then
    say "preparing the lane failed; running apt-get update and trying again"
    apt-get update -qq >&2 && "$1" -P >&2 && return 0
  fi
  return 125
}

# Number of tests carrying LABEL in the build directory (ctest -N).
count_label() {
  ctest --test-dir "$build" -N -L "$1" 2>/dev/null | awk '/^Total Tests:/ {print $3}'
}

# ---------------------------------------------------------------- stage 1
rc=0
t0=$SECONDS
say "stage 1: single-guest lane, topology 2x2, ctest -L verbs in $build"
if ! prepare "$lane"; then
  banner 125 "LANE BROKEN: cannot prepare the single-guest lane (packages? kernel download?)"
  exit 125
fi
st=0
"$lane" -T 2x2 -t "$timeout_s" -C "$build" \
  ctest -L '^verbs$' --output-on-failure --no-tests=error --timeout "$timeout_s" || st=$?
say "stage 1 took $((SECONDS - t0))s"
judge "stage 1 (ctest -L verbs, single guest)" "$st" || rc=$st

# ---------------------------------------------------------------- stage 2
t0=$SECONDS
n=$(count_label '^verbs-ring$')
if [[ -z $n ]]; then
  banner 125 "LANE BROKEN: ctest -N -L verbs-ring failed in $build"
  exit 125
fi
if ((n == 0)); then
  say "stage 2: no tests labelled verbs-ring in $build: the ring of $ring_guests guests is not booted"
  exit "$rc"
fi
say "stage 2: ring of $ring_guests guests, ctest -L verbs-ring ($n tests) in every guest"
if ! prepare "$ring"; then
  banner 125 "LANE BROKEN: cannot prepare the ring lane (packages? python3? kernel download?)"
  exit 125
fi
# ctest writes Testing/ in the build directory: inside each guest that lands in
# its own tmpfs overlay, so the guests do not collide. Status 126: a guest's
# kernel oopsed (the Debian 6.1 rdma_rxe's rxe_skb_tx_dtor, seen in 1 of 6 rings
# with cables cut under traffic): the ring runs once more, said in a banner, and
# counts only if that run is clean.
for try in 1 2; do
  st=0
  "$ring" -n "$ring_guests" -G -t "$timeout_s" -C "$build" \
    ctest -L '^verbs-ring$' --output-on-failure --no-tests=error --timeout "$timeout_s" || st=$?
  ((st == 126 && try == 1)) || break
  banner 126 "stage 2: a guest KERNEL OOPSED (soft-RoCE in the guest kernel; oops above): running the ring again"
done
say "stage 2 took $((SECONDS - t0))s"
judge "stage 2 (ctest -L verbs-ring, ring of $ring_guests)" "$st" || { ((rc)) || rc=$st; }
exit "$rc"
