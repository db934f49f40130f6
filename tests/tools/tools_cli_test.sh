#!/bin/sh
# The tools' command lines (issue 8.6): usage errors exit 2 everywhere (CLI11's own 105/106
# are not used), `railyard-config-doc --help` prints help instead of writing a file named
# ./--help, and `railyard-info --sysfs <fixture>` shows the fixture's rails without
# --include-no-address (a fixture has no addresses: unknown, not absent).
# A dead interval not above the hello interval is refused naming both (railyardd's flags and
# the variables).
# railyard-fabric-bench refuses an --ops name it does not know (it ran FetchAdd for any),
# and its Write with immediate runs over TCP on loopback; bad input is a usage error.
# Usage: tools_cli_test.sh RAILYARD_INFO RAILYARD_TCP_PUMP RAILYARD_CONFIG_DOC FIXTURE_DIR RAILYARDD FABRIC_BENCH
set -u
INFO=$1 PUMP=$2 DOC=$3 FIXTURES=$4 DAEMON=$5 FBENCH=$6
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_status() {  # WANT DESCRIPTION CMD...
  want=$1 what=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"
    sed 's/^/  | /' "$tmp/err" | head -5
    failed=1
  else
    echo "ok: $what: exit $got"
  fi
}

expect_status 2 "railyard-info --sysfs /nonexistent" "$INFO" --sysfs /nonexistent
grep -q "railyard-info: --sysfs" "$tmp/err" || { echo "FAIL: railyard-info names no option: $(cat "$tmp/err")"; failed=1; }
# Trial: a directory that is no sysfs tree listed no rail and exited 0; an XML file hwloc
# cannot read exited 1 ("init would fail") where a missing one is a bad flag.
expect_status 2 "railyard-info --sysfs (not sysfs)" "$INFO" --sysfs "$tmp" --no-hwloc
grep -q "not a sysfs tree (no class/net directory" "$tmp/err" || { echo "FAIL: --sysfs not sysfs: $(cat "$tmp/err")"; failed=1; }
printf 'not xml\n' > "$tmp/bad.xml"
expect_status 2 "railyard-info --hwloc-xml (not XML)" "$INFO" --hwloc-xml "$tmp/bad.xml" --sysfs "$FIXTURES/sysfs-spark"
grep -q "hwloc cannot use XML topology" "$tmp/err" || { echo "FAIL: --hwloc-xml not XML: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-info --hwloc-xml /nonexistent.xml" "$INFO" --hwloc-xml /nonexistent.xml --listen-ms 0
grep -q "railyard-info: --hwloc-xml" "$tmp/err" || { echo "FAIL: railyard-info names no option: $(cat "$tmp/err")"; failed=1; }
# Every tool says its version (a new-user trial found none had --version).
for tool in "$INFO" "$PUMP" "$DOC" "$DAEMON" "$FBENCH"; do
  name=$(basename "$tool")
  expect_status 0 "$name --version" "$tool" --version
  grep -Eq "^$name [0-9]+\.[0-9]+\.[0-9]+\$" "$tmp/out" || { echo "FAIL: $name --version printed: $(cat "$tmp/out")"; failed=1; }
done
expect_status 2 "railyard-info --no-such-flag" "$INFO" --no-such-flag
expect_status 0 "railyard-info --help" "$INFO" --help
expect_status 2 "railyard-tcp-pump --np 1" "$PUMP" --np 1
expect_status 2 "railyard-tcp-pump -p bogus" "$PUMP" -p bogus
expect_status 0 "railyard-tcp-pump --help" "$PUMP" --help
# An empty size range printed nothing and exited 0; a size of 100G (or "-5", read as a huge
# size_t) killed every rank with bad_alloc ("read results: Success", exit 1); --np with
# -p pair was silently ignored. All are usage errors naming the option.
expect_status 2 "railyard-tcp-pump -b 1M -e 1K" "$PUMP" -b 1M -e 1K
grep -q -- "--minbytes 1048576 is larger than --maxbytes 1024" "$tmp/err" || { echo "FAIL: pump -b > -e: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-tcp-pump -e 100G" "$PUMP" -b 1K -e 100G
grep -q -- "above the 1G limit" "$tmp/err" || { echo "FAIL: pump -e 100G: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-tcp-pump -b -5" "$PUMP" -b -5
expect_status 2 "railyard-tcp-pump -p pair --np 5" "$PUMP" -p pair --np 5
grep -q -- "--np 5: -p pair always runs 2 processes" "$tmp/err" || { echo "FAIL: pump --np with pair: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-fabric-bench --ops write,wrtie" "$FBENCH" --ops write,wrtie
grep -q -- "--ops: 'wrtie' is not write, writeimm, read or fetchadd" "$tmp/err" ||
  { echo "FAIL: fabric-bench --ops wrtie: $(cat "$tmp/err")"; failed=1; }
# A new-user trial: a bad --address failed only in the forked target (exit 1, "status
# 256"); --lat-max-bytes had no range; an op given twice ran twice; "write, read" was
# refused for its blank; --hca-* was silently ignored over TCP; no latency printed -1.
for bad in foo 0.0.0.0 ::1 255.255.255.255 224.0.0.1 " 127.0.0.1"; do
  expect_status 2 "railyard-fabric-bench --address $bad" "$FBENCH" --address "$bad"
  grep -q -- "--address" "$tmp/err" || { echo "FAIL: fabric-bench --address $bad names no option: $(cat "$tmp/err")"; failed=1; }
done
expect_status 2 "railyard-fabric-bench --lat-max-bytes 2G" "$FBENCH" --lat-max-bytes 2G
expect_status 2 "railyard-fabric-bench --ops write,write" "$FBENCH" --ops write,write
grep -q -- "'write' is given twice" "$tmp/err" || { echo "FAIL: fabric-bench duplicate --ops: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-fabric-bench --hca-target with tcp" "$FBENCH" --transport tcp --hca-target rxe0
grep -q -- "need --transport verbs" "$tmp/err" || { echo "FAIL: fabric-bench --hca-target tcp: $(cat "$tmp/err")"; failed=1; }
expect_status 0 "railyard-fabric-bench --ops 'write, read' --lat-max-bytes 8 (tcp)" "$FBENCH" --transport tcp \
  --ops 'write, read' --min-bytes 8 --max-bytes 64 --factor 8 --iters 5 --rounds 1 --bw-bytes 4096 --lat-max-bytes 8
[ "$(grep -c '"op":"write",.*"lat_median_us":[0-9]' "$tmp/out")" -eq 1 ] &&
  [ "$(grep -c '"op":"read",.*"size":64,"lat_median_us":null,' "$tmp/out")" -eq 1 ] ||
  { echo "FAIL: fabric-bench 'write, read' printed: $(cat "$tmp/out")"; failed=1; }
expect_status 0 "railyard-fabric-bench --ops writeimm (tcp)" "$FBENCH" --transport tcp --ops writeimm \
  --min-bytes 8 --max-bytes 64 --factor 8 --iters 5 --rounds 1 --bw-bytes 4096
[ "$(grep -c '"op":"writeimm"' "$tmp/out")" -eq 2 ] ||
  { echo "FAIL: fabric-bench writeimm printed: $(cat "$tmp/out")"; failed=1; }

cd "$tmp" || exit 1
expect_status 0 "railyard-config-doc --help" "$DOC" --help
if [ -e "$tmp/--help" ]; then echo "FAIL: railyard-config-doc --help wrote a file named ./--help"; failed=1; fi
grep -q "OUTPUT" "$tmp/out" || { echo "FAIL: railyard-config-doc --help printed no usage"; failed=1; }
expect_status 2 "railyard-config-doc --bogus" "$DOC" --bogus
expect_status 2 "railyard-config-doc a b" "$DOC" a b
expect_status 0 "railyard-config-doc out.md" "$DOC" out.md
# A write error on standard output is exit 1 (it was 0: fwrite's short count was ignored).
if [ -w /dev/full ]; then
  expect_status 1 "railyard-config-doc >/dev/full" sh -c '"$1" >/dev/full' sh "$DOC"
  grep -q "cannot write to standard output" "$tmp/err" || { echo "FAIL: config-doc >/dev/full: $(cat "$tmp/err")"; failed=1; }
fi
grep -q "RAILYARD_SOCKET_IFNAME" "$tmp/out.md" || { echo "FAIL: out.md lacks the table"; failed=1; }
cd - >/dev/null || exit 1

# The Spark fixture has four netdevs and no addresses: all four are rails without a flag.
expect_status 0 "railyard-info --sysfs sysfs-spark" "$INFO" --sysfs "$FIXTURES/sysfs-spark" --no-hwloc --json --listen-ms 0
rails=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rails"]))' "$tmp/out")
if [ "$rails" != 4 ]; then echo "FAIL: railyard-info --sysfs sysfs-spark shows $rails rails, expected 4"; failed=1; else echo "ok: 4 rails in the Spark fixture"; fi

# "Cabling: not listened" says why (it printed one guess for every cause): the fixture, and
# a filter that leaves only loopback (a table rail, never a fabric rail: topology/loopback_rail.h).
expect_status 0 "railyard-info --sysfs sysfs-spark (text)" "$INFO" --sysfs "$FIXTURES/sysfs-spark" --no-hwloc
grep -q "^Cabling: not listened (a fixture: --sysfs)" "$tmp/out" || { echo "FAIL: fixture reason: $(grep Cabling "$tmp/out")"; failed=1; }
expect_status 0 "railyard-info --ifname =lo" "$INFO" --no-hwloc --ifname =lo --listen-ms 100
grep -q "^Cabling: not listened (no fabric rail: .*lo: loopback" "$tmp/out" || { echo "FAIL: loopback reason: $(grep Cabling "$tmp/out")"; failed=1; }
# Loopback the filter names is the LO row, never a numbered rail (new-user trial: "Rails (1)
# NIC0 lo" while the plugin refused lo as a rail).
expect_status 0 "RAILYARD_SOCKET_IFNAME=lo railyard-info --json" env RAILYARD_SOCKET_IFNAME=lo "$INFO" --no-hwloc --listen-ms 0 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["rails"]==[] and d["loopback"]["netdev"]=="lo" and "outside fabric mode" in d["loopback"]["role"], (d["rails"], d.get("loopback"))' "$tmp/out" ||
  { echo "FAIL: RAILYARD_SOCKET_IFNAME=lo: lo is not the LO row alone"; failed=1; }

expect_status 2 "railyardd --interval-ms 100 --dead-ms 50" "$DAEMON" --interval-ms 100 --dead-ms 50
grep -q -- "--dead-ms / RAILYARD_DISCOVERY_DEAD_MS = 50) must be larger than the hello period (--interval-ms / RAILYARD_DISCOVERY_INTERVAL_MS = 100)" "$tmp/err" ||
  { echo "FAIL: railyardd does not name both: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "RAILYARD_DISCOVERY_DEAD_MS=50 railyardd" env RAILYARD_DISCOVERY_DEAD_MS=50 "$DAEMON"
grep -q "RAILYARD_DISCOVERY_DEAD_MS=50 must be larger than RAILYARD_DISCOVERY_INTERVAL_MS=100" "$tmp/err" ||
  { echo "FAIL: railyardd does not name both variables: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyardd --bogus" "$DAEMON" --bogus
# --swap-dir is RAILYARD_SWAP_DIR as a flag (it was refused as unexpected): a missing
# directory is refused naming it.
expect_status 2 "railyardd --swap-dir (missing)" "$DAEMON" --snapshot-only \
  --snapshot-arena kind=a,mode=paging,blob=4096,slots=4 --swap-dir "$tmp/no-such-dir"
grep -q "'$tmp/no-such-dir'" "$tmp/err" || { echo "FAIL: railyardd --swap-dir not used: $(cat "$tmp/err")"; failed=1; }
# Unexpected arguments are named in the order typed (CLI11's own message named them last
# first: "/tmp --swap-dir"; new-user trial). Every tool parses through tools::ParseCommandLine.
for tool in "$DAEMON" "$INFO"; do
  expect_status 2 "$(basename "$tool") --spool-dir /tmp" "$tool" --spool-dir /tmp
  grep -q "not expected: --spool-dir /tmp$" "$tmp/err" ||
    { echo "FAIL: $(basename "$tool") does not name the arguments in order: $(cat "$tmp/err")"; failed=1; }
done
# A flag given twice takes its last value, as railyard-perf's (it was refused "At Most 1"):
# the second --interval-ms is the one checked against --dead-ms.
expect_status 2 "railyardd --interval-ms 10 --interval-ms 100 --dead-ms 50" "$DAEMON" --interval-ms 10 --interval-ms 100 --dead-ms 50
grep -q -- "--interval-ms / RAILYARD_DISCOVERY_INTERVAL_MS = 100" "$tmp/err" ||
  { echo "FAIL: railyardd did not take the last --interval-ms: $(cat "$tmp/err")"; failed=1; }
# A port out of range names the flag and the range (CLI11 said only "could not be converted").
expect_status 2 "railyardd --snapshot-port 99999" "$DAEMON" --snapshot-port 99999
grep -q -- "--snapshot-port.*99999.*0.*65535" "$tmp/err" || { echo "FAIL: railyardd --snapshot-port 99999: $(cat "$tmp/err")"; failed=1; }
# Trial: --relay-port took the fabric relay's port, whose bind then failed at run time
# blaming "another process"; as RAILYARD_RELAY_PORT, it is refused at once.
expect_status 2 "railyardd --relay-port 29519" env -u RAILYARD_FABRIC_RELAY_PORT "$DAEMON" --relay-port 29519
grep -q -- "--relay-port 29519 (it stands for RAILYARD_RELAY_PORT): RAILYARD_RELAY_PORT and RAILYARD_FABRIC_RELAY_PORT are both port 29519" "$tmp/err" ||
  { echo "FAIL: railyardd --relay-port on the fabric relay's port: $(cat "$tmp/err")"; failed=1; }
# Trial: --settle-ms/--linger-ms/--timeout-ms without --wait-hosts were ignored silently.
expect_status 2 "railyardd --linger-ms 5" "$DAEMON" --linger-ms 5
grep -q -- "--linger-ms needs --wait-hosts N" "$tmp/err" || { echo "FAIL: railyardd --linger-ms alone: $(cat "$tmp/err")"; failed=1; }
# Trial: --settle-ms not below --timeout-ms was reported "settled" when the deadline cut the wait.
expect_status 2 "railyardd --wait-hosts 2 --timeout-ms 300" "$DAEMON" --wait-hosts 2 --timeout-ms 300
grep -q -- "--settle-ms 500 (the default) must be less than --timeout-ms 300" "$tmp/err" ||
  { echo "FAIL: railyardd settle >= timeout: $(cat "$tmp/err")"; failed=1; }
# Trial: a tier served alone took (and ignored) discovery and relay flags, and the snapshot
# flags without an arena.
expect_status 2 "railyardd --snapshot-only --relay-port" "$DAEMON" --snapshot-only --snapshot-arena kind=k,mode=raw,blob=4096,slots=1 --relay-port 30000
grep -q -- "--relay-port has no effect with --snapshot-only" "$tmp/err" || { echo "FAIL: --snapshot-only --relay-port: $(cat "$tmp/err")"; failed=1; }
# Trial: a --swap-dir no arena uses (here one that does not exist) was taken without a word.
expect_status 2 "railyardd --swap-dir with raw arenas only" "$DAEMON" --snapshot-only --swap-dir "$tmp/none" \
  --snapshot-arena kind=k,mode=raw,blob=4096,slots=1 --relay-port 30000
grep -q -- "warning: --swap-dir $tmp/none has no effect: no --snapshot-arena is a paging one" "$tmp/err" ||
  { echo "FAIL: --swap-dir with raw arenas only: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyardd --expert-only --wait-hosts" "$DAEMON" --expert-only --expert-store "$tmp" --wait-hosts 2
grep -q -- "--wait-hosts has no effect with --expert-only" "$tmp/err" || { echo "FAIL: --expert-only --wait-hosts: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyardd --snapshot-port alone" "$DAEMON" --snapshot-port 30001
grep -q -- "--snapshot-port needs at least one --snapshot-arena" "$tmp/err" || { echo "FAIL: --snapshot-port alone: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyardd --snapshot-address alone" "$DAEMON" --snapshot-address 127.0.0.1
grep -q -- "--snapshot-address needs at least one --snapshot-arena" "$tmp/err" || { echo "FAIL: --snapshot-address alone: $(cat "$tmp/err")"; failed=1; }
# Trial: one port for two listeners failed later, blaming another process.
expect_status 2 "railyardd, snapshot and expert on one port" "$DAEMON" --expert-only --snapshot-only --expert-store "$tmp" \
  --expert-listen 127.0.0.1:30002 --snapshot-arena kind=k,mode=raw,blob=4096,slots=1 --snapshot-port 30002
grep -q -- "--snapshot-port and --expert-listen are both TCP port 30002" "$tmp/err" || { echo "FAIL: one port twice: $(cat "$tmp/err")"; failed=1; }
# Trial: "snapshot-port N" was announced before an expert store that cannot be served failed.
expect_status 2 "railyardd, a bad expert store beside an arena" "$DAEMON" --expert-only --snapshot-only --expert-store "$tmp/none" \
  --snapshot-arena kind=k,mode=raw,blob=4096,slots=1
if [ -s "$tmp/out" ]; then echo "FAIL: stdout before the expert store failed: $(cat "$tmp/out")"; failed=1; fi
grep -q "$tmp/none" "$tmp/err" || { echo "FAIL: the bad store is not named: $(cat "$tmp/err")"; failed=1; }
# railyardd --help documents its exit statuses like every other tool (it said nothing).
expect_status 0 "railyardd --help" "$DAEMON" --help
grep -q "^Exit status: 0 stopped by SIGTERM/SIGINT" "$tmp/out" || { echo "FAIL: railyardd --help has no exit statuses"; failed=1; }

# Trial D13: a missing key file is said (it was passed over in silence when no rail was
# listened on); exit 1, the report still printed.
expect_status 1 "railyard-info, key file missing" env -u RAILYARD_SOCKET_IFNAME RAILYARD_CLUSTER_KEY_FILE="$tmp/no-key" "$INFO" --no-hwloc --listen-ms 0
grep -q "^Cluster key: UNUSABLE: .*$tmp/no-key" "$tmp/out" || { echo "FAIL: no UNUSABLE key line: $(grep -i key "$tmp/out")"; failed=1; }
grep -q "$tmp/no-key" "$tmp/err" || { echo "FAIL: the key error is not on stderr: $(cat "$tmp/err")"; failed=1; }
expect_status 0 "railyard-info, no key file" env -u RAILYARD_SOCKET_IFNAME -u RAILYARD_CLUSTER_KEY_FILE "$INFO" --no-hwloc --listen-ms 0
grep -q "^Cluster key: none (RAILYARD_CLUSTER_KEY_FILE is unset" "$tmp/out" || { echo "FAIL: no 'Cluster key: none' line"; failed=1; }
# Trial D18: loopback, the tiers' TCP rail while RAILYARD_SOCKET_IFNAME is unset, is listed and
# marked (it stood in "Skipped" only).
grep -q "^  LO  *lo (loopback) " "$tmp/out" || { echo "FAIL: no LO row: $(cat "$tmp/out")"; failed=1; }
grep -qF "LO: loopback, never a fabric rail (its packets never leave this host), whatever RAILYARD_SOCKET_IFNAME (or railyardd --ifname) names; the tiers' TCP rail (127.0.0.1) while neither RAILYARD_SOCKET_IFNAME nor railyardd --ifname is set" "$tmp/out" || { echo "FAIL: LO not explained"; failed=1; }
if grep -q "^  lo: loopback" "$tmp/out"; then echo "FAIL: lo still listed as skipped"; failed=1; fi
expect_status 0 "railyard-info --json, loopback" env -u RAILYARD_SOCKET_IFNAME -u RAILYARD_CLUSTER_KEY_FILE "$INFO" --no-hwloc --listen-ms 0 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["loopback"]["netdev"]=="lo" and "127.0.0.1" in [a["address"] for a in d["loopback"]["addresses"]] and d["cluster_key"]["file"] is None, d["loopback"]' "$tmp/out" ||
  { echo "FAIL: --json has no loopback/cluster_key"; failed=1; }
# Trial D14: '^' and '=' only as NCCL writes them; the rest is a usage error naming the flag/variable.
expect_status 2 "railyard-info --ifname ^" "$INFO" --no-hwloc --ifname '^'
grep -q -- "--ifname='^': '^' with no name after it" "$tmp/err" || { echo "FAIL: --ifname ^: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "RAILYARD_SOCKET_IFNAME=eth0,^docker railyard-info" env RAILYARD_SOCKET_IFNAME='eth0,^docker' "$INFO" --no-hwloc
grep -q "RAILYARD_SOCKET_IFNAME='eth0,^docker': '^' may only lead the list" "$tmp/err" || { echo "FAIL: eth0,^docker: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyardd --ifname ^=" "$DAEMON" --ifname '^='
grep -q -- "--ifname='^=': '^=' with no name after it" "$tmp/err" || { echo "FAIL: railyardd --ifname ^=: $(cat "$tmp/err")"; failed=1; }
expect_status 0 "railyard-info --ifname ^=mgmt0 (an NCCL form)" "$INFO" --no-hwloc --listen-ms 0 --ifname '^=mgmt0'
# New-user trial: a numeric option given a word said "Value abc not in range 0 to 600000".
expect_status 2 "railyard-info --listen-ms abc" "$INFO" --no-hwloc --listen-ms abc
grep -q -- "--listen-ms: 'abc' is not a number" "$tmp/err" || { echo "FAIL: --listen-ms abc: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-info --listen-ms 99999999999" "$INFO" --no-hwloc --listen-ms 99999999999
grep -q -- "--listen-ms: '99999999999' is out of range: expected 0..600000" "$tmp/err" || { echo "FAIL: --listen-ms 99999999999: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-info --listen-ms -1" "$INFO" --no-hwloc --listen-ms -1
grep -q -- "--listen-ms: '-1' is out of range: expected 0..600000" "$tmp/err" || { echo "FAIL: --listen-ms -1: $(cat "$tmp/err")"; failed=1; }
expect_status 2 "railyard-info --listen-ms 1.5" "$INFO" --no-hwloc --listen-ms 1.5
grep -q -- "--listen-ms: '1.5' is not an integer" "$tmp/err" || { echo "FAIL: --listen-ms 1.5: $(cat "$tmp/err")"; failed=1; }
# Bad-input trial: RAILYARD_FABRIC=on with no rail (loopback never is one) is the plugin's
# init error; railyard-info said nothing of it and exited 0.
expect_status 1 "RAILYARD_FABRIC=on, no rail" env -u RAILYARD_CLUSTER_KEY_FILE RAILYARD_FABRIC=on RAILYARD_SOCKET_IFNAME='=lo' "$INFO" --no-hwloc --listen-ms 0
grep -q "the plugin's init would fail here: RAILYARD_FABRIC=on but no interface qualifies as a rail .*lo: loopback" "$tmp/err" ||
  { echo "FAIL: RAILYARD_FABRIC=on, no rail: $(cat "$tmp/err")"; failed=1; }
grep -q "^Mode: none: the plugin's init fails: RAILYARD_FABRIC=on but no interface" "$tmp/out" ||
  { echo "FAIL: RAILYARD_FABRIC=on, no rail: no Mode line: $(grep -i mode "$tmp/out")"; failed=1; }
grep -q "^NCCL comms: none (init fails)" "$tmp/out" || { echo "FAIL: init fails, comms: $(grep -i comms "$tmp/out")"; failed=1; }
# New-user trial: init fails for reasons other than the rails too (a socket filter that
# matches nothing, RAILYARD_TRANSPORT=verbs on a host without RDMA); railyard-info said
# "plain TCP" and exited 0.
expect_status 1 "RAILYARD_SOCKET_IFNAME matching nothing" env -u RAILYARD_CLUSTER_KEY_FILE RAILYARD_SOCKET_IFNAME='=nosuchif0' "$INFO" --no-hwloc --listen-ms 0
grep -q "^Mode: none: the plugin's init fails: socket interface list '=nosuchif0' .* matches no interface" "$tmp/out" ||
  { echo "FAIL: socket filter matching nothing: $(grep -i mode "$tmp/out"; cat "$tmp/err")"; failed=1; }
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  expect_status 1 "RAILYARD_TRANSPORT=verbs without RDMA" env -u RAILYARD_CLUSTER_KEY_FILE RAILYARD_TRANSPORT=verbs RAILYARD_SOCKET_IFNAME='=lo' "$INFO" --no-hwloc --listen-ms 0 --json
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["mode"]; assert m["init_error"].startswith("RAILYARD_TRANSPORT=verbs: no usable RDMA port") and m["comms"] is None and m["fabric_mode"] is False, m' "$tmp/out" ||
    { echo "FAIL: RAILYARD_TRANSPORT=verbs without RDMA: $(head -c 600 "$tmp/out")"; failed=1; }
fi
# The mode and comms the plugin's init would choose (bad-input trial: railyard-info did not
# say which comms run).
expect_status 0 "railyard-info, fabric off, legacy comms" env -u RAILYARD_CLUSTER_KEY_FILE RAILYARD_FABRIC=off RAILYARD_COMMS=legacy "$INFO" --no-hwloc --listen-ms 0
grep -q "^Mode: plain TCP: fabric mode off, 0 usable RDMA port(s) (RAILYARD_FABRIC=off)" "$tmp/out" || { echo "FAIL: no plain Mode line: $(grep -i mode "$tmp/out")"; failed=1; }
grep -q "^NCCL comms: the older per-transport comms (proxy/tcp, proxy/verbs) (RAILYARD_COMMS=legacy)" "$tmp/out" ||
  { echo "FAIL: no legacy comms line: $(grep -i comms "$tmp/out")"; failed=1; }
# The plain TCP mode names its devices (new-user trial: it never said which interface).
expect_status 0 "railyard-info, plain TCP on lo" env -u RAILYARD_CLUSTER_KEY_FILE RAILYARD_FABRIC=off RAILYARD_SOCKET_IFNAME='=lo' "$INFO" --no-hwloc --listen-ms 0
grep -q "^Mode: plain TCP: fabric mode off, .*; its TCP devices: lo$" "$tmp/out" || { echo "FAIL: no TCP devices in the Mode line: $(grep -i mode "$tmp/out")"; failed=1; }
# Trial: "the comms over the fabric" beside "Mode: plain TCP: no fabric rail" read as a contradiction.
expect_status 0 "railyard-info, plain TCP, auto comms" env -u RAILYARD_CLUSTER_KEY_FILE -u RAILYARD_COMMS RAILYARD_FABRIC=auto RAILYARD_SOCKET_IFNAME='=lo' "$INFO" --no-hwloc --listen-ms 0
grep -q "^NCCL comms: the fabric-interface comms (proxy/nccl) over the fabric's TCP transport alone (no fabric mode) (RAILYARD_COMMS=auto; plain TCP" "$tmp/out" ||
  { echo "FAIL: plain TCP comms line: $(grep -i comms "$tmp/out")"; failed=1; }
# Why no fabric rail comes before the devices (trial: "its TCP devices: lo: lo: ..." read
# as if lo were left out of the TCP devices too).
grep -q "^Mode: plain TCP: no fabric rail (.*), 0 usable RDMA port(s) (RAILYARD_FABRIC=auto); its TCP devices: lo$" "$tmp/out" ||
  { echo "FAIL: no-fabric-rail Mode line: $(grep -i '^mode' "$tmp/out")"; failed=1; }
expect_status 0 "railyard-info --json, mode" env -u RAILYARD_CLUSTER_KEY_FILE -u RAILYARD_COMMS RAILYARD_FABRIC=auto RAILYARD_SOCKET_IFNAME='=lo' "$INFO" --no-hwloc --listen-ms 0 --json
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["mode"]; assert m["fabric_mode"] is False and m["fabric_rails"]==0 and m["rdma_ports"]==0 and m["comms"]=="fabric" and m["comms_setting"]=="auto" and m["init_error"] is None and "plain TCP" in m["comms_reason"], m' "$tmp/out" ||
  { echo "FAIL: --json mode: $(cat "$tmp/out" | head -c 600)"; failed=1; }

exit $failed
