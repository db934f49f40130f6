#!/usr/bin/env python3
"""Helper for testbed.sh: plans a netns cluster, writes its JSON description and
the shell commands that build it, and runs the link subcommands (cut, heal,
down, shape) against a built testbed.

Only testbed.sh calls this. Standard library only. See README.md for the model.
"""
import argparse
import ipaddress
import json
import re
import shlex
import subprocess
import sys

SCHEMA_VERSION = 1
MAX_HOSTS = 64


class PlanError(Exception):
    pass


# ---------------------------------------------------------------- topology

def parse_edges(text, hosts):
    """'0-1,1-2' or with explicit ports '0:1-1:0' -> [(a, pa|None, b, pb|None)]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"(\d+)(?::p?(\d+))?-(\d+)(?::p?(\d+))?", item)
        if not m:
            raise PlanError(f"bad edge '{item}' (want A-B or A:PORT-B:PORT)")
        a, pa, b, pb = m.groups()
        a, b = int(a), int(b)
        if a == b:
            raise PlanError(f"edge '{item}' joins a host to itself")
        if not (0 <= a < hosts and 0 <= b < hosts):
            raise PlanError(f"edge '{item}' names a host outside 0..{hosts - 1}")
        out.append((a, None if pa is None else int(pa), b, None if pb is None else int(pb)))
    if not out:
        raise PlanError("--edges lists no cable")
    return out


def cable_ends(topo, hosts, edges):
    """Return [(a, pa, b, pb)]: the hosts each cable joins, in cable order, and the
    physical port each end is pinned to by the topology's default wiring
    (None = pick later)."""
    if topo == "ring":
        if hosts < 2:
            raise PlanError("a ring needs at least 2 hosts")
        # cable L joins host L port 1 to host L+1 port 0 (the last one wraps to host 0)
        return [(L, 1, (L + 1) % hosts, 0) for L in range(hosts)]
    if topo == "chain":
        if hosts < 2:
            raise PlanError("a chain needs at least 2 hosts")
        return [(L, 1, L + 1, 0) for L in range(hosts - 1)]
    if topo == "mesh":
        if hosts < 2:
            raise PlanError("a mesh needs at least 2 hosts")
        # host i reaches peer j on port (j-1 if j > i else j): its peers in id order
        return [(i, j - 1, j, i) for i in range(hosts) for j in range(i + 1, hosts)]
    if topo == "edges":
        return [(a, pa, b, pb) for a, pa, b, pb in parse_edges(edges, hosts)]
    raise PlanError(f"unknown topology '{topo}'")


def assign_ports(ends, hosts, nports, wiring, explicit):
    """Give every cable end a physical port. explicit: ports given in --edges stay."""
    used = [set() for _ in range(hosts)]
    result = [None] * len(ends)
    # explicit ports first, so greedy choices cannot steal them
    for i, (a, pa, b, pb) in enumerate(ends):
        if explicit and pa is not None and pb is not None:
            result[i] = (pa, pb)
        for h, p in ((a, pa), (b, pb)):
            if explicit and p is not None:
                if p in used[h]:
                    raise PlanError(f"host {h} port {p} is used by two cables")
                used[h].add(p)
    for i, (a, pa, b, pb) in enumerate(ends):
        if result[i] is not None:
            continue
        fa = None if not explicit else pa
        fb = None if not explicit else pb
        if wiring == "p0p0" and fa is None and fb is None:
            # the lowest port index free on both ends; else each end its lowest free
            common = [k for k in range(nports) if k not in used[a] and k not in used[b]]
            if common:
                fa = fb = common[0]
        elif wiring == "default" and not explicit:
            fa, fb = pa, pb
        if fa is None:
            fa = next((k for k in range(nports) if k not in used[a]), None)
        if fa is None:
            raise PlanError(f"host {a} has no free port (it has {nports})")
        used[a].add(fa)
        if fb is None:
            fb = next((k for k in range(nports) if k not in used[b]), None)
        if fb is None:
            raise PlanError(f"host {b} has no free port (it has {nports})")
        used[b].add(fb)
        result[i] = (fa, fb)
    for i, (pa, pb) in enumerate(result):
        a, b = ends[i][0], ends[i][2]
        if pa >= nports or pb >= nports:
            raise PlanError(f"cable {i}: port out of range (hosts have ports 0..{nports - 1})")
    # no port used twice (default wirings are collision-free by construction)
    seen = set()
    for i, (pa, pb) in enumerate(result):
        for h, p in ((ends[i][0], pa), (ends[i][2], pb)):
            if (h, p) in seen:
                raise PlanError(f"host {h} port {p} is used by two cables")
            seen.add((h, p))
    return result


def parse_rate_bits(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)", rate.lower())
    if not m:
        raise PlanError(f"bad rate '{rate}' (want e.g. 200mbit, 1gbit, 500kbit)")
    mult = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m.group(2)]
    bits = float(m.group(1)) * mult
    if bits < 8000:
        raise PlanError(f"rate '{rate}' is too low")
    return int(bits)


def tbf_args(rate):
    """tc tbf arguments for a rate: burst = 10 ms worth of bytes, at least 16 kB."""
    bits = parse_rate_bits(rate)
    burst = max(16000, bits // 8 // 100)
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]


def plan(args):
    H = args.hosts
    R = args.rails
    if not 2 <= H <= MAX_HOSTS:
        raise PlanError(f"--hosts must be 2..{MAX_HOSTS}")
    if not 1 <= R <= 8:
        raise PlanError("--rails must be 1..8")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,23}", args.prefix):
        raise PlanError("--prefix must be a letter then up to 23 letters, digits or _")
    if args.wiring not in ("default", "p0p0"):
        raise PlanError("--wiring must be default or p0p0")
    data_net = ipaddress.ip_network(args.data_net + ".0.0/16")
    mgmt_net = ipaddress.ip_network(args.mgmt_net + ".0/24")
    if data_net.overlaps(mgmt_net):
        raise PlanError("--data-net and --mgmt-net overlap")
    if H + 1 > 254:
        raise PlanError("too many hosts for a /24 management network")
    if args.rate:
        tbf_args(args.rate)  # validate

    explicit = args.topo == "edges"
    ends = cable_ends(args.topo, H, args.edges)
    degree = [0] * H
    maxport = -1
    for a, pa, b, pb in ends:
        degree[a] += 1
        degree[b] += 1
        if explicit:
            maxport = max(maxport, pa if pa is not None else -1, pb if pb is not None else -1)
    nports = args.ports or max(2, max(degree), maxport + 1)
    if nports > 16:
        raise PlanError("more than 16 ports per host")
    if max(degree) > nports:
        raise PlanError(f"a host has {max(degree)} cables but only {nports} ports")
    ports = assign_ports(ends, H, nports, args.wiring, explicit)
    if len(ends) * R > 256:
        raise PlanError(f"{len(ends)} cables x {R} rails = {len(ends) * R} rail links; "
                        "the /16 data range has room for 256 (one /24 each)")

    def shuffled(h):
        return args.shuffle_ports and h % 2 == 1

    def port_name(h, phys):  # the port number a host's interface names show
        return nports - 1 - phys if shuffled(h) else phys

    def rail_name(h, lane):
        return R - 1 - lane if shuffled(h) else lane

    def descending(h):  # ifindex order opposite to name order
        return args.shuffle_ports and h % 4 in (2, 3)

    ns = [f"{args.prefix}-h{h}" for h in range(H)]
    sw = f"{args.prefix}-sw"

    # every (host, physical port, lane) gets an interface; cabled or not
    ifaces = {}  # (h, phys_port, lane) -> dict
    for h in range(H):
        for p in range(nports):
            for r in range(R):
                ifaces[(h, p, r)] = {
                    "ifname": f"p{port_name(h, p)}r{rail_name(h, r)}",
                    "port": port_name(h, p), "rail": rail_name(h, r),
                    "phys_port": p, "lane": r,
                    "cable": None, "ip": None, "prefix_len": None,
                    "peer_host": None, "peer_ifname": None, "peer_ip": None,
                }
    # ifindex: lo is 1; data interfaces from 10 in name order (or reversed);
    # mgmt0 is 2 unless the host enumerates descending, then it comes last
    hosts_json = []
    for h in range(H):
        mine = sorted((v for k, v in ifaces.items() if k[0] == h),
                      key=lambda v: (v["port"], v["rail"]), reverse=descending(h))
        for i, v in enumerate(mine):
            v["ifindex"] = 10 + i
        mgmt_index = 10 + len(mine) if descending(h) else 2
        hosts_json.append({
            "id": h, "namespace": ns[h],
            "mgmt_ifname": "mgmt0", "mgmt_ifindex": mgmt_index,
            "mgmt_ip": str(mgmt_net.network_address + h + 1), "mgmt_prefix_len": 24,
            "ports": nports, "shuffled_names": shuffled(h),
            "ifindex_descending": descending(h),
            "interfaces": None,  # filled below
        })

    d0, d1 = data_net.network_address.packed[:2]
    cables_json, rails_json = [], []
    for L, ((a, _, b, _), (pa, pb)) in enumerate(zip(ends, ports)):
        rail_ids = []
        for r in range(R):
            k = L * R + r
            ia, ib = ifaces[(a, pa, r)], ifaces[(b, pb, r)]
            ipa, ipb = f"{d0}.{d1}.{k}.1", f"{d0}.{d1}.{k}.2"
            for me, peer, myip, pip, ph in ((ia, ib, ipa, ipb, b), (ib, ia, ipb, ipa, a)):
                me.update(cable=L, ip=myip, prefix_len=24, peer_host=ph,
                          peer_ifname=peer["ifname"], peer_ip=pip, peer_ifindex=peer["ifindex"])
            rails_json.append({
                "id": k, "cable": L, "lane": r, "subnet": f"{d0}.{d1}.{k}.0/24",
                "host": a, "namespace": ns[a], "ifname": ia["ifname"], "ifindex": ia["ifindex"],
                "ip": ipa, "prefix_len": 24, "cidr": f"{ipa}/24",
                "peer_host": b, "peer_namespace": ns[b], "peer_ifname": ib["ifname"],
                "peer_ifindex": ib["ifindex"], "peer_ip": ipb, "peer_cidr": f"{ipb}/24",
            })
            rail_ids.append(k)
        cables_json.append({
            "id": L, "hosts": [a, b],
            "ports": [port_name(a, pa), port_name(b, pb)],
            "phys_ports": [pa, pb], "rails": rail_ids,
        })
    for h in range(H):
        hosts_json[h]["interfaces"] = sorted(
            (dict(v) for k, v in ifaces.items() if k[0] == h), key=lambda v: v["ifindex"])

    desc = {
        "version": SCHEMA_VERSION,
        "prefix": args.prefix,
        "lane": args.lane or None,
        "topology": args.topo,
        "edges": args.edges if args.topo == "edges" else None,
        "hosts_count": H, "rails_per_cable": R, "ports_per_host": nports,
        "wiring": args.wiring, "shuffle_ports": bool(args.shuffle_ports),
        "rate": args.rate or None,
        "data_net": str(data_net),
        "mgmt": {"namespace": sw, "bridge": "mgmt", "subnet": str(mgmt_net)},
        "hosts": hosts_json, "cables": cables_json, "rails": rails_json,
    }
    return desc


def build_script(desc):
    """Shell commands (bash -e) that build what desc describes."""
    q = shlex.quote
    sw = desc["mgmt"]["namespace"]
    lines = ["set -e"]
    all_ns = [h["namespace"] for h in desc["hosts"]] + [sw]
    for n in all_ns:
        lines.append(f"ip netns add {q(n)}")
    for n in all_ns:
        # IPv4 only, no forwarding; strict per-interface ARP as multi-rail hosts use
        lines.append(
            f"ip netns exec {q(n)} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
            "net.ipv6.conf.default.disable_ipv6=1 net.ipv4.ip_forward=0 "
            "net.ipv4.conf.all.forwarding=0 net.ipv4.conf.default.forwarding=0 "
            "net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 >/dev/null")
        lines.append(f"ip -n {q(n)} link set lo up")
    lines.append(f"ip -n {q(sw)} link add mgmt type bridge stp_state 0 forward_delay 0")
    lines.append(f"ip -n {q(sw)} link set mgmt up")
    for h in desc["hosts"]:
        n = h["namespace"]
        lines.append(f"ip link add mgmt0 index {h['mgmt_ifindex']} netns {q(n)} type veth "
                     f"peer name h{h['id']} netns {q(sw)}")
        lines.append(f"ip -n {q(sw)} link set h{h['id']} master mgmt up")
    byname = {}
    for h in desc["hosts"]:
        for i in h["interfaces"]:
            byname[(h["id"], i["ifname"])] = i
    for rl in desc["rails"]:
        lines.append(
            f"ip link add {rl['ifname']} index {rl['ifindex']} netns {q(rl['namespace'])} type veth "
            f"peer name {rl['peer_ifname']} index {rl['peer_ifindex']} netns {q(rl['peer_namespace'])}")
    # uncabled ports: a veth whose peer is parked, down, in the switch namespace,
    # so the host sees NO-CARRIER like an empty QSFP cage
    for h in desc["hosts"]:
        for i in h["interfaces"]:
            if i["cable"] is None:
                lines.append(
                    f"ip link add {i['ifname']} index {i['ifindex']} netns {q(h['namespace'])} "
                    f"type veth peer name x{h['id']}p{i['phys_port']}l{i['lane']} netns {q(sw)}")
    for h in desc["hosts"]:
        n = h["namespace"]
        batch = [f"address add {h['mgmt_ip']}/{h['mgmt_prefix_len']} dev mgmt0", "link set mgmt0 up"]
        for i in h["interfaces"]:
            if i["ip"]:
                batch.append(f"address add {i['ip']}/{i['prefix_len']} dev {i['ifname']}")
            batch.append(f"link set {i['ifname']} up")
        lines.append(f"ip -n {q(n)} -batch - <<'EOF'\n" + "\n".join(batch) + "\nEOF")
    if desc["rate"]:
        args = " ".join(tbf_args(desc["rate"]))
        for h in desc["hosts"]:
            for i in h["interfaces"]:
                if i["ip"]:
                    lines.append(f"tc -n {q(h['namespace'])} qdisc replace dev {i['ifname']} root {args}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- overlap check

def root_prefixes():
    nets = []
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        m = re.search(r"\sinet\s+(\S+)", line)
        if m:
            nets.append((ipaddress.ip_interface(m.group(1)).network, "address " + m.group(1)))
    out = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in ("local", "broadcast", "unicast", "multicast", "anycast",
                        "blackhole", "unreachable", "prohibit", "throw"):
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            nets.append((ipaddress.ip_network(words[0], strict=False), "route " + line.strip()))
        except ValueError:
            pass
    return nets


def cmd_check_overlap(a):
    mine = [ipaddress.ip_network(a.data_net + ".0.0/16"), ipaddress.ip_network(a.mgmt_net + ".0/24")]
    bad = [(m, why) for net, why in root_prefixes() for m in mine if m.overlaps(net)]
    for m, why in bad:
        print(f"testbed: range {m} overlaps this machine's {why}", file=sys.stderr)
    return 1 if bad else 0


# ---------------------------------------------------------------- link subcommands

def run(cmd, check=True, stdin=None):
    p = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if check and p.returncode != 0:
        raise PlanError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p


def select_rails(desc, cable, rail):
    cables = {c["id"]: c for c in desc["cables"]}
    if cable not in cables:
        raise PlanError(f"no cable {cable} (cables are 0..{len(cables) - 1})")
    rails = [r for r in desc["rails"] if r["cable"] == cable]
    if rail is not None:
        rails = [r for r in rails if r["lane"] == rail]
        if not rails:
            raise PlanError(f"cable {cable} has no rail {rail} (rails are 0..{desc['rails_per_cable'] - 1})")
    return rails


def ends(rl):
    return [(rl["namespace"], rl["ifname"]), (rl["peer_namespace"], rl["peer_ifname"])]


def nft_chain(ifname, hook):
    return f"cut_{hook}_{ifname}"


def cmd_link(a):
    desc = json.load(open(a.json))
    rails = select_rails(desc, a.cable, a.rail)
    for rl in rails:
        for ns, ifn in ends(rl):
            if a.op == "cut":
                # a cut cable with the link still up: drop everything, ARP included,
                # both in and out, on this end (and the same on the other end)
                script = "add table netdev railyard\n" + "".join(
                    f"add chain netdev railyard {nft_chain(ifn, hook)} "
                    f"{{ type filter hook {hook} device \"{ifn}\" priority -500; policy drop; }}\n"
                    for hook in ("ingress", "egress"))
                run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=script)
            elif a.op == "heal":
                for hook in ("ingress", "egress"):
                    run(["ip", "netns", "exec", ns, "nft", "delete", "chain", "netdev", "railyard",
                         nft_chain(ifn, hook)], check=False)
                run(["ip", "-n", ns, "link", "set", ifn, "up"])
            elif a.op == "down":
                run(["ip", "-n", ns, "link", "set", ifn, "down"])
            elif a.op == "shape":
                if a.rate in ("none", "off"):
                    run(["tc", "-n", ns, "qdisc", "del", "dev", ifn, "root"], check=False)
                else:
                    run(["tc", "-n", ns, "qdisc", "replace", "dev", ifn, "root"] + tbf_args(a.rate))
            else:
                raise PlanError(f"unknown op {a.op}")
    # after heal, both ends are up again: veth carrier is synchronous on link up
    return 0


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(prog="testbed.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--topo", default="ring")
    p.add_argument("--hosts", type=int, default=0, help="default 4; with --edges, max id + 1")
    p.add_argument("--rails", type=int, default=1)
    p.add_argument("--ports", type=int, default=0)
    p.add_argument("--edges", default="")
    p.add_argument("--wiring", default="default")
    p.add_argument("--shuffle-ports", action="store_true")
    p.add_argument("--rate", default="")
    p.add_argument("--prefix", required=True)
    p.add_argument("--lane", default="")
    p.add_argument("--data-net", default="10.201")
    p.add_argument("--mgmt-net", default="10.200.0")
    p.add_argument("--json-out", required=True)
    p.add_argument("--script-out", required=True)
    o = sub.add_parser("check-overlap")
    o.add_argument("--data-net", default="10.201")
    o.add_argument("--mgmt-net", default="10.200.0")
    lk = sub.add_parser("link")
    lk.add_argument("--json", required=True)
    lk.add_argument("op", choices=["cut", "heal", "down", "shape"])
    lk.add_argument("cable", type=int)
    lk.add_argument("rail", nargs="?")
    lk.add_argument("rate", nargs="?")
    a = ap.parse_args()
    try:
        if a.cmd == "plan":
            for v, what in ((a.data_net, "--data-net (want A.B)"), (a.mgmt_net, "--mgmt-net (want A.B.C)")):
                want = 2 if what.startswith("--data") else 3
                parts = v.split(".")
                if len(parts) != want or not all(x.isdigit() and int(x) < 256 for x in parts):
                    raise PlanError(f"bad {what}: '{v}'")
            if not a.hosts:
                a.hosts = 4
                if a.topo == "edges":
                    ids = [int(x) for x in re.findall(r"(?:^|[,-])\s*(\d+)", a.edges)]
                    a.hosts = max(ids) + 1 if ids else 0
            desc = plan(a)
            with open(a.json_out, "w") as f:
                json.dump(desc, f, indent=1)
                f.write("\n")
            with open(a.script_out, "w") as f:
                f.write(build_script(desc))
            return 0
        if a.cmd == "check-overlap":
            return cmd_check_overlap(a)
        if a.cmd == "link":
            # shape takes: L [r] RATE ; others: L [r]
            if a.op == "shape":
                if a.rate is None:
                    if a.rail is None:
                        raise PlanError("shape needs: CABLE [RAIL] RATE|none")
                    a.rate, a.rail = a.rail, None
            elif a.rate is not None:
                raise PlanError(f"{a.op} takes: CABLE [RAIL]")
            if a.rail is not None:
                if not a.rail.isdigit():
                    raise PlanError(f"bad rail '{a.rail}'")
                a.rail = int(a.rail)
            if a.op == "shape" and a.rate not in ("none", "off"):
                tbf_args(a.rate)
            return cmd_link(a)
    except PlanError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
