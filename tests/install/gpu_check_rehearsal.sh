#!/usr/bin/env bash
# install.gpu_check_rehearsal: everything of tools/gpu/nccl-check.sh but the GPU.
#  - --pack makes a travelling folder (plugin + tools installed, the non-glibc
#    libraries they need in libs/: libhwloc, libibverbs and theirs), under 64 MiB;
#  - the folder still works after it moved (mv), in a clean environment (env -i):
#    --no-gpu passes the bundle check (every non-glibc library from the folder),
#    railyard-perf over loopback with the bundled plugin, the rank program's
#    compile + self-test, and two ranks launched with the GPU run's environment
#    (NCCL_HOSTID per rank, SHM/P2P off, NCCL_NET_PLUGIN=railyard) that each
#    dlopen libnccl-net-railyard.so by name from the folder; CollNet/RMA skipped;
#  - results land in $OUT/nccl-check (summary.json);
#  - the GPU branch runs against tests/install/fake_torch (a numpy stand-in for
#    PyTorch, no NCCL): right results pass, a missing NCCL log or a corrupted
#    all_reduce fails;
#  - with libhwloc.so.15 taken out of libs/, the bundle check fails (the machine's
#    copy is not from the folder) and the script exits 1.
#
# Usage: gpu_check_rehearsal.sh BUILD SRC
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/install/lib.sh
source "$here/lib.sh"
scratch=$(mktemp -d /tmp/railyard-gpu-rehearsal.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

"$src/tools/gpu/nccl-check.sh" --pack "$scratch/packed" --build "$build" >"$scratch/pack.log" 2>&1 ||
  { cat "$scratch/pack.log"; fail "nccl-check.sh --pack"; }
for f in nccl-check.sh nccl_check_ranks.py MANIFEST prefix/lib/libnccl-net-railyard.so prefix/bin/railyard-perf \
         libs/libhwloc.so.15 libs/libibverbs.so.1; do
  [[ -e "$scratch/packed/$f" ]] || fail "the packed folder lacks $f"
done
kib=$(du -sk "$scratch/packed" | cut -f1)
((kib < 64 * 1024)) || fail "the packed folder is $kib KiB; the device machine takes 64 MiB at most"
grep -q '^glibc_needed=2\.[0-9]*$' "$scratch/packed/MANIFEST" || fail "MANIFEST: $(cat "$scratch/packed/MANIFEST")"
ok "packed: $(sed -n 's/^libs=//p' "$scratch/packed/MANIFEST")in libs/, ${kib} KiB, needs glibc $(sed -n 's/^glibc_needed=//p' "$scratch/packed/MANIFEST")"

mv "$scratch/packed" "$scratch/travelled"
T=$scratch/travelled
env -i PATH=/usr/bin:/bin OUT="$scratch/out" "$T/nccl-check.sh" --no-gpu >"$scratch/run.log" 2>&1 ||
  { cat "$scratch/run.log"; fail "nccl-check.sh --no-gpu exited non-zero"; }
sum=$scratch/out/nccl-check/summary.json
[[ -f "$sum" ]] || fail "no $sum"
/usr/bin/env python3 - "$sum" "$scratch/out/nccl-check" "$T" <<'PY' || fail "summary.json: $(cat "$sum")"
import json, sys
s, res, T = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
st = s["steps"]
want_ok = ["bundle", "perf", "rank_program", "ranks_dry"]
assert s["ok"] is True, s
for k in want_ok:
    assert st[k].startswith("ok:"), (k, st[k])
assert st["gpu"].startswith("skipped: --no-gpu"), st["gpu"]
assert st["collnet"].startswith("ok: railyard-perf -np 2 -p allreduce") and "0 wrong values" in st["collnet"], st["collnet"]
assert st["rma"].startswith("ok: railyard-perf -np 2 -p gin-put") and "0 wrong values" in st["rma"], st["rma"]
r0, r1 = (json.load(open(f"{res}/result-rank{r}.json")) for r in (0, 1))
assert r0["hostid"] != r1["hostid"], (r0["hostid"], r1["hostid"])
for r in (r0, r1):
    assert r["plugin_path"] == f"{T}/prefix/lib/libnccl-net-railyard.so", r["plugin_path"]
    assert all(r["checks"].values()), r["checks"]
print("summary ok")
PY
ok "--no-gpu after the move, env -i: $(grep -c '^nccl-check: .*: ok' "$scratch/run.log") steps ok, GPU/CollNet/RMA skipped; ranks loaded $T/prefix/lib/libnccl-net-railyard.so with distinct NCCL_HOSTIDs"

# The GPU branch itself, with tests/install/fake_torch standing in for PyTorch
# (numpy tensors swapped between the two ranks over loopback; no NCCL): the rank
# program's run() executes and checks every result; the script collects both
# ranks and reads their NCCL logs. Three cases: the stand-in writes the log lines
# NCCL would (pass), writes none (fail: no 'Using network Railyard'), or corrupts
# all_reduce (fail: wrong results).
fake=(env -i PATH=/usr/bin:/bin PYTHON=/usr/bin/python3 PYTHONPATH="$here/fake_torch" PYTHONDONTWRITEBYTECODE=1)
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  "${fake[@]}" OUT="$scratch/fake-ok" FAKE_TORCH_NCCL_LOG=1 "$T/nccl-check.sh" --sizes 4096,1048576 \
    >"$scratch/fake-ok.log" 2>&1 || { cat "$scratch/fake-ok.log"; fail "GPU branch with the stand-in torch"; }
  grep -q '^gpu: ok: ' "$scratch/fake-ok/nccl-check/summary.txt" || fail "$(grep '^gpu' "$scratch/fake-ok/nccl-check/summary.txt")"
  n=$(grep -c ': ok$' "$scratch/fake-ok/nccl-check/rank0.out")
  [[ $n -eq 7 ]] || fail "rank 0 reported $n right cases, expected 7 (3 ops × 2 sizes + int32): $(cat "$scratch/fake-ok/nccl-check/rank0.out")"
  rc=0; "${fake[@]}" OUT="$scratch/fake-nolog" "$T/nccl-check.sh" --sizes 4096 >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 1 ]] && grep -q "^gpu: FAIL: .*rank 0 wrote no NCCL log" "$scratch/fake-nolog/nccl-check/summary.txt" ||
    fail "no NCCL log: exit $rc, $(grep '^gpu' "$scratch/fake-nolog/nccl-check/summary.txt")"
  rc=0; "${fake[@]}" OUT="$scratch/fake-bad" FAKE_TORCH_NCCL_LOG=1 FAKE_TORCH_CORRUPT=1 "$T/nccl-check.sh" --sizes 4096 \
    >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 1 ]] && grep -q "^gpu: FAIL: .*wrong or missing results" "$scratch/fake-bad/nccl-check/summary.txt" &&
    grep -q 'all_reduce sum float32 4096 B: WRONG (1)' "$scratch/fake-bad/nccl-check/rank0.out" ||
    fail "corrupted all_reduce: exit $rc, $(grep '^gpu' "$scratch/fake-bad/nccl-check/summary.txt")"
  ok "GPU branch with the stand-in torch: 7 right cases per rank pass; no NCCL log → FAIL; a corrupted all_reduce → FAIL (WRONG (1))"
else
  echo "skip: the GPU-branch rehearsal needs numpy for /usr/bin/python3 (python3-numpy)"
fi

rm "$T/libs/libhwloc.so.15"
rc=0
env -i PATH=/usr/bin:/bin OUT="$scratch/out2" "$T/nccl-check.sh" --no-gpu >"$scratch/run2.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$scratch/run2.log"; fail "without libs/libhwloc.so.15: exit $rc, expected 1"; }
grep -q '^bundle: FAIL: not from the bundle: libhwloc.so.15 ' "$scratch/out2/nccl-check/summary.txt" ||
  fail "without libs/libhwloc.so.15 the bundle step says: $(grep '^bundle' "$scratch/out2/nccl-check/summary.txt")"
ok "without libs/libhwloc.so.15: exit 1, $(grep '^bundle' "$scratch/out2/nccl-check/summary.txt")"
echo "install.gpu_check_rehearsal: all checks passed"
