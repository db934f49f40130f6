#!/usr/bin/env bash
# install.plot: the plotting commands on real data.
#  - railyard-plot (tools/plot/railyard_plot.py) on railyard-perf --json files from
#    two short loopback sendrecv runs (one configuration, merged) and a ring run,
#    with railyard-tcp-pump baselines: PNG of the expected size, and an SVG whose
#    legend names each configuration and whose x ticks are the measured sizes;
#    bad input exits 2 naming the file;
#  - tools/bench/bench_plots.py on a copy of docs/benchmarks.md draws its four
#    figures, byte for byte the PNGs committed under docs/img/ (a figure that no
#    longer matches its table fails here: rerun tools/bench/bench_plots.py).
# Exit 77 (skipped) when no python3 with matplotlib is found (python3-matplotlib).
#
# Usage: plot_test.sh BUILD SRC
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/install/lib.sh
source "$here/lib.sh"
py=
for c in python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null && "$c" -c 'import matplotlib' 2>/dev/null; then py=$c; break; fi
done
[[ -n "$py" ]] || { echo "plot_test: no python3 with matplotlib (apt-get install python3-matplotlib); skipped"; exit 77; }

scratch=$(mktemp -d /tmp/railyard-plot-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
perf=$build/tools/railyard-perf/railyard-perf pump=$build/tools/railyard-tcp-pump/railyard-tcp-pump
export LD_LIBRARY_PATH=$build/lib NCCL_NET_PLUGIN=railyard RAILYARD_SOCKET_IFNAME==lo RAILYARD_TRANSPORT=tcp RAILYARD_FABRIC=off
sweep=(-b 64K -e 4M -f 4 -n 2 -w 1)
for r in 1 2; do
  timeout 120 "$perf" -np 2 -p sendrecv "${sweep[@]}" -c 0 -T 90 --json "$scratch/sr$r.json" >"$scratch/sr$r.log" 2>&1 ||
    { cat "$scratch/sr$r.log"; fail "railyard-perf sendrecv run $r"; }
done
timeout 120 "$perf" -np 3 -p ring "${sweep[@]}" -c 0 -T 90 --json "$scratch/ring.json" >"$scratch/ring.log" 2>&1 ||
  { cat "$scratch/ring.log"; fail "railyard-perf ring"; }
timeout 120 "$pump" -p pair -s 2 "${sweep[@]}" >"$scratch/pair.jsonl" || fail "railyard-tcp-pump pair"
timeout 120 "$pump" -p ring --np 3 -s 2 "${sweep[@]}" >"$scratch/pring.jsonl" || fail "railyard-tcp-pump ring"
ok "loopback runs: 2× sendrecv, ring (railyard-perf --json), pump pair and ring (JSON lines)"

plot=$src/tools/plot/railyard_plot.py
args=("$scratch/sr1.json" "$scratch/sr2.json" "$scratch/ring.json" --baseline "$scratch/pair.jsonl" --baseline "$scratch/pring.jsonl")
"$py" "$plot" "${args[@]}" -o "$scratch/run.png" >/dev/null || fail "railyard-plot → PNG"
# PNG signature, then the IHDR width and height (big-endian) at bytes 16..23.
sig=$(od -An -tx1 -N8 "$scratch/run.png" | tr -d ' \n')
[[ "$sig" == 89504e470d0a1a0a ]] || fail "run.png is not a PNG (signature $sig)"
wh=$("$py" -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); print("%dx%d" % struct.unpack(">II", d[16:24]))' "$scratch/run.png")
[[ "$wh" == 750x420 ]] || fail "run.png is $wh, expected 750x420"
"$py" "$plot" "${args[@]}" -o "$scratch/run.svg" >/dev/null || fail "railyard-plot → SVG"
for want in "sendrecv, 2 ranks (Railyard) (median of 2 runs)" "ring, 3 ranks (Railyard)" "pump pair, 2 ranks" \
            "pump ring, 3 ranks" "<!-- 64K -->" "<!-- 256K -->" "<!-- 1M -->" "<!-- 4M -->"; do
  grep -qF -- "$want" "$scratch/run.svg" || fail "run.svg lacks '$want'"
done
grep -qF -- "<!-- 16M -->" "$scratch/run.svg" && fail "run.svg has a 16M tick, but no run went past 4M"
ok "railyard-plot: run.png 750x420; run.svg names both configurations (sendrecv merged from 2 runs) and both baselines, ticks 64K..4M"

echo '{"tool": "something-else"}' >"$scratch/bad.json"
if "$py" "$plot" "$scratch/bad.json" -o "$scratch/bad.png" 2>"$scratch/bad.err"; then fail "railyard-plot accepted bad.json"; fi
rc=0; "$py" "$plot" "$scratch/bad.json" -o "$scratch/bad.png" 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "railyard-plot on bad input: exit $rc, expected 2"
grep -q "bad.json: a JSON object but not railyard-perf --json output" "$scratch/bad.err" || fail "message: $(cat "$scratch/bad.err")"
[[ ! -e "$scratch/bad.png" ]] || fail "railyard-plot wrote a file for bad input"
ok "railyard-plot rejects a non-railyard-perf JSON file with exit 2: $(cat "$scratch/bad.err")"

mkdir -p "$scratch/page"
cp "$src/docs/benchmarks.md" "$scratch/page/"
"$py" "$src/tools/bench/bench_plots.py" "$scratch/page/benchmarks.md" >"$scratch/bench_plots.log" || fail "bench_plots.py"
for name in loopback-sendrecv loopback-ring verbs-bandwidth fabric-cases; do
  [[ -f "$scratch/page/img/$name.png" ]] || fail "bench_plots.py drew no $name.png"
  grep -qF "](img/$name.png)" "$src/docs/benchmarks.md" || fail "docs/benchmarks.md does not show img/$name.png"
  cmp -s "$scratch/page/img/$name.png" "$src/docs/img/$name.png" ||
    fail "docs/img/$name.png is not what tools/bench/bench_plots.py draws from docs/benchmarks.md (rerun it)"
done
ok "bench_plots.py: the 4 figures of docs/benchmarks.md match its tables and are linked from it"
echo "install.plot: all checks passed"
