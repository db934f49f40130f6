#!/usr/bin/env bash
# ring_tiers_test.sh NODE RAILYARDD LIBRARY - the storage tiers' user path over RDMA in
# a ring of 4 guests (tests/lanes/rxe-ring, `ctest -L verbs-ring`, SPMD: every guest
# runs this at once; issues 13 and 14, "a peer with no cable to the client is reached
# through the fabric's relays", over the soft-RoCE rails).
#
# Every guest runs railyardd on its two RDMA rails (RAILYARD_SOCKET_IFNAME '=p0,p1');
# g1 and g3 relay, g2 serves an expert store (2 layers x 8 experts x 256 KiB, written by
# NODE make-store) and a paging snapshot arena (kind kv, 8 slots of 256 KiB). g0, with
# no cable to g2, runs the Python binding (C API of LIBRARY) naming its peer "host:g2":
#   - expert: every record fetched by fabric Reads and compared byte by byte with the
#     store's files;
#   - snapshot: 12 blobs put into the 8-slot arena (so the peer pages to its swap file)
#     and got back byte by byte.
# The control connections go through railyardd's TCP tier tunnels; the data must go
# over RDMA, relayed by g1's or g3's Forwarder verbs ports: g0's rxe devices must count
# at least one RoCE packet per 4 KiB moved (rcvd_pkts for the fetch, sent_pkts for the
# puts; over TCP they would count none).
# Guests meet through /ring barriers, never through the rails.
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
#
# With `bench` (by hand, for docs/benchmarks.md; RING_TIERS_ROUNDS, default 3, passed
# with ring.sh -e):
#   tests/lanes/rxe-ring/ring.sh -n 4 -G -e RING_TIERS_ROUNDS -C build \
#     $PWD/tests/verbs/ring_tiers_test.sh $B/tests/tiers_relay/tiers_relay_node \
#     $B/tools/railyardd/railyardd $B/lib/libnccl-net-railyard.so bench
# the store's records are 1 MiB and no arena is served. In interleaved rounds, one at a
# time, g1 (cabled to g2) and then g0 (relayed) fetch all 16 records of host:g2 in one
# fetch_batch (checksums verified), after one untimed warm-up fetch; MB/s = record bytes
# / the batch's wall time. Guest 0 prints the medians and the relayed / direct ratio.
set -uo pipefail
node=$1 railyardd=$2 lib=$3 mode=${4:-test}
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_tiers_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
tag=tiers-$mode${RING_ROUND:+-$RING_ROUND}  # every guest must use the same names
dir=/ring/$tag
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
fail() { echo "ring_tiers_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }
# Waits (bounded, 120 s) for a line matching $2 in file $1 while process $3 lives.
await_line() {
  for ((i = 0; i < 1200; ++i)); do
    grep -q -- "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1  # polling for a log line another process writes, not a barrier
  done
  return 1
}
# Sum of one hw counter over this guest's rxe devices.
rxe_count() {
  local n=0 f
  for f in /sys/class/infiniband/rxe*/ports/1/hw_counters/"$1"; do [[ -r $f ]] && n=$((n + $(<"$f"))); done
  echo "$n"
}
# bench: the interleaved rounds (see the file comment), then the relays' counts.
bench_rounds() {
  local r d rl
  bench() {  # warm-up, then one timed fetch of every record; prints "mbps X"
    RAILYARD_LIB=$lib PYTHONPATH=$here/../../python python3 - <<'PY'
import time
from railyard.expert import ExpertClient
arena = bytearray(16 << 20)
with ExpertClient("host:g2", arena, transport="read") as c:
    batch = [(l, e, (l * c.experts_per_layer + e) * c.record_stride)
             for l in range(c.layers) for e in range(c.experts_per_layer)]
    c.fetch_batch(batch)  # warm-up: routes open, caches warm
    t = time.monotonic()
    c.fetch_batch(batch)
    dt = time.monotonic() - t
    print(f"mbps {len(batch) * c.record_stride / dt / 1e6:.2f}")
PY
  }
  for ((r = 0; r < ${RING_TIERS_ROUNDS:-3}; ++r)); do
    if ((RING_ID == 1)); then
      bench >"$out/direct.$r" 2>&1 || fail "direct fetch: $(tail -3 "$out/direct.$r")"
      sed -n 's/^mbps //p' "$out/direct.$r" >>"$dir/direct"
    fi
    ring-barrier "$tag-direct-$r" 600 || exit 1
    if ((RING_ID == 0)); then
      bench >"$out/relayed.$r" 2>&1 || fail "relayed fetch: $(tail -3 "$out/relayed.$r")"
      sed -n 's/^mbps //p' "$out/relayed.$r" >>"$dir/relayed"
    fi
    ring-barrier "$tag-relayed-$r" 600 || exit 1
  done
  if ((RING_ID == 0)); then
    median() { sort -n "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
    d=$(median "$dir/direct") rl=$(median "$dir/relayed")
    echo "ring_tiers_test: bench: host:g2 expert fetch over RDMA, 16 x 1 MiB:" \
      "direct (g1) $(tr '\n' ' ' <"$dir/direct")MB/s, median $d;" \
      "relayed (g0) $(tr '\n' ' ' <"$dir/relayed")MB/s, median $rl;" \
      "relayed / direct $(awk -v a="$rl" -v b="$d" 'BEGIN {printf "%.2f", a / b}')"
  fi
  ring-barrier "$tag-done" 300 || exit 1
  kill -TERM "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
  if ((RING_ID == 1 || RING_ID == 3)); then
    echo "ring_tiers_test: bench: guest $RING_ID: $(grep '^railyardd: fabric relay: ' "$out/rydd")"
  fi
}
export RAILYARD_TIMEOUT_MS=60000 RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_HOST_NAME=g$RING_ID
record=$((256 << 10))
[[ $mode == bench ]] && record=$((1 << 20))
((RING_ID == 0)) && { rm -rf "$dir"; mkdir -p "$dir"; }
ring-barrier "$tag-dir" 120 || exit 1

args=() envs=()
case $RING_ID in
  0) args=(--no-relay) ;;
  2)
    "$node" make-store --store "$dir/store" --layers 2 --experts 8 --record-bytes "$record" >"$out/make" 2>&1 ||
      fail "make-store: $(tail -5 "$out/make")"
    mkdir -p "$out/swap"
    args=(--no-relay --expert-store "$dir/store")
    if [[ $mode != bench ]]; then
      args+=(--snapshot-arena "kind=kv,mode=paging,blob=$record,slots=8")
      envs=(RAILYARD_SWAP_DIR="$out/swap")
    fi
    ;;
esac
env "${envs[@]}" RAILYARD_DEBUG=INFO "$railyardd" "${args[@]}" >"$out/rydd" 2>&1 &
pids+=($!)
case $RING_ID in
  1 | 3)
    await_line "$out/rydd" 'over 2 cables, 2 of them also over RDMA' "${pids[0]}" ||
      fail "railyardd's Forwarder did not serve both cables over RDMA: $(grep -i 'relay' "$out/rydd" | tail -5)"
    ;;
  2)
    await_line "$out/rydd" '^railyardd: tier tunnels: ' "${pids[0]}" ||
      fail "railyardd did not serve its tier tunnels: $(tail -8 "$out/rydd")"
    grep -q 'tier data over RDMA on 2 port' "$out/rydd" ||
      fail "railyardd's tier data Domain has no RDMA ports: $(grep -i 'rdma' "$out/rydd" | tail -5)"
    ;;
esac
ring-barrier "$tag-up" 300 || exit 1
[[ $mode == bench ]] && { bench_rounds; exit; }

if ((RING_ID == 0)); then
  client() {  # NAME ARGS...: the Python client, its output in $out/NAME
    local name=$1
    shift
    RAILYARD_LIB=$lib PYTHONPATH=$here/../../python RAILYARD_DEBUG=INFO \
      timeout 600 python3 "$here/../tiers_relay/capi_client.py" "$@" >"$out/$name" 2>&1
  }
  rc=0
  rx0=$(rxe_count rcvd_pkts)
  client expert expert host:g2 "$dir/store" || rc=$?
  rx1=$(rxe_count rcvd_pkts)
  tx0=$(rxe_count sent_pkts)
  ((rc == 0)) && { client snapshot snapshot host:g2 kv "$record" 8 12 || rc=$?; }
  tx1=$(rxe_count sent_pkts)
  cat "$out/expert" "$out/snapshot" 2>/dev/null | grep -v '^\[' | head -20
  {
    echo "rc $rc"
    echo "fetch-rcvd-pkts $((rx1 - rx0))"
    echo "put-sent-pkts $((tx1 - tx0))"
  } >"$dir/g0-result"
  cp "$out/expert" "$dir/g0-expert.log" 2>/dev/null
  cp "$out/snapshot" "$dir/g0-snapshot.log" 2>/dev/null
fi
ring-barrier "$tag-done" 900 || exit 1
kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
pids=()
[[ -s $dir/g0-result ]] || fail "g0 wrote no result"
client_rc=$(sed -n 's/^rc //p' "$dir/g0-result")

case $RING_ID in
  0)
    [[ $client_rc == 0 ]] || fail "the client failed (exit $client_rc): $(grep -v '^\[' "$dir/g0-expert.log" "$dir/g0-snapshot.log" 2>/dev/null | tail -8)"
    fetched=$((2 * 8 * record))
    grep -q "^expert ok $fetched bytes$" "$dir/g0-expert.log" || fail "no 'expert ok $fetched bytes'"
    grep -q '^snapshot ok' "$dir/g0-snapshot.log" || fail "no 'snapshot ok'"
    grep -q 'tier data over RDMA on 2 port' "$dir/g0-expert.log" ||
      fail "the client's data Domain has no RDMA ports: $(grep -i 'rdma' "$dir/g0-expert.log" | tail -3)"
    rx=$(sed -n 's/^fetch-rcvd-pkts //p' "$dir/g0-result")
    tx=$(sed -n 's/^put-sent-pkts //p' "$dir/g0-result")
    ((rx >= fetched / 4096)) || fail "the fetch of $fetched bytes came in $rx RoCE packets: not over RDMA"
    ((tx >= 12 * record / 4096)) || fail "the puts of $((12 * record)) bytes went out in $tx RoCE packets: not over RDMA"
    echo "ring_tiers_test: guest 0: host:g2 expert fetch ($fetched bytes, $rx RoCE packets in) and snapshot" \
      "put/get (12 x $record bytes, $tx RoCE packets out) over RDMA through a relay passed"
    ;;
  1 | 3)
    echo "ring_tiers_test: guest $RING_ID: $(grep '^railyardd: fabric relay: ' "$out/rydd")"
    ;;
  2)
    [[ $client_rc == 0 ]] || fail "the client on g0 failed; railyardd here: $(grep -i -E 'tier|expert|snapshot' "$out/rydd" | tail -5)"
    echo "ring_tiers_test: guest 2: served host:g2 to g0 with no cable between"
    ;;
esac
exit 0
