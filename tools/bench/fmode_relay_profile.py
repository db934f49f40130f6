#!/usr/bin/env python3
"""Where a relayed sendrecv's time goes in fabric mode: one railyard-perf sendrecv
h0<->h2 (relayed by railyardd on h1 and h3) per comms path, with `strace -c -f` or
`perf record -g` attached to both relays for the run (inside `testbed.sh run --lane
ring4x2`). Writes each tool's report to OUTDIR/<comms>-<size>-<tool>-h<relay>.txt and
prints the perf busbw of each run.

Usage: fmode_relay_profile.py OUTDIR PERF RAILYARDD LIBDIR TOOL(strace|perf|none) ITERS SIZE [SIZE...]
"""
import json
import os
import subprocess
import sys
import time

import netns_perf  # noqa: E402  (this folder: run as a script)

TB = json.load(open(os.environ["TESTBED_JSON"]))
OUTDIR, PERF, RAILYARDD, LIBDIR, TOOL = sys.argv[1:6]
ITERS = int(sys.argv[6])
SIZES = [int(s) for s in sys.argv[7:]]
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]


def env_for(host, comms):
    return netns_perf.fabric_env(host, comms, LIBDIR)


def run_perf(size, comms):
    return netns_perf.perf_row(PERF, NS, MGMT, (0, 2), "sendrecv", size, ITERS, 3, lambda h: env_for(h, comms),
                               f"{comms}, {size} B")


def main():
    os.makedirs(OUTDIR, exist_ok=True)
    for size in SIZES:
        for comms in ("fabric", "legacy"):
            relays = [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD], env=env_for(h, comms),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in (1, 3)]
            time.sleep(1.0)  # railyardd takes its seat before the ranks look for it
            tools = []
            for h, rp in zip((1, 3), relays):
                pid = subprocess.check_output(["pgrep", "-P", str(rp.pid)]).split()[0].decode() \
                    if subprocess.run(["pgrep", "-P", str(rp.pid)], capture_output=True).returncode == 0 else str(rp.pid)
                out = f"{OUTDIR}/{comms}-{size}-{TOOL}-h{h}"
                if TOOL == "strace":
                    tools.append((subprocess.Popen(["strace", "-c", "-f", "-o", out + ".txt", "-p", pid],
                                                   stderr=subprocess.DEVNULL), out, h))
                elif TOOL == "perf":
                    tools.append((subprocess.Popen(["perf", "record", "-g", "-o", out + ".data", "-p", pid],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out, h))
            time.sleep(0.5)
            t0 = time.monotonic()
            row = run_perf(size, comms)
            wall = time.monotonic() - t0
            for tp, out, h in tools:
                tp.send_signal(2)
                tp.wait()
                if TOOL == "perf":
                    with open(out + ".txt", "w") as f:
                        subprocess.run(["perf", "report", "-i", out + ".data", "--no-children", "--stdio",
                                        "--percent-limit", "1.5", "-g", "none"], stdout=f, stderr=subprocess.DEVNULL)
            for p in relays:
                p.terminate()
                p.wait()
            print(f"{comms:>7} {size:>9} busbw {float(row['busbw_gbps']):.3f} GB/s, row {json.dumps(row)}, wall {wall:.1f} s",
                  flush=True)


if __name__ == "__main__":
    main()
