#!/usr/bin/env bash
# tools/bench/snapshot.sh — the snapshot tier's numbers for docs/benchmarks.md, in one
# run: railyard-snapshot-bench (put/get GB/s, 1-64 MiB blobs, resident and faulted
# from swap), the raw TCP pump one way on loopback (railyard-tcp-pump -p oneway, the
# lane's ceiling for resident blobs), and the swap disk's sequential write and read
# (dd with O_DIRECT, the ceiling for faulted blobs). Prints JSON lines on stdout.
#
# Usage: tools/bench/snapshot.sh [--build DIR] [--swap-dir DIR] [--iters N] [--sizes LIST]
#   --swap-dir  where the swap files and the dd file go (default: a fresh directory
#               under $TMPDIR or /tmp: the disk under test)
# Traffic stays on 127.0.0.1.
#
# Over verbs, inside the soft-RoCE guest (one rail: host h0 = the serving process,
# h1 = the client), against ib_write_bw / ib_read_bw on the same rail, same boot:
#   flock /tmp/railyard-lane.lock tests/lanes/rxe/lane.sh -T 2x1 -t 600 \
#     tools/bench/snapshot.sh --lane --build build --sizes 1M --iters 4
# (resident blobs only: the guest's files live in a tmpfs, so there is no disk to
# fault from; the faulted figures come from the loopback run.) Nothing is built then.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$ROOT/build"
SWAP=""
ITERS=8
LANE=0
SIZES=1M,4M,16M,64M
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --swap-dir) SWAP="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --lane) LANE=1; shift ;;
    *) echo "snapshot.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
echo "# load: $(cat /proc/loadavg) on $(nproc) cores" >&2
if [[ $LANE == 1 ]]; then
  [[ -n "${RXE_LANE_HOSTS:-}" ]] || { echo "snapshot.sh --lane: not in the soft-RoCE lane" >&2; exit 2; }
  gid=${RXE_LANE_GID_INDEX:-1}
  ip=${RXE_LANE_IPS_H1%% *}
  port=18700
  for size in ${SIZES//,/ }; do
    bytes=$(( ${size%M} << 20 ))
    for tool in ib_write_bw ib_read_bw; do
      port=$((port + 1))
      # A count scaled to the size (64 MiB each run, at least 5): 20 of 64 MiB did not end
      # inside the timeouts at this lane's speed.
      n=$(( (64 << 20) / bytes )); (( n < 5 )) && n=5; (( n > 20 )) && n=20
      timeout 100 "$tool" -d rxe_h1r0 -x "$gid" -p "$port" -F -s "$bytes" -n "$n" --report_gbits > /tmp/perf.srv 2>&1 &
      srv=$!
      for _ in $(seq 100); do ss -ltn 2>/dev/null | grep -q ":$port " && break; sleep 0.1; done
      out=$( (timeout 90 "$tool" -d rxe_h0r0 -x "$gid" -p "$port" -F -s "$bytes" -n "$n" --report_gbits "$ip" 2>&1 || true) |
        awk '$1 == '"$bytes"' {print $4}')
      wait "$srv" || true
      echo "{\"what\": \"$tool\", \"size\": $bytes, \"gbits\": \"${out:-?}\"}"
    done
  done
  SWAP=$(mktemp -d /tmp/railyard-snapshot-bench-XXXXXX)
  SNAPSHOT_TEST_TRANSPORT=verbs "$BUILD/tests/snapshot/railyard-snapshot-bench" --swap-dir "$SWAP" \
    --iters "$ITERS" --sizes "$SIZES" | sed 's/^{/{"what": "snapshot_verbs", /'
  echo "# load after: $(cat /proc/loadavg)" >&2
  exit 0
fi
cmake --build "$BUILD" --target railyard-snapshot-bench railyard-tcp-pump >&2
OWN=0
if [[ -z "$SWAP" ]]; then SWAP=$(mktemp -d "${TMPDIR:-/tmp}/railyard-snapshot-bench-XXXXXX"); OWN=1; fi
trap '[[ $OWN == 1 ]] && rm -rf "$SWAP"' EXIT
echo "# disk: $(df -h --output=source,fstype "$SWAP" | tail -1)" >&2

# 1. The raw pump, one way, 1 stream (the snapshot client uses one socket per rail).
"$BUILD/tools/railyard-tcp-pump/railyard-tcp-pump" -p oneway -s 1 -b 1M -e 64M -f 4 -n "$ITERS" -w 2 |
  sed 's/^{/{"what": "pump_oneway", /'

# 2. The disk: 256 MiB sequential, O_DIRECT, 1 MiB and 16 MiB blocks.
for bs in 1M 16M; do
  count=$(( 256 / ${bs%M} ))
  w=$(dd if=/dev/zero of="$SWAP/dd.bin" bs="$bs" count="$count" oflag=direct conv=fdatasync 2>&1 | tail -1)
  r=$(dd if="$SWAP/dd.bin" of=/dev/null bs="$bs" iflag=direct 2>&1 | tail -1)
  echo "{\"what\": \"dd\", \"bs\": \"$bs\", \"write\": \"${w##*, }\", \"read\": \"${r##*, }\"}"
  rm -f "$SWAP/dd.bin"
done

# 3. The snapshot tier.
"$BUILD/tests/snapshot/railyard-snapshot-bench" --swap-dir "$SWAP" --iters "$ITERS" --sizes "$SIZES" |
  sed 's/^{/{"what": "snapshot", /'
echo "# load after: $(cat /proc/loadavg)" >&2
