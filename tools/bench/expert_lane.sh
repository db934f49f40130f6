#!/usr/bin/env bash
# tools/bench/expert_lane.sh — the expert tier over the verbs fabric in the soft-RoCE
# lane (tests/lanes/rxe, topology 2x1: two hosts, one rail), beside ib_read_bw on the
# same rail in the same guest boot, for docs/benchmarks.md (section between
# <!-- expert-lane:begin --> and <!-- expert-lane:end -->).
#
# Usage (on the host): tools/bench/expert_lane.sh [--build DIR] [--seconds S] [--write]
#                                                [--ctest REGEX]
#   --write  replace that section of docs/benchmarks.md (appended when missing);
#            default: print it
#   --ctest  first run `ctest -R REGEX` of the build in the same guest boot (saves a
#            boot; its output goes to build/expert-lane-ctest.log, its status is reported)
# It takes /tmp/railyard-lane.lock itself (one lane machine-wide) and gives the guest
# at most 600 s. Inside the guest: for each record size 64 KiB..64 MiB, ib_read_bw -n N
# with N = 16 MiB / size, at least 5 (a fixed count: with -D 3 too few reads of 16 and
# 64 MiB completed inside perftest's window at this lane's speed and it reported 0)
# (server on rxe_h0r0 = the peer's side, client on rxe_h1r0 reading from it), then
# railyard-expert-bench --fabric verbs (peer on h0's device, client on h1's; modes pread,
# tcp, read; batches 1 and 8, at most 64 MiB a batch; 64 MiB stores in the guest's
# /dev/shm). The lane is TCG-emulated: only ratios in one run mean anything.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
SELF="$ROOT/tools/bench/expert_lane.sh"
SIZES="65536 262144 1048576 4194304 16777216 67108864"

if [[ ${1:-} == --guest ]]; then
  WORK=$2
  set +e
  [[ -n ${RXE_LANE_HOSTS:-} ]] || { echo "expert_lane: no lane topology" >&2; exit 99; }
  GID=${RXE_LANE_GID_INDEX:-1}
  if [[ -n ${CTEST_REGEX:-} ]]; then
    (cd "$BENCH_BUILD" && ctest -R "$CTEST_REGEX" --output-on-failure -j1) >"$WORK/ctest.log" 2>&1
    echo "ctest rc=$?" >>"$WORK/ctest.log"
  fi
  : >"$WORK/ib_read_bw.txt"
  port=18700
  for s in $SIZES; do
    port=$((port + 1))
    n=$(( 16777216 / s )); (( n < 5 )) && n=5
    timeout 120 ib_read_bw -d rxe_h0r0 -x "$GID" -p "$port" -F -s "$s" -n "$n" --report_gbits >"$WORK/ibrd-$s.srv" 2>&1 &
    srv=$!
    for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$port " && break; sleep 0.1; done
    timeout 110 ib_read_bw -d rxe_h1r0 -x "$GID" -p "$port" -F -s "$s" -n "$n" --report_gbits 10.77.0.1 >"$WORK/ibrd-$s.cli" 2>&1
    wait "$srv"
    # The result line: "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]".
    awk -v s="$s" '$1 == s && NF >= 5 { print s, $4 }' "$WORK/ibrd-$s.cli" >>"$WORK/ib_read_bw.txt"
  done
  cat /proc/loadavg >"$WORK/guest-load.txt"
  nproc >"$WORK/guest-cpus.txt"
  "$WORK/railyard-expert-bench" --fabric verbs --seconds "${BENCH_SECONDS:-1}" --sizes $SIZES --batches 1 8 \
    --max-batch-bytes 67108864 --store-bytes 67108864 --dir /dev/shm >"$WORK/expert.jsonl" 2>"$WORK/expert.err"
  echo "bench rc=$?" >>"$WORK/expert.err"
  exit 0
fi

BUILD="$ROOT/build"
SECS=1
WRITE=0
CTEST_REGEX=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ctest) CTEST_REGEX="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --seconds) SECS="$2"; shift 2 ;;
    --write) WRITE=1; shift ;;
    *) echo "expert_lane.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bench=$BUILD/tools/railyard-expert-bench/railyard-expert-bench
[[ -x "$bench" ]] || { echo "expert_lane.sh: build $bench first" >&2; exit 2; }
WORK=$(mktemp -d /tmp/railyard-expert-lane-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp "$bench" "$WORK/"   # a rebuild during the run does not change what the guest runs
host_load_before=$(cut -d' ' -f1 /proc/loadavg)
export BENCH_SECONDS=$SECS CTEST_REGEX BENCH_BUILD=$BUILD
flock /tmp/railyard-lane.lock "$ROOT/tests/lanes/rxe/lane.sh" -T 2x1 -q -t 600 -e BENCH_SECONDS -e CTEST_REGEX \
  -e BENCH_BUILD -w "$WORK" -C "$WORK" -- "$SELF" --guest "$WORK" >"$WORK/lane.log" 2>&1 || {
  echo "expert_lane.sh: the lane failed (see below)" >&2; tail -30 "$WORK/lane.log" >&2; exit 1; }
if [[ -n $CTEST_REGEX ]]; then
  cp "$WORK/ctest.log" "$BUILD/expert-lane-ctest.log"
  tail -3 "$WORK/ctest.log" >&2
fi
host_load_after=$(cut -d' ' -f1 /proc/loadavg)
[[ -s "$WORK/expert.jsonl" ]] || { echo "expert_lane.sh: no bench output" >&2; cat "$WORK/expert.err" >&2; exit 1; }
python3 - "$WORK" "$WRITE" "$ROOT/docs/benchmarks.md" "$host_load_before" "$host_load_after" "$(nproc)" <<'PY'
import io, json, re, sys, time
work, write, doc_path, lb, la, ncpu = sys.argv[1:7]
out = io.StringIO()
p = lambda *a: out.write(" ".join(str(x) for x in a) + "\n")
rows = [json.loads(l) for l in open(f"{work}/expert.jsonl") if l.startswith("{")]
ib = {}
for l in open(f"{work}/ib_read_bw.txt"):
    s, g = l.split()
    ib[int(s)] = float(g) / 8  # Gb/s -> GB/s
gload = open(f"{work}/guest-load.txt").read().split()[0]
gcpus = open(f"{work}/guest-cpus.txt").read().strip()
def h(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
p("<!-- expert-lane:begin -->")
p("### Expert tier over verbs in the soft-RoCE lane (railyard-expert-bench --fabric verbs vs ib_read_bw)")
p()
p(f"Generated by `tools/bench/expert_lane.sh --write` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: one guest boot "
  f"(tests/lanes/rxe, topology 2x1, TCG, {gcpus} vCPUs, guest load average {gload} after ib_read_bw), host of {ncpu} CPUs shared "
  f"with other helpers' builds (load average {lb} before, {la} after). Peer on rxe_h0r0, client on rxe_h1r0 "
  "(one rail), one process, checksums verified; `read` = RDMA READ of the peer's registered copy of the layer straight "
  "into the client's registered arena. `ib_read_bw` = perftest on the same rail in the same boot (`-n` = 16 MiB / record size, at least 5; one QP, as many READs outstanding as the device allows, perftest's default). "
  "Cells: GB/s of record bytes (records/s). The lane is soft-RoCE under emulation: absolute figures say nothing "
  "about hardware; the ratio to ib_read_bw is the figure of merit.")
p()
p("| record | batch | pread GB/s (rec/s) | tcp GB/s (rec/s) | read GB/s (rec/s) | ib_read_bw GB/s | read / ib_read_bw |")
p("| --- | --- | --- | --- | --- | --- | --- |")
for s in sorted({r["record_bytes"] for r in rows}):
    for b in sorted({r["batch"] for r in rows if r["record_bytes"] == s}):
        cell = {r["mode"]: r for r in rows if r["record_bytes"] == s and r["batch"] == b}
        v = [f"{cell[m]['gbps']:.3f} ({cell[m]['records_per_s']:.1f})" if m in cell else "-" for m in ("pread", "tcp", "read")]
        ref = ib.get(s)
        ratio = f"{cell['read']['gbps'] / ref:.2f}" if ref and "read" in cell else "-"
        p(f"| {h(s)} | {b} | " + " | ".join(v) + f" | {ref:.3f} | {ratio} |" if ref else f"| {h(s)} | {b} | " + " | ".join(v) + " | - | - |")
p()
p("A `-` under ib_read_bw: perftest reported no result for that size. `read` with batch 1 pays one round trip per record (the client posts the next batch only after the last completion and verifies checksums between batches); batch 8 keeps several RDMA READs in flight.")
p()
p("<!-- expert-lane:end -->")
section = out.getvalue()
if write == "1":
    doc = open(doc_path).read()
    pat = re.compile(r"<!-- expert-lane:begin -->.*?<!-- expert-lane:end -->\n", re.S)
    if pat.search(doc):
        doc = pat.sub(lambda _: section, doc)
    else:
        doc = doc.replace("<!-- expert:end -->\n", "<!-- expert:end -->\n\n" + section, 1) if "<!-- expert:end -->" in doc \
            else doc.rstrip("\n") + "\n\n" + section
    open(doc_path, "w").write(doc)
else:
    sys.stdout.write(section)
PY
