#!/usr/bin/env python3
"""Self-test of a running testbed, run by `testbed.sh run ... -- selftest.py`.

TESTBED_JSON is the expected truth. Checks that the namespaces hold exactly the
described interfaces (names, ifindexes, addresses, veth peers), that every rail
pings its peer both ways, that nothing else is reachable (no routes, no
forwarding), that management addresses all reach each other, that cut/heal and
down/heal work, that shaping installs tbf, and lane-specific wiring claims.
Exit 0 = pass, 1 = fail.
"""
import concurrent.futures as cf
import ipaddress
import json
import os
import subprocess
import sys
import time

J = json.load(open(os.environ["TESTBED_JSON"]))
TB = os.environ["TESTBED_SH"]
PREFIX = os.environ["TESTBED_PREFIX"]
FAILS = []
T0 = time.monotonic()


def fail(msg):
    FAILS.append(msg)
    print(f"FAIL: {msg}", flush=True)


def ok(msg):
    print(f"ok   {msg}  [{time.monotonic() - T0:.1f}s]", flush=True)


def sh(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} -> {p.returncode}: {p.stderr.strip()}")
    return p


def ipj(ns, *args):
    return json.loads(sh(["ip", "-n", ns, "-j"] + list(args)).stdout or "[]")


def ping(ns, dst):
    """One ping, 1 s timeout. True when answered."""
    return subprocess.run(["ip", "netns", "exec", ns, "ping", "-n", "-q", "-c", "1", "-W", "1", dst],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def ping_many(pairs):
    """[(ns, dst)] -> [bool], in parallel."""
    with cf.ThreadPoolExecutor(max_workers=32) as ex:
        return list(ex.map(lambda p: ping(*p), pairs))


def tb(*args):
    p = subprocess.run([TB] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"testbed.sh {' '.join(map(str, args))} -> {p.returncode}: {p.stderr.strip()}")


def ping_until(ns, dst, want, tries=3):
    """Bounded retry: poll the condition (reachability) at most `tries` times."""
    for _ in range(tries):
        if ping(ns, dst) == want:
            return True
    return False


HOSTS = J["hosts"]
NS = {h["id"]: h["namespace"] for h in HOSTS}
RAILS = J["rails"]


# ------------------------------------------------------------ structure

def check_structure():
    for h in HOSTS:
        ns = h["namespace"]
        links = {l["ifname"]: l for l in ipj(ns, "link", "show")}
        addrs = {a["ifname"]: a for a in ipj(ns, "-4", "addr", "show")}
        want = {i["ifname"]: i for i in h["interfaces"]}
        extra = set(links) - set(want) - {"lo", "mgmt0"}
        missing = (set(want) | {"lo", "mgmt0"}) - set(links)
        if extra or missing:
            fail(f"h{h['id']}: interfaces extra={sorted(extra)} missing={sorted(missing)}")
            continue
        if "UP" not in links["lo"]["flags"]:
            fail(f"h{h['id']}: lo is not up")
        if links["mgmt0"]["ifindex"] != h["mgmt_ifindex"]:
            fail(f"h{h['id']}: mgmt0 ifindex {links['mgmt0']['ifindex']} != {h['mgmt_ifindex']}")
        got_mgmt = [a["local"] for a in addrs.get("mgmt0", {}).get("addr_info", [])]
        if got_mgmt != [h["mgmt_ip"]]:
            fail(f"h{h['id']}: mgmt0 has {got_mgmt}, want {h['mgmt_ip']}")
        for name, i in want.items():
            l = links[name]
            if l["ifindex"] != i["ifindex"]:
                fail(f"h{h['id']} {name}: ifindex {l['ifindex']} != {i['ifindex']}")
            if "UP" not in l["flags"]:
                fail(f"h{h['id']} {name}: not up")
            got = [f"{a['local']}/{a['prefixlen']}" for a in addrs.get(name, {}).get("addr_info", [])]
            exp = [f"{i['ip']}/{i['prefix_len']}"] if i["ip"] else []
            if got != exp:
                fail(f"h{h['id']} {name}: addresses {got}, want {exp}")
            if i["cable"] is not None:
                if l.get("link_index") != i["peer_ifindex"]:
                    fail(f"h{h['id']} {name}: veth peer ifindex {l.get('link_index')} != {i['peer_ifindex']}")
                if "LOWER_UP" not in l["flags"]:
                    fail(f"h{h['id']} {name}: no carrier")
            elif "NO-CARRIER" not in l["flags"]:
                fail(f"h{h['id']} {name}: uncabled port has carrier")
        # routes: only the connected /24s of this host's own interfaces, no gateway
        own = {str(ipaddress.ip_interface(f"{i['ip']}/{i['prefix_len']}").network)
               for i in h["interfaces"] if i["ip"]} | {J["mgmt"]["subnet"]}
        for r in ipj(ns, "-4", "route", "show"):
            if r.get("gateway") or r["dst"] not in own:
                fail(f"h{h['id']}: unexpected route {r}")
        fwd = sh(["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.ip_forward"]).stdout.strip()
        if fwd != "0":
            fail(f"h{h['id']}: ip_forward={fwd}")
    # the JSON's own consistency: each rail's ends are in the hosts' interface lists
    for rl in RAILS:
        for host, ifn, ip in ((rl["host"], rl["ifname"], rl["ip"]),
                              (rl["peer_host"], rl["peer_ifname"], rl["peer_ip"])):
            i = [x for x in HOSTS[host]["interfaces"] if x["ifname"] == ifn]
            if not i or i[0]["ip"] != ip:
                fail(f"JSON rail {rl['id']}: h{host} {ifn} {ip} not in hosts[].interfaces")
    ok(f"structure: {len(HOSTS)} hosts, {len(J['cables'])} cables, {len(RAILS)} rail links match JSON")


# ------------------------------------------------------------ reachability

def check_rails_ping():
    pairs = [(rl["namespace"], rl["peer_ip"]) for rl in RAILS] + \
            [(rl["peer_namespace"], rl["ip"]) for rl in RAILS]
    res = ping_many(pairs)
    bad = [p for p, r in zip(pairs, res) if not r]
    for ns, dst in bad:
        fail(f"rail ping {ns} -> {dst} failed")
    ok(f"every rail pings its peer both ways ({len(pairs)} pings)")


def check_isolation():
    # from every host, every rail address that is not on one of its own links must be unreachable
    all_addrs = [(rl["host"], rl["ip"], rl["subnet"]) for rl in RAILS] + \
                [(rl["peer_host"], rl["peer_ip"], rl["subnet"]) for rl in RAILS]
    pairs = []
    for h in HOSTS:
        mine = {str(ipaddress.ip_interface(f"{i['ip']}/24").network) for i in h["interfaces"] if i["ip"]}
        for owner, ip, subnet in all_addrs:
            if owner != h["id"] and subnet not in mine:
                pairs.append((h["namespace"], ip))
    res = ping_many(pairs)
    for p, r in zip(pairs, res):
        if r:
            fail(f"{p[0]} reaches {p[1]}, which is on no link of its own")
    ok(f"isolation: {len(pairs)} off-link rail addresses unreachable")


def two_hop():
    """(a, ab_rail_from_a, b, bc_rail_from_b, c): a path a-b-c over two different cables."""
    def from_host(rl, h):  # the rail seen from host h: (my ip, peer host, peer ip)
        if rl["host"] == h:
            return rl["ip"], rl["peer_host"], rl["peer_ip"]
        return rl["peer_ip"], rl["host"], rl["ip"]
    for b in HOSTS:
        mine = [rl for rl in RAILS if b["id"] in (rl["host"], rl["peer_host"]) and rl["lane"] == 0]
        for x in mine:
            for y in mine:
                if x["cable"] != y["cable"]:
                    bx, a, ax = from_host(x, b["id"])
                    by, c, cy = from_host(y, b["id"])
                    if a != c:
                        return a, ax, bx, b["id"], by, c, cy
    return None


def check_no_forwarding():
    hop = two_hop()
    if hop is None:
        ok("no-forwarding: no two-hop path in this topology (skipped)")
        return
    a, ax, bx, b, by, c, cy = hop
    na, nb, nc = NS[a], NS[b], NS[c]
    # routes both ways through b: only b's forwarding can now carry a <-> c
    sh(["ip", "-n", na, "route", "add", f"{cy}/32", "via", bx])
    sh(["ip", "-n", nc, "route", "add", f"{ax}/32", "via", by])
    try:
        if ping(na, cy):
            fail(f"h{a} reaches h{c} ({cy}) through h{b}: h{b} forwards")
        # positive control: with forwarding on in b the same ping works, so the check has teeth
        sh(["ip", "netns", "exec", nb, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        try:
            if not ping_until(na, cy, True):
                fail(f"control: h{a} -> h{c} via h{b} with forwarding on did not work")
        finally:
            sh(["ip", "netns", "exec", nb, "sysctl", "-qw", "net.ipv4.ip_forward=0"])
        if ping(na, cy):
            fail(f"h{a} still reaches h{c} after forwarding went off again")
    finally:
        sh(["ip", "-n", na, "route", "del", f"{cy}/32"], check=False)
        sh(["ip", "-n", nc, "route", "del", f"{ax}/32"], check=False)
    ok(f"no-forwarding: h{a} -> h{b} -> h{c} blocked (and works when h{b} forwards)")


def check_mgmt():
    pairs = [(h["namespace"], g["mgmt_ip"]) for h in HOSTS for g in HOSTS if g is not h]
    res = ping_many(pairs)
    for p, r in zip(pairs, res):
        if not r:
            fail(f"mgmt ping {p[0]} -> {p[1]} failed")
    ok(f"management network: {len(pairs)} pings")


# ------------------------------------------------------------ faults, shaping

def rails_of(cable, lane=None):
    return [rl for rl in RAILS if rl["cable"] == cable and (lane is None or rl["lane"] == lane)]


def both_ways(rl, want):
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        r = list(ex.map(lambda p: ping_until(p[0], p[1], want),
                        [(rl["namespace"], rl["peer_ip"]), (rl["peer_namespace"], rl["ip"])]))
    return all(r)


def check_cut_heal():
    R = J["rails_per_cable"]
    L = len(J["cables"]) - 1           # the last cable (a ring's wrap-around one)
    lane = R - 1
    victim = rails_of(L, lane)[0]
    others = [rl for rl in RAILS if rl is not victim]
    tb("cut", L, lane)
    if not both_ways(victim, False):
        fail(f"cut {L} {lane}: rail still answers")
    # the link stays up: a cut is not a down
    st = ipj(victim["namespace"], "link", "show", "dev", victim["ifname"])[0]
    if "LOWER_UP" not in st["flags"]:
        fail(f"cut {L} {lane}: {victim['ifname']} lost carrier (cut must keep link up)")
    res = ping_many([(rl["namespace"], rl["peer_ip"]) for rl in others])
    if not all(res):
        fail(f"cut {L} {lane}: other rails broke too")
    tb("heal", L, lane)
    if not both_ways(victim, True):
        fail(f"heal {L} {lane}: rail does not answer")
    # a whole cable
    tb("cut", 0)
    if any(ping_many([(rl["namespace"], rl["peer_ip"]) for rl in rails_of(0)])):
        fail("cut 0: some rail of cable 0 still answers")
    tb("heal", 0)
    if not all(both_ways(rl, True) for rl in rails_of(0)):
        fail("heal 0: cable 0 does not answer")
    left = sh(["ip", "netns", "exec", victim["namespace"], "nft", "list", "ruleset"]).stdout
    if "cut_" in left:
        fail(f"heal left nft chains behind: {left}")
    ok(f"cut/heal: rail {L}/{lane} and all of cable 0")


def check_down_heal():
    rl = rails_of(0, 0)[0]
    tb("down", 0, 0)
    for ns, ifn in ((rl["namespace"], rl["ifname"]), (rl["peer_namespace"], rl["peer_ifname"])):
        st = ipj(ns, "link", "show", "dev", ifn)[0]
        if "UP" in st["flags"]:
            fail(f"down 0 0: {ns} {ifn} still up")
    if not both_ways(rl, False):
        fail("down 0 0: rail still answers")
    tb("heal", 0, 0)
    if not both_ways(rl, True):
        fail("heal after down 0 0: rail does not answer")
    ok("down/heal: rail 0/0")


def qdisc(ns, ifn):
    q = ipj(ns, "link", "show", "dev", ifn)  # make sure the device exists
    out = json.loads(sh(["tc", "-n", ns, "-j", "qdisc", "show", "dev", ifn, "root"]).stdout or "[]")
    return out[0] if out and q else {}


def rail_ends():
    for rl in RAILS:
        yield rl["namespace"], rl["ifname"]
        yield rl["peer_namespace"], rl["peer_ifname"]


def check_shaping():
    rate = J["rate"]
    for ns, ifn in rail_ends():
        kind = qdisc(ns, ifn).get("kind")
        if rate and kind != "tbf":
            fail(f"--rate {rate}: {ns} {ifn} has qdisc {kind}, not tbf")
        if not rate and kind == "tbf":
            fail(f"no --rate, yet {ns} {ifn} has tbf")
    # shape subcommand: one rail to 100mbit, then off (or back to --rate)
    rl = rails_of(0, 0)[0]
    tb("shape", 0, 0, "100mbit")
    for ns, ifn in ((rl["namespace"], rl["ifname"]), (rl["peer_namespace"], rl["peer_ifname"])):
        q = qdisc(ns, ifn)
        if q.get("kind") != "tbf" or q.get("options", {}).get("rate") != 12500000:
            fail(f"shape 0 0 100mbit: {ns} {ifn} qdisc {q}")
    if not both_ways(rl, True):
        fail("shaped rail does not answer")
    tb("shape", 0, 0, rate or "none")
    kind = qdisc(rl["namespace"], rl["ifname"]).get("kind")
    if (kind == "tbf") != bool(rate):
        fail(f"shape 0 0 {rate or 'none'}: qdisc is {kind}")
    ok(f"shaping: --rate {rate or '(none)'} as described; shape subcommand sets and clears tbf")


# ------------------------------------------------------------ lane claims

def check_wiring():
    cables = J["cables"]
    if J["wiring"] == "p0p0":
        same = [c for c in cables if c["ports"][0] == c["ports"][1]]
        p0 = [c for c in cables if c["ports"] == [0, 0]]
        if len(p0) < len(HOSTS) // 2 or not same:
            fail(f"p0p0 wiring: only {len(p0)} p0-p0 cables: {cables}")
        if J["topology"] == "ring" and len(HOSTS) % 2 == 1 and all(
                c["ports"][0] == c["ports"][1] for c in cables):
            fail("odd ring with p0p0 wiring cannot have every cable same-port")
    elif J["topology"] in ("ring", "chain"):
        for c in cables:
            if c["phys_ports"] != [1, 0]:
                fail(f"default {J['topology']} wiring: cable {c['id']} is {c['phys_ports']}, want [1, 0]")
    if J["topology"] == "mesh" and len(cables) != len(HOSTS) * (len(HOSTS) - 1) // 2:
        fail("mesh: wrong number of cables")
    if J["shuffle_ports"]:
        # names differ from physical order on some host, ifindex order from name order on another
        renamed = [h for h in HOSTS if any(i["port"] != i["phys_port"] for i in h["interfaces"])]
        reordered = []
        for h in HOSTS:
            links = [l for l in ipj(h["namespace"], "link", "show") if l["ifname"] not in ("lo", "mgmt0")]
            by_index = [l["ifname"] for l in sorted(links, key=lambda l: l["ifindex"])]
            if by_index != sorted(by_index):
                reordered.append(h["id"])
        if not renamed or not reordered:
            fail(f"shuffle: renamed hosts {[h['id'] for h in renamed]}, reordered {reordered}")
        # some cable must join differently numbered ports or rails, else shuffling proves nothing
        if all(rl["ifname"] == rl["peer_ifname"] for rl in RAILS):
            fail("shuffle: every rail joins same-named interfaces")
    ok(f"wiring claims ({J['topology']}, wiring={J['wiring']}, shuffle={J['shuffle_ports']})")


def main():
    print(f"selftest: testbed {PREFIX} lane={J.get('lane')} topo={J['topology']} "
          f"hosts={len(HOSTS)} rails/cable={J['rails_per_cable']}", flush=True)
    for step in (check_structure, check_wiring, check_rails_ping, check_isolation, check_mgmt,
                 check_no_forwarding, check_shaping, check_cut_heal, check_down_heal,
                 check_rails_ping):
        try:
            step()
        except Exception as e:  # a broken step is a failure, not a crash
            fail(f"{step.__name__}: {e}")
    print(f"selftest: {'FAILED' if FAILS else 'passed'} in {time.monotonic() - T0:.1f}s "
          f"({len(FAILS)} failures)", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
