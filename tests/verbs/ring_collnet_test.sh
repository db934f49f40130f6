#!/usr/bin/env bash
# ring_collnet_test.sh PERF PLUGIN - the CollNet tables on a ring of 4 soft-RoCE guests
# in fabric mode over the cable set (RAILYARD_COMMS=fabric): the shape (a ring) from
# the cabling graph, the collectives over the cables' RDMA ports, both directions of
# every cable, no relay (issue 12: "CollNet in the ring of guests").
#
# Runs in EVERY guest of the ring lane at once (tests/lanes/rxe-ring, SPMD): guest g is
# rank g of railyard-perf's allreduce (float sum, 4 B to 1 MiB: the one-shot variant
# up to 64 KiB, the ring's bidirectional algorithm above), then allgather and
# reducescatter, every element checked against the double reference (-c 1). Checks:
# every run exits 0 with "Out of bounds values : 0 OK" on rank 0, rank 0 connected as
# a ring (from the cabling graph or the rails' subnets), and both cables ran verbs.
# RING_COLLNET_DEBUG_LINES=N (ring.sh -e) prints N lines of a failed rank's routing log.
# Bootstrap goes over the lane's management network (ring.sh -G; g0 at 10.79.0.1).
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
set -uo pipefail
perf=$1
plugin=$2
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_collnet_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "ring_collnet_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }
export RAILYARD_COMMS=fabric RAILYARD_TRANSPORT=auto RAILYARD_FABRIC=on RAILYARD_SOCKET_IFNAME='=p0,p1' \
  RAILYARD_TIMEOUT_MS=60000 NCCL_DEBUG=INFO RAILYARD_DEBUG=INFO
port=29690
for run in "allreduce -d float -o sum -b 4 -e 1M -f 16" "allgather -d float -b 64 -e 256K -f 64" \
           "reducescatter -d float -o sum -b 64 -e 256K -f 64"; do
  name=${run%% *}
  # shellcheck disable=SC2086
  timeout 600 "$perf" --plugin "$plugin" --rank "$RING_ID" --nranks 4 --root 10.79.0.1:$port \
    -p $run -n 2 -w 1 -c 1 >"$out/$name" 2>"$out/$name.log"
  rc=$?
  port=$((port + 1))
  ((rc == 0)) || { grep -v ' INFO ' "$out/$name.log" | tail -30 >&2; grep -E "CollNet|cable|route|relay" "$out/$name.log" | tail -${RING_COLLNET_DEBUG_LINES:-0} >&2; fail "$name: railyard-perf exited $rc"; }
  if ((RING_ID == 0)); then
    grep -q "Out of bounds values : 0 OK" "$out/$name" || fail "$name: no OK line: $(tail -5 "$out/$name")"
    # From the cabling graph, or from the rails' subnets when the agents' graphs still
    # disagreed as the ranks filled their handles (plugin/collnet_shape.h).
    grep -Eq "CollNet: rank 0 of 4 connected \(ring, order [0-9 ]*, from the (cabling graph|rail subnets)" \
      "$out/$name.log" ||
      fail "$name: rank 0 did not connect as a ring: $(grep 'CollNet' "$out/$name.log" | head -3)"
    grep -E '^ +[0-9]+ ' "$out/$name" | tail -2
  fi
  verbs=$(grep -c 'fabric mode: the cable to .* runs verbs' "$out/$name.log")
  tcp=$(grep -c 'fabric mode: the cable to .* runs TCP' "$out/$name.log")
  ((verbs >= 2 && tcp == 0)) || fail "$name: $verbs verbs cables, $tcp TCP ones"
  echo "ring_collnet_test: guest $RING_ID: $name -c 1 ok over verbs cables"
  ring-barrier "collnet-$name-done" 600 || exit 1
done
exit 0
