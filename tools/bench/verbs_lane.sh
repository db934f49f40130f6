#!/usr/bin/env bash
# tools/bench/verbs_lane.sh — railyard-perf over the verbs transport beside perftest
# (ib_write_bw, ib_write_lat) in the soft-RoCE lane, one guest boot, and the
# section of docs/benchmarks.md between <!-- verbs:begin --> and <!-- verbs:end -->.
#
# Usage (on the host): tools/bench/verbs_lane.sh [--rounds N] [--quick] [--build DIR]
#                                                [--out PATH] [--no-report]
#   --rounds N   interleaved rounds (default 3); each round runs, in this order:
#                railyard-perf sendrecv (bandwidth sweep), ib_write_bw -b, ib_write_bw
#                (one direction; first round only, a reference), railyard-perf sendrecv at 8 B and 64 KiB (latency),
#                ib_write_lat at 8 B and 64 KiB. Figures are medians over rounds.
#   --quick      smoke check: 64 KiB–1 MiB, 1 round, few iterations; writes
#                <build>/bench/verbs-quick.md unless --out is given
#   --build DIR  CMake build directory holding railyard-perf and the plugin (default
#                build/); both are copied into the run's folder first, so a rebuild
#                during the run does not change what the guest executes
#   --out PATH   file whose verbs section is (re)written (default docs/benchmarks.md)
#   --no-report  only run; tools/bench/verbs_report.py report --work DIR --out PATH
#                renders an existing run folder again
#   --comms C    RAILYARD_COMMS for railyard-perf in the guest: auto (the default;
#                verbs mode then runs the older proxy/verbs comms), fabric (the NCCL
#                comms over the fabric's verbs transport) or legacy, to compare them
#
# Inside the guest (lane topology 2x2, flat mode) rank 0 / the perftest client use
# rxe_h0r0 and rank 1 / the perftest server rxe_h1r0, i.e. rail 0 only; perftest
# connects to 10.77.0.2 (h1r0's rail address; policy routing sends it over the veth).
# railyard-perf runs as two processes (--rank 0/1 --nranks 2 --root 127.0.0.1:PORT)
# with RAILYARD_TRANSPORT=verbs, RAILYARD_HCA==<device>, RAILYARD_SOCKET_IFNAME==lo.
# Raw outputs: <build>/bench/verbs-<date>/{raw,logs}. Needs what tests/lanes/rxe
# needs (qemu, rdma-core, perftest) and python3.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
SELF="$ROOT/tools/bench/verbs_lane.sh"

# =================================================================================
# Guest side: tools/bench/verbs_lane.sh --guest WORK   (run by lane.sh)
# =================================================================================
guest() {
  local WORK=$1
  set +e +o pipefail   # every run reports its own status; one failure must not stop the rest
  # shellcheck disable=SC1091
  source "$WORK/plan.env"
  [[ -n ${RXE_LANE_HOSTS:-} ]] || { echo "verbs_lane: no lane topology (RXE_LANE_HOSTS unset)" >&2; exit 99; }
  local D0=rxe_h0r0 D1=rxe_h1r0 PEER=10.77.0.2 GID=${RXE_LANE_GID_INDEX:-1}
  for d in $D0 $D1; do
    [[ -e /sys/class/infiniband/$d ]] || { echo "verbs_lane: device $d missing in the guest" >&2; exit 98; }
  done
  local RAW=$WORK/raw LOGS=$WORK/logs
  mkdir -p "$RAW" "$LOGS"
  : > "$WORK/failures.txt"
  export NCCL_NET_PLUGIN=$WORK/bin/libnccl-net-railyard.so
  export RAILYARD_TRANSPORT=verbs RAILYARD_SOCKET_IFNAME==lo RAILYARD_COMMS=${COMMS:-auto}
  unset NCCL_SOCKET_IFNAME NCCL_IB_HCA || true
  local PERF=$WORK/bin/railyard-perf

  {
    echo "guest_kernel=$(uname -r)"
    echo "guest_cpus=$(nproc)"
    echo "lane_mtu=${RXE_LANE_MTU:-?}"
    echo "active_mtu=$(ibv_devinfo -d $D0 2>/dev/null | awk '/active_mtu/ {print $2; exit}')"
    echo "perftest=$(ib_write_bw --version 2>&1 | head -1 | tr -d '\r')"
  } > "$WORK/guest.env"

  txb() { cat "/sys/class/net/$1/statistics/tx_bytes" 2>/dev/null || echo 0; }
  fail() { echo "$*" >> "$WORK/failures.txt"; echo "FAILED: $*"; }

  # railyard-perf, 2 ranks as 2 processes; NAME then railyard-perf flags
  local port=29600
  ry() {
    local name=$1; shift
    port=$((port + 1))
    local a0 a1; a0=$(txb h0r0); a1=$(txb h1r0)
    local t0=$SECONDS
    RAILYARD_HCA="=$D1" timeout "$RY_TIMEOUT" "$PERF" --rank 1 --nranks 2 --root "127.0.0.1:$port" \
      -p sendrecv -T "$((RY_TIMEOUT - 10))" "$@" > "$LOGS/$name.rank1.log" 2>&1 &
    local p1=$!
    RAILYARD_HCA="=$D0" timeout "$RY_TIMEOUT" "$PERF" --rank 0 --nranks 2 --root "127.0.0.1:$port" \
      -p sendrecv -T "$((RY_TIMEOUT - 10))" --json "$RAW/$name.json" "$@" > "$LOGS/$name.rank0.log" 2>&1
    local rc0=$? rc1=0
    wait "$p1" || rc1=$?
    echo "$name rc0=$rc0 rc1=$rc1 secs=$((SECONDS - t0)) h0r0_tx=$(( $(txb h0r0) - a0 )) h1r0_tx=$(( $(txb h1r0) - a1 ))" \
      | tee -a "$WORK/runs.txt"
    ((rc0 == 0 && rc1 == 0)) || fail "$name (rank0 rc $rc0, rank1 rc $rc1; logs/$name.rank*.log)"
  }

  # perftest: NAME TOOL ARGS... (server on D1, client on D0 -> PEER)
  local pport=18600
  pt() {
    local name=$1 tool=$2; shift 2
    pport=$((pport + 1))
    local t0=$SECONDS
    timeout "$PT_TIMEOUT" "$tool" -d "$D1" -x "$GID" -p "$pport" -F "$@" > "$LOGS/$name.srv.log" 2>&1 &
    local sp=$!
    for _ in $(seq 300); do
      ss -Hltn "sport = :$pport" 2>/dev/null | grep -q . && break
      kill -0 "$sp" 2>/dev/null || break
      sleep 0.1
    done
    timeout "$PT_TIMEOUT" "$tool" -d "$D0" -x "$GID" -p "$pport" -F "$@" "$PEER" > "$RAW/$name.txt" 2>&1
    local crc=$? src=0
    wait "$sp" || src=$?
    echo "$name rc_cli=$crc rc_srv=$src secs=$((SECONDS - t0))" | tee -a "$WORK/runs.txt"
    ((crc == 0 && src == 0)) || fail "$name (client rc $crc, server rc $src; raw/$name.txt, logs/$name.srv.log)"
  }

  local k sw lo hi n w s
  for ((k = 1; k <= ROUNDS; k++)); do
    echo "== round $k/$ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))"
    cut -d' ' -f1 /proc/loadavg >> "$WORK/round-load.txt"
    for sw in $SWEEPS; do                         # lo:hi:iters:warmup
      IFS=: read -r lo hi n w <<< "$sw"
      ry "r$k-ry-bw-$lo" -b "$lo" -e "$hi" -f 2 -n "$n" -w "$w" -c 0
    done
    for sw in $SWEEPS; do
      IFS=: read -r lo hi n w <<< "$sw"
      for ((s = lo; s <= hi; s *= 2)); do
        pt "r$k-pt-bwbi-$s" ib_write_bw -b -s "$s" -n "$((n < 5 ? 5 : n))" --report_gbits
      done
    done
    if ((k == 1)); then                           # one direction: reference, first round only
      for sw in $SWEEPS; do
        IFS=: read -r lo hi n w <<< "$sw"
        for ((s = lo; s <= hi; s *= 2)); do
          pt "r$k-pt-bwuni-$s" ib_write_bw -s "$s" -n "$((n < 5 ? 5 : n))" --report_gbits
        done
      done
    fi
    ry "r$k-ry-lat" -b 8 -e 65536 -f 8192 -n "$LAT_ITERS" -w "$LAT_WARM" -c 0
    for s in 8 65536; do
      pt "r$k-pt-lat-$s" ib_write_lat -s "$s" -n "$LAT_ITERS"
    done
  done
  # correctness, untimed: every timed iteration's data checked (-c 1)
  ry "check" -b 65536 -e "$CHECK_MAX" -f 4 -n 3 -w 1 -c 1
  echo "== done; $(grep -c . "$WORK/failures.txt" || true) failed runs"
  [[ ! -s $WORK/failures.txt ]]
}

if [[ ${1:-} == --guest ]]; then
  guest "$2"
  exit $?
fi

# =================================================================================
# Host side
# =================================================================================
ROUNDS=3 ROUNDS_GIVEN=0 QUICK=0 OUT="" BUILD="$ROOT/build" REPORT=1 COMMS=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="${2:-}"; ROUNDS_GIVEN=1; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --build) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-report) REPORT=0; shift ;;
    --comms) COMMS="${2:-}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "verbs_lane.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ "$COMMS" == auto || "$COMMS" == fabric || "$COMMS" == legacy ]] || { echo "verbs_lane.sh: --comms wants auto, fabric or legacy" >&2; exit 2; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "verbs_lane.sh: --rounds wants a positive integer" >&2; exit 2; }
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

for t in python3 qemu-system-x86_64 ib_write_bw ib_write_lat; do
  command -v "$t" >/dev/null || { echo "verbs_lane.sh: $t missing (tools/scripts/install-deps.sh test)" >&2; exit 2; }
done
PERF="$BUILD/tools/railyard-perf/railyard-perf"
PLUGIN="$BUILD/lib/libnccl-net-railyard.so"
for f in "$PERF" "$PLUGIN"; do
  [[ -x "$f" ]] || { echo "verbs_lane.sh: $f missing; build it: cmake --build $BUILD --target nccl-net-railyard railyard-perf" >&2; exit 2; }
done

if [[ $QUICK -eq 1 ]]; then
  [[ -n "$OUT" ]] || OUT="$BUILD/bench/verbs-quick.md"
  [[ $ROUNDS_GIVEN -eq 1 ]] || ROUNDS=1
  SWEEPS="65536:1048576:10:2"
  LAT_ITERS=50 LAT_WARM=5 CHECK_MAX=1048576
else
  [[ -n "$OUT" ]] || OUT="$ROOT/docs/benchmarks.md"
  # rxe under TCG moves ~5-40 MB/s (a busy 2-core host: ~5), so large sizes get few
  # iterations; perftest refuses -n below 5 (the guest raises it to 5 for perftest)
  SWEEPS="65536:1048576:20:2 2097152:16777216:5:1"
  LAT_ITERS=100 LAT_WARM=10 CHECK_MAX=4194304
fi
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

WORK="$BUILD/bench/verbs-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$WORK/bin" "$WORK/raw" "$WORK/logs"
cp "$PERF" "$PLUGIN" "$WORK/bin/"
cat > "$WORK/plan.env" <<EOF
ROUNDS=$ROUNDS
SWEEPS="$SWEEPS"
LAT_ITERS=$LAT_ITERS
LAT_WARM=$LAT_WARM
CHECK_MAX=$CHECK_MAX
COMMS=$COMMS
RY_TIMEOUT=300
PT_TIMEOUT=120
EOF
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
cmdline="tools/bench/verbs_lane.sh"
[[ $QUICK -eq 1 ]] && cmdline+=" --quick"
[[ $ROUNDS_GIVEN -eq 1 ]] && cmdline+=" --rounds $ROUNDS"
[[ $COMMS != auto ]] && cmdline+=" --comms $COMMS"
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "command=$cmdline"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "dirty=$(git -C "$ROOT" status --porcelain -- proxy plugin tools/railyard-perf 2>/dev/null | wc -l)"
  echo "build_type=${build_type:-?}"
  echo "nproc=$(nproc)"
  echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "kernel=$(uname -sr)"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rounds=$ROUNDS"
  echo "sweeps=$SWEEPS"
  echo "lat_iters=$LAT_ITERS"
  echo "lat_warm=$LAT_WARM"
  echo "check_max=$CHECK_MAX"
} > "$WORK/meta.env"
echo "== work dir $WORK"

T0=$(date +%s)
set +e
"$ROOT/tests/lanes/rxe/lane.sh" -T 2x2 -w "$WORK" -C "$WORK" -t 2400 -o "$WORK/lane-out.log" \
  -- bash "$SELF" --guest "$WORK"
LANE_RC=$?
set -e
{
  echo "lane_rc=$LANE_RC"
  echo "elapsed=$(( $(date +%s) - T0 ))"
  echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
} >> "$WORK/meta.env"
echo "== lane exit status $LANE_RC after $(( $(date +%s) - T0 )) s"
if [[ $LANE_RC -eq 125 ]]; then
  echo "verbs_lane.sh: the lane itself failed (125); no report written" >&2
  exit 125
fi
if [[ $REPORT -eq 1 ]]; then
  python3 "$ROOT/tools/bench/verbs_report.py" report --work "$WORK" --out "$OUT"
  echo "== wrote the verbs section of $OUT"
fi
exit "$LANE_RC"
