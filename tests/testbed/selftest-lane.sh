#!/usr/bin/env bash
# selftest-lane.sh LANE [EXTRA testbed options]: build LANE, run selftest.py in
# it, then check that teardown removed every namespace and state file of the
# testbed and that the root namespace gained nothing of ours. ctest entry point.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lane=${1:?usage: selftest-lane.sh LANE [OPTIONS]}; shift
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
prefix="ryst$$"
state=${TESTBED_STATE_DIR:-/run/railyard-testbed}

# root namespace: interfaces/routes that look like ours must not appear
ours() {
  { ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^(p[0-9]+r[0-9]+|mgmt0?|h[0-9]+|x[0-9]+p[0-9]+l[0-9]+)$'
    ip -4 route show table all | grep -E '10\.20[01]\.' ; } | sort
}
before=$(ours)

"$here/testbed.sh" run --lane "$lane" --prefix "$prefix" "$@" -- python3 "$here/selftest.py"
rc=$?
[ "$rc" = 77 ] && exit 77

left=$(ip netns list | awk '{print $1}' | grep -E "^$prefix-" || true)
if [ -n "$left" ]; then
  echo "FAIL: namespaces left after teardown: $left"
  "$here/testbed.sh" teardown "$prefix"
  rc=1
else
  echo "ok   teardown: no namespace with prefix $prefix left"
fi
if ls "$state/$prefix".* >/dev/null 2>&1; then echo "FAIL: state files left: $(ls "$state/$prefix".*)"; rc=1; fi
after=$(ours)
if [ "$before" != "$after" ]; then
  echo "FAIL: root namespace changed:"; diff <(echo "$before") <(echo "$after"); rc=1
else
  echo "ok   root namespace untouched"
fi
exit "$rc"
