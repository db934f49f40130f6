#!/usr/bin/env bash
# tools/bench/fabric_onesided_lane.sh BUILD_DIR [OUT_DIR] - the fabric's one-sided
# benchmark (railyard-fabric-bench --transport verbs) beside perftest, in ONE boot of
# the soft-RoCE lane. Run it through the lane (flat mode, 2x2), under the lane lock:
#   flock /tmp/railyard-lane.lock tests/lanes/rxe/lane.sh -T 2x2 -w /tmp/out \
#     tools/bench/fabric_onesided_lane.sh build /tmp/out
# Rail 0 only on both sides, for a like-for-like comparison: the target / perftest
# server on rxe_h1r0, the initiator / perftest client on rxe_h0r0 (perftest connects
# to 10.77.0.2, h1r0's address; the fabric bench bootstraps over 127.0.0.1).
# Order: Write and Read bandwidth at 64 KiB and 1 MiB (railyard, then ib_write_bw /
# ib_read_bw at the same sizes, one direction, 3 s each), FetchAdd latency (railyard,
# then ib_atomic_lat), then railyard's 8 B..256 MiB sweep over both rails.
# Output: JSON lines of railyard-fabric-bench and perftest's own lines, in OUT_DIR
# (default: stdout only). Never asserts anything: it measures.
set -u
build=$(readlink -f "${1:?usage: fabric_onesided_lane.sh BUILD_DIR [OUT_DIR]}")
out=${2:-}
[[ -n ${RXE_LANE_HOSTS:-} ]] || { echo "not in the soft-RoCE lane (RXE_LANE_HOSTS unset)" >&2; exit 99; }
bench=$build/tools/railyard-fabric-bench/railyard-fabric-bench
gid=${RXE_LANE_GID_INDEX:-1}
log() { if [[ -n $out ]]; then tee -a "$out/$1"; else cat; fi; }
rb() { timeout 600 "$bench" --transport verbs --hca-target '=rxe_h1r0' --hca-initiator '=rxe_h0r0' "$@"; }

# perf NAME TOOL ARGS...: perftest server on rxe_h1r0, client on rxe_h0r0 (as rxe-perf.sh).
port=18700
perf() {
  local name=$1 tool=$2; shift 2
  port=$((port + 1))
  timeout 60 "$tool" -d rxe_h1r0 -p "$port" -F -x "$gid" "$@" > /tmp/$name.srv 2>&1 &
  local spid=$!
  for _ in $(seq 300); do
    ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  timeout 50 "$tool" -d rxe_h0r0 -p "$port" -F -x "$gid" "$@" 10.77.0.2 > /tmp/$name.cli 2>&1
  wait "$spid"
  echo "# $name: $tool $*"
  grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/$name.cli | tail -1
}

{
  echo "# lane ${RXE_LANE_HOSTS}x${RXE_LANE_RAILS} mtu=${RXE_LANE_MTU:-} $(date -u +%FT%TZ)"
  rb --ops write,read --min-bytes 65536 --max-bytes 1048576 --factor 16 --bw-bytes 64M --rounds 3 --iters 20
  perf write_bw_64k ib_write_bw -s 65536 -D 3 --report_gbits
  perf write_bw_1m ib_write_bw -s 1048576 -D 3 --report_gbits
  perf read_bw_64k ib_read_bw -s 65536 -D 3 --report_gbits
  perf read_bw_1m ib_read_bw -s 1048576 -D 3 --report_gbits
  rb --ops fetchadd --iters 2000 --rounds 3 --bw-bytes 80000
  perf atomic_lat ib_atomic_lat -n 2000
  echo "# railyard sweep 8 B .. 256 MiB, both rails (h0r0+h0r1 -> h1r0+h1r1), 1 round"
  timeout 900 "$bench" --transport verbs --hca-target "=${RXE_LANE_DEVS_H1// /,}" \
    --hca-initiator "=${RXE_LANE_DEVS_H0// /,}" --ops write,read --min-bytes 8 --max-bytes 268435456 --factor 8 \
    --bw-bytes 16M --rounds 1 --iters 20 --lat-max-bytes 1048576
  timeout 900 "$bench" --transport verbs --hca-target "=${RXE_LANE_DEVS_H1// /,}" \
    --hca-initiator "=${RXE_LANE_DEVS_H0// /,}" --ops write,read --min-bytes 256M --max-bytes 256M \
    --bw-bytes 256M --rounds 1 --iters 1 --lat-max-bytes 0
} 2>&1 | log onesided.txt
