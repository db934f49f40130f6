#!/usr/bin/env bash
# tools/bench/gin_lane.sh BUILD_DIR [OUT_DIR] - GIN/RMA put bandwidth and signal latency
# over the fabric's verbs transport beside the fabric's raw one-sided ops and perftest,
# in ONE boot of the soft-RoCE lane (flat mode, 2x2). Run it through the lane, under
# the lane lock (tools/bench/gin.sh does):
#   flock /tmp/railyard-lane.lock tests/lanes/rxe/lane.sh -T 2x2 -w /tmp/out \
#     tools/bench/gin_lane.sh build /tmp/out
# Rail 0 only on both sides, as tools/bench/fabric_onesided_lane.sh: rank 0 / the
# initiator / the perftest client on rxe_h0r0, rank 1 / the target / the server on
# rxe_h1r0; sockets (bootstrap) over 127.0.0.1.
# Measures, in this order, each in its own line of OUT_DIR/gin_lane.txt:
#   railyard-perf gin-put-oneway (RMA v14 table; rank 0 puts, <= 8 in flight)
#   railyard-fabric-bench write (one direction, depth 8, 3 rounds, median)
#   railyard-perf gin-put-oneway --idle-sleep-us 50 (idle ranks sleep, as the raw target does)
#   railyard-perf gin-put (both ranks put at once)
#   railyard-perf gin-signal 8 B (put + signal one way, answered the same way: one round
#     trip), polling with sched_yield, then with --idle-sleep-us 50 (frees a vCPU for rxe)
#   railyard-fabric-bench fetchadd (8 B atomic, completion = round trip)
#   ib_atomic_lat (perftest, fetch-and-add)
# Never asserts anything: it measures (tools/bench/gin_report.py makes the table).
set -u
build=$(readlink -f "${1:?usage: gin_lane.sh BUILD_DIR [OUT_DIR]}")
out=${2:-}
[[ -n ${RXE_LANE_HOSTS:-} ]] || { echo "not in the soft-RoCE lane (RXE_LANE_HOSTS unset)" >&2; exit 99; }
perfbin=$build/tools/railyard-perf/railyard-perf
bench=$build/tools/railyard-fabric-bench/railyard-fabric-bench
gid=${RXE_LANE_GID_INDEX:-1}
sizes=(-b 64K -e 1M -f 4)
log() { if [[ -n $out ]]; then tee -a "$out/gin_lane.txt"; else cat; fi; }

# gin PATTERN ARGS...: railyard-perf ranks 0 (rxe_h0r0) and 1 (rxe_h1r0) over verbs.
port=29500
gin() {
  local pattern=$1; shift
  port=$((port + 1))
  common=(-p "$pattern" -T 300 --root "127.0.0.1:$port" --nranks 2 "$@")
  env RAILYARD_TRANSPORT=verbs RAILYARD_HCA='=rxe_h1r0' RAILYARD_SOCKET_IFNAME='=lo' NCCL_NET_PLUGIN=railyard \
    LD_LIBRARY_PATH="$build/lib" timeout 320 "$perfbin" --rank 1 "${common[@]}" > /tmp/gin_r1.txt 2>&1 &
  local r1=$!
  env RAILYARD_TRANSPORT=verbs RAILYARD_HCA='=rxe_h0r0' RAILYARD_SOCKET_IFNAME='=lo' NCCL_NET_PLUGIN=railyard \
    LD_LIBRARY_PATH="$build/lib" timeout 320 "$perfbin" --rank 0 "${common[@]}"
  local rc0=$?
  wait "$r1"
  echo "# rc rank0=$rc0 rank1=$?"
  grep -v '^ *[0-9]' /tmp/gin_r1.txt | grep -iE 'error|warn|fail' | head -5
}

port2=18800
perf() {  # NAME TOOL ARGS...: perftest server on rxe_h1r0, client on rxe_h0r0
  local name=$1 tool=$2; shift 2
  port2=$((port2 + 1))
  timeout 60 "$tool" -d rxe_h1r0 -p "$port2" -F -x "$gid" "$@" > /tmp/$name.srv 2>&1 &
  local spid=$!
  for _ in $(seq 300); do
    ss -Hltn "sport = :$port2" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  timeout 50 "$tool" -d rxe_h0r0 -p "$port2" -F -x "$gid" "$@" 10.77.0.2 > /tmp/$name.cli 2>&1
  wait "$spid"
  echo "# $name: $tool $*"
  grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/$name.cli | tail -1
}

{
  echo "# lane ${RXE_LANE_HOSTS}x${RXE_LANE_RAILS} $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# gin-put-oneway"
  gin gin-put-oneway "${sizes[@]}" -n 10 -w 3 -c 1
  echo "# raw-write"
  timeout 300 "$bench" --transport verbs --hca-target '=rxe_h1r0' --hca-initiator '=rxe_h0r0' --ops write \
    --min-bytes 64K --max-bytes 1M --factor 4 --depth 8 --bw-bytes 16M --rounds 3 --iters 20 --lat-max-bytes 0
  echo "# gin-put-oneway-sleep"
  gin gin-put-oneway "${sizes[@]}" -n 10 -w 3 -c 1 --idle-sleep-us 50
  echo "# gin-put"
  gin gin-put "${sizes[@]}" -n 10 -w 3 -c 1
  echo "# gin-signal"
  gin gin-signal -b 8 -e 8 -n 200 -w 10 -c 1
  echo "# gin-signal-sleep"
  gin gin-signal -b 8 -e 8 -n 200 -w 10 -c 1 --idle-sleep-us 50
  echo "# raw-fetchadd"
  timeout 300 "$bench" --transport verbs --hca-target '=rxe_h1r0' --hca-initiator '=rxe_h0r0' --ops fetchadd \
    --iters 500 --rounds 1 --bw-bytes 8000
  perf atomic_lat ib_atomic_lat -n 500
  echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | log
