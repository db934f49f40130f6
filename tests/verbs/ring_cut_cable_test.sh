#!/usr/bin/env bash
# ring_cut_cable_test.sh PERF PLUGIN RAILYARDD [COMMS] - a cable cut under verbs traffic,
# in a ring of 4 guests (tests/lanes/rxe-ring, `ctest -L verbs-ring`, SPMD). COMMS sets
# RAILYARD_COMMS for phases 1 and 2 and skips phase 3 (empty: auto, the older comms on
# these hosts, and phase 3; `fabric`: the cable set, relayed over RDMA).
#
# Guests 0 and 1 share a cable (g0.p1 - g1.p0) and stream 16 MiB messages over verbs
# QPs on it; guests 2 and 3 run railyardd. Mid-stream guest 0 takes p1 down.
#  1. Both ranks must fail (railyard-perf exits non-zero), guest 0 within 120 s of the
#     cut (no hang; its error comes at the port-down event, and an exit later than 30 s
#     is logged as SLOW with the job's stacks), and the error must name the rail and
#     the message sequence.
#  2. A new job between the same two guests then succeeds (#wrong 0) the long way
#     round, through railyardd on g3 and g2 (over TCP with the older comms, over RDMA
#     through their Forwarders with the fabric comms), never over the cut cable.
#  3. GIN over RDMA (issue 11: "a rail cut: a named error on the others, no hang"):
#     guest 0 brings p1 back up; once rxe1 is ACTIVE with its IPv4 GID again, guests 0
#     and 1 stream railyard-perf gin-put (RMA v14 table, verbs, plain device on the
#     cable's HCA) and guest 0 takes p1 down mid-stream. Both ranks must exit non-zero
#     within RAILYARD_TIMEOUT_MS plus slack; guest 0's error names peer rank 1, a
#     sequence and the rail.
# Guests meet through /ring barriers, never through the rails. p1 comes back up at
# the end. Exit: 0 pass, 1 fail, 77 not in a ring of 4.
set -uo pipefail
perf=$1
plugin=$2
railyardd=$3
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_cut_cable_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"; [[ -n ${dpid:-} ]] && kill "$dpid" 2>/dev/null; ((RING_ID == 0)) && ip link set p1 up' EXIT
export RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_FABRIC=on RAILYARD_DISCOVERY_DEAD_MS=1000
comms=${4:-}
export RAILYARD_COMMS=${comms:-auto}  # not one the caller's environment left behind
tag=cut${comms:+-$comms}  # every guest of one run uses the same barrier names
fail() { echo "ring_cut_cable_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }
# wait_failed_after_cut PID WHAT LOG BOUND: waits for the job the cut must stop; it must
# exit non-zero and not by `timeout` (124), and on guest 0 within BOUND s of $cut_at.
# Sets rc and took; on a failure the job's LOG ends the message.
wait_failed_after_cut() {
  if ((RING_ID == 0)); then
    # A slow exit after the cut (seen 1 run in 5 under GIN, once in CI with the fabric
    # comms): the stacks of every thread of the job, 20 s after the cut, are logged.
    while kill -0 "$1" 2>/dev/null && (($(date +%s) - cut_at < 20)); do
      sleep 0.2  # polling the job for its exit, not a barrier
    done
    local job
    if job=$(pgrep -P "$1" | head -1) && [[ -n $job ]] && command -v gdb >/dev/null; then
      echo "ring_cut_cable_test: guest 0: $2 still running 20 s after the cut; its threads:" >&2
      for t in /proc/"$job"/task/*; do  # kernel side: a thread stuck in a verbs call shows here
        echo "task ${t##*/} ($(cat "$t/comm" 2>/dev/null)): $(tr '\n' ' ' <"$t/stack" 2>/dev/null)" >&2
      done
      timeout 60 gdb -p "$job" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)' >&2
    fi
  fi
  wait "$1"
  rc=$?
  took=
  ((RING_ID == 0)) && took=$(($(date +%s) - cut_at))
  local why=
  ((rc != 0)) || why="$2 survived the cable cut (exit 0)"
  ((rc != 124)) || why="$2 hung after the cable cut (killed by timeout)"
  [[ -n $took ]] && ((took > $4)) && why="$2 failed $took s after the cut (RAILYARD_TIMEOUT_MS=5000)"
  [[ -z $why ]] || { tail -25 "$3" >&2; fail "$why"; }
}

if ((RING_ID >= 2)); then
  NCCL_DEBUG=INFO RAILYARD_DEBUG=INFO "$railyardd" >"$out/log" 2>&1 &
  dpid=$!
  ring-barrier "$tag-up" 300 || exit 1
  ring-barrier "$tag-done" 600 || fail "the ranks did not finish"
  exit 0
fi

rank=$RING_ID  # g0 = rank 0, g1 = rank 1
ring-barrier "$tag-up" 300 || exit 1
# Phase 1: stream over the g0-g1 cable (verbs), then cut it.
RAILYARD_TIMEOUT_MS=5000 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
  timeout 300 "$perf" --plugin "$plugin" --rank "$rank" --nranks 2 --root 10.79.0.1:29670 \
  -p sendrecv -b 16M -e 16M -n 400 -w 1 -c 0 >"$out/table1" 2>"$out/log1" &
ppid=$!
if ((RING_ID == 0)); then
  # Cut once the stream is under way: the first connection is logged (the older comms'
  # line, or the fabric comms'; over RDMA ports).
  connected='verbs: connected to|send comm connected to'
  for _ in $(seq 1 600); do
    grep -Eq "$connected" "$out/log1" && break
    sleep 0.1  # polling a log file for an event, not a barrier
  done
  grep -Eq "$connected" "$out/log1" || { tail -25 "$out/log1" >&2; fail "no verbs connection before the cut"; }
  # 400 messages of 16 MiB take minutes under emulation: the cut lands mid-stream.
  ip link set p1 down
  cut_at=$(date +%s)
fi
# The error comes within a second of the cut (the port-down event). Exiting took more
# than 30 s once in CI (fabric variant, CI host under a parallel build; not seen in 27
# runs since, quiet or loaded): the bound is for "no hang", and a slow exit is logged
# with the stacks wait_failed_after_cut took at 20 s.
wait_failed_after_cut "$ppid" "railyard-perf sendrecv" "$out/log1" 120
if [[ -n $took ]] && ((took > 30)); then
  echo "ring_cut_cable_test: guest 0: SLOW: sendrecv exited $took s after the cut; its log ends:" >&2
  tail -25 "$out/log1" >&2
fi
# Guest 0 saw the cut (port down): its error must name the rail and the sequence.
# Guest 1 may stop first on its own timeout or on rank 0's failure (railyard-perf
# ends every rank when one fails), so only its non-zero exit is required.
if ((RING_ID == 0)); then
  grep -Eq 'rail [^ ]*(rxe|p[01])' "$out/log1" || fail "no error names the rail: $(grep WARN "$out/log1" | head -3)"
  grep -q 'seq [0-9]' "$out/log1" || fail "no error names the message sequence: $(grep WARN "$out/log1" | head -3)"
fi
echo "ring_cut_cable_test: guest $RING_ID: phase 1 failed as it should (exit $rc): $(grep -m1 WARN "$out/log1")"
ring-barrier "$tag-phase1" 120 2 || fail "peer did not finish phase 1"

# Phase 2: the same pair again, now around the ring through the relays. The new
# processes' cabling agents never hear each other over the cut cable, and a link
# counts only when both ends report it, so the route goes round.
RAILYARD_TIMEOUT_MS=60000 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
  timeout 600 "$perf" --plugin "$plugin" --rank "$rank" --nranks 2 --root 10.79.0.1:29671 \
  -p sendrecv -b 4K -e 1M -f 16 -n 2 -w 1 -c 1 >"$out/table2" 2>"$out/log2"
rc=$?
ring-barrier "$tag-done" 600 || true
((rc == 0)) || { tail -30 "$out/log2" >&2; fail "the job after the cut failed (exit $rc)"; }
peer=$((1 - RING_ID))
if grep -q 'verbs: connected to' "$out/log2" || grep -q "the cable to g$peer " "$out/log2"; then
  fail "phase 2 used the cut cable: $(grep -E 'verbs: connected to|the cable to' "$out/log2" | head -3)"
fi
if ((RING_ID == 0)); then
  bad=$(awk '/^ +[0-9]+ / && $NF != "0"' "$out/table2" | wc -l)
  rows=$(grep -Ec '^ +[0-9]+ ' "$out/table2")
  ((rows > 0 && bad == 0)) || fail "phase 2: $rows rows, $bad with #wrong != 0"
fi
echo "ring_cut_cable_test: guest $RING_ID: after the cut the pair ran around the ring through the relays, #wrong 0"

# Phase 3 runs verbs mode, whose comms do not depend on COMMS: once, in the default run.
[[ -n $comms ]] && exit 0

# Phase 3: the cable back, a GIN stream over RDMA on it, then the cut again.
if ((RING_ID == 0)); then
  ip link set p1 up
  ok=0
  for _ in $(seq 1 300); do  # polling the port state after link up, not a barrier
    if grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state && ring-gid rxe1 v4 >/dev/null 2>&1 &&
      ping -c 1 -W 1 "$RING_PEER_P1" >/dev/null 2>&1; then
      ok=1
      break
    fi
    sleep 0.1
  done
  ((ok)) || fail "p1 up again, but rxe1 is not ACTIVE with an IPv4 GID reaching $RING_PEER_P1 within 30 s"
  hca=rxe1 nic=p1
else
  hca=rxe0 nic=p0
fi
ring-barrier "$tag-gin-up" 120 2 || fail "peer did not reach the GIN phase"
tx0=$(cat /sys/class/net/p1/statistics/tx_bytes 2>/dev/null || echo 0)
# The verbs Workers' bootstrap listeners bind the first RAILYARD_SOCKET_IFNAME
# interface (net_transport.cc): the cable's own, the only one the peer can reach.
RAILYARD_TIMEOUT_MS=5000 RAILYARD_TRANSPORT=verbs RAILYARD_FABRIC=off RAILYARD_HCA="=$hca" RAILYARD_SOCKET_IFNAME="=$nic" \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET RAILYARD_DEBUG=INFO \
  timeout 300 "$perf" --plugin "$plugin" --rank "$rank" --nranks 2 --root 10.79.0.1:29672 \
  -p gin-put --one-sided rma-v14 -b 4M -e 4M -n 100000 -w 0 -c 0 -T 290 >"$out/table3" 2>"$out/log3" &
ppid=$!
if ((RING_ID == 0)); then
  moving=0
  for _ in $(seq 1 1200); do  # polling a byte counter for traffic, not a barrier
    kill -0 "$ppid" 2>/dev/null || break
    tx=$(cat /sys/class/net/p1/statistics/tx_bytes)
    if ((tx - tx0 >= 8 << 20)); then
      moving=1
      break
    fi
    sleep 0.1
  done
  ((moving)) || { tail -20 "$out/log3" >&2; fail "no GIN traffic on p1 before the cut"; }
  ip link set p1 down
  cut_at=$(date +%s)
fi
# Usually 0-1 s (the port-down event fails the Endpoint); 1 run in 5 took 51 s to
# exit, cause not yet found (suspect: teardown of the failed comm under rxe), so the
# bound here is for "no hang" and a slow exit is logged with the job's log.
wait_failed_after_cut "$ppid" "railyard-perf gin-put" "$out/log3" 120
if [[ -n $took ]] && ((took > 30)); then
  echo "ring_cut_cable_test: guest 0: SLOW: gin-put exited $took s after the cut; its log ends:" >&2
  tail -25 "$out/log3" >&2
fi
# As in phase 1, guest 0 (whose port went down) must name the fault; guest 1 may stop
# first on railyard-perf's word that rank 0 failed, so only its non-zero exit counts.
if ((RING_ID == 0)); then
  for w in "peer rank 1" "seq" "rail"; do
    grep WARN "$out/log3" | grep -q "$w" || { tail -20 "$out/log3" >&2; fail "the GIN error does not name '$w'"; }
  done
fi
echo "ring_cut_cable_test: guest $RING_ID: GIN over RDMA failed as it should on the cut (exit $rc${took:+, $took s after it}): $(grep -m1 'GIN rank' "$out/log3")"
ring-barrier "$tag-gin-done" 120 2 || true
exit 0
