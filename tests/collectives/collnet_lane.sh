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
# COLLNET_RUNS: the collectives to run one after the other, each a fresh set of ranks,
# as PATTERN/TYPE/OP words (default "allreduce/float/sum"; OP is ignored for allgather):
# the lanes of ring and direct run allgather and reducescatter too, with other
# types and ops, from 20 B up by x7 (railyard-perf rounds each size to whole elements
# per rank, as nccl-tests does; uneven blocks are the unit tests' part).
# An allreduce run also checks that h0 sent at least 256 KiB on each of its cabled rails.
# Usage: collnet_lane.sh <expected shape> <railyard-perf> <libnccl-net-railyard.so> [perf args...]
# (perf args, when given, replace the runs: one run with exactly those arguments)
set -uo pipefail
shape="${1:?shape}" perf="${2:?railyard-perf}" lib="${3:?plugin}"
shift 3
: "${TESTBED_PREFIX:?run inside testbed.sh run}" "${TESTBED_HOSTS:?}"
n=$TESTBED_HOSTS
fabric=${COLLNET_FABRIC:-off}
port=$((20000 + RANDOM % 20000))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# h0's cabled rails (those with an address in the testbed's description) and what
# each has sent so far: the allreduce run must have sent on every one of them (both
# directions of every cable, every rail of a cable: the fabric stripes the 512 KiB
# chunks over a cable's rails).
cabled=$(python3 -c 'import json, os
h = json.load(open(os.environ["TESTBED_JSON"]))["hosts"][0]
print(" ".join(i["ifname"] for i in h["interfaces"] if i.get("ip")))')
tx_of() { ip netns exec "$TESTBED_PREFIX-h0" cat "/sys/class/net/$1/statistics/tx_bytes"; }
declare -A tx0=()
# One collective on every host at once; appends to the failure report and sets fail.
run_one() {  # TAG then railyard-perf arguments
  local tag=$1 i pids=()
  shift
  for ((i = 0; i < n; i++)); do
    ip netns exec "$TESTBED_PREFIX-h$i" env RAILYARD_SOCKET_IFNAME=p0,p1,p2,p3 RAILYARD_FABRIC=$fabric \
      NCCL_DEBUG=INFO RAILYARD_TIMEOUT_MS=20000 NCCL_NET_PLUGIN="$lib" \
      "$perf" --rank "$i" --nranks "$n" --root "10.200.0.1:$port" "$@" >"$tmp/out.$tag.$i" 2>"$tmp/err.$tag.$i" &
    pids+=($!)
  done
  port=$((port + 1))
  local bad=0
  for ((i = 0; i < n; i++)); do
    if ! wait "${pids[$i]}"; then echo "FAIL ($tag): rank $i exited non-zero"; bad=1; fi
  done
  # Rank 0 prints the table; every rank checks its own result (-c 1) and exits non-zero on a wrong element.
  if ! grep -q "Out of bounds values : 0 OK" "$tmp/out.$tag.0"; then echo "FAIL ($tag): rank 0 has no OK line"; bad=1; fi
  if ! grep -q "CollNet: rank 0 of $n connected ($shape" "$tmp/err.$tag.0"; then
    echo "FAIL ($tag): rank 0 did not connect as a $shape:"; grep 'CollNet' "$tmp/err.$tag.0" | head -5; bad=1
  fi
  if [ "$fabric" = on ] && ! grep -q "CollNet: rank 0 of $n connected ($shape, order [0-9 ]*, from the cabling graph" "$tmp/err.$tag.0"; then
    echo "FAIL ($tag): rank 0 did not take the shape from the cabling graph:"; grep 'CollNet' "$tmp/err.$tag.0" | head -5; bad=1
  fi
  if [ $bad -ne 0 ]; then
    for ((i = 0; i < n; i++)); do
      echo "--- $tag rank $i stdout"; tail -30 "$tmp/out.$tag.$i"
      echo "--- $tag rank $i stderr"; grep -v ' INFO ' "$tmp/err.$tag.$i" | tail -20
    done
    fail=1
    return
  fi
  grep 'CollNet: rank 0' "$tmp/err.$tag.0" | sed 's/.*CollNet/CollNet/' | head -1
  grep -E '^ +[0-9]+ ' "$tmp/out.$tag.0" | tail -2
  echo "ok: collnet $tag -c 1 on the $shape of $n"
}
if [ $# -gt 0 ]; then
  run_one custom "$@"
else
  for spec in ${COLLNET_RUNS:-allreduce/float/sum}; do
    IFS=/ read -r pattern dtype op <<<"$spec"
    case $pattern in
      allreduce) sizes=(-b 4 -e 1M -f 8) ;;  # crosses the 64 KiB one-shot threshold
      *) sizes=(-b 20 -e 1M -f 7) ;;  # 20 B .. 329 KiB
    esac
    opargs=(-o "$op")
    [ "$pattern" = allgather ] && opargs=()
    if [ "$pattern" = allreduce ]; then
      for i in $cabled; do tx0[$i]=$(tx_of "$i"); done
    fi
    run_one "$pattern-$dtype${op:+-$op}" -p "$pattern" -d "$dtype" "${opargs[@]}" "${sizes[@]}" -n 2 -w 1 -c 1 -T 60
    if [ "$pattern" = allreduce ]; then
      # Up to 1 MiB, 3 iterations: about 1 MiB a rail on ring4x2 (4 rails); 256 KiB is
      # what a rail that carried no chunk of its own cannot reach with acks alone.
      sent=""
      for i in $cabled; do
        d=$(( $(tx_of "$i") - ${tx0[$i]} ))
        sent+=" $i=$((d >> 10))KiB"
        ((d >= 256 * 1024)) || { echo "FAIL (allreduce): h0's rail $i sent only $d bytes"; fail=1; }
      done
      echo "h0 sent per cabled rail during the allreduce run:$sent"
    fi
  done
fi
exit $fail
