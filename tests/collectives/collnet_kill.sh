#!/usr/bin/env bash
# A rank in its own process SIGKILLed mid-collective: three railyard-perf ranks (separate
# processes, multi-host mode on loopback) run large allreduces through the CollNet
# table (64 MiB each); once rank 1 is in its timed loop and has worked 0.2 s of CPU there
# it is SIGKILLed. Ranks 0 and 2 must exit 4 (a peer's failure) within RAILYARD_TIMEOUT_MS
# + 10 s, each with a named collnet error ("collnet rank R/3: ...") naming the rank it
# lost (one of them at least rank 1), never hang.
# Usage: collnet_kill.sh <railyard-perf> <libnccl-net-railyard.so> [auto|ring|chain|mesh]
# (RAILYARD_COLLNET_SHAPE; loopback's auto is a mesh: the direct algorithm).
set -uo pipefail
perf="${1:?railyard-perf}" lib="${2:?plugin}" shape="${3:-auto}"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
# A port the kernel says is free now (bind to port 0), as the C++ tests' FreePort: a
# random pick in 20000-39999 collided with an ephemeral port in use (CI, 2026-12-06:
# "bootstrap: bind 127.0.0.1:39217: Address already in use").
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
timeout_ms=5000
for i in 0 1 2; do
  RAILYARD_SOCKET_IFNAME="=lo" RAILYARD_FABRIC=off RAILYARD_COLLNET_SHAPE=$shape RAILYARD_TIMEOUT_MS=$timeout_ms NCCL_DEBUG=INFO NCCL_NET_PLUGIN="$lib" \
    "$perf" --rank $i --nranks 3 --root "127.0.0.1:$port" -p allreduce -d float -o sum -b 64M -e 64M -n 20 -w 0 -c 0 \
    -T 120 >"$tmp/out.$i" 2>"$tmp/err.$i" &
  pids+=($!)
done
# Wait (bounded) until rank 1 has entered its timed loop (railyard-perf's INFO line
# after the last barrier before it; -c 0: no barrier inside it) and then spent 0.2 s
# of CPU (/proc/PID/stat utime + stime): it is inside the 64 MiB allreduces. (Counting
# CPU from the connect instead killed it during set-up on a loaded CI host: the
# survivors then failed in railyard-perf's barrier, not in a collective.)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
started='rank 1: 67108864 B: 20 timed iterations start'
# Bounds (40 s + 30 s + 2 x 15 s) stay under ctest's 120 s, so a slow or stuck start
# fails here with the ranks' logs rather than as a bare ctest timeout.
for _ in $(seq 1 800); do
  grep -q "$started" "$tmp/err.1" 2>/dev/null && break
  sleep 0.05
done
base=$(cpu "${pids[1]}")
hz=$(getconf CLK_TCK)
for _ in $(seq 1 600); do
  [ $(( $(cpu "${pids[1]}") - base )) -ge $((hz / 5)) ] && break
  sleep 0.05
done
if ! grep -q "$started" "$tmp/err.1" || [ $(( $(cpu "${pids[1]}") - base )) -lt $((hz / 5)) ]; then
  echo "FAIL: rank 1 did not start its timed allreduces within 40 s and then run 0.2 s of CPU within 30 s"
  tail -n 8 "$tmp/err.0" "$tmp/err.1" "$tmp/err.2"; exit 1
fi
kill -9 "${pids[1]}"
killed=$(date +%s.%N)
fail=0
for i in 0 2; do
  # Each survivor must end by itself within the bound (polled, not slept).
  ended=0
  for _ in $(seq 1 $(( (timeout_ms / 1000 + 10) * 10 ))); do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then ended=1; break; fi
    sleep 0.1
  done
  if [ $ended -eq 0 ]; then
    echo "FAIL: rank $i still running $((timeout_ms / 1000 + 10)) s after rank 1 was killed (hang)"
    tail -n 8 "$tmp/err.$i"; fail=1; continue
  fi
  wait "${pids[$i]}"; rc=$?
  took=$(echo "$(date +%s.%N) - $killed" | bc)
  # 4: stopped because another rank failed (railyard-perf --help), seen through the
  # bootstrap: rank 0 sees rank 1's connection close, rank 2 sees rank 0 leave.
  if [ $rc -ne 4 ]; then echo "FAIL: rank $i exited $rc, not 4 (a peer's failure), although rank 1 died"; tail -3 "$tmp/err.$i"; fail=1; fi
  msg=$(grep -o 'collnet rank [0-9]/3: .*' "$tmp/err.$i" "$tmp/out.$i" | head -1)
  if [ -z "$msg" ]; then echo "FAIL: rank $i has no named collnet error:"; tail -5 "$tmp/err.$i"; fail=1; continue; fi
  # The error names the rank it lost by rank, not only by worker address: rank 1, or
  # the other survivor when that one left first (its connection closed).
  other=$((2 - i))
  if ! grep -Eq "rank (1|$other)[^0-9/]" <<<"${msg#*: }"; then echo "FAIL: rank $i's error names no other rank: $msg"; fail=1; fi
  grep -q 'rank 1[^0-9/]' <<<"${msg#*: }" && named1=1
  echo "ok: rank $i exited $rc after ${took} s: ${msg:0:200}"
done
# One survivor at least (the first to notice) names the dead rank.
if [ $fail -eq 0 ] && [ -z "${named1:-}" ]; then echo "FAIL: neither survivor names rank 1"; fail=1; fi
exit $fail
