#!/usr/bin/env python3
"""The storage tiers through the fabric relay on the netns ring of 4 (run inside
`testbed.sh run --lane ring4x2`): an expert client and a snapshot client on h0 reach
their peer on h2, which has no cable to h0, through the Forwarder railyardd runs on
h1 or h3 (it holds that host's relay seat; RAILYARD_FABRIC_RELAY_PORT). Control
records (the tiers' TCP control protocols, carried by storage/tunnel's
ControlTunnel) and data (fabric Reads and Writes) take the same relayed route.
tiers_relay_node (tests/tiers_relay/) runs each host's part.

Usage: tiers_relay_lane.py CASE TIERS_RELAY_NODE RAILYARDD [LIBRARY]
Cases:
  expert-relayed         every record of a 2 x 8 x 1 MiB store fetched by RDMA-READ-style
                         fabric Reads from h2 into h0's arena, checked by content
                         against the store's files; the relay's rails toward h0
                         carried the records
  expert-relay-killed    SIGKILL of the relay's railyardd mid-fetch: the fetch fails
                         with a named error (peer, relay, seq) within
                         RAILYARD_TIMEOUT_MS (+ slack), no fetch returned other bytes
  snapshot-relayed       24 blobs of 1 MiB put into h2's paging arena of 8 slots (the
                         rest spills to its swap file) and got back, checked by content
  snapshot-relay-killed  SIGKILL of the relay's railyardd mid-put (the error names the
                         relayed op's seq, or, killed between a put's data ops, the
                         control call that broke and the fabric route's failure)
  capi-expert-relayed    the user path: railyardd --expert-store on h2, and on h0 the
                         Python binding (C API of LIBRARY) opening "host:h2": the library
                         resolves h2 in its cabling graph and goes through railyardd's
                         tier tunnel there, relayed; every record compared byte by byte
                         with the store's files; a relay's rails toward h0 carried them
  capi-expert-relay-killed  as above, streaming; SIGKILL of the relay carrying the
                         fetch (the one whose rails toward h0 move bytes): a named
                         error within RAILYARD_TIMEOUT_MS (+ slack), no torn record
  capi-snapshot-relayed  railyardd --snapshot-arena on h2; its arenas listed, then 24 blobs of 1 MiB put from h0
                         through "host:h2" into 8 slots and got back, byte by byte, one by one
                         and then with put_many/get_many
  capi-expert-late-cable railyardd on h2 (serving) and h3 only: h2's tier tunnels start
                         with the cable to h3; the cable to h1 comes up when the C API
                         client on h1 says hello, the tunnels take it (listen on its
                         rails) and every record is fetched straight over it
  capi-no-tier-or-self   railyardd on every host, none serving a tier: the C API opening
                         "host:h1" fails once its tier tunnel port has refused for
                         5 x RAILYARD_DISCOVERY_DEAD_MS, asking whether railyardd there
                         serves --expert-store; "host:h0" on h0 is refused at once as
                         this host (both well before RAILYARD_TIMEOUT_MS)
  capi-unknown-host      railyardd on every host; the C API opening "host:nosuch": refused
                         once the settled cabling graph has lacked the name for
                         5 x RAILYARD_DISCOVERY_DEAD_MS (not the whole RAILYARD_TIMEOUT_MS
                         wait), naming the hosts it knows and what to check
  bench                  (benchmark, not a ctest case) relayed fetch h0 -> h2 against
                         direct fetch h0 -> h1 of the same store, interleaved rounds
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from netns_lane import Lane  # noqa: E402

LANE = Lane("tiers-relay-", "TIERS_KEEP_LOGS")
TB, NS, WORK = LANE.tb, LANE.ns, LANE.work
fail, cleanup, log_of, listening, wait_for = LANE.fail, LANE.cleanup, LANE.log_of, LANE.listening, LANE.wait_for
CASE, NODE, RAILYARDD = sys.argv[1:4]
LIBRARY = sys.argv[4] if len(sys.argv) > 4 else ""
TIER_TUNNEL_PORT = 29520  # RAILYARD_TIER_TUNNEL_PORT's default (snapshot: + 1)
PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
FABRIC_RELAY_PORT = 29519  # RAILYARD_FABRIC_RELAY_PORT's default
TIMEOUT_MS = 2000
SLACK_MS = 2500  # scheduling on a shared box; the bound asserted is TIMEOUT_MS + this
ENV = dict(os.environ, RAILYARD_SOCKET_IFNAME="^mgmt0", RAILYARD_TIMEOUT_MS=str(TIMEOUT_MS))


def start(host, argv, name, env=None):
    """`argv` on host `host` as RAILYARD_HOST_NAME hN, in ENV (or `env`)."""
    return LANE.start(host, argv, name, dict(env or ENV, RAILYARD_HOST_NAME=f"h{host}"))


def node(host, role, name, *args):
    """tiers_relay_node `role` on host `host` (log NAME.log), told the ring's link count."""
    # --links: every rail-link of the ring known before the node routes (a settled graph).
    links = sum(len(c["rails"]) for c in TB["cables"])
    return start(host, [NODE, role, "--links", str(links)] + list(args), name)


def rails(host, toward):
    """Host `host`'s rail interfaces on its cable to `toward`, in rail order."""
    return LANE.interfaces(host, toward)


def tx_bytes(host, toward):
    """Bytes host `host` has sent on its rails toward host `toward`."""
    return sum(LANE.tx_bytes(host, i["ifname"]) for i in rails(host, toward))


def start_daemons(peer_args=()):
    """railyardd on every host (their cabling agents); h1 and h3 relay (each holds its
    relay seat, so its fabric relay listens at FABRIC_RELAY_PORT on both cables).
    h2's gets `peer_args` (a store or arenas to serve)."""
    daemons = {}
    for h in range(4):
        args = [] if h in (1, 3) else ["--no-relay"]
        if h == 2:
            args += list(peer_args)
        env = dict(ENV)
        if h == 2 and peer_args:
            env["RAILYARD_SWAP_DIR"] = f"{WORK}/swap"
        daemons[h] = start(h, [RAILYARDD] + args, f"railyardd{h}", env)
    for h in (1, 3):
        want = {f"{i['ip']}:{FABRIC_RELAY_PORT}" for t in (0, 2) for i in rails(h, t)}
        wait_for(lambda: listening(h, FABRIC_RELAY_PORT) == want or daemons[h].poll() is not None,
                 f"h{h}'s fabric relay on {sorted(want)}")
        if daemons[h].poll() is not None:
            fail(f"railyardd on h{h} exited:\n" + log_of(f"railyardd{h}"))
    return daemons


def start_peer(role, *args):
    """The tiers_relay_node peer on h2 in `role`; waits until it wrote its address file."""
    peer = node(2, role, "peer", "--out", f"{WORK}/peer", *args)
    wait_for(lambda: os.path.exists(f"{WORK}/peer") or peer.poll() is not None, "the peer on h2")
    if peer.poll() is not None:
        fail("the peer on h2 exited:\n" + log_of("peer"))
    return peer


def relay_of(out):
    """The relay host (1 or 3) the client's output says its route goes through."""
    m = re.search(r"route via relay (h\d)", out)
    if not m:
        fail("the client did not go through a relay:\n" + out)
    return int(m.group(1)[1:])


def client_ok(c, what, want, also_log):
    """Waits (60 s) for client `c`, prints what it wrote and returns it; fails the lane,
    naming `what` (and with `also_log`'s log), unless it exited 0 having written `want`."""
    try:
        rc = c.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail(f"{what} hung:\n" + log_of("client"))
    out = log_of("client")
    print(out)
    if rc != 0 or want not in out:
        fail(f"{what} (exit {rc}):\n" + log_of(also_log))
    return out


def spilled(path):
    """The size of the swap file at `path`; fails the lane unless the 16 blobs of 1 MiB
    put beyond the arena's 8 slots are in it."""
    swap = os.path.getsize(path)
    if swap < 16 << 20:
        fail(f"the swap file holds {swap} bytes: the 16 blobs beyond the arena did not spill")
    return swap


STORE_ARGS = ["--layers", "2", "--experts", "8", "--record-bytes", str(1 << 20)]


def case_expert_relayed():
    start_daemons()
    start_peer("expert-serve", "--store", f"{WORK}/store", *STORE_ARGS)
    before = {h: tx_bytes(h, 0) for h in (1, 3)}
    c = node(0, "expert-fetch", "client", "--peer", f"{WORK}/peer", "--store", f"{WORK}/store")
    out = client_ok(c, "the relayed fetch", "expert ok 16777216 bytes", "peer")
    relay = relay_of(out)
    carried = tx_bytes(relay, 0) - before[relay]
    if carried < 16 << 20:
        fail(f"h{relay}'s rails toward h0 carried only {carried} bytes of the 16 MiB fetched")
    print(f"ok: 16 records x 1 MiB fetched h2 -> h{relay} -> h0, checked by content; h{relay} -> h0 rails carried {carried} bytes")


def case_snapshot_relayed():
    start_daemons()
    os.makedirs(f"{WORK}/swap")
    start_peer("snapshot-serve", "--arena", "kind=kv,mode=paging,blob=1M,slots=8", "--swap-dir", f"{WORK}/swap")
    before = {h: tx_bytes(h, 2) for h in (1, 3)}
    c = node(0, "snapshot-put", "client", "--peer", f"{WORK}/peer", "--kind", "kv", "--blob", str(1 << 20),
             "--slots", "8", "--count", "24")
    out = client_ok(c, "the relayed snapshot round trip", "snapshot ok", "peer")
    relay = relay_of(out)
    carried = tx_bytes(relay, 2) - before[relay]
    if carried < 24 << 20:
        fail(f"h{relay}'s rails toward h2 carried only {carried} bytes of the 24 MiB put")
    swap = spilled(f"{WORK}/swap/railyard-snapshot-kv.swap")
    print(f"ok: 24 blobs x 1 MiB put h0 -> h{relay} -> h2 into 8 slots (swap {swap} bytes) and got back, "
          f"checked by content; h{relay} -> h2 rails carried {carried} bytes")


def kill_relay(daemon, client):
    """SIGKILLs the relay's railyardd `daemon` while `client` streams, and checks what
    the client printed: no call returned other bytes (TORN), it exited 3 with a named
    error ("error-at-ms MS", "error TEXT") and failed the call it tried again
    ("stays-failed yes"), all within RAILYARD_TIMEOUT_MS + SLACK_MS of the kill.
    Returns (the error's TEXT, the ms from the kill to the error)."""
    fault_at = int(time.time() * 1000)
    daemon.send_signal(signal.SIGKILL)
    try:
        rc = client.wait(timeout=(TIMEOUT_MS + SLACK_MS) / 1000 + 20)
    except subprocess.TimeoutExpired:
        fail("the client hung after the relay was killed:\n" + log_of("client"))
    out = log_of("client")
    print(out)
    if "TORN" in out:
        fail("a call returned success with bytes that differ")
    m = re.search(r"error-at-ms (\d+)", out)
    e = re.search(r"^error (.*)$", out, re.M)
    if rc != 3 or not m or not e:
        fail(f"no named error after the relay was killed (exit {rc})")
    after = int(m.group(1)) - fault_at
    if "stays-failed yes" not in out:
        fail("the client took a new call after failing")
    if after > TIMEOUT_MS + SLACK_MS:
        fail(f"the error came {after} ms after the fault (timeout {TIMEOUT_MS} ms): {e.group(1)}")
    return e.group(1), after


def fault_case(tier):
    daemons = start_daemons()
    if tier == "expert":
        start_peer("expert-serve", "--store", f"{WORK}/store", *STORE_ARGS)
        c = node(0, "expert-fetch", "client", "--peer", f"{WORK}/peer", "--store", f"{WORK}/store", "--stream",
                 "--max-seconds", "60")
    else:
        os.makedirs(f"{WORK}/swap")
        start_peer("snapshot-serve", "--arena", "kind=kv,mode=paging,blob=1M,slots=8", "--swap-dir", f"{WORK}/swap")
        c = node(0, "snapshot-put", "client", "--peer", f"{WORK}/peer", "--kind", "kv", "--blob", str(1 << 20),
                 "--slots", "8", "--count", "12", "--stream", "--max-seconds", "60")
    wait_for(lambda: "streaming" in log_of("client") or c.poll() is not None, "the stream to be under way", 60)
    if c.poll() is not None:
        fail("the stream ended before the fault:\n" + log_of("client"))
    relay = relay_of(log_of("client"))
    err, after = kill_relay(daemons[relay], c)
    if "peer" not in err or not re.search(r"via (relay|h\d)", err):
        fail(f"the error does not name the peer and the relay: {err}")
    # Killed while a fabric op was in flight, the relayed op's sequence is named; killed
    # between ops (a snapshot control call: alloc, commit, get), no fabric op had one,
    # and the error names the call and says the fabric route failed too.
    control_call = re.search(r"snapshot \w+ of key \d+: .*the fabric route to the peer failed too", err)
    if not re.search(r"seq \d+", err) and not control_call:
        fail(f"the error names neither the relayed op's seq nor the control call: {err}")
    # The relay is named by its address: one of h{relay}'s rails toward h0.
    if not any(i["ip"] in err for i in rails(relay, 0)):
        fail(f"the error does not name the relay h{relay} ({[i['ip'] for i in rails(relay, 0)]}): {err}")
    # The snapshot error says which call and key (new-user trial: a put's write through a
    # killed relay said only the fabric's error).
    if tier == "snapshot" and not re.search(r"snapshot \w+ of key \d+", err):
        fail(f"the error does not name the snapshot call and key: {err}")
    if re.search(r"(expert [A-Z_]+: )\1", err):
        fail(f"the error repeats its name: {err}")
    print(f"ok: {tier}: relay h{relay} killed mid-{'fetch' if tier == 'expert' else 'put'}: "
          f"error {after} ms after (timeout {TIMEOUT_MS} ms): {err}")


def capi_client(*args, host=None, timeout_ms=TIMEOUT_MS):
    """The Python client on `host`, by default h0 (CAPI_CLIENT_HOST=1 puts it on h1, cabled to
    h2: a debugging aid that tells the relayed path from the rest; the relay checks then fail),
    with RAILYARD_TIMEOUT_MS `timeout_ms`."""
    env = dict(ENV, RAILYARD_LIB=LIBRARY, PYTHONPATH=PYTHON_DIR, RAILYARD_TIMEOUT_MS=str(timeout_ms))
    if host is None:
        host = int(os.environ.get("CAPI_CLIENT_HOST", "0"))
    return start(host, [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "capi_client.py")] + list(args),
                 "client", env)





def start_tier_peer(serve_args, port):
    """railyardd on every host, h2's serving `serve_args`; waits for h2's tier tunnel
    at `port` on each of its rails."""
    os.makedirs(f"{WORK}/swap", exist_ok=True)
    daemons = start_daemons(serve_args)
    want = {f"{i['ip']}:{port}" for t in (1, 3) for i in rails(2, t)}
    wait_for(lambda: listening(2, port) == want or daemons[2].poll() is not None, f"h2's tier tunnel on {sorted(want)}")
    if daemons[2].poll() is not None:
        fail("railyardd on h2 exited:\n" + log_of("railyardd2"))
    return daemons


def make_store():
    """Writes the 2 x 8 x 1 MiB expert store on h2 (tiers_relay_node make-store)."""
    p = node(2, "make-store", "make-store", "--store", f"{WORK}/store", *STORE_ARGS)
    if p.wait(timeout=60) != 0:
        fail("make-store:\n" + log_of("make-store"))


def carrying_relay(toward, before):
    """The relay (h1 or h3) whose rails toward `toward` moved the most bytes since `before`."""
    moved = {h: tx_bytes(h, toward) - before[h] for h in (1, 3)}
    return max(moved, key=moved.get), moved


def case_capi_expert_relayed():
    make_store()
    start_tier_peer(["--expert-store", f"{WORK}/store"], TIER_TUNNEL_PORT)
    before = {h: tx_bytes(h, 0) for h in (1, 3)}
    c = capi_client("expert", "host:h2", f"{WORK}/store")
    client_ok(c, "the relayed fetch through the C API", "expert ok 16777216 bytes", "railyardd2")
    relay, moved = carrying_relay(0, before)
    if moved[relay] < 16 << 20:
        fail(f"no relay's rails toward h0 carried the 16 MiB fetched: {moved}")
    print(f"ok: Python binding / C API opened host:h2; 16 records x 1 MiB fetched h2 -> h{relay} -> h0, "
          f"compared byte by byte; rails toward h0 moved {moved}")


def case_capi_snapshot_relayed():
    start_tier_peer(["--snapshot-arena", "kind=kv,mode=paging,blob=1M,slots=8"], TIER_TUNNEL_PORT + 1)
    before = {h: tx_bytes(h, 2) for h in (1, 3)}
    c = capi_client("snapshot", "host:h2", "kv", str(1 << 20), "8", "24")
    out = client_ok(c, "the relayed snapshot round trip through the C API", "snapshot ok", "railyardd2")
    if "listed host:h2: ['kv']" not in out:  # railyard_snapshot_list through the tunnel too
        fail(f"list_arenas('host:h2', 0) did not list the one arena kv:\n{out}")
    if "batches ok 24 blobs" not in out:  # put_many/get_many: requests ahead of answers through the tunnel
        fail(f"the batch round did not end well:\n{out}")
    relay, moved = carrying_relay(2, before)
    if moved[relay] < 24 << 20:
        fail(f"no relay's rails toward h2 carried the 24 MiB put: {moved}")
    swap = spilled(f"{WORK}/swap/fabric/railyard-snapshot-kv.swap")
    print(f"ok: 24 blobs x 1 MiB put through host:h2 (h0 -> h{relay} -> h2) into 8 slots (swap {swap} bytes) "
          f"and got back byte by byte, one by one and in batches; rails toward h2 moved {moved}")


def case_capi_expert_relay_killed():
    make_store()
    daemons = start_tier_peer(["--expert-store", f"{WORK}/store"], TIER_TUNNEL_PORT)
    c = capi_client("expert", "host:h2", f"{WORK}/store", "--stream", "60")
    wait_for(lambda: "streaming" in log_of("client") or c.poll() is not None, "the stream to be under way", 60)
    if c.poll() is not None:
        fail("the stream ended before the fault:\n" + log_of("client"))
    # Which relay carries it: the one whose rails toward h0 move bytes over a short window.
    before = {h: tx_bytes(h, 0) for h in (1, 3)}
    time.sleep(0.5)  # a measuring window, not a barrier
    relay, moved = carrying_relay(0, before)
    if moved[relay] < 1 << 20:
        fail(f"no relay is carrying the stream: {moved}")
    err, after = kill_relay(daemons[relay], c)
    if not re.match(r"(PEER_LOST|PROTOCOL|SYSTEM)\b", err):
        fail(f"the error is not a named cause: {err}")
    if not re.search(rf"via h{relay}\b", err) or not re.search(r"seq \d+", err):
        fail(f"the error names neither the relay h{relay} nor the relayed op's seq: {err}")
    print(f"ok: C API: relay h{relay} killed mid-fetch: error {after} ms after (timeout {TIMEOUT_MS} ms): {err}")


def case_capi_expert_late_cable():
    make_store()
    # railyardd on h2 (serving) and h3 only: h2's tier tunnels start with the one cable
    # to h3; the cable to h1 comes up when a process on h1 (the client) says hello.
    daemons = {3: start(3, [RAILYARDD, "--no-relay"], "railyardd3"),
               2: start(2, [RAILYARDD, "--no-relay", "--expert-store", f"{WORK}/store"], "railyardd2")}
    toward1 = {f"{i['ip']}:{TIER_TUNNEL_PORT}" for i in rails(2, 1)}
    toward3 = {f"{i['ip']}:{TIER_TUNNEL_PORT}" for i in rails(2, 3)}
    wait_for(lambda: listening(2, TIER_TUNNEL_PORT) == toward3 or daemons[2].poll() is not None,
             f"h2's tier tunnel on the cable to h3 {sorted(toward3)}")
    if daemons[2].poll() is not None:
        fail("railyardd on h2 exited:\n" + log_of("railyardd2"))
    before = tx_bytes(2, 1)
    # The client's dials to h2's tier port are redialed for RAILYARD_TIMEOUT_MS at most
    # (5 x the dead interval): h2's tunnels take the cable once h2's own graph has it,
    # which under CI load came more than the suite's 2 s after h1's (refused 15 times
    # over 1.9 s). What is checked here is that they take it, not how fast: 10 s.
    c = capi_client("expert", "host:h2", f"{WORK}/store", host=1, timeout_ms=10000)
    client_ok(c, "the fetch over the cable that came up late", "expert ok 16777216 bytes", "railyardd2")
    moved = tx_bytes(2, 1) - before
    if moved < 16 << 20:
        fail(f"h2's rails toward h1 carried {moved} bytes, not the 16 MiB fetched")
    if not toward1 <= listening(2, TIER_TUNNEL_PORT):
        fail(f"h2's tier tunnel does not listen on the late cable {sorted(toward1)}")
    print(f"ok: the cable h1-h2 came up after railyardd on h2 started its tier tunnels: they took it "
          f"(now listening on {sorted(listening(2, TIER_TUNNEL_PORT))}); h1 fetched 16 records x 1 MiB straight "
          f"over it ({moved} bytes)")


def refused_open(peer, words, what):
    """The C API on h0 opening expert peer `peer` (RAILYARD_TIMEOUT_MS 60 s): must fail
    before that timeout with an error holding every one of `words`; returns the line."""
    env = dict(ENV, RAILYARD_TIMEOUT_MS="60000", RAILYARD_LIB=LIBRARY, PYTHONPATH=PYTHON_DIR)
    c = start(0, [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "capi_client.py"),
                  "expert", peer, f"{WORK}/none"], "client", env)
    try:
        rc = c.wait(timeout=50)
    except subprocess.TimeoutExpired:
        c.kill()
        fail(f"opening {peer} ({what}) did not fail before RAILYARD_TIMEOUT_MS (60 s):\n" + log_of("client"))
    out = log_of("client")
    if rc == 0:
        fail(f"opening {peer} ({what}) succeeded:\n" + out)
    for w in words:
        if w not in out:
            fail(f"opening {peer} ({what}): the error does not say '{w}':\n{out}")
    return next((l for l in out.splitlines() if words[0] in l), "").strip()


def case_capi_no_tier_or_self():
    start_daemons()  # no host serves a tier
    line = refused_open("host:h1", ["does railyardd there serve --expert-store?", "host:h1", "Connection refused"],
                        "railyardd there serves no expert store")
    # The code stays the store's (review: leading with the tunnel's text made it SYSTEM).
    if not line.startswith("setup-failed PEER_LOST: expert PEER_LOST: the tunnel to host:h1 failed"):
        fail(f"opening host:h1: expected PEER_LOST, the tunnel's failure first: {line}")
    print(f"client: {line[:500]}")
    # The same through a relay (h2 has no cable to h0): the tier's hint, not only the dialer's.
    # The relay's whole reason arrives (it was cut at the frame header's 56 bytes), and
    # the route named is the one the tunnel took.
    line = refused_open("host:h2", ["does railyardd there serve --expert-store?", "host:h2",
                                    "connect onward: Connection refused (errno 111)"],
                        "railyardd on a relayed host serves no expert store")
    named = re.search(r"host:h2 \(via relay (h\d)\)", line)  # the route the client names
    took = re.search(r" via (h\d) \(", line)                    # the tunnel's Endpoint's relay
    if not named or not took or named.group(1) != took.group(1):
        fail(f"the route named for host:h2 is not the one its tunnel took: {line}")
    print(f"client: {line[:500]}")
    line = refused_open("host:h0", ["host 'h0' is this host", "127.0.0.1"], "this host's own name")
    print(f"client: {line[:300]}")
    print("ok: a host that serves no expert store, and this host's own name, are refused naming why, "
          "well before RAILYARD_TIMEOUT_MS")


def case_capi_unknown_host():
    start_daemons()
    env = dict(ENV, RAILYARD_TIMEOUT_MS="60000")  # the early refusal is what ends it
    c = start(0, [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "capi_client.py"),
                  "expert", "host:nosuch", f"{WORK}/none"], "client", dict(env, RAILYARD_LIB=LIBRARY,
                                                                            PYTHONPATH=PYTHON_DIR))
    try:
        rc = c.wait(timeout=50)
    except subprocess.TimeoutExpired:
        fail("opening host:nosuch did not fail before RAILYARD_TIMEOUT_MS (60 s):\n" + log_of("client"))
    out = log_of("client")
    if rc == 0:
        fail("opening host:nosuch succeeded:\n" + out)
    for w in ["no host 'nosuch' in the settled cabling graph", "5 x RAILYARD_DISCOVERY_DEAD_MS",
              "hosts known: ", "h1", "h2", "h3", "railyardd"]:
        if w not in out:
            fail(f"the error does not say '{w}':\n{out}")
    line = next(l for l in out.splitlines() if "no host 'nosuch'" in l)
    print(f"client: {line.strip()[:400]}")
    print("ok: host:nosuch refused once the settled graph lacked it, naming the hosts known")


def case_bench():
    start_daemons()
    start_peer("expert-serve", "--store", f"{WORK}/store", *STORE_ARGS)
    direct = node(1, "expert-serve", "direct", "--out", f"{WORK}/direct", "--store", f"{WORK}/store")
    wait_for(lambda: os.path.exists(f"{WORK}/direct") or direct.poll() is not None, "the direct peer on h1")
    c = node(0, "expert-bench", "client", "--peer", f"{WORK}/peer", "--direct", f"{WORK}/direct",
             "--store", f"{WORK}/store", "--rounds", os.environ.get("ROUNDS", "5"))
    rc = c.wait(timeout=600)
    print(log_of("client"))
    with open("/proc/loadavg") as f:
        print("loadavg " + f.read().strip())
    if rc != 0:
        fail("bench")


try:
    if CASE == "expert-relayed":
        case_expert_relayed()
    elif CASE == "snapshot-relayed":
        case_snapshot_relayed()
    elif CASE == "expert-relay-killed":
        fault_case("expert")
    elif CASE == "snapshot-relay-killed":
        fault_case("snapshot")
    elif CASE == "capi-expert-relayed":
        case_capi_expert_relayed()
    elif CASE == "capi-expert-relay-killed":
        case_capi_expert_relay_killed()
    elif CASE == "capi-snapshot-relayed":
        case_capi_snapshot_relayed()
    elif CASE == "capi-expert-late-cable":
        case_capi_expert_late_cable()
    elif CASE == "capi-no-tier-or-self":
        case_capi_no_tier_or_self()
    elif CASE == "capi-unknown-host":
        case_capi_unknown_host()
    elif CASE == "bench":
        case_bench()
    else:
        fail(f"unknown case {CASE}")
finally:
    cleanup()
