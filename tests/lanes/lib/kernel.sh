# tests/lanes/lib/kernel.sh - sourced by rxe/lane.sh and rxe-ring/ring.sh: fetches
# and unpacks the Debian kernel both lanes boot, into the shared cache $LAB.
#
#   lane_fetch_kernel NAME   sets KV (e.g. 6.1.0-57-amd64) and KDIR ($LAB/kernel-$KV).
#
# The package is linux-image-amd64's current dependency (or $RXE_KERNEL_PKG), fetched
# with `apt-get download`, unpacked with dpkg -x, given a modules.dep (depmod -b; the
# .deb ships none) and checked for rdma_rxe. An uncompressed vmlinux is extracted
# when the kernel has CONFIG_PVH (qemu boots it through its PVH entry, skipping the
# real-mode path and the XZ decompressor: about 4 s under TCG); otherwise the
# bzImage is used. The caller holds the cache lock. NAME prefixes messages; errors
# go through the caller's die().

lane_kernel_pkg() {
  if [[ -n ${RXE_KERNEL_PKG:-} ]]; then echo "$RXE_KERNEL_PKG"; return; fi
  apt-cache depends linux-image-amd64 2>/dev/null \
    | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}

lane_fetch_kernel() {
  local name=$1 pkg kv kdir
  pkg=$(lane_kernel_pkg)
  [[ -n $pkg ]] || die "cannot resolve linux-image-amd64 (run apt-get update)"
  kv=${pkg#linux-image-}
  kdir=$LAB/kernel-$kv
  mkdir -p "$LAB/debs"
  if [[ ! -e $kdir/.ok ]]; then
    echo "$name: fetching $pkg into $kdir" >&2
    rm -rf "$kdir"
    if ! (cd "$LAB/debs" && apt-get download "$pkg") > "$LAB/debs/download.log" 2>&1; then
      sed 's/^/  apt-get: /' "$LAB/debs/download.log" >&2
      die "apt-get download $pkg failed (run apt-get update?)"
    fi
    dpkg -x "$LAB/debs/${pkg}"_*.deb "$kdir"
    depmod -b "$kdir" "$kv"
    [[ -f $kdir/lib/modules/$kv/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko ]] \
      || die "$pkg has no rdma_rxe module"
    touch "$kdir/.ok"
  fi
  if [[ ! -e $kdir/boot/.vmlinux-tried ]]; then
    local off vml=$kdir/boot/vmlinux-$kv
    off=$(grep -abo $'\xfd7zXZ' "$kdir/boot/vmlinuz-$kv" | head -1 | cut -d: -f1 || true)
    if [[ -n $off ]] && grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kv" \
       && xz -dc --single-stream < <(tail -c +$((off + 1)) "$kdir/boot/vmlinuz-$kv") > "$vml.tmp" 2>/dev/null \
       && [[ $(head -c 4 "$vml.tmp" | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
      mv "$vml.tmp" "$vml"
    else
      rm -f "$vml.tmp"
    fi
    touch "$kdir/boot/.vmlinux-tried"
  fi
  KV=$kv
  KDIR=$kdir
}
