#!/usr/bin/env bash
# ring_tiers_bench.sh NODE RAILYARDD LIBRARY - benchmark (by hand, not a ctest case) of
# the expert tier's host:NAME path over RDMA in a ring of 4 soft-RoCE guests, for
# docs/benchmarks.md. SPMD: every guest runs it at once, e.g.
#   tests/lanes/rxe-ring/ring.sh -n 4 -G -e RING_TIERS_ROUNDS -C build \
#     tests/verbs/ring_tiers_bench.sh build/tests/tiers_relay/tiers_relay_node \
#     build/tools/railyardd/railyardd build/lib/libnccl-net-railyard.so
# g2's railyardd serves a store of 2 layers x 8 experts x 1 MiB (NODE make-store); g1 and
# g3 relay. In interleaved rounds (RING_TIERS_ROUNDS, default 3), one at a time: g1
# (cabled to g2) fetches the whole store from host:g2 straight over its RDMA cable, then
# g0 (no cable to g2) fetches it through a relay's Forwarder over RDMA. Each fetch is the
# Python binding's fetch_batch of 16 records into a 16 MiB arena, checksums verified,
# after one untimed warm-up fetch; the client prints MB/s (record bytes / wall time of
# the batch). Guest 0 prints the medians and the relayed / direct ratio.
# Exit: 0 done, 1 a step failed, 77 not in a ring guest of 4.
set -uo pipefail
node=$1 railyardd=$2 lib=$3
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_tiers_bench: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
rounds=${RING_TIERS_ROUNDS:-3}
tag=tiers-bench${RING_ROUND:+-$RING_ROUND}
dir=/ring/$tag
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
fail() { echo "ring_tiers_bench: FAIL: guest $RING_ID: $*" >&2; exit 1; }
export RAILYARD_TIMEOUT_MS=60000 RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_HOST_NAME=g$RING_ID
((RING_ID == 0)) && { rm -rf "$dir"; mkdir -p "$dir"; }
ring-barrier "$tag-dir" 120 || exit 1
args=()
case $RING_ID in
  0) args=(--no-relay) ;;
  2)
    "$node" make-store --store "$dir/store" --layers 2 --experts 8 --record-bytes $((1 << 20)) >"$out/make" 2>&1 ||
      fail "make-store: $(tail -5 "$out/make")"
    args=(--no-relay --expert-store "$dir/store")
    ;;
esac
"$railyardd" "${args[@]}" >"$out/rydd" 2>&1 &
pids+=($!)
if ((RING_ID == 2)); then
  for ((i = 0; i < 1200; ++i)); do
    grep -q '^railyardd: tier tunnels: ' "$out/rydd" && break
    sleep 0.1  # polling for railyardd's log line, not a barrier
  done
  grep -q '^railyardd: tier tunnels: ' "$out/rydd" || fail "no tier tunnels: $(tail -5 "$out/rydd")"
fi
ring-barrier "$tag-up" 300 || exit 1
bench() {  # the Python client: warm-up, then one timed fetch of every record; prints "mbps X"
  RAILYARD_LIB=$lib PYTHONPATH=$here/../../python python3 - "$@" <<'PY'
import sys, time
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
for ((r = 0; r < rounds; ++r)); do
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
  echo "ring_tiers_bench: host:g2 expert fetch over RDMA, 16 x 1 MiB, $rounds rounds:" \
    "direct (g1) $(tr '\n' ' ' <"$dir/direct")MB/s, median $d;" \
    "relayed (g0) $(tr '\n' ' ' <"$dir/relayed")MB/s, median $rl;" \
    "relayed / direct $(awk -v a="$rl" -v b="$d" 'BEGIN {printf "%.2f", a / b}')"
fi
ring-barrier "$tag-done" 300 || exit 1
kill -TERM "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
pids=()
if ((RING_ID == 1 || RING_ID == 3)); then echo "ring_tiers_bench: guest $RING_ID: $(grep '^railyardd: fabric relay: ' "$out/rydd")"; fi
exit 0
