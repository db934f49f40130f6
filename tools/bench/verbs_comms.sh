#!/usr/bin/env bash
# tools/bench/verbs_comms.sh — verbs mode's two NCCL comm implementations side by side in
# ONE soft-RoCE guest boot: railyard-perf sendrecv (2 ranks, rxe_h0r0 <-> rxe_h1r0, rail 0)
# with RAILYARD_COMMS=legacy (the older proxy/verbs comms) and RAILYARD_COMMS=fabric (the
# NCCL comms written once over the fabric's verbs transport), interleaved round by round,
# so both see the same guest and the same host load. Prints one table: per size the
# median µs per iteration of each and the ratio fabric ÷ legacy in bandwidth terms
# (legacy time ÷ fabric time: > 1 means the fabric comms moved more per second).
#
# Usage (host): tools/bench/verbs_comms.sh [--build DIR] [--rounds N] [--out FILE]
#   --build DIR  CMake build directory with railyard-perf and the plugin (default build/)
#   --rounds N   interleaved rounds (default 2)
#   --out FILE   also write the table (markdown) to FILE
# Or in pieces, to share one guest boot with other work:
#   tools/bench/verbs_comms.sh --prepare [--build DIR] [--rounds N]   (prints WORK)
#   in the guest: tools/bench/verbs_comms.sh --guest WORK              (lane.sh -w WORK)
#   tools/bench/verbs_comms.sh --report WORK [--out FILE]
# The whole form runs lane.sh itself (take `flock /tmp/railyard-lane.lock` around it on
# a shared host). Raw output: <build>/bench/verbs-comms-<date>/. Under TCG rxe moves a
# few MB/s: the figures say nothing about hardware, only the ratio means anything.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)

guest() {  # WORK
  local WORK=$1 round comms port=29700
  # shellcheck disable=SC1091
  source "$WORK/plan.env"
  export NCCL_NET_PLUGIN=$WORK/bin/libnccl-net-railyard.so RAILYARD_TRANSPORT=verbs RAILYARD_SOCKET_IFNAME==lo
  for ((round = 1; round <= ROUNDS; round++)); do
    for comms in legacy fabric; do
      port=$((port + 1))
      echo "== round $round $comms (guest load $(cut -d' ' -f1 /proc/loadavg))"
      RAILYARD_COMMS=$comms RAILYARD_HCA==rxe_h1r0 timeout 240 "$WORK/bin/railyard-perf" --rank 1 --nranks 2 \
        --root "127.0.0.1:$port" -p sendrecv -T 230 -b 65536 -e 16777216 -f 4 -n "$ITERS" -w 1 -c 0 \
        > "$WORK/r$round-$comms.rank1.log" 2>&1 &
      local p1=$!
      RAILYARD_COMMS=$comms RAILYARD_HCA==rxe_h0r0 timeout 240 "$WORK/bin/railyard-perf" --rank 0 --nranks 2 \
        --root "127.0.0.1:$port" -p sendrecv -T 230 -b 65536 -e 16777216 -f 4 -n "$ITERS" -w 1 -c 0 \
        --json "$WORK/r$round-$comms.json" > "$WORK/r$round-$comms.rank0.log" 2>&1
      local rc0=$? rc1=0
      wait "$p1" || rc1=$?
      echo "r$round-$comms rc0=$rc0 rc1=$rc1" | tee -a "$WORK/runs.txt"
    done
  done
}

report() {  # WORK
  python3 - "$1" "${OUT:-}" <<'PY'
import glob, json, os, statistics, sys
work, out = sys.argv[1:3]
meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(work, "host.env")) if "=" in l)
rows = {}  # comms -> size -> [time_us]
for path in sorted(glob.glob(os.path.join(work, "r*-*.json"))):
    comms = os.path.basename(path).split("-", 1)[1].rsplit(".", 1)[0]
    for r in json.load(open(path))["rows"]:
        if r.get("time_us"):
            rows.setdefault(comms, {}).setdefault(int(r["size"]), []).append(float(r["time_us"]))
lines = [f"Run {meta.get('start', '?')}, host load average {meta.get('load_start', '?')} before the boot, "
         f"{meta.get('load_end', '?')} after (2 cores shared by seven helpers).", "",
         "| size | legacy µs/iter median (n) | fabric µs/iter median (n) | fabric ÷ legacy (bandwidth) |",
         "| --- | --- | --- | --- |"]
def fmt(v):
    return f"{statistics.median(v):.0f} ({len(v)})" if v else "n/a (0)"
for s in sorted(set(rows.get("legacy", {})) | set(rows.get("fabric", {}))):
    l, f = rows.get("legacy", {}).get(s, []), rows.get("fabric", {}).get(s, [])
    ratio = f"{statistics.median(l) / statistics.median(f):.2f}" if l and f else "n/a"
    size = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
    lines.append(f"| {size} | {fmt(l)} | {fmt(f)} | {ratio} |")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
  cat "$1/runs.txt" 2>/dev/null || true
}

if [[ ${1:-} == --guest ]]; then
  guest "$2"
  exit 0
fi

BUILD="$ROOT/build" ROUNDS=2 OUT="" MODE=all WORK=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --prepare) MODE=prepare; shift ;;
    --report) MODE=report; WORK="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "verbs_comms.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "verbs_comms.sh: --rounds wants a positive integer" >&2; exit 2; }
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

prepare() {
  WORK="$BUILD/bench/verbs-comms-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$WORK/bin"
  cp "$BUILD/tools/railyard-perf/railyard-perf" "$BUILD/lib/libnccl-net-railyard.so" "$WORK/bin/"
  printf 'ROUNDS=%s\nITERS=5\n' "$ROUNDS" > "$WORK/plan.env"
  printf 'start=%s\nload_start=%s\n' "$(date -u +%FT%TZ)" "$(cut -d' ' -f1-3 /proc/loadavg)" > "$WORK/host.env"
}

case $MODE in
  prepare) prepare; echo "$WORK" ;;
  report)
    grep -q '^load_end=' "$WORK/host.env" || echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$WORK/host.env"
    report "$WORK" ;;
  all)
    prepare
    "$ROOT/tests/lanes/rxe/lane.sh" -T 2x2 -t 540 -q -w "$WORK" -C "$ROOT" -- "$ROOT/tools/bench/verbs_comms.sh" --guest "$WORK"
    echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$WORK/host.env"
    report "$WORK" ;;
esac
