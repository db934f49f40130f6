#!/usr/bin/env python3
"""GIN/RMA faults on a netns testbed lane (run inside `testbed.sh run`).

Two railyard-perf ranks on hosts h0 and h1 stream `gin-put` (RMA v14 table) at each
other over the TCP fabric on the two rails of the cable between them (each host's
RAILYARD_SOCKET_IFNAME names exactly those rail interfaces; bootstrap over the
management network). Checks real outcomes:

  rail-cut     once bytes are moving on the rails, the cable is cut (nftables drop
               both ways, links stay up): both ranks must exit non-zero within
               RAILYARD_TIMEOUT_MS + 10 s, each naming its peer rank, a sequence number
               and the rails (no hang).
  frozen-peer  once bytes are moving, rank 1 is SIGSTOPped: rank 0 must exit non-zero
               within the same bound naming "peer rank 1" and the sequence; rank 1 is
               then killed.

Usage: gin_fault_lane.py CASE RAILYARD_PERF LIBDIR
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

TB = json.load(open(os.environ["TESTBED_JSON"]))
CASE, PERF, LIBDIR = sys.argv[1:4]
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]
TIMEOUT_MS = 3000


def fail(msg):
    print(f"FAIL [{CASE}]: {msg}")
    sys.exit(1)


def rails_between(a, b):
    """Rail interfaces on host a whose cable goes to host b, in lane order."""
    out = [(r["lane"], r["ifname"]) for r in TB["rails"] if r["host"] == a and r["peer_host"] == b]
    out += [(r["lane"], r["peer_ifname"]) for r in TB["rails"] if r["peer_host"] == a and r["host"] == b]
    return [name for _, name in sorted(out)]


def tx_bytes(host, ifnames):
    total = 0
    for ifname in ifnames:
        out = subprocess.run(["ip", "netns", "exec", NS[host], "cat", f"/sys/class/net/{ifname}/statistics/tx_bytes"],
                             capture_output=True, text=True, check=True).stdout
        total += int(out)
    return total


def start(hosts):
    port = random.randint(30000, 39000)
    procs = []
    for rank, h in enumerate(hosts):
        env = dict(os.environ)
        env.update({
            "RAILYARD_HOST_NAME": f"h{h}",
            "RAILYARD_SOCKET_IFNAME": "=" + ",".join(rails_between(h, hosts[1 - rank])),
            "RAILYARD_TRANSPORT": "tcp",
            "RAILYARD_FABRIC": "off",
            "RAILYARD_TIMEOUT_MS": str(TIMEOUT_MS),
            "NCCL_NET_PLUGIN": "railyard",
            "LD_LIBRARY_PATH": LIBDIR,
            "RAILYARD_DEBUG": "WARN",
            "NCCL_DEBUG": "WARN",
        })
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", NS[h], PERF, "--rank", str(rank), "--nranks", "2", "--root",
             f"{MGMT[hosts[0]]}:{port}", "-p", "gin-put", "-b", "4M", "-e", "4M", "-n", "100000", "-w", "0",
             "-c", "0", "-T", "120"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def wait_for_traffic(host, ifnames, at_least, procs):
    base = tx_bytes(host, ifnames)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if tx_bytes(host, ifnames) - base >= at_least:
            return
        for p in procs:
            if p.poll() is not None:
                fail(f"a rank exited ({p.returncode}) before the fault:\n{p.stderr.read()[-3000:]}")
        time.sleep(0.05)  # polling a counter, not a barrier
    fail(f"no GIN traffic on h{host} {ifnames}")


def finish(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"a rank did not exit within {timeout:.0f} s of the fault (hang)\n{err[-3000:]}")
    return p.returncode, out, err


def expect_named(rc, err, rank, words):
    if rc == 0:
        fail(f"rank {rank} exited 0 after the fault")
    for w in words:
        if w not in err:
            fail(f"rank {rank}'s error does not mention '{w}':\n{err[-3000:]}")


def case_rail_cut():
    procs = start([0, 1])
    try:
        wait_for_traffic(0, rails_between(0, 1), 16 * 2**20, procs)
        cable = next(r["cable"] for r in TB["rails"] if {r["host"], r["peer_host"]} == {0, 1})
        t0 = time.monotonic()
        subprocess.run([os.environ["TESTBED_SH"], "cut", "--prefix", os.environ["TESTBED_PREFIX"], str(cable)],
                       check=True, capture_output=True)
        bound = TIMEOUT_MS / 1000 + 10
        results = [finish(p, bound + 5) for p in procs]
        took = time.monotonic() - t0
        for rank, (rc, _, err) in enumerate(results):
            expect_named(rc, err, rank, [f"peer rank {1 - rank}", "seq", "rail"])
        if took > bound:
            fail(f"ranks took {took:.1f} s to fail after the cut (RAILYARD_TIMEOUT_MS={TIMEOUT_MS})")
        print(f"ok: cut cable {cable} under a GIN stream: both ranks failed in {took:.1f} s naming peer, seq, rails")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def case_frozen_peer():
    procs = start([0, 1])
    try:
        wait_for_traffic(0, rails_between(0, 1), 16 * 2**20, procs)
        # railyard-perf runs under `ip netns exec`, which execs it: the Popen pid is the rank.
        t0 = time.monotonic()
        os.kill(procs[1].pid, signal.SIGSTOP)
        bound = TIMEOUT_MS / 1000 + 10
        rc, _, err = finish(procs[0], bound + 5)
        took = time.monotonic() - t0
        expect_named(rc, err, 0, ["peer rank 1", "seq"])
        if took > bound:
            fail(f"rank 0 took {took:.1f} s to fail after rank 1 froze (RAILYARD_TIMEOUT_MS={TIMEOUT_MS})")
        print(f"ok: rank 1 frozen under a GIN stream: rank 0 failed in {took:.1f} s naming peer rank 1 and seq")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


CASES = {"rail-cut": case_rail_cut, "frozen-peer": case_frozen_peer}
if CASE not in CASES:
    fail(f"unknown case; known: {', '.join(CASES)}")
CASES[CASE]()
