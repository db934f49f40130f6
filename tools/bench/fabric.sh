#!/usr/bin/env bash
# tools/bench/fabric.sh — fabric-mode benchmarks on a shaped netns ring of 4 hosts
# with 2 rails per cable (the testbed's ring4x2 lane, every rail shaped by tc tbf):
# sendrecv between neighbours over 1 and 2 rails, between opposite hosts (2 hops,
# relayed), and alltoall over the ring, each as a ratio to one rail's shaped rate.
# Updates the "Switchless fabric" section of docs/benchmarks.md (between the
# fabric:begin/end markers) and leaves the rest of the file alone.
#
# Usage: tools/bench/fabric.sh [--rate MBIT] [--rounds N] [--build DIR]
#   --rate MBIT   tbf rate of every rail in Mbit/s (default 400: well inside what
#                 these 2-core machines sustain through two relays)
#   --rounds N    rounds of the four cases; medians and min–max (default 3)
# Needs root (network namespaces), python3, iproute2, nftables.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RATE=400
ROUNDS=3
BUILD="$ROOT/build"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) RATE="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "fabric.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$(id -u)" -eq 0 ]] || { echo "fabric.sh: needs root (network namespaces)" >&2; exit 2; }
cmake --build "$BUILD" -j"$(nproc)" --target railyard-perf railyardd nccl-net-railyard >/dev/null
out=$(mktemp /tmp/fabric-bench.XXXXXX.json)
"$ROOT/tests/testbed/testbed.sh" run --lane ring4x2 --rate "${RATE}mbit" -- \
  "$ROOT/tools/bench/fabric_bench.py" "$out" "$BUILD/tools/railyard-perf/railyard-perf" \
  "$BUILD/tools/railyardd/railyardd" "$BUILD/lib" "$RATE" "$ROUNDS"
python3 "$ROOT/tools/bench/fabric_report.py" "$out" "$ROOT/docs/benchmarks.md" \
  "tools/bench/fabric.sh --rate $RATE --rounds $ROUNDS"
rm -f "$out"
echo "fabric.sh: updated docs/benchmarks.md"
