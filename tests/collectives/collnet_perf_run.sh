#!/usr/bin/env bash
# The CollNet tables end to end, multi-process on loopback: railyard-perf forks N
# ranks that load the built plugin, connect one collComm through
# ncclCollNetPlugin_v12 and run allreduce / allgather / reducescatter with -c 1 (every
# element checked against the double reference). Sizes grow by x3 from one element, so
# counts not divisible by the rank count come up; several datatypes and ops.
# Usage: collnet_perf_run.sh <railyard-perf> <libnccl-net-railyard.so>
set -euo pipefail
perf="${1:?railyard-perf}" lib="${2:?plugin}"
export RAILYARD_SOCKET_IFNAME="=lo" NCCL_NET_PLUGIN="$lib"
fail=0
run() {
  local out
  if ! out=$("$perf" -T 120 -n 3 -w 1 -c 1 "$@" 2>&1); then
    echo "FAILED: railyard-perf $*"; echo "$out"; fail=1; return
  fi
  if ! grep -q "Out of bounds values : 0 OK" <<<"$out"; then
    echo "FAILED (no OK line): railyard-perf $*"; echo "$out"; fail=1; return
  fi
  echo "ok: railyard-perf $* ($(grep -c '^ *[0-9]' <<<"$out") sizes)"
}
run -np 3 -p allreduce -d float -o sum -b 4 -e 1M -f 3
run -np 4 -p allreduce -d half -o max -b 2 -e 300K -f 3
run -np 2 -p allreduce -d bfloat16 -o avg -b 2 -e 100K -f 5
run -np 3 -p allreduce -d int8 -o prod -b 1 -e 30K -f 3
run -np 4 -p allreduce -d f8e4m3 -o sum -b 1 -e 30K -f 3
run -np 3 -p allreduce -d int64 -o min -b 8 -e 300K -f 3
run -np 4 -p allgather -d float -b 16 -e 1M -f 4
run -np 3 -p allgather -d uint8 -b 3 -e 100K -f 5
run -np 4 -p reducescatter -d float -o sum -b 16 -e 1M -f 4
run -np 3 -p reducescatter -d double -o prod -b 24 -e 100K -f 5
run -np 1 -p allreduce -d float -o sum -b 4 -e 4K -f 4
exit $fail
