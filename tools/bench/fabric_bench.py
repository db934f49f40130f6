#!/usr/bin/env python3
"""Fabric benchmarks on a shaped netns ring (run inside `testbed.sh run --rate R`).

Measures, with railyard-perf over the plugin in fabric mode, on a ring of 4 hosts
with 2 rails per cable, every rail shaped to the same tbf rate:
  - sendrecv between adjacent hosts over 1 rail and over 2 rails,
  - sendrecv between opposite hosts (2 hops, relayed by railyardd),
  - alltoall over the ring (4 ranks, the ranks relay),
each as a ratio to the shaped rate of one rail, medians of several rounds.
Writes a JSON summary to argv[1].

Usage: fabric_bench.py OUT.json PERF RAILYARDD LIBDIR RATE_MBIT ROUNDS
"""
import json
import os
import statistics
import subprocess
import sys

import netns_perf  # noqa: E402  (this folder: run as a script)

TB = json.load(open(os.environ["TESTBED_JSON"]))
OUT, PERF, RAILYARDD, LIBDIR = sys.argv[1:5]
RATE_MBIT = float(sys.argv[5])
ROUNDS = int(sys.argv[6])
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]


def env_for(host, ifname):
    env = dict(os.environ)
    env.update({"RAILYARD_HOST_NAME": f"h{host}", "RAILYARD_SOCKET_IFNAME": ifname,
                "RAILYARD_FABRIC": "on", "NCCL_NET_PLUGIN": "railyard",
                "LD_LIBRARY_PATH": LIBDIR, "RAILYARD_DEBUG": "WARN"})
    return env


def run_perf(hosts, pattern, size, iters, ifname):
    row = netns_perf.perf_row(PERF, NS, MGMT, hosts, pattern, size, iters, 2, lambda h: env_for(h, ifname),
                              f"{pattern} on {hosts}")
    return float(row["busbw_gbps"] if "busbw_gbps" in row else row["busbw"])


def main():
    one_rail = "^mgmt0,p0r1,p1r1"
    two_rails = "^mgmt0"
    rate_gbps = RATE_MBIT / 8 / 1000  # GB/s of one shaped rail
    relays = [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD], env=env_for(h, two_rails),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in (1, 3)]
    size = 32 * 2**20
    cases = [
        ("sendrecv adjacent, 1 rail", [0, 1], "sendrecv", one_rail),
        ("sendrecv adjacent, 2 rails", [0, 1], "sendrecv", two_rails),
        ("sendrecv opposite (2 hops)", [0, 2], "sendrecv", two_rails),
        ("alltoall, 4 ranks", [0, 1, 2, 3], "alltoall", two_rails),
    ]
    results = {name: [] for name, *_ in cases}
    try:
        for _ in range(ROUNDS):
            for name, hosts, pattern, ifname in cases:
                results[name].append(run_perf(hosts, pattern, size, 4, ifname))
    finally:
        for p in relays:
            p.terminate()
            p.wait()
    summary = {"rate_mbit_per_rail": RATE_MBIT, "rail_gbps": rate_gbps, "size": size, "rounds": ROUNDS,
               "cases": {}}
    for name, vals in results.items():
        med = statistics.median(vals)
        summary["cases"][name] = {"busbw_gbps": vals, "median": med, "min": min(vals), "max": max(vals),
                                  "ratio_to_rail": med / rate_gbps}
    json.dump(summary, open(OUT, "w"), indent=1)


if __name__ == "__main__":
    main()
