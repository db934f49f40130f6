#!/usr/bin/env bash
# install.deb: `cpack -G DEB` on the build, then, without installing anything on
# this machine:
#  - exactly the three packages come out: libnccl-net-railyard (the plugin),
#    libnccl-net-railyard-dev (header, pkg-config, CMake package), railyard-tools
#    (tools + railyardd.service, installed but not enabled);
#  - each package's files are where cmake/RailyardPackaging.cmake says, under /usr;
#  - Depends (dpkg-deb -I) lists the package of every shared library the packaged
#    ELF files link (their DT_NEEDED, resolved by ldd, owner by dpkg -S), and -dev/tools
#    depend on the same-version plugin package;
#  - the plugin package alone, extracted into a scratch root (dpkg-deb -x), runs:
#    railyard-perf extracted from railyard-tools into another root drives it over
#    loopback in a clean environment, finding it the NCCL way
#    (NCCL_NET_PLUGIN=railyard + LD_LIBRARY_PATH=ROOT/usr/lib); with all packages
#    in one root, railyard-perf's install-relative default finds it too;
#  - no RPATH/RUNPATH, nothing from the build tree, no CUDA library.
# Exit 77 (skipped) only when dpkg-deb is missing (not a Debian-family host).
#
# Usage: deb_test.sh BUILD SRC VERSION LIBDIR   (LIBDIR: CMAKE_INSTALL_LIBDIR, relative)
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") version=$3 libdir=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/install/lib.sh
source "$here/lib.sh"
for t in dpkg-deb dpkg-shlibdeps dpkg; do
  command -v "$t" >/dev/null || { echo "deb_test: $t not found (Debian package dpkg-dev); skipped"; exit 77; }
done

scratch=$(mktemp -d /tmp/railyard-deb-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/out") >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log"; fail "cpack -G DEB"; }
arch=$(dpkg --print-architecture)
declare -A deb
for p in libnccl-net-railyard libnccl-net-railyard-dev railyard-tools; do
  deb[$p]=$scratch/out/${p}_${version}_${arch}.deb
  [[ -f "${deb[$p]}" ]] || { ls "$scratch/out" >&2; fail "no ${p}_${version}_${arch}.deb"; }
done
n=$(find "$scratch/out" -maxdepth 1 -name '*.deb' | wc -l)
[[ $n -eq 3 ]] || fail "expected 3 packages, cpack made $n: $(ls "$scratch/out")"
ok "cpack made $(cd "$scratch/out" && ls ./*.deb | tr '\n' ' ')"

# ---- contents ------------------------------------------------------------------------
contents() { dpkg-deb -c "$1" | awk '{print $NF}' | sed 's|^\./|/|' | grep -v '/$'; }
expect_files() {  # expect_files PKG FILE...
  local pkg=$1; shift
  local list; list=$(contents "${deb[$pkg]}")
  for f in "$@"; do grep -qx "$f" <<<"$list" || fail "$pkg lacks $f (has: $(tr '\n' ' ' <<<"$list"))"; done
}
expect_files libnccl-net-railyard /usr/$libdir/libnccl-net-railyard.so /usr/share/doc/railyard/configuration.md
expect_files libnccl-net-railyard-dev /usr/include/railyard/railyard.h /usr/include/railyard/version.h \
  /usr/$libdir/pkgconfig/railyard.pc /usr/$libdir/cmake/Railyard/RailyardConfig.cmake
expect_files railyard-tools /usr/bin/railyard-perf /usr/bin/railyard-info /usr/bin/railyardd \
  /usr/bin/railyard-tcp-pump /usr/bin/railyard-config-doc /usr/bin/railyard-plot /usr/bin/railyard-pack \
  /usr/lib/systemd/system/railyardd.service
contents "${deb[libnccl-net-railyard]}" | grep -Eq '^/usr/(bin|include)/' && fail "the plugin package carries tools or headers"
ok "package contents where expected"

# ---- extract and look --------------------------------------------------------------------
R=$scratch/root
for p in "${!deb[@]}"; do dpkg-deb -x "${deb[$p]}" "$R"; done
grep -qx 'ExecStart=/usr/bin/railyardd' "$R/usr/lib/systemd/system/railyardd.service" ||
  fail "railyardd.service: $(grep ExecStart "$R/usr/lib/systemd/system/railyardd.service")"
grep -qx 'prefix=/usr' "$R/usr/$libdir/pkgconfig/railyard.pc" || fail "railyard.pc: $(grep prefix= "$R/usr/$libdir/pkgconfig/railyard.pc")"
dpkg-deb -e "${deb[railyard-tools]}" "$scratch/ctl-tools"
if grep -v '^[[:space:]]*#' "$scratch"/ctl-tools/* | grep -E 'systemctl +(enable|start)|deb-systemd-(helper +enable|invoke)'; then
  fail "railyard-tools' maintainer scripts enable or start railyardd"
fi
ok "railyardd.service (ExecStart=/usr/bin/railyardd) is shipped and not enabled; railyard.pc prefix=/usr"
dpkg-deb -e "${deb[libnccl-net-railyard]}" "$scratch/ctl-plugin"
grep -qx 'activate-noawait ldconfig' "$scratch/ctl-plugin/triggers" || fail "the plugin package has no ldconfig trigger"
ok "the plugin package triggers ldconfig"

# ---- Depends against what the binaries need ---------------------------------------------------
depends() { dpkg-deb -f "$1" Depends; }
# depends_on DEPENDS NAME: NAME is one of the packages of the Depends field
# (alternatives "a | b" count; version constraints ignored).
depends_on() {
  local IFS=,
  local d alt
  for d in $1; do
    IFS='|'
    for alt in $d; do
      alt=${alt%%(*}; alt=${alt// /}
      [[ "$alt" == "$2" ]] && return 0
    done
    IFS=,
  done
  return 1
}
for p in "${!deb[@]}"; do
  dep=$(depends "${deb[$p]}")
  echo "   $p Depends: $dep"
  elfs=()
  while read -r f; do
    file -b "$R$f" | grep -q ELF && elfs+=("$R$f")
  done < <(contents "${deb[$p]}")
  for f in "${elfs[@]}"; do
    # The libraries this file links directly (DT_NEEDED; their own dependencies
    # are their packages' business), resolved on this machine by ldd.
    map=$(ldd "$f")
    while read -r need; do
      lib=$(awk -v n="$need" '$1 == n && $2 == "=>" {print $3}' <<<"$map")
      [[ "$need" == ld-linux* ]] && continue  # the dynamic loader: libc6's
      [[ -n "$lib" ]] || fail "${f#"$R"}: ldd does not resolve $need"
      owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" 2>/dev/null || true)
      owner=$(head -1 <<<"$owner" | cut -d: -f1)
      [[ -n "$owner" ]] || fail "${f#"$R"} needs $lib, which no installed package owns"
      depends_on "$dep" "$owner" || fail "$p: ${f#"$R"} needs $lib ($owner), not in Depends: $dep"
    done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  ((${#elfs[@]} == 0)) || ok "$p: Depends covers every library its ${#elfs[@]} ELF file(s) need"
done
grep -q "libnccl-net-railyard (= $version)" <<<"$(depends "${deb[libnccl-net-railyard-dev]}")" ||
  fail "the -dev package does not depend on libnccl-net-railyard (= $version)"
grep -q "libnccl-net-railyard (= $version)" <<<"$(depends "${deb[railyard-tools]}")" ||
  fail "railyard-tools does not depend on libnccl-net-railyard (= $version)"
for lib in libibverbs1 libhwloc15; do
  depends_on "$(depends "${deb[libnccl-net-railyard]}")" "$lib" || fail "the plugin package does not depend on $lib"
done
ok "the plugin package depends on libibverbs1 and libhwloc15; -dev and tools on libnccl-net-railyard (= $version)"

# ---- run from the extracted root ----------------------------------------------------------------
elfs=("$R/usr/$libdir/libnccl-net-railyard.so")
for t in railyard-perf railyard-info railyardd railyard-tcp-pump railyard-config-doc; do elfs+=("$R/usr/bin/$t"); done
check_runtime_clean "$build" "$src" "${elfs[@]}"
# The plugin package on its own root, railyard-perf from the tools package on
# another: nothing of the -dev package (or of the build) is needed at run time.
dpkg-deb -x "${deb[libnccl-net-railyard]}" "$scratch/root-plugin"
dpkg-deb -x "${deb[railyard-tools]}" "$scratch/root-tools"
run_installed_perf "$scratch/root-tools/usr/bin/railyard-perf" "$scratch/root-plugin/usr/$libdir/libnccl-net-railyard.so" \
  "$scratch/perf-nccl-way.log" NCCL_NET_PLUGIN=railyard LD_LIBRARY_PATH="$scratch/root-plugin/usr/$libdir"
# Both in one root, as on an installed system: railyard-perf's default finds it.
if [[ "$libdir" == lib ]]; then
  run_installed_perf "$R/usr/bin/railyard-perf" "$R/usr/$libdir/libnccl-net-railyard.so" "$scratch/perf-default.log"
else
  echo "skip: railyard-perf's install-relative default is <bin>/../lib; LIBDIR here is $libdir"
fi
echo "install.deb: all checks passed"
