#!/usr/bin/env bash
# CollNet on a netns testbed lane (run inside `testbed.sh run --lane L --`): one
# railyard-perf rank per host namespace, bootstrap over mgmt0, the collectives over
# the host's data rails (RAILYARD_SOCKET_IFNAME=p0,p1,p2,p3: every p<port>r<rail>; uncabled ones have no address), the
# shape found from the connect handles. Checks: every rank exits 0 with nccl-tests'
# rank 0 prints "Out of bounds values : 0 OK" (-c 1: every element against the double reference),
# rank 0 logs the expected shape, sizes cross the one-shot threshold (64 KiB) so both
# the small and the shape's own algorithm run.
# COLLNET_FABRIC=on runs the ranks in fabric mode (RAILYARD_FABRIC=on: each process's
# cabling agent finds the graph) and then also checks that the shape came "from the
# cabling graph" (the neighbours in the handles), not from the rails' subnets.
# Usage: collnet_lane.sh <expected shape> <railyard-perf> <libnccl-net-railyard.so> [perf args...]
set -uo pipefail
shape="${1:?shape}" perf="${2:?railyard-perf}" lib="${3:?plugin}"
shift 3
: "${TESTBED_PREFIX:?run inside testbed.sh run}" "${TESTBED_HOSTS:?}"
n=$TESTBED_HOSTS
fabric=${COLLNET_FABRIC:-off}
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(-p allreduce -d float -o sum -b 4 -e 1M -f 8 -n 2 -w 1 -c 1 -T 60)
[ $# -gt 0 ] && args=("$@")
pids=()
for ((i = 0; i < n; i++)); do
  ip netns exec "$TESTBED_PREFIX-h$i" env RAILYARD_SOCKET_IFNAME=p0,p1,p2,p3 RAILYARD_FABRIC=$fabric \
    NCCL_DEBUG=INFO RAILYARD_TIMEOUT_MS=20000 NCCL_NET_PLUGIN="$lib" \
    "$perf" --rank "$i" --nranks "$n" --root "10.200.0.1:$port" "${args[@]}" >"$tmp/out.$i" 2>"$tmp/err.$i" &
  pids+=($!)
done
fail=0
for ((i = 0; i < n; i++)); do
  if ! wait "${pids[$i]}"; then echo "FAIL: rank $i exited non-zero"; fail=1; fi
done
# Rank 0 prints the table; every rank checks its own result (-c 1) and exits non-zero on a wrong element.
if ! grep -q "Out of bounds values : 0 OK" "$tmp/out.0"; then echo "FAIL: rank 0 has no OK line"; fail=1; fi
if ! grep -q "CollNet: rank 0 of $n connected ($shape" "$tmp/err.0"; then
  echo "FAIL: rank 0 did not connect as a $shape:"; grep 'CollNet' "$tmp/err.0" | head -5; fail=1
fi
if [ "$fabric" = on ] && ! grep -q "CollNet: rank 0 of $n connected ($shape, order [0-9 ]*, from the cabling graph" "$tmp/err.0"; then
  echo "FAIL: rank 0 did not take the shape from the cabling graph:"; grep 'CollNet' "$tmp/err.0" | head -5; fail=1
fi
if [ $fail -ne 0 ]; then
  for ((i = 0; i < n; i++)); do echo "--- rank $i stdout"; tail -30 "$tmp/out.$i"; echo "--- rank $i stderr"; grep -v ' INFO ' "$tmp/err.$i" | tail -20; done
  exit 1
fi
grep 'CollNet: rank 0' "$tmp/err.0" | sed 's/.*CollNet/CollNet/'
grep -E '^ +[0-9]+ ' "$tmp/out.0" | tail -3
echo "ok: collnet allreduce -c 1 on the $shape of $n"
