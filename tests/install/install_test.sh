#!/usr/bin/env bash
# install.prefix: `cmake --install BUILD --prefix P` into a scratch prefix, then
# check P as a user of the installed tree would, with nothing of the build tree
# on any search path:
#  - the layout: plugin in P/LIBDIR, tools in P/bin, header in P/include/railyard,
#    railyard.pc, the CMake package, railyardd.service (ExecStart = P/bin/railyardd),
#    docs/configuration.md under P/share/doc/railyard (and the installed
#    railyard-config-doc regenerates it byte for byte);
#  - no RPATH/RUNPATH in the installed binaries, all their libraries resolve,
#    none from the build tree, no CUDA library; the plugin exports only what
#    tests/scripts/check_exports.sh allows;
#  - a C program built against the installed header through pkg-config, and one
#    through find_package(Railyard) (tests/install/consumer), each checking that
#    railyard_version() matches the header;
#  - the installed railyard-perf drives the installed plugin over loopback
#    (2 ranks, data checked) in a clean environment (env -i), found the way NCCL
#    finds it (NCCL_NET_PLUGIN=railyard + LD_LIBRARY_PATH=P/LIBDIR, with LD_DEBUG
#    showing no file opened from the build tree) and through railyard-perf's
#    install-relative default (nothing set).
#
# Usage: install_test.sh BUILD SRC VERSION LIBDIR BINDIR INCLUDEDIR DOCDIR
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") version=$3 libdir=$4 bindir=$5 incdir=$6 docdir=$7
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/install/lib.sh
source "$here/lib.sh"
for d in "$libdir" "$bindir" "$incdir" "$docdir"; do
  [[ "$d" != /* ]] || { echo "install_test: absolute install dir $d; the test needs relative ones"; exit 77; }
done

scratch=$(mktemp -d /tmp/railyard-install-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
P=$scratch/prefix
cmake --install "$build" --prefix "$P" >"$scratch/install.log" 2>&1 || { cat "$scratch/install.log"; fail "cmake --install"; }
ok "cmake --install $build --prefix $P ($(grep -c '^-- Installing' "$scratch/install.log") files)"

# ---- layout ----------------------------------------------------------------------
plugin=$P/$libdir/libnccl-net-railyard.so
want=("$plugin" "$P/$incdir/railyard/railyard.h" "$P/$incdir/railyard/version.h"
      "$P/$libdir/pkgconfig/railyard.pc" "$P/$libdir/cmake/Railyard/RailyardConfig.cmake"
      "$P/$libdir/cmake/Railyard/RailyardConfigVersion.cmake" "$P/$libdir/cmake/Railyard/RailyardTargets.cmake"
      "$P/lib/systemd/system/railyardd.service" "$P/$docdir/configuration.md" "$P/$docdir/README.md")
tools=(railyard-perf railyard-info railyardd railyard-tcp-pump railyard-config-doc railyard-plot railyard-pack)
for t in "${tools[@]}"; do want+=("$P/$bindir/$t"); done
for f in "${want[@]}"; do [[ -e "$f" ]] || fail "not installed: ${f#"$P"/}"; done
for t in "${tools[@]}"; do [[ -x "$P/$bindir/$t" ]] || fail "not executable: $bindir/$t"; done
ok "layout: ${#want[@]} files where expected"
grep -q '^usage: railyard-plot' < <("$P/$bindir/railyard-plot" --help) || fail "the installed railyard-plot does not run"
ok "the installed railyard-plot runs (--help)"
if grep -rIl --exclude='*.md' -e "$build" -e "$src" "$P" >"$scratch/leaks.txt" 2>/dev/null; then
  fail "installed text files name the build or source tree: $(cat "$scratch/leaks.txt")"
fi
ok "no installed text file names the build or source tree"

unit=$P/lib/systemd/system/railyardd.service
grep -qx "ExecStart=$P/$bindir/railyardd" "$unit" || fail "railyardd.service: $(grep ExecStart "$unit")"
grep -q '@' <(grep -v '^#' "$unit") && fail "railyardd.service has an unreplaced @VAR@"
ok "railyardd.service: ExecStart=$P/$bindir/railyardd"

cmp -s "$P/$docdir/configuration.md" "$src/docs/configuration.md" || fail "installed configuration.md differs from docs/"
"$P/$bindir/railyard-config-doc" "$scratch/configuration.md" >/dev/null
cmp -s "$scratch/configuration.md" "$P/$docdir/configuration.md" ||
  fail "the installed railyard-config-doc does not regenerate the installed configuration.md"
ok "configuration.md installed and regenerated identically by the installed railyard-config-doc"

# ---- run-time cleanliness -------------------------------------------------------------
elfs=("$plugin")
for t in "${tools[@]}"; do file -b "$P/$bindir/$t" | grep -q ELF && elfs+=("$P/$bindir/$t"); done
check_runtime_clean "$build" "$src" "${elfs[@]}"
"$src/tests/scripts/check_exports.sh" "$plugin" >/dev/null || fail "exports of the installed plugin"
ok "installed plugin exports only ncclNetPlugin_v8..v11 and railyard_*"

# ---- consumers -------------------------------------------------------------------
export PKG_CONFIG_PATH=$P/$libdir/pkgconfig
unset PKG_CONFIG_LIBDIR
[[ "$(pkg-config --modversion railyard)" == "$version" ]] || fail "pkg-config --modversion railyard: $(pkg-config --modversion railyard)"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror "$here/consumer/consumer.c" $(pkg-config --cflags --libs railyard) \
  -o "$scratch/consumer-pc" || fail "building the pkg-config consumer"
out=$(env -i LD_LIBRARY_PATH="$P/$libdir" "$scratch/consumer-pc" "$version") || fail "pkg-config consumer: $out"
grep -q "libnccl-net-railyard.so => $P/$libdir/" < <(LD_LIBRARY_PATH="$P/$libdir" ldd "$scratch/consumer-pc") ||
  fail "pkg-config consumer does not load the installed plugin"
ok "pkg-config consumer (cc \$(pkg-config --cflags --libs railyard)): $out"

env -u CMAKE_PREFIX_PATH cmake -S "$here/consumer" -B "$scratch/consumer-cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$scratch/consumer-cmake.log" 2>&1 &&
  cmake --build "$scratch/consumer-cmake" >>"$scratch/consumer-cmake.log" 2>&1 ||
  { cat "$scratch/consumer-cmake.log"; fail "building the find_package(Railyard) consumer"; }
grep -q "Railyard_DIR:PATH=$P/$libdir/cmake/Railyard" "$scratch/consumer-cmake/CMakeCache.txt" ||
  fail "find_package(Railyard) found $(grep Railyard_DIR "$scratch/consumer-cmake/CMakeCache.txt")"
# CMake gives the consumer a build RUNPATH to P/LIBDIR: it runs with a clean environment.
out=$(env -i "$scratch/consumer-cmake/consumer" "$version") || fail "find_package consumer: $out"
ok "find_package(Railyard) consumer (Railyard::nccl-net-railyard from $P/$libdir/cmake/Railyard): $out"

# ---- the installed tools drive the installed plugin ------------------------------------
perf=$P/$bindir/railyard-perf
run_installed_perf "$perf" "$plugin" "$scratch/perf-nccl-way.log" \
  NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH="$P/$libdir" LD_DEBUG=files
if grep -q 'file=' < <(grep -F "$build/" "$scratch/perf-nccl-way.log"); then
  fail "LD_DEBUG: a file from the build tree was loaded: $(grep -F "$build/" "$scratch/perf-nccl-way.log" | head -3)"
fi
grep -q "file=.*$P/$libdir/libnccl-net-railyard.so" "$scratch/perf-nccl-way.log" ||
  fail "LD_DEBUG shows no load of $P/$libdir/libnccl-net-railyard.so"
ok "LD_DEBUG=files: the plugin came from $P/$libdir, nothing from the build tree"
if [[ "$libdir" == lib ]]; then
  run_installed_perf "$perf" "$plugin" "$scratch/perf-default.log"
else
  echo "skip: railyard-perf's install-relative default is <bin>/../lib; LIBDIR here is $libdir"
fi
echo "install.prefix: all checks passed"
