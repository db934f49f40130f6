#!/usr/bin/env python3
"""Fabric mode end to end on a netns testbed lane (run inside `testbed.sh run`).

Each case starts railyard-perf ranks (and railyardd where a case needs a relay on
a host that runs no rank) inside the host namespaces, with the management port
excluded from the rails (RAILYARD_SOCKET_IFNAME=^mgmt0, as an operator would),
and checks real outcomes: data verified on every iteration (#wrong 0, exit 0),
bytes counted on the rail interfaces, and for faults the error each rank prints.

Usage: fabric_lane.py CASE RAILYARD_PERF RAILYARDD LIBDIR
Cases: adjacent-two-rails, opposite-via-railyardd, alltoall-ranks-relay,
       chain-end-to-end, cut-cable, kill-relay (the older comms: RAILYARD_COMMS=legacy);
       a case name ending in ".fabric" runs the ranks over the fabric comms (fabric
       mode's default; RAILYARD_COMMS=fabric, relayed peers
       spliced through the socket relays: RAILYARD_FABRIC_TCP_RELAY=splice) and checks
       that the Endpoints took the socket relays (their INFO lines) and no Forwarder
       route opened; relay-refuses.fabric (fabric comms only): a relay that is not
       where the ranks dial fails the connect within the timeout; allreduce-ranks-apart.fabric:
       CollNet between two ranks with no cable between them, a ring over the relays
"""
import json
import os
import random
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import netns_lane  # noqa: E402
from netns_lane import stop  # noqa: E402,F401  (relay_lane.py takes it from here)

TB = json.load(open(os.environ["TESTBED_JSON"]))
CASE, PERF, RAILYARDD, LIBDIR = sys.argv[1:5]
FABRIC = CASE.endswith(".fabric")  # the ranks run the fabric comms (see the docstring)
# The plain cases pin the older comms (fabric mode's default is the fabric comms): they
# check the socket relay's behaviour (both ring directions, the connector's hello).
COMMS = ({"RAILYARD_COMMS": "fabric", "RAILYARD_FABRIC_TCP_RELAY": "splice"} if FABRIC
         else {"RAILYARD_COMMS": "legacy"})
NS = [h["namespace"] for h in TB["hosts"]]
MGMT = [h["mgmt_ip"] for h in TB["hosts"]]


def env_for(host, extra=None):
    return netns_lane.fabric_env(host, {"NCCL_NET_PLUGIN": "railyard", "LD_LIBRARY_PATH": LIBDIR}, extra)


def railyardd(hosts, extra=None, args=(), stdout=subprocess.DEVNULL):
    return [subprocess.Popen(["ip", "netns", "exec", NS[h], RAILYARDD] + list(args), env=env_for(h, extra),
                             stdout=stdout, stderr=subprocess.PIPE, text=True)
            for h in hosts]


def perf(hosts, pattern, args, extra=None):
    """One rank per listed host (rank i on hosts[i]); bootstrap over the management network.
    In a ".fabric" case the ranks run the fabric comms (COMMS) with INFO logs."""
    extra = {**COMMS, **({"NCCL_DEBUG": "INFO"} if FABRIC else {}), **(extra or {})}
    port = random.randint(30000, 39000)
    root = f"{MGMT[hosts[0]]}:{port}"
    return [subprocess.Popen(
        ["ip", "netns", "exec", NS[h], PERF, "--rank", str(r), "--nranks", str(len(hosts)),
         "--root", root, "-p", pattern, "-T", "60"] + args,
        env=env_for(h, extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r, h in enumerate(hosts)]


def wait_all(procs, timeout=90):
    out = []
    deadline = time.monotonic() + timeout
    for p in procs:
        o, e = p.communicate(timeout=max(1, deadline - time.monotonic()))
        out.append((p.returncode, o, e))
    return out


def rails_between(a, b):
    """Rail interfaces on host a whose cable goes to host b."""
    out = [r["ifname"] for r in TB["rails"] if r["host"] == a and r["peer_host"] == b]
    out += [r["peer_ifname"] for r in TB["rails"] if r["peer_host"] == a and r["host"] == b]
    return sorted(out)


def tx_bytes(host, ifname):
    """Bytes interface `ifname` of host `host` has sent."""
    return netns_lane.tx_bytes(NS[host], ifname)


def expect_ok(results, what, spliced=True):
    for rank, (rc, out, err) in enumerate(results):
        if rc != 0:
            fail(f"{what}: rank {rank} exited {rc}\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-3000:]}")
        if rank == 0 and "Out of bounds values : 0 OK" not in out:  # rank 0 prints the table
            fail(f"{what}: rank {rank} did not report 0 wrong values\n{out[-2000:]}")
    if FABRIC:
        expect_fabric_comms(results, what, spliced)


def expect_fabric_comms(results, what, spliced):
    """A ".fabric" case: every rank ran the fabric comms; when `spliced`, some comm names a
    peer reached "via hN (ADDR:RELAY_PORT)" of the socket relay, and no rank's own
    Forwarder opened a route (its stop line counts 0)."""
    for rank, (_, _, err) in enumerate(results):
        if "over the fabric comms" not in err:
            fail(f"{what}: rank {rank} did not run the fabric comms:\n{err[-2000:]}")
        m = re.search(r"Forwarder stopped: (\d+) routes opened", err)
        if m and int(m.group(1)) != 0:
            fail(f"{what}: rank {rank}'s Forwarder opened {m.group(1)} routes; relayed peers should be "
                 f"spliced through the socket relays:\n{m.group(0)}")
    if spliced and not any(re.search(r"via h\d \([0-9.]+:29518\)", err) for _, _, err in results):
        fail(f"{what}: no rank names a peer reached through a socket relay ('via hN (ADDR:29518)'):\n" +
             "\n".join(e[-1500:] for _, _, e in results))


def fail(msg):
    print(f"FAIL [{CASE}]: {msg}")
    sys.exit(1)


def case_adjacent_two_rails():
    rails = rails_between(0, 1)
    assert len(rails) == 2, rails
    before = {r: tx_bytes(0, r) for r in rails}
    expect_ok(wait_all(perf([0, 1], "sendrecv", ["-b", "16M", "-e", "16M", "-n", "8", "-w", "2", "-c", "1"])),
              "sendrecv h0<->h1")
    delta = {r: tx_bytes(0, r) - before[r] for r in rails}
    total = sum(delta.values())
    sent = 16 * 2**20 * 10
    if total < sent:
        fail(f"only {total} bytes left h0 on the rails to h1, expected at least {sent}: {delta}")
    for r, d in delta.items():
        if d < 0.3 * total:
            fail(f"rail {r} carried {d} of {total} bytes: the message was not striped over both rails")
    print(f"ok: h0->h1 striped over {rails}: {delta}")


def case_opposite_via_railyardd():
    relays = railyardd([1, 3])
    try:
        r1 = {r: tx_bytes(1, r) for r in rails_between(1, 2)}
        r3 = {r: tx_bytes(3, r) for r in rails_between(3, 2)}
        r1to0 = {r: tx_bytes(1, r) for r in rails_between(1, 0)}
        r3to0 = {r: tx_bytes(3, r) for r in rails_between(3, 0)}
        expect_ok(wait_all(perf([0, 2], "sendrecv", ["-b", "1", "-e", "8M", "-f", "8", "-n", "5", "-c", "1"])),
                  "sendrecv h0<->h2 (no cable)")
        d1 = sum(tx_bytes(1, r) - v for r, v in r1.items())
        d3 = sum(tx_bytes(3, r) - v for r, v in r3.items())
        if FABRIC:
            # One spliced route per direction, each through its own relay (the higher
            # host id of the pair takes the last tied cable; the ids are hashes, so
            # either relay may carry either direction).
            d1to0 = sum(tx_bytes(1, r) - v for r, v in r1to0.items())
            d3to0 = sum(tx_bytes(3, r) - v for r, v in r3to0.items())
            big = 8 * 2**20
            if not ((d1 >= big and d3to0 >= big) or (d3 >= big and d1to0 >= big)):
                fail(f"relays forwarded h1: {d1} B toward h2 and {d1to0} B toward h0, h3: {d3} B toward h2 and "
                     f"{d3to0} B toward h0; expected each direction through its own relay")
            print(f"ok: h0<->h2 spliced, h1 forwarded {d1} B toward h2 and {d1to0} B toward h0, "
                  f"h3 {d3} B toward h2 and {d3to0} B toward h0")
            return
        if d1 < 8 * 2**20 or d3 < 8 * 2**20:
            fail(f"relays forwarded h1: {d1}, h3: {d3} bytes toward h2; expected both ring directions in use")
        print(f"ok: h0<->h2 through railyardd on h1 ({d1} B) and h3 ({d3} B)")
    finally:
        stop(relays)


def case_alltoall_ranks_relay():
    expect_ok(wait_all(perf([0, 1, 2, 3], "alltoall", ["-b", "4K", "-e", "16M", "-f", "16", "-n", "5", "-c", "1"])),
              "alltoall over the ring, relayed by the ranks themselves")
    print("ok: alltoall on 4 hosts, no railyardd")


def case_chain_end_to_end():
    relays = railyardd([1, 2])
    try:
        expect_ok(wait_all(perf([0, 3], "sendrecv", ["-b", "1K", "-e", "4M", "-f", "64", "-n", "5", "-c", "1"])),
                  "sendrecv between the chain's ends (2 relays)")
        print("ok: h0<->h3 across two relays")
    finally:
        stop(relays)


def wait_for_either_traffic(candidates, at_least):
    """The first host of `candidates` ((host, ifnames) pairs) whose interfaces send
    `at_least` bytes from now; fails the case after 30 s."""
    base = {h: sum(tx_bytes(h, r) for r in ifs) for h, ifs in candidates}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for h, ifs in candidates:
            if sum(tx_bytes(h, r) for r in ifs) - base[h] >= at_least:
                return h
        time.sleep(0.05)
    fail(f"no traffic on any of {candidates}")


def wait_for_traffic(host, ifnames, at_least):
    base = sum(tx_bytes(host, r) for r in ifnames)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if sum(tx_bytes(host, r) for r in ifnames) - base >= at_least:
            return
        time.sleep(0.05)  # polling a counter, not a barrier
    fail(f"no traffic on h{host} {ifnames}")


def expect_fault(results, names, peers):
    """Every rank failed, and its error names the sequence, the rail and its peer's host."""
    for rank, (rc, out, err) in enumerate(results):
        if rc == 0:
            fail(f"rank {rank} exited 0 after the fault")
        for word in names + [f"peer {peers[rank]}"]:
            if word not in err:
                fail(f"rank {rank}'s error does not mention '{word}':\n{err[-3000:]}")


def case_cut_cable():
    relays = railyardd([2, 3])  # the long way round for the comm that follows
    try:
        timeout_ms = 3000
        procs = perf([0, 1], "sendrecv", ["-b", "64M", "-e", "64M", "-n", "400", "-w", "0", "-c", "0"],
                     {"RAILYARD_TIMEOUT_MS": str(timeout_ms)})
        wait_for_traffic(0, rails_between(0, 1), 32 * 2**20)
        cable = next(r["cable"] for r in TB["rails"] if {r["host"], r["peer_host"]} == {0, 1})
        t0 = time.monotonic()
        subprocess.run([os.environ["TESTBED_SH"], "cut", "--prefix", os.environ["TESTBED_PREFIX"], str(cable)],
                       check=True, capture_output=True)
        results = wait_all(procs, timeout=60)
        took = time.monotonic() - t0
        # Both ranks time out on their own waits about together. The one that loses the race
        # sees its peer's process exit first (railyard-perf's bootstrap), but with its own ops
        # in flight it keeps testing them (3 s): each rank reports the plugin's own error.
        primary = [r for r in range(2) if "has gone away" not in results[r][2]]
        if len(primary) != 2:
            fail("a rank reports only that the other has gone away, not the plugin's error:\n" +
                 "\n".join(e[-1500:] for _, _, e in results))
        expect_fault([results[r] for r in primary], ["seq", "rail", "no progress"],
                     [["h1", "h0"][r] for r in primary])
        for rank, (_, _, err) in enumerate(results):
            # A send that waited for a receive used to say "seq 0" and "none posted" whatever it waited for.
            if "none posted" in err:
                fail(f"rank {rank}'s error still says 'none posted':\n{err[-3000:]}")
        if took > timeout_ms / 1000 + 10:
            fail(f"ranks took {took:.1f} s to fail after the cut (RAILYARD_TIMEOUT_MS={timeout_ms})")
        print(f"ok: cut cable {cable}: both ranks failed in {took:.1f} s; ranks {primary} named seq and rail")
        # A new comm between the same hosts takes the route that survives (3 hops).
        expect_ok(wait_all(perf([0, 1], "sendrecv", ["-b", "1K", "-e", "1M", "-f", "32", "-n", "3", "-c", "1"])),
                  "sendrecv h0<->h1 after the cut (the long way round)")
        print("ok: a new comm h0<->h1 ran around the ring after the cut")
    finally:
        stop(relays)


def case_kill_relay():
    relays = railyardd([1, 3])
    try:
        procs = perf([0, 2], "sendrecv", ["-b", "32M", "-e", "32M", "-n", "400", "-w", "0", "-c", "0"],
                     {"RAILYARD_TIMEOUT_MS": "3000"})
        victim = 1
        if FABRIC:
            # One spliced route per direction: kill the relay that carries h0's data to h2.
            victim = wait_for_either_traffic([(1, rails_between(1, 2)), (3, rails_between(3, 2))], 16 * 2**20)
        else:
            wait_for_traffic(1, rails_between(1, 2), 16 * 2**20)
        t0 = time.monotonic()
        relays[0 if victim == 1 else 1].kill()
        results = wait_all(procs, timeout=60)
        took = time.monotonic() - t0
        # A rank whose peer failed first may report that instead (the launcher-side
        # bootstrap sees the peer exit); at least one rank must carry the plugin's error.
        named = [r for r in range(2) if "seq" in results[r][2] and "rail" in results[r][2]]
        if not named:
            fail("no rank's error names seq and rail:\n" + "\n".join(e[-1500:] for _, _, e in results))
        for r in range(2):
            if results[r][0] == 0:
                fail(f"rank {r} exited 0 after the relay was killed")
        expect_fault([results[r] for r in named], ["seq", "rail"], [["h2", "h0"][r] for r in named])
        # The error names the relay that broke (h1), the hop (rail and h1's address on
        # that socket), and never prints another host's address as the peer's.
        def addrs(h):
            return ({r["ip"] for r in TB["rails"] if r["host"] == h} |
                    {r["peer_ip"] for r in TB["rails"] if r["peer_host"] == h})
        hop = [r for r in named if any(f"via h{victim} ({a}:" in results[r][2] for a in addrs(victim))]
        if not hop:
            fail(f"no rank's error names the relay h{victim} with its address ('via h{victim} (ADDR:'):\n" +
                 "\n".join(e[-1500:] for _, _, e in results))
        for r in named:
            for m in re.finditer(r"peer h(\d) \(pid \d+, ([0-9.]+):\d+\)", results[r][2]):
                if m.group(2) not in addrs(int(m.group(1))):
                    fail(f"rank {r} prints {m.group(2)} as the address of peer h{m.group(1)}, "
                         f"which is not that host's:\n{m.group(0)}")
        line = next(l for l in results[hop[0]][2].splitlines() if f"via h{victim} (" in l and "WARN" in l)
        print(f"rank {hop[0]}: {line.split('NCCL WARN ')[-1]}")
        print(f"ok: killing the relay on h{victim} failed both ranks in {took:.1f} s, naming the relay h{victim}")
    finally:
        stop(relays)


def failing_pair(why, within_s):
    """A sendrecv between h0 and h2 (relayed) with RAILYARD_TIMEOUT_MS=3000 that must fail
    on both ranks within `within_s` seconds (not wait for -T 60) because `why`: the
    ranks' (returncode, stdout, stderr) and the seconds it took."""
    t0 = time.monotonic()
    results = wait_all(perf([0, 2], "sendrecv", ["-b", "1K", "-e", "1K", "-n", "2", "-c", "1"],
                            {"RAILYARD_TIMEOUT_MS": "3000"}), timeout=120)
    took = time.monotonic() - t0
    for r in range(2):
        if results[r][0] == 0:
            fail(f"rank {r} exited 0 though {why}")
    if took > within_s:
        fail(f"the ranks took {took:.1f} s to fail (RAILYARD_TIMEOUT_MS=3000, -T 60): a connect waited")
    return results, took


def case_relay_refuses():
    """The relays' socket port differs from the ranks' (railyardd on h1 and h3 listens at
    29600, the ranks dial 29518): over the fabric comms a relayed connect must fail within
    RAILYARD_TIMEOUT_MS plus slack, naming the relay, not wait for railyard-perf's -T
    (before: the connect handed back a comm and the peer's accept waited until -T)."""
    relays = railyardd([1, 3], {"RAILYARD_RELAY_PORT": "29600"})
    try:
        results, took = failing_pair("no relay listens where it dials", 30)
        named = [r for r in range(2) if "CONNECT_FAILED" in results[r][2] and ":29518" in results[r][2]]
        if not named:
            fail("no rank's error says CONNECT_FAILED naming the relay port it dialed:\n" +
                 "\n".join(e[-1500:] for _, _, e in results))
        line = next(l for l in results[named[0]][2].splitlines() if "CONNECT_FAILED" in l)
        print(f"rank {named[0]}: {line.split('NCCL WARN ')[-1][:300]}")
        print(f"ok: both ranks failed in {took:.1f} s, naming the relay that refused")
    finally:
        stop(relays)


def case_relay_dropped():
    """Both relays' socket port dropped by a firewall (nft drop on h1 and h3: SYNs go
    unanswered, unlike a refusal): the ranks on h0 and h2 fail within RAILYARD_TIMEOUT_MS
    plus slack, their error saying the connect to the relay never completed (new-user
    trial: it read as a data stall, "no progress ... with 1 ops outstanding")."""
    relays = railyardd([1, 3])
    nft = "table inet rydrop {\n chain in {\n  type filter hook input priority 0;\n  tcp dport 29518 drop\n }\n}\n"
    try:
        for h in (1, 3):
            subprocess.run(["ip", "netns", "exec", NS[h], "nft", "-f", "-"], input=nft, text=True, check=True)
        results, took = failing_pair("the relays' port is dropped", 40)
        said = [r for r in range(2) if "TCP connect to the relay never completed" in results[r][2]]
        if not said:
            fail("no rank's error says its connect to the relay never completed:\n" +
                 "\n".join(e[-1500:] for _, _, e in results))
        print(f"ok: both ranks failed in {took:.1f} s; rank {said[0]} says the relay's connect never completed")
    finally:
        for h in (1, 3):
            subprocess.run(["ip", "netns", "exec", NS[h], "nft", "delete", "table", "inet", "rydrop"], capture_output=True)
        stop(relays)


def case_allreduce_ranks_apart():
    """CollNet between ranks two hosts apart (h0, h2 of the ring; railyardd relays on h1
    and h3): their own cables make no shape, so connect takes a ring in rank order over
    the relays (new-user trial: "collnet topology: rank 0 reaches no other rank")."""
    relays = railyardd([1, 3])
    try:
        results = wait_all(perf([0, 2], "allreduce", ["-b", "4", "-e", "1M", "-f", "8", "-n", "2", "-w", "1", "-c", "1"],
                                {"NCCL_DEBUG": "INFO"}))
        for rank, (rc, out, err) in enumerate(results):
            if rc != 0:
                fail(f"allreduce h0,h2: rank {rank} exited {rc}\n--- stdout\n{out[-1500:]}\n--- stderr\n{err[-3000:]}")
        if "Out of bounds values : 0 OK" not in results[0][1]:
            fail(f"allreduce h0,h2: rank 0 did not report 0 wrong values\n{results[0][1][-1500:]}")
        want = "CollNet: rank 0 of 2 connected (ring, order 0 1, from the rank order over relays"
        if want not in results[0][2]:
            fail(f"allreduce h0,h2: rank 0 did not connect as a ring over relays:\n" +
                 "\n".join(l for l in results[0][2].splitlines() if "CollNet" in l))
        print("ok: allreduce -c 1 between h0 and h2 (no cable), a ring in rank order over the relays")
    finally:
        stop(relays)


CASES = {
    "adjacent-two-rails": case_adjacent_two_rails,
    "opposite-via-railyardd": case_opposite_via_railyardd,
    "alltoall-ranks-relay": case_alltoall_ranks_relay,
    "chain-end-to-end": case_chain_end_to_end,
    "cut-cable": case_cut_cable,
    "kill-relay": case_kill_relay,
}

CASES["relay-refuses.fabric"] = case_relay_refuses
CASES["allreduce-ranks-apart.fabric"] = case_allreduce_ranks_apart
CASES["relay-dropped.fabric"] = case_relay_dropped
for _name in ("opposite-via-railyardd", "alltoall-ranks-relay", "chain-end-to-end", "cut-cable", "kill-relay"):
    CASES[_name + ".fabric"] = CASES[_name]

if __name__ == "__main__":
    CASES[CASE]()
