#!/usr/bin/env python3
"""Relayed sendrecv in fabric mode, several builds and comms paths in one run
(inside `testbed.sh run --lane ring4x2`): for each size and round, each variant runs
railyard-perf sendrecv h0<->h2 (relayed by railyardd on h1 and h3, the variant's own
railyardd, started for the case and stopped after it), the variants interleaved
round by round so load changes hit them alike. Prints and writes (OUT.json) each
variant's median busbw and every variant's median over the first variant's.

Usage: fmode_relay_ab.py OUT.json ROUNDS SIZES(a,b,c) ITERS(a,b,c) NAME=DIR:COMMS [NAME=DIR:COMMS ...]
  DIR holds railyard-perf, railyardd and libnccl-net-railyard.so; COMMS fabric|legacy.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import netns_perf  # noqa: E402  (this folder: run as a script)

TB = json.load(open(os.environ["TESTBED_JSON"]))
OUT = sys.argv[1]
ROUNDS = int(sys.argv[2])
SIZES = [int(s) for s in sys.argv[3].split(",")]
ITERS = [int(s) for s in sys.argv[4].split(",")]
VARIANTS = []
for spec in sys.argv[5:]:
    name, rest = spec.split("=", 1)
    d, comms = rest.rsplit(":", 1)
    VARIANTS.append((name, d, comms))
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]


def env_for(host, comms, d):
    env = dict(os.environ)
    env.update({"RAILYARD_HOST_NAME": f"h{host}", "RAILYARD_SOCKET_IFNAME": "^mgmt0",
                "RAILYARD_FABRIC": "on", "NCCL_NET_PLUGIN": "railyard", "RAILYARD_COMMS": comms,
                "LD_LIBRARY_PATH": d, "RAILYARD_DEBUG": "WARN"})
    return env


def run_case(d, comms, size, iters):
    relays = [subprocess.Popen(["ip", "netns", "exec", NS[h], f"{d}/railyardd"], env=env_for(h, comms, d),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in (1, 3)]
    time.sleep(2.0)  # the relays listen before the ranks connect through them (a loaded host is slow to start them)
    try:
        row = netns_perf.perf_row(f"{d}/railyard-perf", NS, MGMT, (0, 2), "sendrecv", size, iters, 3,
                                  lambda h: env_for(h, comms, d), f"{d}, {comms}, {size} B")
        return float(row["busbw_gbps"])
    finally:
        for p in relays:
            p.terminate()
            p.wait()


def main():
    load_before = open("/proc/loadavg").read().split()[:3]
    got = {(v[0], s): [] for v in VARIANTS for s in SIZES}
    for _ in range(ROUNDS):
        for s, it in zip(SIZES, ITERS):
            for name, d, comms in VARIANTS:
                got[(name, s)].append(run_case(d, comms, s, it))
    load_after = open("/proc/loadavg").read().split()[:3]
    med = {k: statistics.median(v) for k, v in got.items()}
    base = VARIANTS[0][0]
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; {ROUNDS} rounds, medians GB/s")
    print(f"{'size':>9} " + " ".join(f"{v[0]:>12}" for v in VARIANTS) + " " +
          " ".join(f"{v[0] + '/' + base:>16}" for v in VARIANTS[1:]))
    rows = []
    for s in SIZES:
        print(f"{s:>9} " + " ".join(f"{med[(v[0], s)]:>12.3f}" for v in VARIANTS) + " " +
              " ".join(f"{med[(v[0], s)] / med[(base, s)]:>16.2f}" for v in VARIANTS[1:]))
        rows.append({"size": s, "median_gbps": {v[0]: med[(v[0], s)] for v in VARIANTS},
                     "samples": {v[0]: got[(v[0], s)] for v in VARIANTS}})
    json.dump({"load_before": load_before, "load_after": load_after, "rounds": ROUNDS,
               "variants": [list(v) for v in VARIANTS], "rows": rows}, open(OUT, "w"), indent=1)


if __name__ == "__main__":
    main()
