#!/usr/bin/env bash
# ring_railyardd_test.sh PERF PLUGIN RAILYARDD [COMMS] - opposite guests through
# railyardd, in a ring of 4 guests (tests/lanes/rxe-ring, `ctest -L verbs-ring`, SPMD).
# COMMS sets RAILYARD_COMMS (empty: the default, the older comms on these hosts).
#
# Guests 1 and 3 run only railyardd (the per-host relay service); guests 0 and 2,
# which share no cable, run a 2-rank sendrecv with -c 1 in fabric mode. Their
# traffic has to cross g1 or g3: the ranks find the route in the cabling graph and
# railyardd relays it: its socket relay with the older comms, its Forwarder over RDMA
# with the fabric comms. Checks: railyard-perf exits 0 on both ranks, rank 0's table
# has #wrong 0 on every row, at least one railyardd relayed by the comms' own relay
# (the socket relay says "relay: carrying"; the Forwarder's stop line counts slots
# forwarded), and no rank made a verbs connection to a peer it has no cable to.
# Guests meet through /ring barriers (ring-barrier), never through the rails.
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
set -uo pipefail
perf=$1
plugin=$2
railyardd=$3
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_railyardd_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"; [[ -n ${dpid:-} ]] && kill "$dpid" 2>/dev/null' EXIT
export RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_FABRIC=on RAILYARD_TIMEOUT_MS=60000
comms=${4:-}
export RAILYARD_COMMS=${comms:-auto}  # not one the caller's environment left behind
tag=rydd${comms:+-$comms}  # every guest must use the same barrier names

if ((RING_ID % 2 == 1)); then
  NCCL_DEBUG=INFO RAILYARD_DEBUG=INFO "$railyardd" >"$out/log" 2>&1 &
  dpid=$!
  ring-barrier "$tag-relays-up" 300 || exit 1
  ring-barrier "$tag-done" 600 || { echo "ring_railyardd_test: FAIL: ranks did not finish" >&2; exit 1; }
  kill "$dpid"
  wait "$dpid" 2>/dev/null
  dpid=
  slots=$(sed -n 's/.*fabric relay: Forwarder stopped: .* \([0-9]*\) slots, .*/\1/p' "$out/log" | sort -n | tail -1)
  # The proof of the relay the comms use: the socket relay's for the older comms (auto
  # on these hosts), the Forwarder's slots for the fabric comms.
  if [[ $RAILYARD_COMMS == fabric ]]; then relayed=$((${slots:-0} > 0)); else relayed=$(grep -c 'relay: carrying' "$out/log"); fi
  if ((relayed == 0)); then
    echo "ring_railyardd_test: FAIL: railyardd on guest $RING_ID relayed nothing; its log:" >&2
    tail -30 "$out/log" >&2
    # Both relays are candidates (two tied paths): fail only if neither carried anything.
    touch "/ring/bar/$tag-idle.$RING_ID"
  fi
  ring-barrier "$tag-checked" 120 2 || exit 1
  idle=$(ls /ring/bar/"$tag"-idle.* 2>/dev/null | wc -l)
  ((idle < 2)) || { echo "ring_railyardd_test: FAIL: no railyardd relayed anything" >&2; exit 1; }
  echo "ring_railyardd_test: guest $RING_ID relayed ($((2 - idle)) of 2 relays carried traffic)"
  exit 0
fi

ring-barrier "$tag-relays-up" 300 || exit 1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET RAILYARD_RELAY_PORT=29518 \
  timeout 600 "$perf" --plugin "$plugin" --rank $((RING_ID / 2)) --nranks 2 --root 10.79.0.1:29660 \
  -p sendrecv -b 4K -e 4M -f 8 -n 2 -w 1 -c 1 >"$out/table" 2>"$out/log"
rc=$?
ring-barrier "$tag-done" 600 || true
cat "$out/table"
if ((rc != 0)); then
  echo "ring_railyardd_test: FAIL: railyard-perf exited $rc on guest $RING_ID; its log:" >&2
  tail -40 "$out/log" >&2
  exit 1
fi
if ((RING_ID == 0)); then
  rows=$(grep -Ec '^ +[0-9]+ ' "$out/table")
  bad=$(awk '/^ +[0-9]+ / && $NF != "0"' "$out/table" | wc -l)
  if ((rows == 0 || bad != 0)); then
    echo "ring_railyardd_test: FAIL: $rows rows, $bad with #wrong != 0" >&2
    exit 1
  fi
fi
# Neither comms may reach the opposite guest over a cable of its own: the older comms
# log a verbs connection per cabled peer, the fabric comms a cable per neighbour.
opposite=$(((RING_ID + 2) % 4))
if grep -q 'verbs: connected to' "$out/log" || grep -q "the cable to g$opposite " "$out/log"; then
  echo "ring_railyardd_test: FAIL: guest $RING_ID used verbs to a peer it has no cable to" >&2
  exit 1
fi
echo "ring_railyardd_test: guest $RING_ID: sendrecv to the opposite guest through railyardd, #wrong 0"
exit 0
