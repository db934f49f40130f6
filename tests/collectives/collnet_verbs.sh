#!/usr/bin/env bash
# CollNet over the verbs transport in the single soft-RoCE guest (tests/lanes/rxe, label
# verbs): one railyard-perf rank per lane "host" h, RAILYARD_TRANSPORT=verbs on exactly
# that host's rxe devices (RXE_LANE_DEVS_H<h>), bootstrap over 127.0.0.1. Runs
# allreduce, allgather and reducescatter through the CollNet table with -c 1 (every
# element against the double reference) from 4 B (allreduce: one-shot) to 256 KiB (the
# shape's own algorithm), and checks that rank 0 connected over verbs with the shape
# read from the handles' rail subnets (every host has a rail on every rail subnet in
# this lane: a mesh, direct reduce-scatter + all-gather).
# Usage: collnet_verbs.sh <railyard-perf> <libnccl-net-railyard.so>
# Exit: 0 pass, 1 fail, 77 not in the lane (RXE_LANE_HOSTS unset).
set -uo pipefail
perf="${1:?railyard-perf}" lib="${2:?plugin}"
if [[ -z ${RXE_LANE_HOSTS:-} ]]; then
  echo "collnet_verbs: not in the soft-RoCE lane (RXE_LANE_HOSTS unset); skipped" >&2
  exit 77
fi
n=$RXE_LANE_HOSTS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for pattern in allreduce allgather reducescatter; do
  port=$((20000 + RANDOM % 20000))
  pids=()
  for ((h = 0; h < n; h++)); do
    devs_var=RXE_LANE_DEVS_H$h
    devs=${!devs_var:-}
    if [[ -z $devs ]]; then echo "FAIL: $devs_var unset in the lane"; exit 1; fi
    env RAILYARD_TRANSPORT=verbs RAILYARD_HCA="=${devs// /,}" RAILYARD_FABRIC=off NCCL_DEBUG=INFO \
      RAILYARD_TIMEOUT_MS=30000 NCCL_NET_PLUGIN="$lib" \
      timeout 120 "$perf" --rank "$h" --nranks "$n" --root "127.0.0.1:$port" \
      -p "$pattern" -d float -o sum -b 4 -e 256K -f 16 -n 2 -w 1 -c 1 -T 100 \
      >"$tmp/out.$pattern.$h" 2>"$tmp/err.$pattern.$h" &
    pids+=($!)
  done
  for ((h = 0; h < n; h++)); do
    if ! wait "${pids[$h]}"; then echo "FAIL: $pattern rank $h exited non-zero"; fail=1; fi
  done
  if ! grep -q "Out of bounds values : 0 OK" "$tmp/out.$pattern.0"; then
    echo "FAIL: $pattern: rank 0 has no OK line"; fail=1
  fi
  if ! grep -q "CollNet: rank 0 of $n connected (mesh, order [0-9 ]*, from the rail subnets; verbs" "$tmp/err.$pattern.0"; then
    echo "FAIL: $pattern: rank 0 did not connect as a mesh over verbs from the rail subnets:"
    grep 'CollNet' "$tmp/err.$pattern.0" | head -5; fail=1
  fi
  if [[ $fail -ne 0 ]]; then
    for ((h = 0; h < n; h++)); do
      echo "--- $pattern rank $h stdout"; tail -20 "$tmp/out.$pattern.$h"
      echo "--- $pattern rank $h stderr"; grep -v ' INFO ' "$tmp/err.$pattern.$h" | tail -20
    done
    exit 1
  fi
  grep 'CollNet: rank 0' "$tmp/err.$pattern.0" | sed 's/.*CollNet/CollNet/' | head -1
  grep -E '^ +[0-9]+ ' "$tmp/out.$pattern.0" | tail -2
done
echo "ok: collnet allreduce, allgather, reducescatter -c 1 over verbs on $n lane hosts"
