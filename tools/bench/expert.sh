#!/usr/bin/env bash
# tools/bench/expert.sh — the expert tier's loopback benchmark for docs/benchmarks.md:
# railyard-expert-bench (local pread, the tcp transport and fabric Reads, record sizes
# 64 KiB–64 MiB, batches 1/8/32) and the raw pump (railyard-tcp-pump oneway, 1 stream,
# the same sizes) in one run, printed as a markdown table.
#
# Usage: tools/bench/expert.sh [--build DIR] [--seconds S]
# Traffic stays on 127.0.0.1. Stores go to /dev/shm (256 MiB each, removed after).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$ROOT/build"
SECONDS_PER_POINT=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --seconds) SECONDS_PER_POINT="$2"; shift 2 ;;
    *) echo "expert.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bench=$BUILD/tools/railyard-expert-bench/railyard-expert-bench
pump=$BUILD/tools/railyard-tcp-pump/railyard-tcp-pump
for b in "$bench" "$pump"; do [[ -x "$b" ]] || { echo "expert.sh: build $b first" >&2; exit 2; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset RAILYARD_SOCKET_IFNAME
"$bench" --seconds "$SECONDS_PER_POINT" >"$tmp/expert.jsonl"
"$pump" -p oneway -s 1 -b 64K -e 64M -f 4 -n 20 -w 3 >"$tmp/pump.jsonl"
python3 - "$tmp/expert.jsonl" "$tmp/pump.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
pump = {r["size"]: r["algbw_gbps"] for r in (json.loads(l) for l in open(sys.argv[2]) if l.startswith("{"))}
sizes = sorted({r["record_bytes"] for r in rows})
batches = sorted({r["batch"] for r in rows})
modes = ["pread", "tcp", "read"]
def h(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print("| record | batch | " + " | ".join(f"{m} GB/s (rec/s)" for m in modes) + " | pump oneway GB/s | read / pump |")
print("| --- | --- | " + " | ".join("---" for _ in modes) + " | --- | --- |")
for s in sizes:
    for b in batches:
        cell = {r["mode"]: r for r in rows if r["record_bytes"] == s and r["batch"] == b}
        vals = [f"{cell[m]['gbps']:.2f} ({cell[m]['records_per_s']:.0f})" if m in cell else "-" for m in modes]
        p = pump.get(s)
        ratio = f"{cell['read']['gbps'] / p:.2f}" if p and "read" in cell else "-"
        print(f"| {h(s)} | {b} | " + " | ".join(vals) + f" | {p:.2f} | {ratio} |" if p else f"| {h(s)} | {b} | " + " | ".join(vals) + " | - | - |")
PY
