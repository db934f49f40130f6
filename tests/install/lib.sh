# Shared checks of tests/install/*.sh (sourced). Each prints what it checked and
# calls fail (exit 1) with the reason on the first problem.

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# check_runtime_clean BUILD SRC FILE...: every ELF file has no RPATH/RUNPATH, all
# its libraries resolve (ldd), none from the build or source tree, no CUDA
# library among them (the plugin must run with only the runtime package).
check_runtime_clean() {
  local build=$1 src=$2; shift 2
  local f dyn deps
  for f in "$@"; do
    [[ -f "$f" ]] || fail "missing $f"
    dyn=$(readelf -d "$f") || fail "readelf -d $f"
    if grep -Eq '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
      fail "$f has an RPATH/RUNPATH: $(grep -E 'RPATH|RUNPATH' <<<"$dyn")"
    fi
    deps=$(ldd "$f" 2>&1) || fail "ldd $f: $deps"
    grep -q 'not found' <<<"$deps" && fail "$f: unresolved libraries: $(grep 'not found' <<<"$deps")"
    grep -Fq "$build/" <<<"$deps" && fail "$f loads a library from the build tree: $deps"
    grep -Fq "$src/" <<<"$deps" && fail "$f loads a library from the source tree: $deps"
    grep -Eq 'lib(cuda|cudart|nvidia-ml)[.]' <<<"$deps" && fail "$f needs a CUDA library: $deps"
  done
  ok "no RPATH/RUNPATH, all libraries resolve outside the build tree, no CUDA: $(for f in "$@"; do basename "$f"; done | tr '\n' ' ')"
}

# perf_env: the clean environment for an installed railyard-perf (loopback only,
# TCP, no fabric). Prints env(1) arguments.
perf_env() {
  echo PATH=/usr/bin:/bin RAILYARD_SOCKET_IFNAME==lo RAILYARD_TRANSPORT=tcp RAILYARD_FABRIC=off
}

# run_installed_perf PERF EXPECTED_PLUGIN LOG [VAR=VALUE...]: runs PERF with 2
# ranks over loopback (data checked) in a clean environment (env -i) plus the
# given variables, and asserts the plugin it loaded is EXPECTED_PLUGIN (compared
# as real paths) and that no value was wrong.
run_installed_perf() {
  local perf=$1 want=$2 log=$3; shift 3
  # shellcheck disable=SC2046
  env -i $(perf_env) "$@" timeout -k 5 120 "$perf" -np 2 -p sendrecv -b 64K -e 1M -f 4 -n 2 -w 1 -c 1 -T 90 \
    >"$log" 2>&1 || { cat "$log" >&2; fail "$perf exited non-zero ($*)"; }
  local got
  got=$(sed -n 's/^# Plugin: \(\/[^ ]*\) (NCCL_NET_PLUGIN=.*/\1/p' "$log" | head -1)
  [[ -n "$got" ]] || { cat "$log" >&2; fail "no '# Plugin: /path' line in the output of $perf"; }
  [[ "$(realpath "$got")" == "$(realpath "$want")" ]] ||
    fail "$perf loaded $got, expected the installed $want ($*)"
  grep -Eq '^# Out of bounds values : 0 OK' "$log" || { cat "$log" >&2; fail "wrong values ($*)"; }
  ok "$(basename "$perf") loaded $got and moved 64K–1M with 0 wrong values (env -i $(perf_env) $*)"
}
