#!/usr/bin/env bash
# railyardd takes a rail that comes up after it started (tools/railyardd/rail_watch.h):
# three hosts as network namespaces, a cable a-b (addressed) and a cable a-c whose end on
# a has no address when a's daemon starts (a boot where the addresses come later). Once
# the address is added, a's daemon says the rails changed, restarts itself on them (the
# same pid) and finds c: its graph reaches 3 hosts. (New-user trial: the cable stayed out
# of the graph until a manual restart.)
# Usage: railyardd_rail_watch_test.sh RAILYARDD
# Exit: 0 pass, 1 fail, 77 not root (skipped).
set -uo pipefail
daemon=$1
[[ $(id -u) -eq 0 ]] || { echo "railyardd_rail_watch_test: needs root (network namespaces); skipped"; exit 77; }
tag=rw$$
ns=("$tag-a" "$tag-b" "$tag-c")
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for n in "${ns[@]}"; do
  ip netns add "$n" || exit 1
  ip -n "$n" link set lo up
done
# Cable a-b: 10.97.0.0/30; cable a-c: 10.97.1.0/30 (a's end unaddressed for now).
ip -n "${ns[0]}" link add ab type veth peer name ba netns "${ns[1]}" || exit 1
ip -n "${ns[0]}" link add ac type veth peer name ca netns "${ns[2]}" || exit 1
ip -n "${ns[0]}" addr add 10.97.0.1/30 dev ab
ip -n "${ns[1]}" addr add 10.97.0.2/30 dev ba
ip -n "${ns[2]}" addr add 10.97.1.2/30 dev ca
for pair in "0 ab" "0 ac" "1 ba" "2 ca"; do
  read -r i dev <<<"$pair"
  ip -n "${ns[$i]}" link set "$dev" up
done
names=(a b c)
for i in 0 1 2; do
  ip netns exec "${ns[$i]}" env -u RAILYARD_SOCKET_IFNAME -u NCCL_SOCKET_IFNAME RAILYARD_HOST_NAME="${names[$i]}" \
    RAILYARD_DISCOVERY_INTERVAL_MS=100 RAILYARD_DISCOVERY_DEAD_MS=1000 "$daemon" --text \
    >"$tmp/out.$i" 2>"$tmp/err.$i" &
  pids+=($!)
done
# Polls `grep -q PATTERN FILE` for up to $3 seconds (the condition, not a sleep as a barrier).
wait_for() {  # PATTERN FILE SECONDS
  local end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    grep -q -- "$1" "$2" && return 0
    sleep 0.2
  done
  return 1
}
if ! wait_for "a: cluster shape" "$tmp/err.0" 20; then
  echo "FAIL: a's daemon never reported a shape"; cat "$tmp/err.0"; exit 1
fi
if grep -q "3 hosts" "$tmp/err.0"; then
  echo "FAIL: a knew 3 hosts before its cable to c had an address"; cat "$tmp/err.0"; exit 1
fi
pid_before=${pids[0]}
ip -n "${ns[0]}" addr add 10.97.1.1/30 dev ac
if ! wait_for "the rails changed (new: ac 10.97.1.1/30" "$tmp/err.0" 20; then
  echo "FAIL: a's daemon did not notice its new rail"; cat "$tmp/err.0"; exit 1
fi
if ! wait_for "a: cluster shape chain, 3 hosts" "$tmp/err.0" 30; then
  echo "FAIL: after the restart a's daemon did not find c (chain of 3)"; cat "$tmp/err.0"; exit 1
fi
if ! kill -0 "$pid_before" 2>/dev/null; then
  echo "FAIL: a's daemon is gone (it should restart in place, same pid)"; cat "$tmp/err.0"; exit 1
fi
echo "railyardd_rail_watch_test: ok: a's daemon took the rail that came up later and found c"
grep -E "rails changed|cluster shape" "$tmp/err.0"
exit 0
