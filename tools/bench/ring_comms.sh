#!/usr/bin/env bash
# tools/bench/ring_comms.sh — fabric mode's two NCCL comm implementations side by side in
# ONE boot of the ring of 4 soft-RoCE guests (tests/lanes/rxe-ring): railyard-perf
# sendrecv between g0 and g1 (direct, over the verbs cable) and between g0 and g2 (no
# cable: relayed through g1 or g3), with RAILYARD_COMMS=legacy (the older comms: verbs to
# the neighbour, relayed peers over TCP through railyardd's socket relay) and
# RAILYARD_COMMS=fabric (the cable set, relayed peers over RDMA through railyardd's
# Forwarders; the default only over TCP rails), interleaved round by round so both see the same guests and
# the same host load. g1 and g3 run railyardd throughout (the relays).
#
# Usage (host):  tools/bench/ring_comms.sh [--build DIR] [--rounds N] [--out FILE]
#   --build DIR  CMake build directory with railyard-perf, railyardd and the plugin
#                (default build/)
#   --rounds N   interleaved rounds (default 3)
#   --out FILE   also write the table (markdown) to FILE
#   --tcp        also run the older comms over TCP only (RAILYARD_TRANSPORT=tcp: sockets on
#                the same cables, the socket relay for g0<->g2) as a third kind, "tcp":
#                what a byte costs over the guests' TCP against over rxe, the yardstick
#                of the relayed comparison (the older comms relay over TCP)
#   --threads    also sample, every second in every guest, each Railyard thread's CPU
#                time (/proc/PID/task/TID/stat, by thread name: ry-comms, ry-forwarder,
#                ...) and the guest's /proc/stat, and print per phase where the guest's
#                CPU went (threads.g*.log in the raw output)
# Prints per pair and size the median µs per iteration of each comms and the ratio
# legacy time ÷ fabric time (> 1: the fabric comms moved more per second). Raw output:
# <build>/bench/ring-comms-<date>/. Under TCG a cable moves 0.1-0.25 Gb/s: only the
# ratios mean anything.
# In a guest (run by the host form through ring.sh): ring_comms.sh --guest WORK BUILD
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)

guest() {  # WORK BUILD
  local work=$1 build=$2 round comms pair port=29800 peer rank
  # shellcheck disable=SC1091
  source "$work/plan.env"
  local perf=$build/tools/railyard-perf/railyard-perf plugin=$build/lib/libnccl-net-railyard.so
  local daemon=$build/tools/railyardd/railyardd dpid=
  export RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_FABRIC=on RAILYARD_TIMEOUT_MS=60000 RAILYARD_TRANSPORT=auto
  if ((RING_ID % 2 == 1)); then
    RAILYARD_DEBUG=WARN "$daemon" >"$work/railyardd.g$RING_ID.log" 2>&1 &
    dpid=$!
  fi
  local spid=
  if ((THREADS)); then
    echo start >"$work/phase.g$RING_ID"
    sampler "$work/phase.g$RING_ID" >"$work/threads.g$RING_ID.log" &
    spid=$!
  fi
  local kinds=(legacy fabric)
  ((${TCP:-0})) && kinds+=(tcp)
  ring-barrier bench-up 300
  for ((round = 1; round <= ROUNDS; round++)); do
    for comms in "${kinds[@]}"; do
      for pair in direct relayed; do
        port=$((port + 1))
        echo "r$round-$comms-$pair" >"$work/phase.g$RING_ID"
        peer=1
        [[ $pair == relayed ]] && peer=2
        rank=-1
        ((RING_ID == 0)) && rank=0
        ((RING_ID == peer)) && rank=1
        if ((rank >= 0)); then
          local json=()
          ((rank == 0)) && json=(--json "$work/r$round-$comms-$pair.json")
          local transport=auto kind=$comms
          [[ $comms == tcp ]] && transport=tcp kind=legacy
          RAILYARD_COMMS=$kind RAILYARD_TRANSPORT=$transport timeout 300 "$perf" --plugin "$plugin" --rank "$rank" --nranks 2 \
            --root "10.79.0.1:$port" -p sendrecv -T 280 -b 65536 -e 16777216 -f 16 -n "$ITERS" -w 1 -c 0 \
            "${json[@]}" >"$work/r$round-$comms-$pair.rank$rank.log" 2>&1 ||
            echo "ring_comms: guest $RING_ID: round $round $comms $pair failed (see r$round-$comms-$pair.rank$rank.log)"
        fi
        ring-barrier "bench-$round-$comms-$pair" 320
      done
    done
  done
  [[ -n $dpid ]] && kill "$dpid"
  [[ -n $spid ]] && kill "$spid"
  return 0
}

# Every second: "S <uptime> <phase>", the guest's /proc/stat cpu line, and one line
# "T <pid> <tid> <name> <utime+stime ticks>" per thread of railyard-perf and railyardd.
# Builtins only (no fork per sample): under TCG a forking sampler took a visible share
# of the guest.
sampler() {  # PHASEFILE
  local t stat rest name pid tid comm f phase cpu d
  while :; do
    read -r t _ </proc/uptime
    read -r phase <"$1"
    echo "S $t $phase"
    read -r cpu <"/proc/stat"
    echo "$cpu"
    for d in /proc/[0-9]*; do
      read -r comm <"$d/comm" 2>/dev/null || continue
      [[ $comm == railyard-perf || $comm == railyardd ]] || continue
      pid=${d#/proc/}
      for stat in "$d"/task/[0-9]*/stat; do
        read -r rest <"$stat" 2>/dev/null || continue
        name=${rest#*(}; name=${name%%)*}
        rest=${rest##*) }
        # After ')': state is field 3 of the whole line, utime 14 and stime 15: here 11 and 12.
        read -r -a f <<<"$rest"
        tid=${stat%/stat}; tid=${tid##*/}
        echo "T $pid $tid ${name// /_} $((f[11] + f[12]))"
      done
    done
    sleep 1
  done
}

if [[ ${1:-} == --guest ]]; then
  guest "$2" "$3"
  exit 0
fi

build=$ROOT/build rounds=3 out= threads=0 tcp=0
while (($#)); do
  case $1 in
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=1; shift ;;
    --tcp) tcp=1; shift ;;
    *) echo "ring_comms.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
work=$build/bench/ring-comms-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$work"
printf 'ROUNDS=%d\nITERS=%d\nTHREADS=%d\nTCP=%d\n' "$rounds" 5 "$threads" "$tcp" >"$work/plan.env"
echo "ring_comms: host load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores; raw output in $work"
# About 300 s a round under TCG on a quiet 2-core host: the guests' limit grows with the rounds.
"$ROOT/tests/lanes/rxe-ring/ring.sh" -n 4 -G -t $((300 + (tcp ? 900 : 600) * rounds)) -w "$work" -C "$ROOT" \
  "$ROOT/tools/bench/ring_comms.sh" --guest "$work" "$build" >"$work/ring.log" 2>&1 ||
  { tail -30 "$work/ring.log" >&2; echo "ring_comms: the ring run failed" >&2; exit 1; }
grep -h "ring_comms:" "$work/ring.log" || true
python3 - "$work" "$rounds" "$out" <<'EOF'
import json, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
times = {}  # (pair, comms, size) -> [µs per iteration]
for r in range(1, rounds + 1):
    for comms in ("legacy", "fabric", "tcp"):
        for pair in ("direct", "relayed"):
            try:
                doc = json.load(open(f"{work}/r{r}-{comms}-{pair}.json"))
            except (OSError, ValueError):
                continue
            for row in doc["rows"]:
                times.setdefault((pair, comms, row["size"]), []).append(row["time_us"])
tcp = any(k[1] == "tcp" for k in times)
head = "| pair | size | legacy µs | fabric µs | legacy ÷ fabric | runs |"
if tcp:
    head += " tcp µs | tcp ÷ fabric |"
lines = [head, "|" + "---|" * (head.count("|") - 1)]
for pair in ("direct", "relayed"):
    for size in sorted({k[2] for k in times if k[0] == pair}):
        leg, fab = times.get((pair, "legacy", size), []), times.get((pair, "fabric", size), [])
        if not leg or not fab:
            continue
        ml, mf = statistics.median(leg), statistics.median(fab)
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        row = f"| {pair} | {label} | {ml:.0f} | {mf:.0f} | {ml / mf:.2f} | {len(leg)}/{len(fab)} |"
        if tcp:
            t = times.get((pair, "tcp", size), [])
            row += f" {statistics.median(t):.0f} | {statistics.median(t) / mf:.2f} |" if t else " - | - |"
        lines.append(row)
table = "\n".join(lines)
print(table)
if out:
    open(out, "w").write(table + "\n")
EOF
if ((threads)); then
  python3 - "$work" <<'EOF'
import collections, glob, re, sys
work = sys.argv[1]
# Per guest and phase: the guest's CPU split (/proc/stat deltas) and each thread name's share.
for path in sorted(glob.glob(f"{work}/threads.g*.log")):
    guest = re.search(r"threads\.(g\d+)\.log", path).group(1)
    first, last, cpu0, cpu1 = {}, {}, {}, {}
    phase = None
    for line in open(path, errors="replace"):
        p = line.split()
        if not p:
            continue
        if p[0] == "S" and len(p) >= 3:
            phase = p[2]
        elif p[0] == "cpu" and phase:
            v = list(map(int, p[1:8]))  # user nice system idle iowait irq softirq
            cpu0.setdefault(phase, v)
            cpu1[phase] = v
        elif p[0] == "T" and phase and len(p) == 5:
            key = (phase, p[1], p[2], p[3])
            first.setdefault(key, int(p[4]))
            last[key] = int(p[4])
    for phase in cpu0:
        if not phase.startswith("r"):
            continue
        d = [b - a for a, b in zip(cpu0[phase], cpu1[phase])]
        total = sum(d) or 1
        by = collections.Counter()
        for key, v in last.items():
            if key[0] == phase:
                by[key[3]] += v - first[key]
        threads = ", ".join(f"{n} {100 * t / total:.0f}%" for n, t in by.most_common() if t > 0)
        print(f"{guest} {phase}: user {100 * d[0] / total:.0f}% sys {100 * d[2] / total:.0f}% "
              f"softirq {100 * d[6] / total:.0f}% idle {100 * d[3] / total:.0f}% | {threads}")
EOF
fi
