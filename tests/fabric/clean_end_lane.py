#!/usr/bin/env python3
"""A clean 4-host run ends without a WARN (issue 8.6), on a netns testbed lane.

Four ranks, one per host of a ring, run alltoall in fabric mode with no railyardd: the ranks
relay for each other, so when one finishes first its relay goes and resets the relayed sockets
of connections whose ends are closing too. Nothing is lost then (every receive is done), so
the ranks must print no WARN. Before the fix, 1 run in 3 printed "data socket ... receive
failed: Connection reset by peer ... waiting for no receive posted" at WARN. Each run passes
its data check; RUNS runs are made (the race needs several to show).

Usage: clean_end_lane.py RAILYARD_PERF LIBDIR [RUNS]
"""
import json
import os
import random
import subprocess
import sys

TB = json.load(open(os.environ["TESTBED_JSON"]))
PERF, LIBDIR = sys.argv[1:3]
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]

for run in range(RUNS):
    port = random.randint(30000, 39000)
    procs = [subprocess.Popen(
        ["ip", "netns", "exec", NS[h], PERF, "--rank", str(h), "--nranks", str(len(NS)), "--root",
         f"{MGMT[0]}:{port}", "-p", "alltoall", "-b", "4K", "-e", "16M", "-f", "16", "-n", "5", "-c", "1", "-T", "60"],
        env={**os.environ, "RAILYARD_HOST_NAME": f"h{h}", "RAILYARD_SOCKET_IFNAME": "^mgmt0", "RAILYARD_FABRIC": "on",
             "NCCL_NET_PLUGIN": "railyard", "LD_LIBRARY_PATH": LIBDIR, "RAILYARD_DEBUG": "WARN"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for h in range(len(NS))]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    for h, (out, err, rc) in enumerate(results):
        if rc != 0:
            print(f"FAIL: run {run}: rank {h} exited {rc}\n{err[-2000:]}")
            sys.exit(1)
        warns = [l for l in err.splitlines() if "WARN" in l]
        if warns:
            print(f"FAIL: run {run}: a clean run printed WARN on h{h}:\n" + "\n".join(warns[:5]))
            sys.exit(1)
    if "Out of bounds values : 0 OK" not in results[0][0]:
        print(f"FAIL: run {run}: rank 0 did not report 0 wrong values\n{results[0][0][-1500:]}")
        sys.exit(1)
    print(f"ok: run {run}: alltoall on {len(NS)} hosts, ranks relaying, no WARN")
