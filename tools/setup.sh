#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job
# (railyard-perf driving libnccl-net-railyard.so with 4 ranks over loopback).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RAILYARD_BUILD_DIR:-$root/build}
"$root/tools/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-railyard}
exec "$build/tools/railyard-perf/railyard-perf" -np 4 -p ring -b 64K -e 64M -f 4 -c 1 "$@"
