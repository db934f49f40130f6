#!/usr/bin/env bash
# bootstrap_not_rail_test.sh LIB - a host:NAME tier client takes the rails the plugin's
# fabric mode and railyardd take: the port NCCL_SOCKET_IFNAME names (NCCL's bootstrap
# network) is never one (plugin/tier_route.cc; it used to be a rail there).
# In a network namespace of its own holding one veth pair (ry0 10.99.0.1/24 and its peer,
# link-local only), so nothing can leave this host: with NCCL_SOCKET_IFNAME=ry0 the
# Python list_arenas("host:x", 0) must fail at once naming ry0 as the bootstrap network.
# Exit: 0 pass, 1 fail, 77 not root or no numpy-free python3 (skipped).
set -uo pipefail
lib=$1
here=$(cd "$(dirname "$0")" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "bootstrap_not_rail_test: needs root (a network namespace); skipped"; exit 77; }
ns=ry-bootstrap-$$
ip netns add "$ns" || exit 1
trap 'ip netns del "$ns" 2>/dev/null' EXIT
ip -n "$ns" link set lo up
ip -n "$ns" link add ry0 type veth peer name ry1 || exit 1
ip -n "$ns" addr add 10.99.0.1/24 dev ry0
ip -n "$ns" link set ry0 up
ip -n "$ns" link set ry1 up
out=$(ip netns exec "$ns" env -u RAILYARD_SOCKET_IFNAME NCCL_SOCKET_IFNAME=ry0 RAILYARD_LIB="$lib" \
      PYTHONPATH="$here/../../python" timeout 60 /usr/bin/python3 -c '
from railyard.snapshot import list_arenas, SnapshotError
try:
    list_arenas("host:x", 0)
    print("reached")
except SnapshotError as e:
    print(e)
' 2>&1)
echo "$out"
want="ry0: NCCL_SOCKET_IFNAME='ry0' makes it NCCL's bootstrap (management) network, never a cable"
if [[ $out != *"list_arenas host:x: a host:NAME peer needs fabric rails"* || $out != *"$want"* ]]; then
  echo "bootstrap_not_rail_test: FAIL: wanted the host:NAME client to refuse ry0 as NCCL's bootstrap network"
  exit 1
fi
echo "bootstrap_not_rail_test: ok"
