#!/usr/bin/env bash
# tools/bench/snapshot.sh — the snapshot tier's numbers for docs/benchmarks.md, in one
# run: railyard-snapshot-bench (put/get GB/s, 1-64 MiB blobs, resident and faulted
# from swap), the raw TCP pump one way on loopback (railyard-tcp-pump -p oneway, the
# lane's ceiling for resident blobs), and the swap disk's sequential write and read
# (dd with O_DIRECT, the ceiling for faulted blobs). Prints JSON lines on stdout.
#
# Usage: tools/bench/snapshot.sh [--build DIR] [--swap-dir DIR] [--iters N]
#   --swap-dir  where the swap files and the dd file go (default: a fresh directory
#               under $TMPDIR or /tmp: the disk under test)
# Traffic stays on 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$ROOT/build"
SWAP=""
ITERS=8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --swap-dir) SWAP="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    *) echo "snapshot.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
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
"$BUILD/tests/snapshot/railyard-snapshot-bench" --swap-dir "$SWAP" --iters "$ITERS" |
  sed 's/^{/{"what": "snapshot", /'
