#!/usr/bin/env python3
"""Relayed against direct sendrecv in fabric mode, new comms against old, one run
(inside `testbed.sh run --lane ring4x2`, unshaped rails).

For each comms path (RAILYARD_COMMS=fabric: the NCCL comms over the cable set and
the Forwarder; RAILYARD_COMMS=legacy: proxy/tcp comms and the socket relay) and each
size, railyard-perf sendrecv between neighbours h0<->h1 (direct, one cable) and
between opposite hosts h0<->h2 (2 hops, relayed by railyardd on h1 and h3), the
cases interleaved round by round so load changes hit every case alike. Prints and
writes (argv[1], JSON) the median busbw of each case, the relayed/direct ratio per
path and the new/old ratio per case, with the load average before and after.

Usage: fmode_relay_bench.py OUT.json PERF RAILYARDD LIBDIR ROUNDS SIZE [SIZE...]
Environment: FMODE_HOPS=relayed (or direct) runs only those cases (the table then
prints 0 for the others); FMODE_ITERS=N timed iterations per run (default 20 up to
1 MiB, 6 above); FMODE_FORWARDER=1 adds the fabric comms with
RAILYARD_FABRIC_TCP_RELAY=forwarder (relayed through the Forwarders, not spliced
through the socket relay) as a third path, "fwd" in the table (FMODE_FWD_RELAY=splice
makes that path splice too). The "fabric" path splices (RAILYARD_FABRIC_TCP_RELAY=splice)
unless the environment sets the variable. FMODE_FAR=N makes the relayed pair h0<->hN
(default 2), relayed by railyardd on every other host: FMODE_FAR=3 inside
`testbed.sh run --lane chain4` measures 2 relays in a row (h1 then h2).
"""
import json
import os
import statistics
import subprocess
import sys

import netns_perf  # noqa: E402  (this folder: run as a script)

TB = json.load(open(os.environ["TESTBED_JSON"]))
OUT, PERF, RAILYARDD, LIBDIR = sys.argv[1:5]
ROUNDS = int(sys.argv[5])
SIZES = [int(s) for s in sys.argv[6:]]
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]
FAR = int(os.environ.get("FMODE_FAR", "2"))  # the relayed pair is h0<->h{FAR}
RELAY_HOSTS = [h for h in range(len(NS)) if h not in (0, FAR)]


def env_for(host, comms):
    if comms == "fwd":
        env = netns_perf.fabric_env(host, "fabric", LIBDIR)
        env["RAILYARD_FABRIC_TCP_RELAY"] = os.environ.get("FMODE_FWD_RELAY", "forwarder")
        return env
    env = netns_perf.fabric_env(host, comms, LIBDIR)
    env.setdefault("RAILYARD_FABRIC_TCP_RELAY", "splice")
    return env


def run_perf(hosts, size, comms):
    iters = int(os.environ.get("FMODE_ITERS", "0")) or (20 if size <= 1 << 20 else 6)
    row = netns_perf.perf_row(PERF, NS, MGMT, hosts, "sendrecv", size, iters, 3, lambda h: env_for(h, comms),
                              f"{comms}, {hosts}, {size} B")
    return float(row["busbw_gbps"])


def main():
    load_before = open("/proc/loadavg").read().split()[:3]
    relays = [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD], env=env_for(h, "legacy"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in RELAY_HOSTS]
    hops_run = [os.environ["FMODE_HOPS"]] if os.environ.get("FMODE_HOPS") else ["direct", "relayed"]
    paths = ("fabric", "legacy", "fwd") if os.environ.get("FMODE_FORWARDER") == "1" else ("fabric", "legacy")
    cases = [(comms, hops, size) for size in SIZES for comms in paths for hops in hops_run]
    got = {c: [] for c in cases}
    try:
        for _ in range(ROUNDS):
            for comms, hops, size in cases:
                got[(comms, hops, size)].append(run_perf([0, 1] if hops == "direct" else [0, FAR], size, comms))
    finally:
        for p in relays:
            p.terminate()
            p.wait()
    load_after = open("/proc/loadavg").read().split()[:3]
    med = {c: statistics.median(v) for c, v in got.items()}
    for size in SIZES:  # cases not run count as 1 (ratios against them are meaningless)
        for c in (("fabric", "direct", size), ("fabric", "relayed", size), ("legacy", "direct", size), ("legacy", "relayed", size)):
            med.setdefault(c, 1.0)
    out = {"load_before": load_before, "load_after": load_after, "rounds": ROUNDS, "rows": []}
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}; {ROUNDS} rounds, medians")
    print(f"{'size':>10} {'new direct':>11} {'new relayed':>12} {'new r/d':>8} {'old direct':>11} "
          f"{'old relayed':>12} {'old r/d':>8} {'new/old d':>10} {'new/old r':>10}")
    for size in SIZES:
        nd, nr = med[("fabric", "direct", size)], med[("fabric", "relayed", size)]
        od, orl = med[("legacy", "direct", size)], med[("legacy", "relayed", size)]
        row = {"size": size, "new_direct_gbps": nd, "new_relayed_gbps": nr, "old_direct_gbps": od,
               "old_relayed_gbps": orl, "new_relayed_over_direct": nr / nd, "old_relayed_over_direct": orl / od,
               "new_over_old_direct": nd / od, "new_over_old_relayed": nr / orl,
               "fwd_relayed_gbps": med.get(("fwd", "relayed", size), 0.0),
               "samples": {f"{c[0]}-{c[1]}": got[c] for c in got if c[2] == size}, "iters": os.environ.get("FMODE_ITERS", "")}
        out["rows"].append(row)
        fwd = med.get(("fwd", "relayed", size), 0.0)
        print(f"{size:>10} {nd:>11.3f} {nr:>12.3f} {nr / nd:>8.2f} {od:>11.3f} {orl:>12.3f} {orl / od:>8.2f} "
              f"{nd / od:>10.2f} {nr / orl:>10.2f}" + (f"  fwd relayed {fwd:.3f} ({fwd / orl:.2f} of old)" if fwd else ""))
    json.dump(out, open(OUT, "w"), indent=1)


if __name__ == "__main__":
    main()
