#!/usr/bin/env bash
# Regenerates the "CollNet collectives on the namespace ring" section of docs/benchmarks.md
# (printed on stdout; paste it in): on the netns testbed's ring of 4 with 2 rails per
# cable, every rail shaped by tc tbf at RATE, in ONE run:
#  - Railyard AllReduce busbw through the CollNet table (shape found from the handles:
#    ring, both directions) against the bound the shaped links allow: a host sends on
#    its 4 rails at once, so busbw <= 4 x RATE;
#  - Open MPI's MPI_Allreduce (Debian openmpi-bin) on the same four namespaces, the
#    kernel forwarding IP between non-adjacent hosts (tools/bench/collnet_routes.py);
#  - latency 8 KiB - 1 MiB beside 2 x the p2p sendrecv time on one cable of the lane;
#  - the TCP ceiling: iperf3 with one flow on every rail in each direction at once (16
#    flows, 5 s), what TCP itself gets from the shaped links on the machine as loaded now.
# Needs root, the testbed's packages, iperf3, openmpi-bin + libopenmpi-dev
# (tools/scripts/install-deps.sh bench). Usage: tools/bench/collnet.sh [BUILD_DIR] [RATE]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)" rate="${2:-100mbit}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_allreduce" "$here/mpi_allreduce.c"
"$root/tests/testbed/testbed.sh" run --lane ring4x2 --rate "$rate" -- \
  "$here/collnet_inner.sh" "$build" "$tmp/mpi_allreduce" "$rate" > "$tmp/raw.txt"
python3 "$here/collnet_report.py" "$rate" < "$tmp/raw.txt"
