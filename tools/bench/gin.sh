#!/usr/bin/env bash
# tools/bench/gin.sh BUILD_DIR [OUT_DIR] - regenerates the "One-sided puts and signals
# (GIN / RMA tables)" section of docs/benchmarks.md (between <!-- gin:begin --> and
# <!-- gin:end -->): GIN put bandwidth against the fabric's raw Write and put+signal
# latency against the fabric's FetchAdd, on loopback TCP (this host) and over the
# fabric's verbs transport in ONE boot of the soft-RoCE lane (tools/bench/gin_lane.sh,
# with ib_atomic_lat beside), then tools/bench/gin_report.py writes the section.
# Needs BUILD_DIR with nccl-net-railyard, railyard-perf and railyard-fabric-bench built.
# The lane runs under `flock /tmp/railyard-lane.lock` (one lane machine-wide).
# Environment: GIN_BENCH_SKIP_LANE=1 keeps the previous OUT_DIR/gin_lane.txt;
# GIN_BENCH_REPORT_ONLY=1 measures nothing and rewrites the section from OUT_DIR.
set -u
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(readlink -f "${1:?usage: gin.sh BUILD_DIR [OUT_DIR]}")
out=${2:-/tmp/railyard-gin-bench}
mkdir -p "$out"
perfbin=$build/tools/railyard-perf/railyard-perf
bench=$build/tools/railyard-fabric-bench/railyard-fabric-bench
for f in "$perfbin" "$bench" "$build/lib/libnccl-net-railyard.so"; do
  [[ -x $f || -f $f ]] || { echo "gin.sh: $f is not built" >&2; exit 2; }
done

# Loopback TCP: the same sizes and depth as the lane.
[[ ${GIN_BENCH_REPORT_ONLY:-0} == 1 ]] || {
  echo "# loopback tcp $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) cores $(nproc)"
  for round in 1 2 3; do
    echo "# gin-put-oneway round $round"
    RAILYARD_TRANSPORT=tcp NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH="$build/lib" timeout 300 \
      "$perfbin" -np 2 -p gin-put-oneway -b 64K -e 4M -f 4 -n 20 -w 5 -c 1
    echo "# raw-write round $round"
    timeout 300 "$bench" --transport tcp --address 127.0.0.1 --ops write --min-bytes 64K --max-bytes 4M \
      --factor 4 --depth 8 --bw-bytes 32M --rounds 1 --iters 20 --lat-max-bytes 0
  done
  echo "# gin-put"
  RAILYARD_TRANSPORT=tcp NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH="$build/lib" timeout 300 \
    "$perfbin" -np 2 -p gin-put -b 64K -e 4M -f 4 -n 20 -w 5 -c 1
  echo "# gin-signal"
  RAILYARD_TRANSPORT=tcp NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH="$build/lib" timeout 300 \
    "$perfbin" -np 2 -p gin-signal -b 8 -e 8 -n 500 -w 20 -c 1
  echo "# raw-fetchadd"
  timeout 300 "$bench" --transport tcp --address 127.0.0.1 --ops fetchadd --iters 500 --rounds 1 --bw-bytes 8000
  echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/gin_loopback.txt" 2>&1

if [[ ${GIN_BENCH_SKIP_LANE:-0} != 1 && ${GIN_BENCH_REPORT_ONLY:-0} != 1 ]]; then
  rm -f "$out/gin_lane.txt"
  echo "host load before the lane: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)" > "$out/gin_host_load.txt"
  flock -w 1800 /tmp/railyard-lane.lock "$repo/tests/lanes/rxe/lane.sh" -q -T 2x2 -t 600 -w "$out" \
    "$repo/tools/bench/gin_lane.sh" "$build" "$out" || echo "gin.sh: the lane run failed (status $?)" >&2
fi
python3 "$here/gin_report.py" "$out" > "$out/gin_section.md" || exit 1
python3 - "$repo/docs/benchmarks.md" "$out/gin_section.md" <<'PY'
import sys
doc, sec = sys.argv[1], open(sys.argv[2]).read().rstrip("\n")
text = open(doc).read()
b, e = "<!-- gin:begin -->", "<!-- gin:end -->"
if b in text and e in text:
    text = text[:text.index(b)] + b + "\n" + sec + "\n" + text[text.index(e):]
else:
    text = text.rstrip("\n") + "\n\n" + b + "\n" + sec + "\n" + e + "\n"
open(doc, "w").write(text)
PY
echo "gin.sh: docs/benchmarks.md section written from $out" >&2
