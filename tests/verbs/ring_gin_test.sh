#!/usr/bin/env bash
# ring_gin_test.sh GIN_MESH_NODE PLUGIN [bench] - NCCL's one-sided tables (RMA v14 and
# GIN v11, proxy mode; RMA v13 runs in the netns ring and the single guest) on a ring of
# 4 soft-RoCE guests in fabric mode
# (RAILYARD_COMMS=fabric): the full mesh over the host's cable set, neighbours over
# the cable's RDMA ports, the opposite guest through the ranks' own fabric relays over
# RDMA (issue 11: "the ring of 4 guests (RDMA relays)").
#
# Runs in EVERY guest of the ring lane at once (tests/lanes/rxe-ring, SPMD): guest g
# is rank g of tests/gin_faults/gin_mesh_node's `mesh` mode, once per table: NCCL's
# GIN proxy loop (descriptor queues, a producer thread for the GPU) iputSignals a
# 256 KiB chunk to every rank, itself included, for 2 rounds, each chunk checked by
# content once its signal is seen; then an iget of the opposite rank and an iflush.
# Checks: "mesh ok" from every rank for both tables, both cables ran verbs, and the
# ranks' Forwarders served both cables over RDMA. With `bench` (by hand): rank 0's
# put bandwidth to g1 (cabled) and g2 (relayed over RDMA), 5 interleaved rounds.
# Bootstrap goes over the lane's management network (ring.sh -G; g0 at 10.79.0.1).
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
set -uo pipefail
node=$1
plugin=$2
mode=${3:-mesh}
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_gin_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "ring_gin_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }
export RAILYARD_COMMS=fabric RAILYARD_TRANSPORT=auto RAILYARD_FABRIC=on RAILYARD_SOCKET_IFNAME='=p0,p1' \
  RAILYARD_TIMEOUT_MS=60000 NCCL_DEBUG=INFO RAILYARD_DEBUG=INFO

port=29680
if [[ $mode == bench ]]; then
  GIN_MESH_TABLE=rma-v14 timeout 900 "$node" "$plugin" bench "$RING_ID" 4 10.79.0.1 $port $((4 << 20)) 5 \
    >"$out/bench" 2>"$out/log"
  rc=$?
  cat "$out/bench"
  ((rc == 0)) || { tail -30 "$out/log" >&2; fail "bench exited $rc"; }
  exit 0
fi
for table in rma-v14 gin-v11; do
  GIN_MESH_TABLE=$table timeout 600 "$node" "$plugin" mesh "$RING_ID" 4 10.79.0.1 $port $((256 << 10)) 2 \
    >"$out/$table" 2>"$out/$table.log"
  rc=$?
  port=$((port + 1))
  ((rc == 0)) || { tail -40 "$out/$table.log" >&2; fail "$table: gin_mesh_node exited $rc: $(tail -3 "$out/$table")"; }
  grep -q '^mesh ok' "$out/$table" || fail "$table: no 'mesh ok': $(tail -3 "$out/$table")"
  verbs=$(grep -c 'fabric mode: the cable to .* runs verbs' "$out/$table.log")
  tcp=$(grep -c 'fabric mode: the cable to .* runs TCP' "$out/$table.log")
  ((verbs >= 2 && tcp == 0)) || fail "$table: $verbs verbs cables, $tcp TCP ones"
  grep -q 'over 2 cables, 2 of them also over RDMA' "$out/$table.log" ||
    fail "$table: the Forwarder did not serve both cables over RDMA"
  echo "ring_gin_test: guest $RING_ID: $table: $(grep '^mesh ok' "$out/$table")"
  ring-barrier "gin-$table-done" 600 || exit 1
done
exit 0
