#!/usr/bin/env bash
# tools/gpu/nccl-check.sh — Railyard under real NCCL (PyTorch torch.distributed) on
# one GPU machine, in one short run (about 50 s on an H200 with --bench 20 --collnet;
# every step is bounded: at worst 3 x --timeout, twice that with --bench, plus 3 x 120 s).
#
# Two steps, because the GPU machine can fetch nothing and may lack libhwloc and
# libibverbs:
#
#   tools/gpu/nccl-check.sh --pack DIR [--build BUILD]      here, after a build
#       makes DIR, a folder that travels: the installed plugin and tools
#       (cmake --install --strip into DIR/prefix), every non-glibc shared library
#       they need (DIR/libs; libstdc++/libgcc_s in DIR/compat, used only if the
#       machine's are too old), this script, the rank program, MANIFEST.
#
#   DIR/nccl-check.sh [--no-gpu] [--sizes B,B,...] [--timeout S] [--bench N] [--collnet]   there
#       1. bundle: LD_LIBRARY_PATH=DIR/prefix/lib:DIR/libs; every library of the
#          plugin resolves (ldd -r), each non-glibc one from DIR; glibc new enough.
#       2. railyard-perf (from DIR) drives the plugin with 2 ranks over loopback,
#          data checked: the plugin works on this machine before NCCL is involved.
#       3. GPU (skipped with --no-gpu): two torch.distributed NCCL ranks on the one
#          GPU, made to look like two hosts (NCCL_HOSTID per rank, NCCL_SHM_DISABLE=1,
#          NCCL_P2P_DISABLE=1), NCCL_NET_PLUGIN=railyard and NCCL_NET=Railyard (no
#          fallback to IB/Socket), NCCL_DEBUG=INFO; all_reduce, all_gather and
#          send/recv on CUDA tensors of several sizes, results checked
#          (nccl_check_ranks.py); NCCL's log must say "Using network Railyard" and
#          route channels "via NET/Railyard".
#          With --no-gpu the same two ranks start with --dry instead: each checks
#          its environment and dlopens libnccl-net-railyard.so by name as NCCL
#          would, without torch (the rehearsal on a machine without a GPU).
#          --bench N: after the checks each rank times all_reduce and send/recv
#          at each size (median of N; the ranks' timeout doubles: the checks' budget,
#          then as much for the bench), then the same ranks run over NCCL's own
#          Socket transport (NCCL_NET=Socket, no plugin) as the baseline; bench.txt
#          and the summary give busbw side by side with the ratio.
#          --collnet: the ranks again with NCCL_COLLNET_ENABLE=1 and all_reduce
#          forced onto CollNet (NCCL_ALGO=allreduce:collnetchain,collnetdirect;
#          RAILYARD_CHECK_COLLNET_ALGO overrides); passes when the results are
#          right and Railyard's CollNet logs a nonzero all_reduce count at close.
#       4. CollNet and RMA v14: railyard-perf allreduce and gin-put over loopback with
#          the bundled plugin, data checked (host memory; NCCL driving them on the GPU
#          is not checked yet).
#       Results: $OUT/nccl-check/ when OUT is set, else DIR/results/ (summary.txt,
#       summary.json, logs). Exit status 0 only when every step that ran passed.
#
# Traffic stays on loopback: RAILYARD_SOCKET_IFNAME==lo, RAILYARD_TRANSPORT=tcp,
# RAILYARD_FABRIC=off, NCCL_SOCKET_IFNAME=lo, MASTER_ADDR=127.0.0.1.
# The interpreter with torch: $PYTHON, else python3, else python.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "nccl-check: $*" >&2; exit 2; }

# ================================================================ --pack
pack() {
  local dir=$1 build=$2 root
  root=$(cd "$here/../.." && pwd)
  [[ -f "$build/CMakeCache.txt" ]] || die "--build $build: not a configured build directory"
  if [[ -e "$dir" && ! -f "$dir/MANIFEST" ]] && [[ -n "$(ls -A "$dir" 2>/dev/null)" || ! -d "$dir" ]]; then
    die "--pack $dir: exists and is not a packed folder (no MANIFEST); give a new or empty folder"
  fi
  local blog
  blog=$(mktemp)
  if ! cmake --build "$build" --target shipped >"$blog" 2>&1; then
    tail -20 "$blog" >&2
    rm -f "$blog"
    die "building the shipped targets in $build failed (its last lines above)"
  fi
  rm -f "$blog"
  rm -rf "$dir"
  mkdir -p "$dir/libs" "$dir/compat"
  cmake --install "$build" --prefix "$dir/prefix" --strip >"$dir/install.log" || die "cmake --install failed"
  local libdir
  libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
  [[ "$libdir" == lib ]] || die "CMAKE_INSTALL_LIBDIR is $libdir; the travelling folder wants lib"
  local plugin=$dir/prefix/lib/libnccl-net-railyard.so perf=$dir/prefix/bin/railyard-perf
  # Every library ldd finds for the plugin and railyard-perf, except glibc's own
  # (never bundled: they must match the machine's loader) and the C++ runtime
  # (compat/: the machine's is newer in most cases and PyTorch loads its own).
  local f lib base
  for f in "$plugin" "$perf"; do
    while read -r lib; do
      base=$(basename "$lib")
      case "$base" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libresolv.so.*) ;;
        libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$dir/compat/$base" ;;
        *) cp -L "$lib" "$dir/libs/$base" ;;
      esac
    done < <(ldd "$f" | sed -n 's/^[[:space:]]*[^ ]* => \(\/.*\) (0x[0-9a-f]*)$/\1/p')
  done
  cp "$here/nccl-check.sh" "$here/nccl_check_ranks.py" "$dir/"
  chmod +x "$dir/nccl-check.sh"
  {
    echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo +dirty)"
    echo "packed=$(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -sr), $(ldd --version 2>&1 | sed -n 1p)"
    echo "build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
    echo "glibc_needed=$(objdump -T "$plugin" "$perf" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
    echo "glibcxx_needed=$(objdump -T "$plugin" "$perf" | grep -o 'GLIBCXX_[0-9.]*' | sed 's/GLIBCXX_//' | sort -uV | tail -1)"
    # compat/'s libstdc++ and libgcc_s, used only where the machine's are older, need their own glibc
    echo "glibc_needed_with_compat=$(objdump -T "$plugin" "$perf" "$dir"/compat/* | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
    echo "libs=$(cd "$dir/libs" && ls | tr '\n' ' ')"
    echo "compat=$(cd "$dir/compat" && ls | tr '\n' ' ')"
  } >"$dir/MANIFEST"
  echo "nccl-check: packed $dir ($(du -sh "$dir" | cut -f1)): prefix/ (plugin, tools), libs/ ($(ls "$dir/libs" | wc -l) libraries), compat/, MANIFEST"
  echo "nccl-check: run it there as: $dir/nccl-check.sh   (or with --no-gpu to rehearse)"
}

# ================================================================ the check
manifest() { sed -n "s/^$1=//p" "$here/MANIFEST"; }

# version_ge A B: A >= B for dotted versions.
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]; }

# launch_ranks TAG SIZES [RANK-PROGRAM-ARGS...]: the two ranks of step 3 (or a
# variant: TAG names its files, extra_env adds to or overrides the environment),
# each bounded by $tmo; their exit codes land in rcs[0], rcs[1]. Files:
# result${TAG}-rank$r.json, rank${TAG}$r.out, nccl${TAG}-rank$r.log in $res.
launch_ranks() {
  local tag=$1 szs=$2 port r rc rank_tmo=$tmo
  shift 2
  [[ " $* " == *" --bench "* ]] && rank_tmo=$((2 * tmo))  # the checks' budget, then as much for the bench
  port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local -a pids=()
  live_pids=()
  for r in 0 1; do
    env "${lo_env[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      NCCL_HOSTID="railyard-nccl-check-host$r" NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 \
      NCCL_NET_PLUGIN=railyard NCCL_NET=Railyard NCCL_SOCKET_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV NCCL_DEBUG_FILE="$res/nccl$tag-rank$r.log" \
      "${extra_env[@]}" \
      timeout -k 10 "$rank_tmo" "$py" "$here/nccl_check_ranks.py" "$@" --sizes "$szs" \
        --out "$res/result$tag-rank$r.json" >"$res/rank$tag$r.out" 2>&1 &
    pids+=($!)
    live_pids+=($!)
  done
  rcs=()
  for r in 0 1; do
    if wait "${pids[$r]}"; then rcs+=(0); else rc=$?; rcs+=($rc); fi
  done
  live_pids=()
}

# results_ok TAG: both ranks exited 0 and wrote a result with ok: true.
results_ok() {
  local r
  for r in 0 1; do
    [[ ${rcs[$r]} -eq 0 ]] || return 1
    "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("ok") else 1)' \
      "$res/result$1-rank$r.json" 2>/dev/null || return 1
  done
}

# bench_table: rank 0's bench rows of the Railyard run and the Socket run side by
# side (busbw GB/s, median µs, and the ratio Railyard/Socket of busbw, from the medians),
# one line per (op, size); empty if either lacks them.
bench_table() {
  "$py" - "$res/result-rank0.json" "$res/result-socket-rank0.json" <<'PY' 2>/dev/null || true
import json, sys
try:
    ry, so = (json.load(open(f)).get("bench", []) for f in sys.argv[1:3])
except (OSError, ValueError):
    sys.exit(0)
base = {(r["op"], r["bytes"]): r for r in so}
for r in ry:
    b = base.get((r["op"], r["bytes"]))
    if b and r["median_s"] > 0:
        # same op, bytes and bus factor: the busbw ratio is the inverse ratio of the medians
        print(f'{r["op"]} {r["bytes"]} B: Railyard {r["busbw_GBs"]:.3f} GB/s ({r["median_s"] * 1e6:.0f} us), '
              f'Socket {b["busbw_GBs"]:.3f} GB/s ({b["median_s"] * 1e6:.0f} us), ratio {b["median_s"] / r["median_s"]:.2f}')
PY
}

check() {
  local no_gpu=$1 sizes=$2 tmo=$3 bench=$4 collnet=$5
  local -a extra_env=() rcs=()
  [[ -f "$here/MANIFEST" && -d "$here/prefix" ]] ||
    die "$here is not a packed folder; make one first: tools/gpu/nccl-check.sh --pack DIR"
  local res=${OUT:+$OUT/nccl-check}
  res=${res:-$here/results}
  rm -rf "$res"
  mkdir -p "$res"
  local plugin=$here/prefix/lib/libnccl-net-railyard.so perf=$here/prefix/bin/railyard-perf
  local -A step=()
  local -a notes=()
  note() { notes+=("$*"); echo "nccl-check: $*"; }

  # ---- 1. bundle and environment --------------------------------------------------
  export LD_LIBRARY_PATH="$here/prefix/lib:$here/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local glibc need
  glibc=$(ldd --version 2>/dev/null || true)   # whole output: head(1) would SIGPIPE ldd
  glibc=$(sed -n '1s/.* \([0-9]\+\.[0-9]\+\)$/\1/p' <<<"$glibc")
  glibc=${glibc:-0}
  need=$(manifest glibc_needed)
  { echo "# $(date -u '+%F %T UTC') $(uname -a)"; cat "$here/MANIFEST"; echo "glibc_here=$glibc"
    env | grep -E '^(NCCL|RAILYARD|CUDA|LD_LIBRARY_PATH|PYTHON)' | sort; } >"$res/env.txt"
  if ! version_ge "$glibc" "$need"; then
    step[bundle]="FAIL: glibc $glibc here, the plugin needs GLIBC_$need (rebuild on an older distribution)"
  else
    ldd -r "$plugin" >"$res/ldd.txt" 2>&1 || true
    if grep -q "GLIBCXX_.*not found\|CXXABI_.*not found" "$res/ldd.txt"; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$here/compat"
      LD_LIBRARY_PATH="$here/prefix/lib:$here/libs:$here/compat" ldd -r "$plugin" >"$res/ldd.txt" 2>&1 || true
      note "this machine's libstdc++ is older than the plugin's; using the bundled compat/ copy"
      need=$(manifest glibc_needed_with_compat)
      need=${need:-0}
      version_ge "$glibc" "$need" ||
        echo "not found: the bundled compat/ libstdc++ needs GLIBC_$need, this machine has $glibc" >>"$res/ldd.txt"
    fi
    local bad outside
    bad=$(grep -E 'not found' "$res/ldd.txt" || true)
    # "name<TAB>path" per resolved library (a path may hold spaces), then those not from the folder
    outside=$(sed -n 's/^[[:space:]]*\([^ ]*\) => \(\/.*\) (0x[0-9a-f]*)$/\1\t\2/p' "$res/ldd.txt" |
              grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' |
              awk -F'\t' -v h="$here/" 'index($2, h) != 1 {print $1 " " $2}' || true)
    if [[ -n "$bad" ]]; then
      step[bundle]="FAIL: unresolved: $(tr '\n' ';' <<<"$bad")"
    elif [[ -n "$outside" ]]; then
      step[bundle]="FAIL: not from the bundle: $(tr '\n' ';' <<<"$outside")"
    else
      step[bundle]="ok: every library of the plugin resolves, each non-glibc one from $here (glibc $glibc ≥ $need)"
    fi
  fi
  echo "nccl-check: bundle: ${step[bundle]}"

  # ---- 2. railyard-perf over loopback --------------------------------------------------
  local lo_env=(RAILYARD_SOCKET_IFNAME==lo RAILYARD_TRANSPORT=tcp RAILYARD_FABRIC=off)
  if [[ "${step[bundle]}" == ok* ]]; then
    if env "${lo_env[@]}" NCCL_NET_PLUGIN=railyard timeout -k 5 120 "$perf" -np 2 -p sendrecv \
         -b 64K -e 4M -f 4 -n 2 -w 1 -c 1 -T 90 >"$res/perf-loopback.log" 2>&1 &&
       grep -qF "# Plugin: $here/prefix/lib/libnccl-net-railyard.so " "$res/perf-loopback.log" &&
       grep -q '^# Out of bounds values : 0 OK' "$res/perf-loopback.log"; then
      step[perf]="ok: railyard-perf -np 2 sendrecv 64K–4M over loopback with the bundled plugin, 0 wrong values"
    else
      step[perf]="FAIL: railyard-perf over loopback (see perf-loopback.log): $(grep -m1 -iE 'error|fail|wrong' "$res/perf-loopback.log" || tail -1 "$res/perf-loopback.log")"
    fi
  else
    step[perf]="skipped: the bundle check failed"
  fi
  echo "nccl-check: perf: ${step[perf]}"

  # ---- 3. two NCCL ranks -------------------------------------------------------------
  local py=""
  for c in "${PYTHON:-}" python3 python; do
    [[ -n "$c" ]] && command -v "$c" >/dev/null || continue
    if [[ $no_gpu == 1 ]] || timeout 120 "$c" -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' 2>/dev/null; then
      py=$c; break
    fi
  done
  if [[ $no_gpu == 0 && -n "${PYTHON:-}" && "$py" != "$PYTHON" ]]; then
    py=""  # the one asked for, or none: never another interpreter behind the user's back
    step[gpu]="FAIL: PYTHON=$PYTHON has no torch with CUDA and NCCL"
  fi
  if [[ $no_gpu == 1 ]]; then
    if [[ -z "$py" ]]; then
      step[rank_program]="FAIL: no python3"
    elif "$py" -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$here/nccl_check_ranks.py" &&
         "$py" "$here/nccl_check_ranks.py" --self-test >"$res/self-test.txt" 2>&1; then
      step[rank_program]="ok: nccl_check_ranks.py compiles; $(cat "$res/self-test.txt")"
    else
      step[rank_program]="FAIL: nccl_check_ranks.py: $(cat "$res/self-test.txt" 2>/dev/null)"
    fi
    echo "nccl-check: rank program: ${step[rank_program]}"
  elif [[ -z "$py" && -z "${step[gpu]:-}" ]]; then
    step[gpu]="FAIL: no python with torch, CUDA and NCCL (set PYTHON=/path/to/python)"
  fi
  if [[ -n "$py" && "${step[bundle]}" == ok* && -z "${step[gpu]:-}" ]]; then
    [[ $no_gpu == 1 ]] || timeout 120 "$py" - >"$res/torch.txt" 2>&1 <<'EOF' || true
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
print("device", torch.cuda.get_device_name(0), "count", torch.cuda.device_count())
EOF
    local r mode=()
    [[ $no_gpu == 1 ]] && mode=(--dry)
    local -a bench_args=()
    ((bench > 0)) && bench_args=(--bench "$bench")
    launch_ranks "" "$sizes" "${mode[@]}" "${bench_args[@]}"
    local all_ok=1
    results_ok "" || all_ok=0
    if [[ $no_gpu == 1 ]]; then
      if ((all_ok)); then
        step[ranks_dry]="ok: 2 ranks launched with the GPU run's environment; each dlopened libnccl-net-railyard.so by name from the bundle (--dry, no torch)"
      else
        step[ranks_dry]="FAIL: rank exit ${rcs[*]}; see result-rank*.json, rank*.out"
      fi
      echo "nccl-check: ranks: ${step[ranks_dry]}"
      step[gpu]="skipped: --no-gpu (the two ranks ran --dry)"
    else
      local logs_ok=1 why=()
      for r in 0 1; do
        [[ -f "$res/nccl-rank$r.log" ]] || { logs_ok=0; why+=("rank $r wrote no NCCL log"); continue; }
        grep -q 'NCCL INFO Using network Railyard' "$res/nccl-rank$r.log" ||
          { logs_ok=0; why+=("rank $r: no 'Using network Railyard'"); }
        grep -q 'via NET/Railyard' "$res/nccl-rank$r.log" ||
          { logs_ok=0; why+=("rank $r: no channel 'via NET/Railyard'"); }
      done
      local nccl_version
      nccl_version=$(grep -ho 'NCCL version [^ ]*' "$res"/nccl-rank*.log 2>/dev/null | head -1 || true)
      if ((all_ok && logs_ok)); then
        step[gpu]="ok: ${nccl_version:-NCCL ?}: all_reduce, all_gather, send/recv on CUDA tensors ($sizes B) right on both ranks; NCCL used network Railyard"
      else
        step[gpu]="FAIL: rank exit ${rcs[*]}$( ((all_ok)) || echo ', wrong or missing results (result-rank*.json, rank*.out)')${why:+; $(IFS=';'; echo "${why[*]}")}"
      fi
    fi
  fi

  if [[ -z "${step[gpu]:-}" ]]; then
    step[gpu]="skipped: the bundle check failed"
    [[ $no_gpu == 1 ]] && step[gpu]="skipped: --no-gpu"
  fi
  echo "nccl-check: gpu: ${step[gpu]}"

  # ---- 3b. variants of the GPU run (--bench, --collnet) -------------------------------
  if [[ $no_gpu == 0 && "${step[gpu]:-}" == ok* ]]; then
    if ((bench > 0)); then
      # NCCL's own Socket transport, same ranks, sizes and iterations: the baseline.
      extra_env=(NCCL_NET=Socket NCCL_NET_PLUGIN=none)
      launch_ranks -socket "$sizes" --bench "$bench"
      extra_env=()
      if results_ok -socket && grep -q 'NCCL INFO Using network Socket' "$res/nccl-socket-rank0.log" 2>/dev/null; then
        step[socket]="ok: the same ranks over NCCL's own Socket transport (NCCL_NET=Socket, no plugin): right results; the bench's baseline"
        bench_table >"$res/bench.txt"
        if [[ -s "$res/bench.txt" ]]; then
          step[bench]="ok: busbw, rank 0, median of $bench: $(paste -sd';' "$res/bench.txt" | sed 's/;/; /g')"
        else
          step[bench]="FAIL: no bench rows in result-rank0.json / result-socket-rank0.json"
        fi
      else
        step[socket]="FAIL: the Socket baseline (rank exit ${rcs[*]}; result-socket-rank*.json, nccl-socket-rank*.log)"
      fi
      echo "nccl-check: socket: ${step[socket]}"
      echo "nccl-check: bench: ${step[bench]:-skipped: no baseline}"
    fi
    if ((collnet)); then
      # NCCL's CollNet on Railyard's CollNet table: all_reduce forced onto it
      # (NCCL_ALGO's per-collective form, NCCL >= 2.24), checked by the count
      # Railyard logs when NCCL closes the CollNet comm.
      extra_env=(NCCL_COLLNET_ENABLE=1 "NCCL_ALGO=${RAILYARD_CHECK_COLLNET_ALGO:-allreduce:collnetchain,collnetdirect}")
      launch_ranks -collnet "$sizes"
      extra_env=()
      local used=0 ncoll=0
      if [[ -f "$res/nccl-collnet-rank0.log" ]]; then
        ncoll=$(sed -n 's/.*CollNet: rank 0 closed after \([0-9]*\) allreduce.*/\1/p' "$res/nccl-collnet-rank0.log" |
                awk '{s += $1} END {print s + 0}')
      fi
      grep -q 'Loaded collnet plugin Railyard' "$res/nccl-collnet-rank0.log" 2>/dev/null && used=1
      if results_ok -collnet && ((used && ncoll > 0)); then
        step[collnet_nccl]="ok: NCCL loaded Railyard's CollNet table and ran $ncoll all_reduce through it (rank 0), every result right"
      else
        step[collnet_nccl]="FAIL: rank exit ${rcs[*]}; collnet plugin loaded: $used; all_reduce through it: $ncoll (result-collnet-rank*.json, nccl-collnet-rank*.log)"
      fi
      echo "nccl-check: collnet_nccl: ${step[collnet_nccl]}"
    fi
  fi

  # ---- 4. the CollNet and one-sided (RMA v14) tables through railyard-perf -----------
  # Host memory over loopback, data checked: the tables work on this machine. NCCL
  # itself driving them on the GPU (NCCL_COLLNET_ENABLE, ncclPutSignal) is not checked
  # yet: both tables report host memory only until a transport with device memory is
  # underneath (docs/architecture.md).
  one_table() {  # KEY PATTERN-ARGS...: run railyard-perf -np 2 on the bundled plugin
    local key=$1; shift
    if command -v nm >/dev/null && ! grep -q "$table_sym" < <(nm -D --defined-only "$plugin" 2>/dev/null); then
      step[$key]="skipped: the plugin exports no $table_sym*"
    elif [[ "${step[bundle]}" != ok* ]]; then
      step[$key]="skipped: the bundle check failed"
    elif env "${lo_env[@]}" NCCL_NET_PLUGIN=railyard timeout -k 5 120 "$perf" -np 2 "$@" \
           -b 64K -e 1M -f 4 -n 2 -w 1 -c 1 -T 90 >"$res/perf-$key.log" 2>&1 &&
         grep -q '^# Out of bounds values : 0 OK' "$res/perf-$key.log"; then
      step[$key]="ok: railyard-perf -np 2 $* 64K-1M over loopback with the bundled plugin, 0 wrong values (host memory; NCCL on the GPU not driven yet)"
    else
      step[$key]="FAIL: railyard-perf $* (see perf-$key.log): $(grep -m1 -iE 'error|fail|wrong' "$res/perf-$key.log" || tail -1 "$res/perf-$key.log")"
    fi
  }
  table_sym=ncclCollNetPlugin_v one_table collnet -p allreduce -d float -o sum
  table_sym=ncclRmaPlugin_v one_table rma -p gin-put --one-sided rma-v14
  echo "nccl-check: collnet: ${step[collnet]}"
  echo "nccl-check: rma: ${step[rma]}"

  # ---- summary -------------------------------------------------------------------------
  local k fails=0
  {
    echo "nccl-check $(date -u '+%F %T UTC') on $(uname -n); packed: $(manifest packed), commit $(manifest commit)"
    for k in bundle perf rank_program ranks_dry gpu socket bench collnet_nccl collnet rma; do
      [[ -n "${step[$k]:-}" ]] && echo "$k: ${step[$k]}"
    done
    for n in "${notes[@]}"; do echo "note: $n"; done
  } >"$res/summary.txt"
  for k in "${!step[@]}"; do [[ "${step[$k]}" == FAIL* ]] && fails=$((fails + 1)); done
  local json_py=${py:-python3}
  if command -v "$json_py" >/dev/null; then
    for k in "${!step[@]}"; do printf '%s\t%s\n' "$k" "$(printf '%s' "${step[$k]}" | tr '\n\t' '  ')"; done |
      "$json_py" -c 'import json,sys; d={k: v for k, v in (l.rstrip("\n").split("\t", 1) for l in sys.stdin)}; json.dump({"steps": d, "ok": not any(v.startswith("FAIL") for v in d.values())}, open(sys.argv[1], "w"), indent=1, sort_keys=True)' \
      "$res/summary.json"
  fi
  echo "nccl-check: results in $res; $( ((fails)) && echo "$fails step(s) FAILED" || echo "every step that ran passed")"
  ((fails == 0))
}

# ================================================================ arguments
mode=check pack_dir="" build="" no_gpu=0 sizes="4096,1048576,67108864" tmo=180 bench=0 collnet=0
# value OPTION WHAT "$@": the option's value, or a usage error (exit 2) naming it.
value() { [[ $# -ge 4 && -n "$4" ]] || die "$1 wants $2"; printf '%s' "$4"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pack) mode=pack; pack_dir=$(value --pack DIR "$@") || exit 2; shift 2 ;;
    --build) build=$(value --build DIR "$@") || exit 2; shift 2 ;;
    --no-gpu) no_gpu=1; shift ;;
    --sizes) sizes=$(value --sizes "B,B,..." "$@") || exit 2; shift 2 ;;
    --timeout) tmo=$(value --timeout S "$@") || exit 2; shift 2 ;;
    --bench) bench=$(value --bench ITERS "$@") || exit 2; shift 2 ;;
    --collnet) collnet=1; shift ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[[ "$sizes" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--sizes wants comma-separated byte counts"
for b in ${sizes//,/ }; do
  ((b >= 4 && b % 4 == 0)) || die "--sizes: $b is not a whole number of float32 elements (4, 8, ... bytes)"
done
[[ "$tmo" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds"
[[ "$bench" =~ ^(0|[1-9][0-9]*)$ ]] || die "--bench wants a count of iterations (no leading zero)"
if [[ $mode == check && $no_gpu == 1 ]] && ((bench > 0 || collnet)); then
  echo "nccl-check: --bench and --collnet need the GPU run; ignored with --no-gpu" >&2
fi
# Ctrl-C or a TERM: the ranks (each under timeout(1), in a process group of its own) go too.
live_pids=()
trap 'for p in "${live_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; exit 130' INT TERM
if [[ $mode == pack ]]; then
  case "$pack_dir" in /*) ;; *) pack_dir=$PWD/$pack_dir ;; esac
  build=${build:-$(cd "$here/../.." && pwd)/build}
  pack "$pack_dir" "$(cd "$build" && pwd)"
else
  check "$no_gpu" "$sizes" "$tmo" "$bench" "$collnet"
fi
