#!/usr/bin/env python3
"""Prints the shell commands that make a testbed route IP between non-adjacent hosts
(how switchless clusters run MPI without Railyard): ip_forward=1 and rp_filter=0 on
every host, and a route on every host to every data subnet it is not on, via the
neighbour on a shortest path (the neighbour's address on the same lane when a cable
has it). Reads TESTBED_JSON (the testbed's own description: this is the baseline's
setup, not software under test)."""
import collections, json, os

tb = json.load(open(os.environ["TESTBED_JSON"]))
hosts = {h["id"]: h for h in tb["hosts"]}
links = tb["rails"]  # one per rail link: host/peer_host, ip/peer_ip, subnet, lane
adj = collections.defaultdict(set)
for l in links:
    adj[l["host"]].add(l["peer_host"]); adj[l["peer_host"]].add(l["host"])
def first_hop(src, dsts):
    prev, q = {src: None}, collections.deque([src])
    while q:
        x = q.popleft()
        if x in dsts and x != src:
            while prev[x] != src: x = prev[x]
            return x
        for y in sorted(adj[x]):
            if y not in prev: prev[y] = x; q.append(y)
    return None
for h, info in hosts.items():
    ns = info["namespace"]
    print(f"ip netns exec {ns} sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")
    for i in info["interfaces"]:
        if i.get("ip"): print(f"ip netns exec {ns} sysctl -qw net.ipv4.conf.{i['ifname']}.rp_filter=0")
    for l in links:
        if h in (l["host"], l["peer_host"]): continue
        nb = first_hop(h, {l["host"], l["peer_host"]})
        if nb is None: continue
        cand = [m for m in links if {m["host"], m["peer_host"]} == {h, nb}]
        same = [m for m in cand if m["lane"] == l["lane"]] or cand
        m = same[0]
        gw = m["peer_ip"] if m["host"] == h else m["ip"]
        print(f"ip netns exec {ns} ip route replace {l['subnet']} via {gw}")
