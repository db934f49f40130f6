#!/usr/bin/env bash
# selftest-cli.sh: the testbed's command line: exit statuses (CMD's own, 125 for
# testbed failures), environment for CMD, --keep/up/teardown, range-overlap
# refusal, prefix collisions, teardown on SIGTERM, edge lists and a 4-mesh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
TB="$here/testbed.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
p="rycli$$"
tmp=$(mktemp -d)
fails=0
cleanup() {
  for s in a k u t e m; do "$TB" teardown "${p}$s" >/dev/null 2>&1; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
nss() { ip netns list | awk '{print $1}' | grep -cE "^$1-" ; }
expect_rc() { # WANT WHAT CMD...
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ "$rc" = "$want" ]; then ok "$what (rc $rc)"; else fail "$what: rc $rc, want $want"; cat "$tmp/out"; fi
}

expect_rc 3 "run returns CMD's status" "$TB" run --lane chain4 --prefix "${p}a" -- sh -c 'exit 3'
[ "$(nss "${p}a")" = 0 ] && ok "torn down after CMD failed" || fail "namespaces left after CMD failed"
expect_rc 125 "bad option -> 125" "$TB" run --hosts 1 --prefix "${p}a" -- true
expect_rc 125 "unknown lane -> 125" "$TB" run --lane nope -- true
expect_rc 125 "data range overlapping 127/8 refused" "$TB" run --data-net 127.0 --prefix "${p}a" -- true
expect_rc 125 "mgmt range overlapping 127/8 refused" "$TB" run --mgmt-net 127.0.0 --prefix "${p}a" -- true
[ "$(nss "${p}a")" = 0 ] && ok "nothing built on refusal" || fail "namespaces left after refusal"
expect_rc 0 "CMD sees TESTBED_JSON, TESTBED_PREFIX, on-host.sh works" "$TB" run --lane mesh3 --prefix "${p}a" -- \
  sh -c '[ -r "$TESTBED_JSON" ] && [ "$TESTBED_PREFIX" = '"${p}a"' ] && [ "$TESTBED_HOSTS" = 3 ] &&
         '"$here"'/on-host.sh 2 ip -4 addr show mgmt0 | grep -q 10.200.0.3/24'

# --keep, then teardown; a second testbed with the same prefix is refused and leaves the first alone
expect_rc 0 "run --keep" "$TB" run --lane ring3-p0p0 --prefix "${p}k" --keep -- true
[ "$(nss "${p}k")" = 4 ] && ok "--keep kept 3 hosts + switch" || fail "--keep: $(nss "${p}k") namespaces"
expect_rc 125 "prefix in use -> 125" "$TB" run --lane chain4 --prefix "${p}k" -- true
[ "$(nss "${p}k")" = 4 ] && ok "refused run left the existing testbed alone" || fail "refused run touched ${p}k"
expect_rc 0 "teardown PREFIX" "$TB" teardown "${p}k"
[ "$(nss "${p}k")" = 0 ] && ok "teardown removed everything" || fail "teardown left namespaces"

# up --out, json, link ops by --prefix, teardown
expect_rc 0 "up --out" "$TB" up --lane ring4x2 --prefix "${p}u" --out "$tmp/u.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["rails"]) == 8 and d["hosts"][0]["mgmt_ip"] == "10.200.0.1"' "$tmp/u.json" \
  && ok "--out JSON has 8 rails" || fail "--out JSON wrong"
expect_rc 0 "cut --prefix" "$TB" cut --prefix "${p}u" 1 1
expect_rc 1 "cut rail does not ping" ip netns exec "${p}u-h1" ping -c1 -W1 -q 10.201.3.2
expect_rc 0 "heal --prefix" "$TB" heal --prefix "${p}u" 1 1
# Any reply of three counts: the first may wait on ARP under load (a CI run lost one).
expect_rc 0 "healed rail pings" ip netns exec "${p}u-h1" ping -c3 -i0.2 -W2 -q 10.201.3.2
expect_rc 2 "cut of a cable that does not exist" "$TB" cut --prefix "${p}u" 9
expect_rc 0 "teardown of up" "$TB" teardown "${p}u"
[ "$(nss "${p}u")" = 0 ] && ok "up testbed removed" || fail "up testbed left"

# SIGTERM while CMD runs: CMD is stopped, the testbed torn down, status 143
"$TB" run --lane chain4 --prefix "${p}t" -- sh -c "touch $tmp/started; exec sleep 60" >/dev/null 2>&1 &
tbpid=$!
for _ in $(seq 200); do [ -e "$tmp/started" ] && break; sleep 0.1; done  # bounded poll (20 s)
[ -e "$tmp/started" ] || fail "CMD never started"
kill -TERM "$tbpid"; wait "$tbpid"; rc=$?
[ "$rc" = 143 ] && ok "SIGTERM -> 143" || fail "SIGTERM: rc $rc, want 143"
[ "$(nss "${p}t")" = 0 ] && ok "torn down on SIGTERM" || fail "namespaces left after SIGTERM"

# an explicit edge list (a triangle plus a pendant, explicit ports on one cable), shuffled, 2 rails
expect_rc 0 "edge list testbed passes selftest" "$TB" run --edges 0:1-1:1,1-2,2-0,0-3 --rails 2 --shuffle-ports \
  --prefix "${p}e" -- python3 "$here/selftest.py"
grep -E '^(ok|FAIL)' "$tmp/out" | sed 's/^/     /'
# a mesh of 4: three ports per host
expect_rc 0 "mesh of 4 (3 ports per host) passes selftest" "$TB" run --topo mesh --hosts 4 --rate 1gbit \
  --prefix "${p}m" -- python3 "$here/selftest.py"
for s in a k u t e m; do [ "$(nss "${p}$s")" = 0 ] || fail "namespaces ${p}$s-* left"; done

echo "selftest-cli: $([ $fails = 0 ] && echo passed || echo "FAILED ($fails)")"
[ $fails = 0 ]
