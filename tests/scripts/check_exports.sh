#!/usr/bin/env bash
# Usage: check_exports.sh <path/to/libnccl-net-railyard.so>
# Fails (printing the offenders) if the library defines any dynamic symbol other
# than ncclNetPlugin_v8..v12, ncclCollNetPlugin_v8..v12, ncclGinPlugin_v11, ncclRmaPlugin_v13/_v14,
# railyard_*; also fails if one of those tables is missing (the list README.md "Using it with NCCL"
# and include/railyard/railyard.h give).
set -euo pipefail

lib="${1:?usage: check_exports.sh <shared library>}"
[[ -f "$lib" ]] || { echo "check_exports: no such file: $lib" >&2; exit 2; }

# nm prints "<value> <type> <name>[@version]"; keep the bare names.
mapfile -t syms < <(nm -D --defined-only "$lib" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u)

allowed='^(ncclNetPlugin_v(8|9|10|11|12)|ncclCollNetPlugin_v(8|9|10|11|12)|ncclGinPlugin_v11|ncclRmaPlugin_v(13|14)|railyard_[A-Za-z0-9_]+)$'
bad=()
for s in "${syms[@]}"; do
  [[ "$s" =~ $allowed ]] || bad+=("$s")
done

# A set of the names, not `printf | grep -q` per name: under pipefail that pipeline fails
# whenever grep -q exits on its match before printf has written everything (SIGPIPE), which
# a loaded machine made happen in CI and reported a table present as missing.
declare -A have=()
for s in "${syms[@]}"; do have[$s]=1; done

missing=()
for want in ncclNetPlugin_v8 ncclNetPlugin_v9 ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 \
            ncclCollNetPlugin_v8 ncclCollNetPlugin_v9 ncclCollNetPlugin_v10 ncclCollNetPlugin_v11 \
            ncclCollNetPlugin_v12 ncclGinPlugin_v11 ncclRmaPlugin_v13 ncclRmaPlugin_v14; do
  [[ -n "${have[$want]:-}" ]] || missing+=("$want")
done

rc=0
if ((${#bad[@]})); then
  echo "check_exports: unexpected exported symbols in $lib:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  rc=1
fi
if ((${#missing[@]})); then
  echo "check_exports: missing exported symbols in $lib:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  rc=1
fi
((rc == 0)) && echo "check_exports: OK (${#syms[@]} symbols: ${syms[*]})"
exit $rc
