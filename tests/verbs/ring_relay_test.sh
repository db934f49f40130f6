#!/usr/bin/env bash
# ring_relay_test.sh NODE [bench] - the fabric relay over RDMA, in a ring of 4 guests
# (tests/lanes/rxe-ring, `ctest -L verbs-ring`, SPMD: every guest runs this at once).
#
# g0 -> g1 -> g2, every leg verbs: g2 runs a fabric target on rxe0 (its cable to g1),
# g1 a fabric relay::Forwarder with one verbs Domain per cable (rxe0 towards g0, rxe1
# towards g2, MakeVerbsCableResolver), g0 the source on rxe1 (its cable to g1). g0 and
# g2 share no cable, so every byte crosses g1's registered rings, written on with RDMA
# WRITE WITH IMM; the only TCP is each verbs Worker's QP bootstrap. The source runs
# fabric_relay_node's suite through the relay: Write then Read back at 0 B to 5 MiB + 3
# (guard bytes checked), 10 FetchAdds (old values exact), records, a Fence between a
# Write and a Read, a Write with immediate of several relay slots, a wrong key refused
# with its named error. Checks: the source prints "suite ok" and "refused ...", g2 saw
# the 3 MiB Write with immediate as one immediate of its whole, g1's relay forwarded slots.
#
# With `bench` (by hand; RING_RELAY_ROUNDS, default 3, and RING_RELAY_MAX_MIB, default 1, passed
# with ring.sh -e: tests/lanes/rxe-ring/ring.sh -n 4 -G -C build \
#   tests/verbs/ring_relay_test.sh build/tests/fabric_relay/fabric_relay_node bench):
# also a 2-hop Write (g0 -> g1 -> g2) against a direct one (g0 -> a target on g1), in
# interleaved rounds (docs/benchmarks.md).
# With `relay-killed` (verbs-ring.fabric_relay_killed_over_rdma): g0 streams 4 MiB Writes
# through g1's relay to g2; once the stream is under way g1's relay is SIGKILLed. The
# source gets an error event within RAILYARD_TIMEOUT_MS (20 s here) + 5 s naming rank 0,
# the route "via relay", device, rail and seq (PEER_CLOSED, REMOTE_ACCESS, SYSTEM or
# TIMEOUT: see the check), the Endpoint
# stays failed and closes at once (issue 10, Faults: a relay host killed, over RDMA).
# With `railyardd RAILYARDD` (verbs-ring.fabric_relay_railyardd_over_rdma): the relay is
# not a test node but g1's railyardd, as in production: every guest runs railyardd in
# fabric mode (RAILYARD_SOCKET_IFNAME='=p0,p1'), its cabling agent finds the ring, and
# g1's ForwarderHost builds a verbs port on each RDMA cable at
# RAILYARD_FABRIC_RELAY_VERBS_PORT (29522), routing by the cabling graph. g0's source
# runs the suite through the verbs Forwarder address the graph's rule gives (g1's
# first rail facing g0, port 29522). Checks as the suite, plus g1's railyardd saying
# its Forwarder serves both cables over RDMA and that it forwarded slots.
# Guests meet through /ring barriers, never through the rails.
# Exit: 0 pass, 1 fail, 77 not in a ring guest of 4 (RING_ID unset, or RING_N != 4).
# NODE [suite|bench|relay-killed|railyardd RAILYARDD]
set -uo pipefail
node=$1
mode=${2:-suite}
railyardd=${3:-}
if [[ -z ${RING_ID:-} || ${RING_N:-0} -ne 4 ]]; then
  echo "ring_relay_test: needs a ring of 4 guests (RING_ID/RING_N); skipped" >&2
  exit 77
fi
tag=frv-$mode${RING_ROUND:+-$RING_ROUND}  # every guest must use the same names (RING_ROUND: a repeat by hand)
dir=/ring/$tag
out=$(mktemp -d)
pids=()
trap 'rm -rf "$out"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
fail() { echo "ring_relay_test: FAIL: guest $RING_ID: $*" >&2; exit 1; }
# Waits (bounded) for a node's address file: the node has opened its devices.
await_file() {  # FILE PID
  for ((i = 0; i < 1200; ++i)); do
    [[ -s $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1  # polling for a file another process writes, not a barrier
  done
  return 1
}
export RAILYARD_TIMEOUT_MS=60000
((RING_ID == 0)) && { rm -rf "$dir"; mkdir -p "$dir"; }
ring-barrier "$tag-dir" 120 || exit 1

if [[ $mode == railyardd ]]; then
  [[ -x $railyardd ]] || fail "railyardd mode needs the railyardd binary"
  RAILYARD_SOCKET_IFNAME='=p0,p1' RAILYARD_FABRIC=on NCCL_DEBUG=INFO RAILYARD_DEBUG=INFO "$railyardd" >"$out/rydd" 2>&1 &
  pids+=($!)
  if ((RING_ID == 1)); then
    # Bounded wait for the Forwarder over both cables, both with RDMA ports.
    for ((i = 0; i < 1200; ++i)); do
      grep -q 'Forwarder on port 29519 over 2 cables, 2 of them also over RDMA' "$out/rydd" && break
      kill -0 "${pids[0]}" 2>/dev/null || break
      sleep 0.1  # polling for railyardd's log line, not a barrier
    done
    grep -q 'over 2 cables, 2 of them also over RDMA' "$out/rydd" ||
      fail "g1's railyardd did not serve verbs ports on both cables: $(grep -i 'fabric relay' "$out/rydd" | tail -5)"
    "$node" forwarder-address --ip "$RING_IP_P0" --port 29522 --rails 1 --out "$dir/relay" ||
      fail "could not write the relay address"
  fi
fi

case $RING_ID in
  1)
    if [[ $mode != railyardd ]]; then
      "$node" relay --port "rxe0@$RING_IP_P0" --port "rxe1@$RING_IP_P1" --out "$dir/relay" --timeout-ms 60000 \
        >"$out/relay" 2>&1 &
      pids+=($!)
      await_file "$dir/relay" "${pids[0]}" || fail "the relay did not start: $(tail -5 "$out/relay")"
    fi
    if [[ $mode == bench ]]; then
      "$node" target --rails "rxe0@$RING_IP_P0" --out "$dir/direct" >"$out/direct" 2>&1 &
      pids+=($!)
      await_file "$dir/direct" "${pids[1]}" || fail "the direct target did not start: $(tail -5 "$out/direct")"
    fi
    ;;
  2)
    "$node" target --rails "rxe0@$RING_IP_P0" --out "$dir/target" >"$out/target" 2>&1 &
    pids+=($!)
    await_file "$dir/target" "${pids[-1]}" || fail "the target did not start: $(tail -5 "$out/target")"
    ;;
esac
ring-barrier "$tag-up" 300 || exit 1

rc=0
if [[ $mode == relay-killed ]] && ((RING_ID != 0)); then
  ring-barrier "$tag-go" 300 || exit 1  # g0's stream is under way
  if ((RING_ID == 1)); then
    relay_pid=${pids[0]}
    if [[ -e $dir/no-stream ]]; then  # the relay stalled before the kill: say where it was
      echo "ring_relay_test: guest 1: g0's stream did not get going; the relay was:" \
        "$(cut -d' ' -f3 "/proc/$relay_pid/stat" 2>/dev/null) wchan $(cat "/proc/$relay_pid/wchan" 2>/dev/null)" \
        "log: $(tail -5 "$out/relay")" >&2
      for t in /proc/"$relay_pid"/task/*; do
        echo "  task ${t##*/}: $(cut -d' ' -f3 "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)" \
          "$(cat "$t/stack" 2>/dev/null | head -6 | tr '\n' ' ')" >&2
      done
    fi
    kill -KILL "$relay_pid"
    pids=()
    # Bounded: a process that stays after SIGKILL is stuck in the kernel (rxe); say where
    # and go on to the barrier, so the other guests are not held for ctest's timeout.
    for ((i = 0; i < 300; ++i)); do
      kill -0 "$relay_pid" 2>/dev/null || break
      sleep 0.1  # polling for the killed process to be reaped, not a barrier
    done
    if kill -0 "$relay_pid" 2>/dev/null; then
      echo "ring_relay_test: guest 1: the relay is still there 30 s after SIGKILL:" \
        "$(cat "/proc/$relay_pid/stat" 2>/dev/null) stack: $(cat "/proc/$relay_pid/stack" 2>/dev/null | head -12 | tr '\n' ' ')" >&2
      echo "relay-stuck" >"$dir/relay-stuck"
    else
      wait "$relay_pid" 2>/dev/null
    fi
    echo "ring_relay_test: guest 1: relay SIGKILLed mid-stream"
  fi
fi
if ((RING_ID == 0)); then
  if [[ $mode == relay-killed ]]; then
    timeout 200 "$node" source --rails "rxe1@$RING_IP_P1" --relay "$dir/relay" --target "$dir/target" \
      --scenario stream --max-seconds 120 --timeout-ms 20000 >"$out/source" 2>&1 &
    src=$!
    for ((i = 0; i < 1200; ++i)); do
      grep -q '^streaming ' "$out/source" && break
      kill -0 "$src" 2>/dev/null || break
      sleep 0.1  # polling for the source's line, not a barrier
    done
    grep -q '^streaming ' "$out/source" || echo "the stream never got going" >"$dir/no-stream"
    # Taken before the barrier: g1 kills only once every guest has reached it, so the
    # error's delay measured from here is an upper bound (the guests' clocks differ).
    fault_at=$(date +%s%3N)
    ring-barrier "$tag-go" 300 || exit 1
    wait "$src" || rc=$?
    echo "fault-at-ms $fault_at" >>"$out/source"
  elif [[ $mode == bench ]]; then
    timeout 900 "$node" source --rails "rxe1@$RING_IP_P1" --relay "$dir/relay" --target "$dir/target" \
      --scenario bench --direct "$dir/direct" --rounds "${RING_RELAY_ROUNDS:-3}" --bench-mib 8 \
      --max-mib "${RING_RELAY_MAX_MIB:-1}" --timeout-ms 60000 >"$out/source" 2>&1 || rc=$?
  else
    timeout 600 "$node" source --rails "rxe1@$RING_IP_P1" --relay "$dir/relay" --target "$dir/target" \
      --scenario suite --timeout-ms 60000 >"$out/source" 2>&1 || rc=$?
  fi
  cat "$out/source"
  echo "$rc" >"$dir/source-rc"
fi
ring-barrier "$tag-done" 900 || exit 1
src_rc=$(cat "$dir/source-rc" 2>/dev/null || echo missing)

case $RING_ID in
  0)
    if [[ $mode == relay-killed ]]; then
      [[ ! -e $dir/no-stream ]] || fail "the stream never got going: $(tail -5 "$out/source")"
      [[ $src_rc == 3 ]] || fail "the source exited $src_rc, not 3 (an error event)"
      err=$(sed -n 's/^error //p' "$out/source")
      for word in "rank 0" "via relay" device rail seq; do
        [[ $err == *"$word"* ]] || fail "the error does not name '$word': $err"
      done
      # Over RDMA a killed relay shows as whichever comes first: its bootstrap socket
      # closing (PEER_CLOSED), a Write into its ring after the kernel freed its MRs
      # (REMOTE_ACCESS at the HCA), its QPs gone (retries exceeded: SYSTEM), or silence.
      [[ $err =~ fabric\ (PEER_CLOSED|REMOTE_ACCESS|SYSTEM|TIMEOUT): ]] ||
        fail "expected PEER_CLOSED, REMOTE_ACCESS, SYSTEM or TIMEOUT: $err"
      grep -q '^stays-failed yes$' "$out/source" || fail "the failed Endpoint took a new op"
      grep -q '^closed$' "$out/source" || fail "closing after the error hung"
      at=$(sed -n 's/^error-at-ms //p' "$out/source")
      fault=$(sed -n 's/^fault-at-ms //p' "$out/source")
      ((at - fault <= 25000)) || fail "the error came $((at - fault)) ms after the kill (timeout 20000 ms)"
      echo "ring_relay_test: guest 0: relay killed: error at most $((at - fault)) ms after the kill: $err"
      exit 0
    fi
    [[ $src_rc == 0 ]] || fail "the source exited $src_rc"
    if [[ $mode == suite || $mode == railyardd ]]; then
      grep -q '^suite ok$' "$out/source" || fail "no 'suite ok' from the source"
      grep -q '^refused .*' "$out/source" || fail "the wrong key was not refused by name"
    else
      grep -q '^median ' "$out/source" || fail "no bench medians"
    fi
    echo "ring_relay_test: guest 0: $mode through g1's RDMA relay to g2 passed"
    ;;
  1)
    [[ $mode == relay-killed ]] && exit 0  # its relay is gone; guest 0 judges
    kill -TERM "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    pids=()
    if [[ $mode == railyardd ]]; then
      line=$(grep '^railyardd: fabric relay: ' "$out/rydd")
      echo "ring_relay_test: guest 1: $line"
      [[ $src_rc == 0 ]] || fail "the source failed (exit $src_rc); railyardd log: $(grep -i 'relay' "$out/rydd" | tail -5)"
      slots=$(sed -n 's/.* \([0-9]*\) slots, .*/\1/p' <<<"$line")
      opened=$(sed -n 's/^railyardd: fabric relay: \([0-9]*\) routes opened.*/\1/p' <<<"$line")
      [[ -n $slots && $slots -gt 0 && -n $opened && $opened -ge 1 ]] || fail "g1's railyardd carried nothing: '$line'"
      [[ $line == *"RDMA ports facing 2 cables"* ]] || fail "g1's Forwarder lost its RDMA ports: '$line'"
      exit 0
    fi
    line=$(grep '^relay opened' "$out/relay")
    echo "ring_relay_test: guest 1: $line"
    [[ $src_rc == 0 ]] || fail "the source failed (exit $src_rc); relay log: $(tail -5 "$out/relay")"
    slots=$(sed -n 's/.* slots \([0-9]*\) .*/\1/p' <<<"$line")
    opened=$(sed -n 's/^relay opened \([0-9]*\) .*/\1/p' <<<"$line")
    [[ -n $slots && $slots -gt 0 && $opened -ge 1 ]] || fail "the relay carried nothing: '$line'"
    ;;
  2)
    kill -TERM "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
    pids=()
    want_rc=0
    [[ $mode == relay-killed ]] && want_rc=3
    [[ $src_rc == "$want_rc" ]] || fail "the source exited $src_rc, not $want_rc; target log: $(tail -5 "$out/target")"
    if [[ $mode == suite || $mode == railyardd ]]; then
      grep -q '^big immediate bytes 3145728$' "$out/target" ||
        fail "the target's one immediate for the 3 MiB Write did not report its whole: $(grep big "$out/target")"
    fi
    echo "ring_relay_test: guest 2: target reached only through g1"
    ;;
esac
exit 0
