#!/usr/bin/env bash
# tools/bench/loopback.sh — regenerate docs/benchmarks.md: railyard-perf sendrecv
# (2 ranks) and ring (4 ranks) busbw over loopback, beside the raw TCP baseline
# (railyard-tcp-pump), iperf3 and a callgrind CPU-cost figure, all in one run.
#
# Usage: tools/bench/loopback.sh [--rounds N] [--quick] [--out PATH] [--build DIR]
#   --rounds N   interleaved rounds of [perf sendrecv, pump pair, perf ring,
#                pump ring, pump oneway] (default 5; medians and min–max over rounds)
#   --quick      smoke check: 3 sizes, 1 round, short iperf3 and callgrind; writes
#                <build>/bench/benchmarks-quick.md unless --out is given
#   --out PATH   where to write the report (default docs/benchmarks.md)
#   --build DIR  CMake build directory (default build/; configured if missing)
#   --no-build   use the binaries already in the build directory as they are
#
# Needs (Debian package names): cmake ninja-build g++ (to build), python3 (stdlib
# only), iperf3, valgrind, coreutils (timeout), procps. The script checks for them
# and prints the apt-get line for what is missing (tools/scripts/install-deps.sh
# bench installs them). The figures under the tables (docs/img/) need
# python3-matplotlib; without it the page is written and the figures are not redrawn.
#
# Traffic stays on loopback: RAILYARD_SOCKET_IFNAME is forced to "=lo", the pump
# and iperf3 use 127.0.0.1 only. RAILYARD_NSOCKS / RAILYARD_NTHREADS /
# RAILYARD_CHUNK_BYTES are taken from the environment if set (the pump and iperf3
# use RAILYARD_NSOCKS streams). Default mode takes about 5–8 minutes on a 2-core VM.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROUNDS=5
ROUNDS_GIVEN=0
QUICK=0
OUT=""
BUILD="$ROOT/build"
NO_BUILD=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="${2:-}"; ROUNDS_GIVEN=1; shift 2 ;;
    --rounds=*) ROUNDS="${1#*=}"; ROUNDS_GIVEN=1; shift ;;
    --quick) QUICK=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --build) BUILD="$2"; shift 2 ;;
    --build=*) BUILD="${1#*=}"; shift ;;
    --no-build) NO_BUILD=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "loopback.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "loopback.sh: --rounds wants a positive integer" >&2; exit 2; }
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

# ---- prerequisites ------------------------------------------------------------
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need cmake cmake; need python3 python3; need iperf3 iperf3; need valgrind valgrind
need timeout coreutils; need c++ g++
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then need ninja ninja-build; fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "loopback.sh: missing tools; install them with:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 2
fi

# ---- build ----------------------------------------------------------------------
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "== configuring $BUILD (RelWithDebInfo)"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
if [[ $NO_BUILD -eq 0 ]]; then
  echo "== building"
  cmake --build "$BUILD" -j"$(nproc)" --target nccl-net-railyard railyard-perf railyard-tcp-pump
fi
PERF="$BUILD/tools/railyard-perf/railyard-perf"
PUMP="$BUILD/tools/railyard-tcp-pump/railyard-tcp-pump"
PLUGIN="$BUILD/lib/libnccl-net-railyard.so"
for f in "$PERF" "$PUMP" "$PLUGIN"; do [[ -e "$f" ]] || { echo "loopback.sh: $f not built" >&2; exit 1; }; done
HELPER="$ROOT/tools/bench/loopback_report.py"

# ---- environment: loopback only -----------------------------------------------------
export RAILYARD_SOCKET_IFNAME="=lo"
unset NCCL_SOCKET_IFNAME || true
export NCCL_NET_PLUGIN="$PLUGIN"
export LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NSOCKS=${RAILYARD_NSOCKS:-4}
NTHREADS=${RAILYARD_NTHREADS:-2}
CHUNK=${RAILYARD_CHUNK_BYTES:-8M}

# ---- plan -------------------------------------------------------------------------
# Sizes are split into a small and a large sweep so that small sizes get many
# iterations and the whole run stays bounded (see docs/benchmarks.md).
if [[ $QUICK -eq 1 ]]; then
  [[ -n "$OUT" ]] || OUT="$BUILD/bench/benchmarks-quick.md"
  [[ $ROUNDS_GIVEN -eq 1 ]] || ROUNDS=1
  SWEEPS=("65536 1048576 16 20 3" "16777216 16777216 2 5 1")   # min max factor iters warmup
  LATENCY="8 1048576 8 50 5"   # the latency sweep: sendrecv and pump pair, 1 stream pair per size
  IPERF_SECS=1; CG_SIZE=$((4 << 20)); CG_NLO=1; CG_NHI=11; CG_TRIES=1
  CHECK_MAX=1M
else
  [[ -n "$OUT" ]] || OUT="$ROOT/docs/benchmarks.md"
  SWEEPS=("65536 2097152 2 50 5" "4194304 268435456 2 15 3")
  LATENCY="8 1048576 2 200 20"
  IPERF_SECS=3; CG_SIZE=$((16 << 20)); CG_NLO=2; CG_NHI=42; CG_TRIES=2
  CHECK_MAX=64M
fi
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
WORK="$BUILD/bench/loopback-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$WORK/raw" "$WORK/logs" "$WORK/callgrind"
echo "== work dir $WORK"
T0=$(date +%s)
FAILS="$WORK/failures.txt"; : >"$FAILS"

# run NAME CMD... : log to $WORK/logs/NAME.log, bounded, failures recorded (not fatal).
run() {
  local name=$1; shift
  if ! timeout -k 10 300 "$@" >"$WORK/logs/$name.log" 2>&1; then
    echo "$name (exit $?): $*" >>"$FAILS"
    echo "   !! $name failed, see $WORK/logs/$name.log" >&2
    return 1
  fi
}

{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "nproc=$(nproc)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "kernel=$(uname -sr)"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- proxy plugin tools/railyard-perf tools/railyard-tcp-pump 2>/dev/null || echo '+dirty')"
  echo "build_type=$(grep -m1 '^CMAKE_BUILD_TYPE' "$BUILD/CMakeCache.txt" | cut -d= -f2)"
  echo "rounds=$ROUNDS"
  echo "quick=$QUICK"
  echo "nsocks=$NSOCKS"
  echo "nthreads=$NTHREADS"
  echo "chunk=$CHUNK"
  echo "sweeps=$(IFS=';'; echo "${SWEEPS[*]}")"
  echo "latency=$LATENCY"
  echo "check_max=$CHECK_MAX"
  echo "iperf_secs=$IPERF_SECS"
  echo "cg_size=$CG_SIZE"
  echo "cg_nlo=$CG_NLO"
  echo "cg_nhi=$CG_NHI"
  echo "cg_tries=$CG_TRIES"
  echo "command=tools/bench/loopback.sh$([[ $ROUNDS_GIVEN -eq 1 ]] && echo " --rounds $ROUNDS")$([[ $QUICK -eq 1 ]] && echo ' --quick')"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/meta.env"

# ---- correctness pass (data verified, not timed for the tables) -------------------------
echo "== correctness check (-c 1)"
run check-sendrecv "$PERF" -np 2 -p sendrecv -b 64K -e "$CHECK_MAX" -f 4 -n 2 -w 1 -c 1 -T 240 || true
run check-ring "$PERF" -np 4 -p ring -b 64K -e "$CHECK_MAX" -f 4 -n 2 -w 1 -c 1 -T 240 || true

# ---- interleaved rounds -------------------------------------------------------------
for ((r = 1; r <= ROUNDS; r++)); do
  echo "== round $r/$ROUNDS ($(( $(date +%s) - T0 )) s elapsed)"
  echo "$(cut -d' ' -f1 /proc/loadavg)" >>"$WORK/round-load.txt"
  # Latency first: small messages, many iterations, railyard-perf then the pump.
  read -r lo hi fac n w <<<"$LATENCY"
  run "r$r-lat-perf-latency" "$PERF" -np 2 -p sendrecv -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" -c 0 -T 240 \
    --json "$WORK/raw/r$r-perf-latency.json" || true
  run "r$r-lat-pump-latency" "$PUMP" -p pair -s "$NSOCKS" -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" &&
    cp "$WORK/logs/r$r-lat-pump-latency.log" "$WORK/raw/r$r-pump-latency.jsonl" || true
  for sw in "${SWEEPS[@]}"; do
    read -r lo hi fac n w <<<"$sw"
    tag="r$r-$lo"
    run "$tag-perf-sendrecv" "$PERF" -np 2 -p sendrecv -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" -c 0 -T 240 \
      --json "$WORK/raw/$tag-perf-sendrecv.json" || true
    run "$tag-pump-pair" "$PUMP" -p pair -s "$NSOCKS" -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" &&
      cp "$WORK/logs/$tag-pump-pair.log" "$WORK/raw/$tag-pump-pair.jsonl" || true
    run "$tag-perf-ring" "$PERF" -np 4 -p ring -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" -c 0 -T 240 \
      --json "$WORK/raw/$tag-perf-ring.json" || true
    run "$tag-pump-ring" "$PUMP" -p ring --np 4 -s "$NSOCKS" -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" &&
      cp "$WORK/logs/$tag-pump-ring.log" "$WORK/raw/$tag-pump-ring.jsonl" || true
    run "$tag-pump-oneway" "$PUMP" -p oneway -s "$NSOCKS" -b "$lo" -e "$hi" -f "$fac" -n "$n" -w "$w" &&
      cp "$WORK/logs/$tag-pump-oneway.log" "$WORK/raw/$tag-pump-oneway.jsonl" || true
  done
done

# ---- iperf3 (reference only; 127.0.0.1, -P = NSOCKS, bounded) -------------------------
iperf() {  # iperf NAME extra-client-args...
  local name=$1; shift
  local port; port=$(python3 "$HELPER" freeport)
  timeout -k 5 $((IPERF_SECS + 20)) iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$WORK/logs/$name-server.log" 2>&1 &
  local spid=$!
  local ok=0
  for _ in 1 2 3 4 5; do
    sleep 0.4
    if timeout -k 5 $((IPERF_SECS + 15)) iperf3 -c 127.0.0.1 -p "$port" -P "$NSOCKS" -t "$IPERF_SECS" -J "$@" \
        >"$WORK/raw/$name.json" 2>"$WORK/logs/$name.log"; then ok=1; break; fi
  done
  wait "$spid" 2>/dev/null || true
  [[ $ok -eq 1 ]] || echo "$name: iperf3 client failed" >>"$FAILS"
}
echo "== iperf3 ($IPERF_SECS s each)"
iperf iperf-oneway
iperf iperf-bidir --bidir

# ---- callgrind: user-space instructions per byte --------------------------------------
# Two runs per program differing only in -n; the difference removes setup cost.
echo "== callgrind (size $CG_SIZE, -n $CG_NLO vs -n $CG_NHI, $CG_TRIES tries)"
for ((t = 1; t <= CG_TRIES; t++)); do
  for n in "$CG_NLO" "$CG_NHI"; do
    d="$WORK/callgrind/perf-sendrecv-n$n-t$t"; mkdir -p "$d"
    run "cg-perf-n$n-t$t" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$d/callgrind.out.%p" \
      "$PERF" -np 2 -p sendrecv -b "$CG_SIZE" -e "$CG_SIZE" -n "$n" -w 0 -c 0 -T 280 || true
    d="$WORK/callgrind/pump-pair-n$n-t$t"; mkdir -p "$d"
    run "cg-pump-n$n-t$t" valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$d/callgrind.out.%p" \
      "$PUMP" -p pair -s "$NSOCKS" -b "$CG_SIZE" -e "$CG_SIZE" -n "$n" -w 0 || true
  done
done

echo "elapsed=$(( $(date +%s) - T0 ))" >>"$WORK/meta.env"
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/meta.env"

# ---- report ----------------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
python3 "$HELPER" report --work "$WORK" --out "$OUT"
echo "== wrote $OUT ($(( $(date +%s) - T0 )) s); raw data in $WORK"
