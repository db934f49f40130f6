#!/usr/bin/env bash
# The README's first command: install the packages building and running need
# (tools/scripts/install-deps.sh build; it says what it installs), build the plugin
# and the tools (target `shipped`, not the tests), and run the main job:
# railyard-perf driving libnccl-net-railyard.so with 4 ranks over loopback. Arguments
# go to railyard-perf after its own and win over them (tools/setup.sh -b 1M -e 4M).
# Idempotent: a second run installs nothing and rebuilds nothing that is current.
# Builds in RAILYARD_BUILD_DIR (default build/); tools/test.sh uses its own.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RAILYARD_BUILD_DIR:-$root/build}
"$root/tools/scripts/install-deps.sh" build
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target shipped
echo "railyard: built the plugin and the tools in $build (tools: $build/tools/NAME/NAME; the tests" \
     "are not built: cmake --build $build builds them, or tools/test.sh builds and runs them all in" \
     "build-test/; install: cmake --install $build --prefix PREFIX); running the main job" >&2
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NET_PLUGIN=${NCCL_NET_PLUGIN:-railyard}
exec "$build/tools/railyard-perf/railyard-perf" -np 4 -p ring -b 64K -e 64M -f 4 -c 1 "$@"
