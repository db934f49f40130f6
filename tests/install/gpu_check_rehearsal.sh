#!/usr/bin/env bash
# install.gpu_check_rehearsal: everything of tools/gpu/nccl-check.sh but the GPU.
#  - --pack makes a travelling folder (plugin + tools installed, the non-glibc
#    libraries they need in libs/: libhwloc, libibverbs and theirs), under 64 MiB;
#  - the folder still works after it moved (mv), in a clean environment (env -i):
#    --no-gpu passes the bundle check (every non-glibc library from the folder),
#    railyard-perf over loopback with the bundled plugin, the rank program's
#    compile + self-test, and two ranks launched with the GPU run's environment
#    (NCCL_HOSTID per rank, SHM/P2P off, NCCL_NET_PLUGIN=railyard) that each
#    dlopen libnccl-net-railyard.so by name from the folder; CollNet and RMA v14
#    through railyard-perf on the bundled plugin;
#  - the folder works from a path with spaces; --pack refuses a non-empty folder
#    that is not a packed one (its file kept); bad arguments are usage errors (2);
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

# --pack never empties a folder that is not a packed one; bad arguments exit 2.
mkdir -p "$scratch/victim" && echo keep >"$scratch/victim/file.txt"
rc=0; "$src/tools/gpu/nccl-check.sh" --pack "$scratch/victim" --build "$build" >"$scratch/victim.log" 2>&1 || rc=$?
[[ $rc -eq 2 && -f "$scratch/victim/file.txt" ]] && grep -q 'is not a packed folder' "$scratch/victim.log" ||
  fail "--pack into a non-empty folder: exit $rc, $(cat "$scratch/victim.log")"
for args in "--bench 09" "--bench" "--sizes 6" "--sizes 0" "--timeout 0" "--sizes"; do
  rc=0; "$scratch/packed/nccl-check.sh" $args >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "nccl-check.sh $args: exit $rc, expected 2 (a usage error)"
done
ok "--pack refuses a non-empty folder without MANIFEST (its file kept); bad --bench/--sizes/--timeout exit 2"

mv "$scratch/packed" "$scratch/travelled dir"
T="$scratch/travelled dir"
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
ok "--no-gpu after the move, env -i: $(grep -c '^nccl-check: .*: ok' "$scratch/run.log") steps ok, GPU skipped; ranks loaded $T/prefix/lib/libnccl-net-railyard.so with distinct NCCL_HOSTIDs"

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
  # --bench and --collnet: the Socket baseline runs with NCCL_NET=Socket and no
  # plugin, bench.txt pairs its rows with Railyard's; the CollNet run passes on
  # the all_reduce count Railyard logs at close, and fails when there is none.
  "${fake[@]}" OUT="$scratch/fake-bench" FAKE_TORCH_NCCL_LOG=1 "$T/nccl-check.sh" --sizes 4096,65536 --bench 3 --collnet \
    >"$scratch/fake-bench.log" 2>&1 || { cat "$scratch/fake-bench.log"; fail "--bench --collnet with the stand-in torch"; }
  sum=$scratch/fake-bench/nccl-check/summary.txt
  grep -q '^socket: ok: ' "$sum" || fail "$(grep '^socket' "$sum")"
  grep -q '^collnet_nccl: ok: NCCL loaded Railyard.s CollNet table and ran 3 all_reduce through it' "$sum" ||
    fail "collnet_nccl: $(grep '^collnet_nccl' "$sum")"
  n=$(grep -cE '^(all_reduce|send/recv) (4096|65536) B: Railyard [0-9.]+ GB/s \([0-9]+ us\), Socket [0-9.]+ GB/s \([0-9]+ us\), ratio [0-9.]+$' \
        "$scratch/fake-bench/nccl-check/bench.txt")
  [[ $n -eq 4 ]] || fail "bench.txt has $n rows of 4: $(cat "$scratch/fake-bench/nccl-check/bench.txt")"
  grep -q 'NCCL INFO Using network Socket' "$scratch/fake-bench/nccl-check/nccl-socket-rank0.log" ||
    fail "the baseline ranks did not run with NCCL_NET=Socket"
  python3 - "$scratch/fake-bench/nccl-check/result-rank0.json" <<'PY' || fail "result-rank0.json bench rows"
import json, sys
rows = json.load(open(sys.argv[1]))["bench"]
assert [(r["op"], r["bytes"]) for r in rows] == [("all_reduce", 4096), ("send/recv", 4096), ("all_reduce", 65536), ("send/recv", 65536)], rows
for r in rows:
    assert r["iters"] == 3 and r["median_s"] > 0, r
    # two ranks: all_reduce's 2(n-1)/n and send/recv's factor are both 1
    assert abs(r["busbw_GBs"] - r["bytes"] / r["median_s"] / 1e9) < 1e-3, r
PY
  rc=0; "${fake[@]}" OUT="$scratch/fake-nocoll" FAKE_TORCH_NCCL_LOG=1 FAKE_TORCH_NO_COLLNET=1 "$T/nccl-check.sh" --sizes 4096 --collnet >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 1 ]] && grep -q '^collnet_nccl: FAIL: .*collnet plugin loaded: 0; all_reduce through it: 0' \
    "$scratch/fake-nocoll/nccl-check/summary.txt" ||
    fail "--collnet with no CollNet in the log: exit $rc, $(grep '^collnet_nccl\|^gpu' "$scratch/fake-nocoll/nccl-check/summary.txt")"
  ok "--bench 3 --collnet with the stand-in torch: Socket baseline under NCCL_NET=Socket, 4 bench rows with ratios, CollNet count 3; no CollNet in the log → FAIL"
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
