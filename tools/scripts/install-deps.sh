#!/usr/bin/env bash
# Installs the Debian 12 packages Railyard builds and tests with (only the missing ones).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libhwloc-dev libibverbs-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev iproute2 procps nftables iputils-ping python3
      # the soft-RoCE lanes (tests/lanes): a QEMU guest with rdma_rxe, its tools
      qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils
      kmod xz-utils perftest rdmacm-utils hwloc-nox
      # the fuzz suite (tests/fuzz/run.sh): clang with libFuzzer, llvm-symbolizer for its reports
      clang-14 libclang-rt-14-dev llvm-14)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "railyard: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
