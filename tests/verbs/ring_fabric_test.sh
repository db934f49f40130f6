#!/usr/bin/env bash
# ring_fabric_test.sh PERF PLUGIN - switchless routing over verbs, in a ring of guests,
# with the older comms (the default on hosts with RDMA ports, pinned here by
# RAILYARD_COMMS=legacy; the fabric comms' all-to-all is ring_fabric_comms_test.sh).
#
# Runs in EVERY guest of the ring lane at once (tests/lanes/rxe-ring, `ctest -L
# verbs-ring`, SPMD): guest g is rank g of an all-to-all over railyard-perf with the
# plugin in fabric mode over the two cabled ports p0/p1. Every guest reaches its two
# neighbours over verbs (one cable each) and the opposite guest of a ring of 4 only
# through a relay (TCP), as on a cabled ring without a switch. Checks, per guest:
#   - every row of the table (rank 0 prints it) has #wrong 0 (-c 1 checks every byte
#     of every iteration on every rank);
#   - the plugin logged a verbs connection to each neighbour ("verbs: connected",
#     counted) and its non-adjacent peers went over TCP (through a relay);
#   - railyard-perf exited 0.
# Bootstrap goes over the lane's management network (ring.sh -G; g0 at 10.79.0.1).
# Exit: 0 pass, 1 fail, 77 not in a ring guest (RING_ID unset).
set -uo pipefail
perf=$1
plugin=$2
if [[ -z ${RING_ID:-} || -z ${RING_N:-} ]]; then
  echo "ring_fabric_test: not in a ring-lane guest (RING_ID unset); skipped" >&2
  exit 77
fi
if [[ -z ${RING_MGMT_IP:-} ]]; then
  echo "ring_fabric_test: FAIL: the ring has no management network (run ring.sh with -G)" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Neighbours in the ring (both cables); everybody else is relayed.
prev=$(((RING_ID + RING_N - 1) % RING_N))
next=$(((RING_ID + 1) % RING_N))
want_verbs=2
((RING_N == 2)) && want_verbs=1
want_tcp=$((RING_N - 1 - want_verbs))

RAILYARD_COMMS=legacy RAILYARD_TRANSPORT=auto RAILYARD_FABRIC=on RAILYARD_SOCKET_IFNAME='=p0,p1' NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
RAILYARD_TIMEOUT_MS=60000 \
  timeout 600 "$perf" --plugin "$plugin" --rank "$RING_ID" --nranks "$RING_N" --root 10.79.0.1:29650 \
  -p alltoall -b 4K -e 4M -f 8 -n 2 -w 1 -c 1 >"$out/table" 2>"$out/log"
rc=$?
cat "$out/table"
fail=0
if ((rc != 0)); then
  echo "ring_fabric_test: FAIL: railyard-perf exited $rc (guest $RING_ID); its log:" >&2
  tail -60 "$out/log" >&2
  exit 1
fi
# Rank 0 prints the table (#wrong summed over every rank); the others exit non-zero
# when any rank saw a wrong byte.
rows=$(grep -Ec '^ +[0-9]+ ' "$out/table")
bad=$(awk '/^ +[0-9]+ / && $NF != "0"' "$out/table" | wc -l)
if ((RING_ID == 0 && (rows == 0 || bad != 0))); then
  echo "ring_fabric_test: FAIL: guest $RING_ID: $rows rows, $bad with #wrong != 0" >&2
  fail=1
fi
verbs=$(grep -c 'verbs: connected to' "$out/log")
tcp=$(grep -c 'connected to .* with [0-9]* data sockets' "$out/log")
echo "ring_fabric_test: guest $RING_ID (neighbours g$prev, g$next): $verbs verbs connections, $tcp TCP connections"
if ((verbs != want_verbs)); then
  echo "ring_fabric_test: FAIL: guest $RING_ID made $verbs verbs connections, expected $want_verbs (one per neighbour)" >&2
  grep -E 'verbs|connected|route' "$out/log" | head -20 >&2
  fail=1
fi
if ((tcp != want_tcp)); then
  echo "ring_fabric_test: FAIL: guest $RING_ID made $tcp TCP (relayed) connections, expected $want_tcp" >&2
  fail=1
fi
exit $fail
