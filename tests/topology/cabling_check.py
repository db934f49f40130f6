#!/usr/bin/env python3
"""Cabling discovery on a netns testbed lane (run inside `testbed.sh run`).

Starts railyardd in every host namespace with no interface filter (so the
management bridge must be recognised as a shared segment by the software, not
excluded by hand), waits for each to print its graph, and checks every host's
view against the wiring the testbed built (TESTBED_JSON), which railyardd never
reads: the same hosts, exactly the rail-links that exist (paired by what is
reachable, whatever the interface names or order), the shape, and for every peer
the hop count and the set of shortest-path next hops.

Usage: cabling_check.py RAILYARDD
"""
import collections
import json
import os
import subprocess
import sys


def expected(tb):
    n = tb["hosts_count"]
    links = set()
    for r in tb["rails"]:
        a = (f"h{r['host']}", r["ifname"])
        b = (f"h{r['peer_host']}", r["peer_ifname"])
        links.add(tuple(sorted([a, b])))
    adj = collections.defaultdict(set)
    for (ha, _), (hb, _) in links:
        adj[ha].add(hb)
        adj[hb].add(ha)
    hosts = [f"h{i}" for i in range(n)]
    degs = [len(adj[h]) for h in hosts]
    if all(d == n - 1 for d in degs):
        shape = "mesh"
    elif all(d == 2 for d in degs):
        shape = "ring"
    elif degs.count(1) == 2 and degs.count(2) == n - 2:
        shape = "chain"
    else:
        shape = "partial"

    def dist_from(src):
        d, q = {src: 0}, [src]
        while q:
            h = q.pop(0)
            for m in sorted(adj[h]):
                if m not in d:
                    d[m] = d[h] + 1
                    q.append(m)
        return d

    routes = {}
    for s in hosts:
        routes[s] = {}
        for t in hosts:
            if s == t:
                continue
            dt = dist_from(t)
            hops = dt[s]
            nxt = sorted(m for m in adj[s] if dt.get(m) == hops - 1) if hops > 1 else []
            routes[s][t] = (hops, nxt)
    return hosts, links, shape, routes


def main():
    railyardd = sys.argv[1]
    tb = json.load(open(os.environ["TESTBED_JSON"]))
    hosts, links, shape, routes = expected(tb)
    n = len(hosts)
    procs = []
    for i, ns in enumerate(h["namespace"] for h in tb["hosts"]):
        env = dict(os.environ, RAILYARD_HOST_NAME=f"h{i}")
        env.pop("RAILYARD_SOCKET_IFNAME", None)
        env.pop("NCCL_SOCKET_IFNAME", None)
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, railyardd, "--wait-hosts", str(n),
             "--timeout-ms", "15000", "--linger-ms", "1500"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    failures = []
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=40)
        if p.returncode != 0:
            failures.append(f"h{i}: railyardd exited {p.returncode}: {err.strip()}")
            continue
        g = json.loads(out)
        me = f"h{i}"
        got_hosts = sorted(h["name"] for h in g["hosts"])
        if got_hosts != sorted(hosts):
            failures.append(f"{me}: hosts {got_hosts}, expected {sorted(hosts)}")
        got_links = {tuple(sorted([(l["a"]["name"], l["a"]["ifname"]), (l["b"]["name"], l["b"]["ifname"])]))
                     for l in g["links"]}
        if got_links != links:
            failures.append(f"{me}: links differ: missing {sorted(links - got_links)}, "
                            f"extra {sorted(got_links - links)}")
        if g["shape"] != shape:
            failures.append(f"{me}: shape {g['shape']}, expected {shape}")
        for r in g["routes"]:
            hops, nxt = routes[me][r["name"]]
            if r["hops"] != hops or sorted(r["next_hops"]) != nxt:
                failures.append(f"{me} -> {r['name']}: hops {r['hops']} via {r['next_hops']}, "
                                f"expected {hops} via {nxt}")
            if hops == 1:
                direct = sorted((d["local_if"], d["peer_if"]) for d in r["direct"])
                want = sorted((a[1], b[1]) if a[0] == me else (b[1], a[1])
                              for a, b in links if {a[0], b[0]} == {me, r["name"]})
                if direct != want:
                    failures.append(f"{me} -> {r['name']}: rails {direct}, expected {want}")
    lane = os.environ.get("TESTBED_LANE", "?")
    if failures:
        print(f"cabling on {lane}: {len(failures)} failure(s)")
        for f in failures:
            print("  " + f)
        return 1
    print(f"cabling on {lane}: {n} hosts agree on {len(links)} rail-links, shape {shape}, all routes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
