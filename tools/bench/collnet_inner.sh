#!/usr/bin/env bash
# The CollNet benchmark inside `testbed.sh run --lane ring4x2 --rate R --` (see
# tools/bench/collnet.sh). Prints the raw tables: Railyard allreduce (CollNet, shape from
# the handles; iterations back to back as nccl-tests runs them, then each waited for),
# p2p sendrecv h0<->h1, Open MPI MPI_Allreduce with kernel forwarding.
set -uo pipefail
build="${1:?build dir}" mpibin="${2:?mpi_allreduce binary}" rate="${3:?rate}"
perf="$build/tools/railyard-perf/railyard-perf" lib="$build/lib/libnccl-net-railyard.so"
n=$TESTBED_HOSTS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
run_perf() {  # nranks args... (IFN_<rank> overrides a rank's RAILYARD_SOCKET_IFNAME)
  local nr=$1; shift
  local port=$((20000 + RANDOM % 20000)) pids=()
  for ((i = 0; i < nr; i++)); do
    local ifn_var="IFN_$i" ifn="p0,p1"
    [ -n "${!ifn_var:-}" ] && ifn="${!ifn_var}"
    ip netns exec "$TESTBED_PREFIX-h$i" env RAILYARD_SOCKET_IFNAME="$ifn" RAILYARD_FABRIC=off NCCL_NET_PLUGIN="$lib" \
      RAILYARD_TIMEOUT_MS=60000 "$perf" --rank "$i" --nranks "$nr" --root "10.200.0.1:$port" "$@" >"$tmp/o.$i" 2>"$tmp/e.$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "railyard-perf failed:"; tail -n 5 "$tmp"/e.*; }; done
  cat "$tmp/o.0"
}
echo "## railyard allreduce (CollNet, -z 0: iterations back to back) on the ring of $n, every rail tbf $rate"
run_perf "$n" -p allreduce -d float -o sum -b 8K -e 16M -f 2 -n 10 -w 2 -c 0 -z 0 -T 600
echo "## railyard allreduce-blocking (CollNet, -z 1: each iteration waited for) on the ring of $n, every rail tbf $rate"
run_perf "$n" -p allreduce -d float -o sum -b 8K -e 16M -f 2 -n 10 -w 2 -c 0 -z 1 -T 600
echo "## iperf3 ceiling: one TCP flow on every rail in each direction at once, 5 s"
iperf_ceiling() {  # prints "iperf3 flows K sum MBITS"
  local -a A H
  local h a i j port=5201 cl=()
  for ((h = 0; h < n; h++)); do
    for a in $(ip netns exec "$TESTBED_PREFIX-h$h" ip -4 -o addr show | awk '{print $4}' | grep '^10\.201\.' | cut -d/ -f1); do
      A+=("$a"); H+=("$h")
    done
  done
  for ((i = 0; i < ${#A[@]}; i++)); do
    for ((j = 0; j < ${#A[@]}; j++)); do
      [[ ${H[$i]} != "${H[$j]}" && ${A[$i]%.*} == "${A[$j]%.*}" ]] || continue
      ip netns exec "$TESTBED_PREFIX-h${H[$j]}" iperf3 -s -1 -B "${A[$j]}" -p $port >/dev/null 2>&1 &
      sleep 0.05  # the server's listen; a refused client shows as a missing flow below
      ip netns exec "$TESTBED_PREFIX-h${H[$i]}" iperf3 -c "${A[$j]}" -B "${A[$i]}" -p $port -t 5 -J >"$tmp/iperf.$port" 2>/dev/null &
      cl+=($!); port=$((port + 1))
    done
  done
  for p in "${cl[@]}"; do wait "$p"; done
  python3 -c 'import json,sys
t=[json.load(open(f))["end"]["sum_received"]["bits_per_second"] for f in sys.argv[1:]]
print("iperf3 flows %d sum %.1f" % (len(t), sum(t)/1e6))' "$tmp"/iperf.*
}
iperf_ceiling
echo "## railyard p2p sendrecv h0<->h1 (one cable: h0's port 1, h1's port 0)"
IFN_0=p1 IFN_1=p0 run_perf 2 -p sendrecv -b 8K -e 1M -f 2 -n 20 -w 2 -c 0 -T 600
echo "## Open MPI MPI_Allreduce, kernel forwarding between non-adjacent hosts"
python3 "$(dirname "$0")/collnet_routes.py" > "$tmp/routes.sh" && bash "$tmp/routes.sh"
cat > "$tmp/agent.sh" <<AG
#!/bin/sh
# Open MPI's rsh agent: "agent HOST CMD..." runs CMD in HOST's namespace (HOST = its mgmt address).
host=\$1; shift
i=\$(( \${host##*.} - 1 ))
exec ip netns exec $TESTBED_PREFIX-h\$i sh -c "\$*"
AG
chmod +x "$tmp/agent.sh"
hosts=$(for ((i = 1; i <= n; i++)); do printf '10.200.0.%d,' "$i"; done)
ip netns exec "$TESTBED_PREFIX-h0" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 600 mpirun --allow-run-as-root -np "$n" --host "${hosts%,}" --mca plm_rsh_agent "$tmp/agent.sh" \
  --mca btl tcp,self --mca btl_tcp_if_include 10.201.0.0/16 --mca oob_tcp_if_include 10.200.0.0/24 \
  --mca pml ob1 "$mpibin" 8192 $((16 << 20)) 5 2>&1 | tail -20
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
