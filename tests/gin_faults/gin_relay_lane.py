#!/usr/bin/env python3
"""GIN/RMA over relays in fabric mode on the switchless ring of 4 (run inside
`testbed.sh run --lane ring4x2`): h0 and h2 have no cable (nor h1 and h3), so the
mesh's Endpoints to the opposite host are relayed through the Forwarders of the
hosts between (proxy/runtime/cable_set_domain.h, RAILYARD_COMMS=fabric).
gin_mesh_node (tests/gin_faults/) runs each rank, loading the plugin as NCCL does
(RMA v14 table), bootstrap over the management network.

Usage: gin_relay_lane.py CASE GIN_MESH_NODE RAILYARDD PLUGIN_LIB
Cases:
  mesh-relayed  4 ranks, one per host, relaying for each other (no railyardd): NCCL's
                GIN proxy loop over every rank, itself included; 3 rounds of 1 MiB
                iputSignal to every rank, each chunk checked by content once its
                signal arrived; then an iget of the opposite rank's bytes and an
                iflush, checked by content. Every rank must print "mesh ok".
                Repeated with the GIN v11 table (NCCL 2.28: no iget) and RMA v13.
  refused-without-cable-set  RAILYARD_COMMS=legacy in fabric mode: no cable set for GIN
                to lease, so every rank's GIN init is refused naming RAILYARD_COMMS=fabric
                (it used to take a TCP Domain on 127.0.0.1 and fail the connect obscurely).
  relay-killed  ranks on h0 and h2 only, railyardd on h1 and h3 holding the relay
                seats; the ranks stream 1 MiB puts to each other through the relays;
                once the rails of h1 (or h3) toward h2 carried 16 MiB, that host's
                railyardd is SIGKILLed.
                Both ranks must fail within RAILYARD_TIMEOUT_MS + 10 s, each naming
                its rank, the peer rank, a rail and a sequence (no hang).
  relay-stopped as relay-killed, but that railyardd is SIGSTOPped (a frozen relay: its
                sockets stay open, nothing moves): the same named errors within the
                same bound (the ranks' own request timeout, RAILYARD_TIMEOUT_MS).
  bench         (not a ctest case) rank 0's iput GB/s to rank 1 (cabled) and to rank 2
                (relayed) in one run, 4 ranks relaying for each other.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import netns_lane  # noqa: E402

TB = json.load(open(os.environ["TESTBED_JSON"]))
CASE, NODE, RAILYARDD, LIB = sys.argv[1:5]
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]
TIMEOUT_MS = 3000


def fail(msg):
    print(f"FAIL [{CASE}]: {msg}", flush=True)
    sys.exit(1)


def env_for(host, extra=None):
    return netns_lane.fabric_env(host, {"RAILYARD_COMMS": "fabric", "RAILYARD_TRANSPORT": "tcp",
                                        "RAILYARD_TIMEOUT_MS": str(TIMEOUT_MS)}, extra)


def nodes(hosts, mode, size, count, extra=None):
    """One rank per listed host (rank i on hosts[i]); bootstrap hub on hosts[0]'s management address."""
    port = random.randint(30000, 39000)
    return [subprocess.Popen(
        ["ip", "netns", "exec", NS[h], NODE, LIB, mode, str(r), str(len(hosts)), MGMT[hosts[0]], str(port),
         str(size), str(count)],
        env=env_for(h, extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r, h in enumerate(hosts)]


def railyardd(hosts):
    return [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD], env=env_for(h),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for h in hosts]


def finish(procs, timeout):
    out = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            o, e = p.communicate()
            fail(f"a rank did not exit within {timeout:.0f} s (hang)\n{e[-3000:]}")
        out.append((p.returncode, o, e))
    return out


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def rails_between(a, b):
    out = [r["ifname"] for r in TB["rails"] if r["host"] == a and r["peer_host"] == b]
    out += [r["peer_ifname"] for r in TB["rails"] if r["peer_host"] == a and r["host"] == b]
    return sorted(out)


def tx_bytes(host, ifnames):
    total = 0
    for ifname in ifnames:
        total += int(subprocess.run(["ip", "netns", "exec", NS[host], "cat",
                                     f"/sys/class/net/{ifname}/statistics/tx_bytes"],
                                    capture_output=True, text=True, check=True).stdout)
    return total


def case_mesh_relayed():
    for table in ("rma-v14", "gin-v11", "rma-v13"):
        results = finish(nodes([0, 1, 2, 3], "mesh", 1 << 20, 3, {"GIN_MESH_TABLE": table}), 150)
        bad = [rank for rank, (rc, out, _) in enumerate(results) if rc != 0 or "mesh ok" not in out]
        if bad:
            fail(f"{table}: rank(s) {bad} failed\n" + "\n".join(
                f"--- rank {rank} exited {rc}: stdout\n{out[-1500:]}\n--- rank {rank} stderr\n{err[-3000:]}"
                for rank, (rc, out, err) in enumerate(results)))
        for _, out, _ in results:
            print(out.strip().splitlines()[-1])
        print(f"ok: {table}: every rank iputSignalled every rank (itself and the opposite host, relayed); "
              "every chunk checked after its signal")


def case_refused_without_cable_set():
    results = finish(nodes([0, 1, 2, 3], "mesh", 4096, 1, {"RAILYARD_COMMS": "legacy"}), 60)
    for rank, (rc, out, err) in enumerate(results):
        if rc == 0:
            fail(f"rank {rank} ran GIN in fabric mode without the cable set (RAILYARD_COMMS=legacy)")
        for w in ["GIN init", "RAILYARD_COMMS=fabric", "relays nothing"]:
            if w not in err:
                fail(f"rank {rank}'s error does not say '{w}':\n{err[-3000:]}")
    line = next(l for l in results[0][2].splitlines() if "GIN init" in l)
    print(f"rank 0: {line.split('WARN ')[-1][:300]}")
    print("ok: fabric mode without the cable set: every rank's GIN init refused, naming RAILYARD_COMMS=fabric")


def case_relay_killed():
    relay_fault("killed")


def case_relay_stopped():
    relay_fault("stopped")


def relay_fault(how):
    relays = railyardd([1, 3])
    procs = []
    try:
        procs = nodes([0, 2], "stream", 1 << 20, 90)
        # A stream that never drains stays on one of its two routes (via h1 or h3):
        # the fault goes to the relay that carries it.
        toward = {1: rails_between(1, 2), 3: rails_between(3, 2)}
        base = {h: tx_bytes(h, r) for h, r in toward.items()}
        deadline = time.monotonic() + 60
        busy = None
        while busy is None:
            for h, r in toward.items():
                if tx_bytes(h, r) - base[h] >= 16 * 2**20:
                    busy = h
            for p in procs:
                if p.poll() is not None:
                    fail(f"a rank exited ({p.returncode}) before the fault:\n{p.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                fail("neither h1 nor h3 relayed 16 MiB toward h2")
            time.sleep(0.05)  # polling a counter, not a barrier
        victim = relays[0] if busy == 1 else relays[1]
        t0 = time.monotonic()
        if how == "killed":
            victim.kill()
        else:
            # `ip netns exec` execs railyardd: the Popen pid is the daemon.
            os.kill(victim.pid, signal.SIGSTOP)
        bound = TIMEOUT_MS / 1000 + 10
        results = finish(procs, bound + 5)
        took = time.monotonic() - t0
        for rank, (rc, out, err) in enumerate(results):
            if rc != 3:
                fail(f"rank {rank} exited {rc}, not 3 (a plugin error in the stream)\n{out[-1000:]}\n{err[-3000:]}")
            words = [f"GIN rank {rank} to peer rank {1 - rank}", "seq", "rail"]
            for w in words:
                if w not in err:
                    fail(f"rank {rank}'s error does not name '{w}':\n{err[-3000:]}")
            line = next((l for l in err.splitlines() if f"GIN rank {rank} to peer rank" in l), "")
            print(f"rank {rank}: {line.split('WARN ')[-1][:400]}")
        if took > bound:
            fail(f"ranks took {took:.1f} s to fail after the relay was {how} (RAILYARD_TIMEOUT_MS={TIMEOUT_MS})")
        print(f"ok: h{busy}'s relay {how} under a relayed GIN stream h0<->h2: both ranks failed in {took:.1f} s, "
              "naming rank, peer, rail and seq")
    finally:
        stop(procs)
        for r in relays:
            if how == "stopped" and r.poll() is None:
                os.kill(r.pid, signal.SIGCONT)
        stop(relays)


def case_bench():
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    size = int(os.environ.get("GIN_BENCH_BYTES", str(4 << 20)))
    puts = int(os.environ.get("GIN_BENCH_PUTS", "64"))
    results = finish(nodes([0, 1, 2, 3], "bench", size, puts), 170)
    for rank, (rc, out, err) in enumerate(results):
        if rc != 0:
            fail(f"rank {rank} exited {rc}\n{out[-1000:]}\n{err[-3000:]}")
    print(results[0][1].strip())
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


CASES = {"mesh-relayed": case_mesh_relayed, "refused-without-cable-set": case_refused_without_cable_set, "relay-killed": case_relay_killed, "relay-stopped": case_relay_stopped,
         "bench": case_bench}
if CASE not in CASES:
    fail(f"unknown case; known: {', '.join(CASES)}")
CASES[CASE]()
