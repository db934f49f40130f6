#!/usr/bin/env bash
# Installs the Debian 12 packages Railyard needs, by purpose, only the missing ones,
# and says what it installs (or that nothing was missing). Idempotent.
#
# Usage: tools/scripts/install-deps.sh [GROUP...]     (default: build)
#   build  building and running: compiler, CMake, Ninja, the libraries the plugin
#          and tools link (hwloc + its plugins: PCI discovery and full XML input,
#          which the Spark fixture tests need; ibverbs + its RDMA providers), the
#          header-only ones, GoogleTest (the build configures the tests), xxHash (the
#          snapshot tier's checksums). tools/setup.sh.
#   test   what the tests add (tools/test.sh installs it): the netns testbed
#          (iproute2, nftables, ping, python3), the soft-RoCE QEMU lanes (qemu,
#          busybox, rdma-core, perftest, rdmacm-utils, ...), the packaging tests
#          (dpkg-dev for dpkg-shlibdeps, file) and the plots (python3-matplotlib;
#          python3-numpy for the GPU-check rehearsal's stand-in torch) and the fuzz suite
#          (tests/fuzz/run.sh: clang-14 with libFuzzer, llvm-14's llvm-symbolizer), and
#          lld (tools/test.sh links the sanitizer tree with it: about 3x faster than ld.bfd).
#   bench  what tools/bench/*.sh add: iperf3, valgrind, python3-matplotlib, openmpi-bin + libopenmpi-dev (tools/bench/collnet.sh: MPI_Allreduce baseline).
#   --list print the packages of the given groups and exit (installs nothing).
set -euo pipefail
declare -A group=(
  [build]="build-essential cmake ninja-build pkg-config libhwloc-dev libhwloc-plugins libibverbs-dev ibverbs-providers
           nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libssl-dev libxxhash-dev libhwy-dev"
  [test]="iproute2 procps nftables iputils-ping python3
          qemu-system-x86 busybox-static rdma-core ibverbs-utils kmod xz-utils perftest rdmacm-utils hwloc-nox
          dpkg-dev file python3-matplotlib python3-numpy
          clang-14 libclang-rt-14-dev llvm-14 lld"
  [bench]="iperf3 valgrind python3 python3-matplotlib openmpi-bin libopenmpi-dev"
)
list=0 groups=()
for a in "$@"; do
  case "$a" in
    --list) list=1 ;;
    build|test|bench) groups+=("$a") ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown group '$a' (build, test, bench; --help)" >&2; exit 2 ;;
  esac
done
((${#groups[@]})) || groups=(build)
pkgs=()
for g in "${groups[@]}"; do
  for p in ${group[$g]}; do pkgs+=("$p"); done  # word splitting on purpose: names have no spaces
done
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | awk '!seen[$0]++')
if ((list)); then printf '%s\n' "${pkgs[@]}"; exit 0; fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "railyard: packages for ${groups[*]}: all ${#pkgs[@]} installed already" >&2
  exit 0
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "railyard: installing for ${groups[*]} (${#missing[@]} of ${#pkgs[@]} missing): ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
