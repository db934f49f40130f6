#!/usr/bin/env bash
# ring_fabric_comms_test.sh PERF PLUGIN - fabric mode over the fabric comms
# (RAILYARD_COMMS=fabric) on a ring of soft-RoCE guests: the NCCL comms over the
# host's CableSetDomain, whose cables of RDMA ports run the verbs transport and whose
# relayed routes go through the ranks' own fabric relays over RDMA (issue 10).
#
# Runs in EVERY guest of the ring lane at once (tests/lanes/rxe-ring, `ctest -L
# verbs-ring`, SPMD): guest g is rank g of an all-to-all over railyard-perf with -c 1
# (every byte of every iteration checked on every rank). No railyardd: each rank
# holds its host's relay seat and runs the Forwarder, with a verbs port on each cable
# (RAILYARD_FABRIC_RELAY_VERBS_PORT). The opposite guest is reached through both
# neighbours (one route through each). Checks, per guest:
#   - railyard-perf exits 0; rank 0's table has rows, every one #wrong 0;
#   - both cables ran verbs ("the cable to gN runs verbs"), none TCP;
#   - the Forwarder served both cables over RDMA and forwarded slots (the opposite
#     pair's routes cross every guest of a ring of 4).
# Bootstrap goes over the lane's management network (ring.sh -G; g0 at 10.79.0.1).
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
set -uo pipefail
perf=$1
plugin=$2
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_fabric_comms_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "ring_fabric_comms_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }

RAILYARD_COMMS=fabric RAILYARD_TRANSPORT=auto RAILYARD_FABRIC=on RAILYARD_SOCKET_IFNAME='=p0,p1' \
RAILYARD_TIMEOUT_MS=60000 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET RAILYARD_DEBUG=INFO \
  timeout 600 "$perf" --plugin "$plugin" --rank "$RING_ID" --nranks 4 --root 10.79.0.1:29670 \
  -p alltoall -b 4K -e 1M -f 16 -n 2 -w 1 -c 1 >"$out/table" 2>"$out/log"
rc=$?
cat "$out/table"
((rc == 0)) || { tail -60 "$out/log" >&2; fail "railyard-perf exited $rc"; }
if ((RING_ID == 0)); then
  rows=$(grep -Ec '^ +[0-9]+ ' "$out/table")
  bad=$(awk '/^ +[0-9]+ / && $NF != "0"' "$out/table" | wc -l)
  ((rows > 0 && bad == 0)) || fail "$rows rows, $bad with #wrong != 0"
fi
verbs=$(grep -c 'fabric mode: the cable to .* runs verbs' "$out/log")
tcp=$(grep -c 'fabric mode: the cable to .* runs TCP' "$out/log")
((verbs >= 2 && tcp == 0)) || { grep 'fabric mode: the cable' "$out/log" >&2; fail "$verbs verbs cables, $tcp TCP ones"; }
grep -q 'Forwarder on port [0-9]* over 2 cables, 2 of them also over RDMA' "$out/log" ||
  { grep 'fabric relay' "$out/log" | tail -5 >&2; fail "the Forwarder did not serve both cables over RDMA"; }
line=$(grep 'fabric relay: Forwarder stopped: ' "$out/log" | tail -1)
slots=$(sed -n 's/.* \([0-9]*\) slots, .*/\1/p' <<<"$line")
[[ -n $slots && $slots -gt 0 ]] || fail "this guest's Forwarder forwarded nothing: '$line'"
echo "ring_fabric_comms_test: guest $RING_ID: alltoall #wrong 0 over verbs cables; relay: ${line#*Forwarder stopped: }"
exit 0
