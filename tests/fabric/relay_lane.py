#!/usr/bin/env python3
"""Who relays, and what a relay agrees to do, on a netns testbed lane (run inside
`testbed.sh run`; same arguments as fabric_lane.py, whose helpers it uses).

Usage: relay_lane.py CASE RAILYARD_PERF RAILYARDD LIBDIR
Cases:
  relay-churn              railyardd everywhere, one-rank processes come and go on the
                           relay hosts: 12 relayed jobs, 0 failures (issue 8 item 1)
  relay-daemon-takes-over  ranks relay first, railyardd starts later and takes the
                           relay port; killing those ranks breaks no later job (8.1)
  second-railyardd         a second railyardd on a host is refused, naming the first (8.6)
  relay-sigterm-drains     SIGTERM: no new relayed socket, the job in flight finishes
                           (#wrong 0), the daemon exits as soon as it has (8.5)
  relay-hostile-records    records for loopback, a non-Railyard port or a host outside
                           the graph are refused; sockets from off the relay's cables
                           (its management or loopback address, its rail address routed
                           over the management network, from itself) are reset; nothing
                           connects (9.4)
  relay-authenticated      with RAILYARD_CLUSTER_KEY_FILE, records without a valid MAC
                           are refused and nothing connects; jobs still run (9.2)
  relay-bounded            idle sockets hold no buffers, a cap per source address, an
                           idle timeout, no spinning on a reset during a pending connect (9.5)
"""
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_lane as fl  # noqa: E402  (reads the same argv and TESTBED_JSON)
from fabric_lane import NS, TB, expect_ok, fail, perf, railyardd, rails_between, stop, wait_all, wait_for_traffic  # noqa: E402

CASE = fl.CASE
RELAY_PORT = 29518
MAGIC = 0x44525952


def address_of(host, toward):
    """Host `host`'s rail address on (the first rail of) its cable to host `toward`."""
    for r in TB["rails"]:
        if r["host"] == host and r["peer_host"] == toward:
            return r["ip"]
        if r["peer_host"] == host and r["host"] == toward:
            return r["peer_ip"]
    raise KeyError((host, toward))


def relay_record(dest, port, hops=0, name=b"hostile"):
    """A RelayRecord as proxy/wire.h lays it out (56 bytes, little-endian)."""
    return struct.pack("<IHHQQHHB3x24s", MAGIC, 1, 5, dest, 0, port, 0, hops, name)


HELLO_HEADER = struct.pack("<IHH", MAGIC, 1, 1)


def in_ns(host, code, timeout=60):
    """Runs Python `code` inside host's namespace; returns its stdout (raises on failure)."""
    r = subprocess.run(["ip", "netns", "exec", NS[host], sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        fail(f"helper on h{host} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def poll_until(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)  # polling a condition, not a barrier
    fail(f"timed out after {timeout} s waiting for {what}")


def graph_ids(proc, nhosts):
    """Host name -> id from the JSON graphs a serving railyardd prints on stdout.

    Reads the pipe unbuffered: railyardd prints only when the graph changes, so a
    graph left in a buffered reader would never make select() fire again."""
    buf, dec = "", json.JSONDecoder()
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 1)
        if not r:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            fail("railyardd exited before printing its graph")
        buf += chunk.decode("utf-8", "replace")
        while True:
            text = buf.lstrip()
            try:
                g, end = dec.raw_decode(text)
            except ValueError:
                break
            buf = text[end:]
            if len(g["hosts"]) >= nhosts:
                return {h["name"]: int(h["id"], 16) for h in g["hosts"]}
    fail("railyardd never printed a graph with every host")


def alive(procs):
    return [p for p in procs if p.poll() is None]


def job_ok(results):
    return all(rc == 0 for rc, _, _ in results) and "Out of bounds values : 0 OK" in results[0][1]


def job_error(results):
    return "; ".join(f"rank {i} rc {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
                     for i, (rc, _, err) in enumerate(results))


# --- 8.1 -------------------------------------------------------------------------------------


def case_relay_churn():
    daemons = railyardd([0, 1, 2, 3])
    stopping = threading.Event()
    churned, churn_errors = [0], []

    def churn(host):
        # One-rank jobs (ring of 1): each loads the plugin in fabric mode, runs a moment, exits.
        while not stopping.is_set():
            res = wait_all(perf([host], "ring", ["-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-c", "0"]), timeout=90)
            if res[0][0] == 0:
                churned[0] += 1
            else:
                churn_errors.append(res[0][2][-500:])

    threads = [threading.Thread(target=churn, args=(h,), daemon=True) for h in (1, 3)]
    for t in threads:
        t.start()
    failures = []
    jobs = 12
    try:
        for i in range(jobs):
            res = wait_all(perf([0, 2], "sendrecv", ["-b", "64K", "-e", "8M", "-f", "4", "-n", "10", "-c", "1"]),
                           timeout=120)
            if not job_ok(res):
                failures.append(f"job {i}: {job_error(res)}")
    finally:
        stopping.set()
        for t in threads:
            t.join(timeout=120)
        gone = [h for h, p in zip(range(4), daemons) if p.poll() is not None]
        stop(daemons)
    print(f"{len(failures)} of {jobs} relayed jobs h0<->h2 failed while {churned[0]} one-rank processes "
          f"came and went on h1 and h3")
    if gone:
        fail(f"railyardd exited on hosts {gone}")
    if failures:
        fail("relayed jobs failed:\n" + "\n".join(failures))
    if churned[0] < jobs:
        fail(f"only {churned[0]} one-rank processes ran to the end ({len(churn_errors)} failed): the churn "
             f"did not overlap the jobs\n" + "\n".join(churn_errors[:3]))
    print(f"ok: {jobs} of {jobs} jobs through railyardd on h1/h3 with {churned[0]} processes churning there")


def relay_seat_lines(host):
    """`ss` lines of the listening relay seat sockets in host's namespace."""
    seat = subprocess.run(["ip", "netns", "exec", NS[host], "ss", "-Hxlp"], capture_output=True, text=True).stdout
    return [l for l in seat.splitlines() if f"railyard-seat:relay:{RELAY_PORT}" in l]


def holds_relay_seat(host, pid):
    """True when process `pid` holds the relay seat of host `host` (listens on its socket)."""
    return any(f"pid={pid}," in l for l in relay_seat_lines(host))


def case_relay_daemon_takes_over():
    # h0 and h2 relay for job A (h1<->h3); on h1 and h3 job A's own ranks are the relays.
    far = railyardd([0, 2])
    jobs, a_results = [], []
    try:
        a = perf([1, 3], "sendrecv", ["-b", "1M", "-e", "1M", "-n", "1000000", "-w", "0", "-c", "0"])
        jobs.append(a)
        wait_for_traffic(0, rails_between(0, 1), 4 * 2**20)  # job A runs (through h0 or h2)
        expect_ok(wait_all(perf([0, 2], "sendrecv", ["-b", "4K", "-e", "1M", "-f", "16", "-n", "3", "-c", "1"])),
                  "job B h0<->h2 relayed by job A's ranks on h1/h3")
        print("ok: with no railyardd on h1/h3, job A's ranks relayed job B")
        dead = [p for p in a if p.poll() is not None]
        if dead:
            fail("job A ended before railyardd started on h1/h3:\n" + "\n".join(p.stderr.read()[-2000:] for p in dead))
        for h, p in zip((1, 3), a):
            if not holds_relay_seat(h, p.pid):
                fail(f"job A's rank on h{h} (pid {p.pid}) does not hold the relay seat before railyardd starts: "
                     f"{relay_seat_lines(h)}")
        # railyardd starts after the ranks: it takes the relay port over from them. Job C
        # starts once both hold the seat (a loaded machine starts them slowly; killing the
        # ranks first would leave the seat free, with nothing to take over).
        near = railyardd([1, 3], {"RAILYARD_DEBUG": "INFO"})
        far += near
        for h, d in zip((1, 3), near):
            poll_until(lambda: d.poll() is not None or holds_relay_seat(h, d.pid), f"railyardd on h{h} to hold the relay seat")
            if d.poll() is not None:
                fail(f"railyardd on h{h} exited {d.returncode}: {d.stderr.read()[-3000:]}")
        # Job C through the daemons; while it runs, job A's ranks (the former relays) die.
        c = perf([0, 2], "sendrecv", ["-b", "16M", "-e", "16M", "-n", "40", "-w", "0", "-c", "1"])
        jobs.append(c)
        wait_for_traffic(1, rails_between(1, 2), 8 * 2**20)
        for p in a:
            p.kill()
        a_results = wait_all(a, timeout=30)
        res = wait_all(c, timeout=120)
        if not job_ok(res):
            fail(f"job C failed when the ranks that relayed before railyardd started were killed: {job_error(res)}")
        print("ok: job C went through railyardd on h1/h3 and survived kill -9 of the former rank relays")
    finally:
        for j in jobs:
            stop(j)
        stop(far)
    for h, p in zip((1, 3), far[2:]):
        err = p.stderr.read()
        if "taken over from a rank process" not in err:
            fail(f"railyardd on h{h} never said it took the relay over from a rank:\n{err[-3000:]}\n"
                 f"--- job A's ranks: " + "\n".join(f"rc {rc}: {e[-1500:]}" for rc, _, e in a_results))
    print("ok: both daemons logged taking the relay seat over from a rank process")


# --- 8.6 -------------------------------------------------------------------------------------


def case_second_railyardd():
    first = railyardd([0])[0]
    try:
        # The first one holds its seats once it answers on the relay port.
        poll_until(lambda: first.poll() is not None or subprocess.run(
            ["ip", "netns", "exec", NS[0], "ss", "-Hltn", f"sport = :{RELAY_PORT}"],
            capture_output=True, text=True).stdout.strip() != "", "the first railyardd's relay port")
        if first.poll() is not None:
            fail(f"the first railyardd exited: {first.stderr.read()}")
        # With a tier too, the refusal comes before the tier is announced (new-user trial: a
        # second daemon said "listening on" for its expert store, then was refused).
        for args in ([], ["--no-relay"], ["--snapshot-arena", "kind=k,mode=raw,blob=4096,slots=1"]):
            second = railyardd([0], args=args)[0]
            try:
                rc = second.wait(timeout=20)
            except subprocess.TimeoutExpired:
                fail(f"a second railyardd {' '.join(args)} on h0 kept running")
            err = second.stderr.read()
            want = f"another railyardd (pid {first.pid}) already runs on this host"
            if rc != 2 or want not in err:
                fail(f"second railyardd {' '.join(args)}: exit {rc}, expected 2 and '{want}':\n{err}")
            if "snapshot arenas on" in err:
                fail(f"second railyardd {' '.join(args)} announced its arenas before it was refused:\n{err}")
            print(f"ok: second railyardd {' '.join(args)} refused: {err.strip()}")
        if first.poll() is not None:
            fail("the first railyardd died when the second one was refused")
    finally:
        stop([first])


# --- 8.5 -------------------------------------------------------------------------------------


def case_relay_sigterm_drains():
    daemons = railyardd([1, 3], {"RAILYARD_RELAY_DRAIN_MS": "60000"})
    try:
        procs = perf([0, 2], "sendrecv", ["-b", "16M", "-e", "16M", "-n", "30", "-w", "0", "-c", "1"])
        wait_for_traffic(1, rails_between(1, 2), 16 * 2**20)
        for d in daemons:
            d.terminate()
        t0 = time.monotonic()
        # No new relayed socket once SIGTERM arrived (polled: the signal takes effect
        # within the daemon's 100 ms tick).
        target = address_of(1, 0)
        probe = ("import socket,sys\n"
                 "s=socket.socket(); s.settimeout(5)\n"
                 f"r=s.connect_ex(('{target}',{RELAY_PORT}))\n"
                 "print(r)\n")
        poll_until(lambda: in_ns(0, probe).strip() != "0", "the relay on h1 to stop accepting", timeout=10)
        results = wait_all(procs, timeout=120)
        job_end = time.monotonic()
        expect_ok(results, "sendrecv h0<->h2 while railyardd on h1/h3 drains after SIGTERM")
        for h, d in zip((1, 3), daemons):
            try:
                rc = d.wait(timeout=10)
            except subprocess.TimeoutExpired:
                fail(f"railyardd on h{h} still runs 10 s after the relayed job ended")
            err = d.stderr.read()
            if rc != 0 or "still open" in err:
                fail(f"railyardd on h{h} exited {rc} after draining:\n{err[-2000:]}")
        took = time.monotonic() - job_end
        print(f"ok: the job finished {job_end - t0:.1f} s after SIGTERM with 0 wrong values; "
              f"both daemons exited {took:.1f} s after it, refusing new sockets meanwhile")
        # With nothing in flight, SIGTERM ends railyardd at once (it used to take over
        # a second); bounded generously, this is no speed test.
        idle = railyardd([1], {"RAILYARD_RELAY_DRAIN_MS": "60000"})[0]
        daemons.append(idle)
        poll_until(lambda: idle.poll() is not None or subprocess.run(
            ["ip", "netns", "exec", NS[1], "ss", "-Hltn", f"sport = :{RELAY_PORT}"],
            capture_output=True, text=True).stdout.strip() != "", "the idle railyardd's relay port")
        t1 = time.monotonic()
        idle.terminate()
        try:
            rc = idle.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("an idle railyardd still runs 10 s after SIGTERM")
        print(f"ok: an idle railyardd exited {rc} {time.monotonic() - t1:.2f} s after SIGTERM")
    finally:
        stop(daemons)


# --- 9.4 -------------------------------------------------------------------------------------

LISTENER = r'''
import socket, sys, time
host, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(16); s.settimeout(0.2)
print("listening", flush=True)
n, end = 0, time.monotonic() + secs
while time.monotonic() < end:
    try:
        c, _ = s.accept(); n += 1; c.close()
    except socket.timeout:
        if sys.stdin in __import__("select").select([sys.stdin], [], [], 0)[0]:
            break
print("connections", n, flush=True)
'''


def listener(host, bind, port):
    p = subprocess.Popen(["ip", "netns", "exec", NS[host], sys.executable, "-c", LISTENER, bind, str(port), "120"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "listening":
        fail(f"listener on h{host} {bind}:{port} did not start")
    return p


def listener_count(p):
    p.stdin.write("stop\n")
    p.stdin.flush()
    out = p.stdout.read()
    p.wait(timeout=10)
    return int(out.split()[-1])


FABRIC_RELAY_PORT = 29519  # RAILYARD_FABRIC_RELAY_PORT's default

# Connects (retrying refusals for 30 s: the Forwarder serves once the cabling settles),
# then says whether the socket was closed within 3 s ("closed"), stayed open ("open").
FORWARDER_PROBE = r'''
import socket, time
deadline = time.monotonic() + 30
while True:
    try:
        s = socket.create_connection(("%s", %d), timeout=5)
        break
    except ConnectionRefusedError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)  # retrying a refused connect, not a barrier
s.settimeout(3)
try:
    print("closed" if s.recv(1) == b"" else "data")
except ConnectionResetError:
    print("closed")
except socket.timeout:
    print("open")
'''


SENDER = r'''
import socket, sys
addr, port, hexbytes = sys.argv[1], int(sys.argv[2]), sys.argv[3]
got = b""
try:
    s = socket.create_connection((addr, port), timeout=10)
    s.sendall(bytes.fromhex(hexbytes))
    s.settimeout(10)
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
except (socket.timeout, ConnectionError):  # reset, refused, aborted, broken pipe: not served
    pass
except OSError as e:  # anything else is the test's business: said, not swallowed
    print(f"error {e!r}")
    raise SystemExit(0)
print(got[8:].split(b"\0")[0].decode(errors="replace") if got[:4] == bytes.fromhex("52595244") else "no reject")
'''


def send_via_relay(frm, relay, payload, addr=None):
    """Sends payload to the relay on host `relay` from host `frm`, at `addr` (default:
    the relay's rail address on its cable to `frm`); returns the relay's reject reason,
    or 'no reject'."""
    addr = addr or address_of(relay, frm)
    r = subprocess.run(["ip", "netns", "exec", NS[frm], sys.executable, "-c", SENDER, addr,
                        str(RELAY_PORT), payload.hex()], capture_output=True, text=True, timeout=30)
    return r.stdout.strip() or f"(sender exited {r.returncode}: {r.stderr.strip()[-500:]})"


def case_relay_hostile_records():
    daemons = railyardd([1], stdout=subprocess.PIPE) + railyardd([0, 2, 3])
    listeners = []
    try:
        ids = graph_ids(daemons[0], 4)
        port = 40080  # in the ephemeral range, where Railyard's listeners bind (the relay serves no other)
        loop = listener(1, "127.0.0.1", port)            # a service on the relay host's loopback
        other = listener(2, "0.0.0.0", port + 1)          # a non-Railyard service on a cabled host
        listeners = [loop, other]
        cases = [
            ("the relay host's own id (loopback)", relay_record(ids["h1"], port) + HELLO_HEADER, "own host"),
            ("a host outside the graph", relay_record(0x1234567890abcdef, port + 1) + HELLO_HEADER,
             "not in the cabling graph"),
            ("a cabled host's non-Railyard port, as curl would", relay_record(ids["h2"], port + 1) +
             b"GET / HTTP/1.0\r\n\r\n", "not a Railyard record"),
            ("the relay port itself", relay_record(ids["h2"], RELAY_PORT) + HELLO_HEADER, "not a listener port"),
            # Hostile-peer probe: a Redis on a cabled host answered through the relay.
            ("a cabled host's service port 6379 (outside the ephemeral range)",
             relay_record(ids["h2"], 6379) + HELLO_HEADER, "is outside"),
            # Bytes the relay never reads must not reset the socket over its reason (it
            # reads and drops them until the origin closes).
            ("a host outside the graph, 32 KiB after the hello (a dialer's first frames)",
             relay_record(0x1234567890abcdef, port + 1) + HELLO_HEADER + bytes(32 << 10), "not in the cabling graph"),
        ]
        for what, payload, reason in cases:
            got = send_via_relay(0, 1, payload)
            if reason not in got:
                fail(f"record for {what}: expected a reject saying '{reason}', got '{got}'")
            print(f"ok: refused {what}: {got}")
        # A well-formed record and hello, but from off the relay's cables: reset before a
        # byte is read, unexplained (no Railyard process sends from there). The relay
        # serves its cables only: the address dialed must be a rail's, and the source
        # must lie on that rail's cable.
        wellformed = relay_record(ids["h2"], port + 1) + HELLO_HEADER + b"\0" * 56
        mgmt = TB["hosts"][1]["mgmt_ip"]
        rail = address_of(1, 0)  # h1's end of its cable to h0
        # h3 has no cable to h1: it routes h1's rail address through h1's management
        # address, so its socket reaches the rail address over the management network.
        subprocess.run(["ip", "-n", NS[3], "route", "add", f"{rail}/32", "via", mgmt], check=True)
        for what, frm, addr in [(f"the management network ({mgmt})", 0, mgmt), ("loopback", 1, "127.0.0.1"),
                                (f"its rail address {rail} routed over the management network (from h3)", 3, rail),
                                (f"its own rail address {rail} (from h1 itself)", 1, rail)]:
            got = send_via_relay(frm, 1, wellformed, addr)
            if got != "no reject":
                fail(f"a socket that reached the relay over {what}: expected a reset, got '{got}'")
            print(f"ok: reset a socket that reached the relay over {what}")
        # The same way into the Forwarder's port (RAILYARD_FABRIC_RELAY_PORT, on the rail
        # addresses): closed at accept, not after its hello deadline (RAILYARD_TIMEOUT_MS).
        got = in_ns(3, FORWARDER_PROBE % (rail, FABRIC_RELAY_PORT)).strip()
        if got != "closed":
            fail(f"a socket routed over the management network to h1's Forwarder port: expected it closed at "
                 f"accept, got '{got}'")
        print(f"ok: h1's Forwarder port closed a socket from h3 routed over the management network at once")
        n_loop, n_other = listener_count(loop), listener_count(other)
        if n_loop or n_other:
            fail(f"the relay connected anyway: loopback listener saw {n_loop}, h2's listener {n_other} connections")
        print("ok: neither listener saw a connection")
        # Control: a well-formed record and hello to the same port does reach it (so the
        # listener would have seen the hostile ones).
        other = listener(2, "0.0.0.0", port + 1)
        listeners = [other]
        got = send_via_relay(0, 1, relay_record(ids["h2"], port + 1) + HELLO_HEADER + b"\0" * 56)
        n = listener_count(other)
        if n != 1:
            fail(f"a well-formed record did not reach h2's listener ({n} connections, relay said '{got}')")
        print("ok: control: a well-formed record and hello reached h2's listener (1 connection)")
    finally:
        for p in listeners:
            if p.poll() is None:
                p.kill()
        stop(daemons)


def keyed_record(record, secret):
    """Sets kRelayFlagMac in a record and appends its HMAC-SHA256 (topology/cluster_key.h)."""
    import hashlib
    import hmac
    rec = bytearray(record)
    rec[29] |= 1  # RelayRecord::flags
    return bytes(rec) + hmac.new(secret, b"railyard.relay.record\0" + bytes(rec), hashlib.sha256).digest()


def case_relay_authenticated():
    import tempfile
    tmp = tempfile.mkdtemp(prefix="rykey")
    path = os.path.join(tmp, "cluster.key")
    secret = os.urandom(32).hex().encode()
    with open(path, "wb") as f:
        f.write(secret + b"\n")  # trailing whitespace is not part of the key
    os.chmod(path, 0o600)
    keyed = {"RAILYARD_CLUSTER_KEY_FILE": path}
    daemons = railyardd([1], keyed, stdout=subprocess.PIPE) + railyardd([0, 2, 3], keyed)
    listeners = []
    try:
        ids = graph_ids(daemons[0], 4)
        expect_ok(wait_all(perf([0, 2], "sendrecv", ["-b", "4K", "-e", "4M", "-f", "32", "-n", "3", "-c", "1"],
                                keyed)), "sendrecv h0<->h2 through relays with a cluster key")
        print("ok: with RAILYARD_CLUSTER_KEY_FILE on every host, a job went through the relays (records MAC'd)")
        port = 40181
        other = listener(2, "0.0.0.0", port)
        listeners = [other]
        plain = relay_record(ids["h2"], port) + HELLO_HEADER
        forged = keyed_record(relay_record(ids["h2"], port), b"not the cluster key, but 32+ bytes long") + HELLO_HEADER
        for what, payload, reason in [("a record without a MAC", plain, "carries no MAC"),
                                      ("a record with a MAC from another key", forged, "does not verify")]:
            got = send_via_relay(0, 1, payload)
            if reason not in got:
                fail(f"{what}: expected a reject saying '{reason}', got '{got}'")
            print(f"ok: refused {what}: {got}")
        n = listener_count(other)
        if n:
            fail(f"the relay connected for an unauthenticated record: h2's listener saw {n} connections")
        other = listener(2, "0.0.0.0", port)
        listeners = [other]
        got = send_via_relay(0, 1, keyed_record(relay_record(ids["h2"], port), secret) + HELLO_HEADER + b"\0" * 56)
        n = listener_count(other)
        if n != 1:
            fail(f"a record with a valid MAC did not reach h2's listener ({n} connections, relay said '{got}')")
        print("ok: control: a record with a valid MAC reached h2's listener (1 connection)")
    finally:
        for p in listeners:
            if p.poll() is None:
                p.kill()
        stop(daemons)
        os.unlink(path)
        os.rmdir(tmp)


# --- 9.5 -------------------------------------------------------------------------------------


def proc_stat(pid):
    """(cpu seconds, rss bytes) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks   # utime + stime
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


IDLE_FLOOD = r'''
import socket, sys, time, select
addr, port, n, expect = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
socks, closed, reset_early, got = [], set(), 0, {}
for _ in range(n):
    try:
        socks.append(socket.create_connection((addr, port), timeout=10))
    except ConnectionResetError:           # over the cap: reset before connect() returned
        reset_early += 1
t0 = time.monotonic()
expect -= reset_early
n -= reset_early
def sweep():
    r, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.05)
    for s in r:
        try:
            b = s.recv(4096)
        except OSError:
            b = b""
        if b:
            got[s] = got.get(s, b"") + b
        else:
            closed.add(s)
end = time.monotonic() + 5
while len(closed) < expect and time.monotonic() < end: sweep()
told = sum(1 for s in closed if b"RAILYARD_RELAY_MAX_PER_PEER" in got.get(s, b""))
print("closed_at_once", len(closed) + reset_early, told, flush=True)
sys.stdin.readline()                      # the parent measured the relay
end = time.monotonic() + 30
while len(closed) < n and time.monotonic() < end: sweep()
print("closed_all", len(closed) + reset_early, round(time.monotonic() - t0, 1), flush=True)
'''

PENDING_RESET = r'''
import socket, struct, sys
addr, port, hexbytes = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.create_connection((addr, port), timeout=10)
s.sendall(bytes.fromhex(hexbytes))
print("sent", flush=True)
sys.stdin.readline()                      # the relay's onward connect is pending now
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()                                 # RST
print("reset", flush=True)
'''


def case_relay_bounded():
    idle_ms, cap, flood = 3000, 200, 300
    relay = railyardd([1], {"RAILYARD_RELAY_IDLE_MS": str(idle_ms), "RAILYARD_RELAY_MAX_PER_PEER": str(cap)},
                      stdout=subprocess.PIPE)[0]
    others = railyardd([0, 2, 3])
    try:
        ids = graph_ids(relay, 4)
        problems = []
        _, rss0 = proc_stat(relay.pid)
        # 1) An idle flood: no buffers, a cap per source address, an idle timeout.
        f = subprocess.Popen(["ip", "netns", "exec", NS[0], sys.executable, "-c", IDLE_FLOOD, address_of(1, 0),
                              str(RELAY_PORT), str(flood), str(flood - cap)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = f.stdout.readline().split()  # the relay accepted them all by now
        at_once, told = int(line[1]), int(line[2])
        _, rss1 = proc_stat(relay.pid)
        f.stdin.write("go\n")
        f.stdin.flush()
        line = f.stdout.readline().split()
        all_closed, secs = int(line[1]), float(line[2])
        f.wait(timeout=30)
        grew = (rss1 - rss0) / 2**20
        print(f"{flood} idle sockets: relay RSS {rss0 / 2**20:.1f} -> {rss1 / 2**20:.1f} MiB; "
              f"{at_once} closed at once (cap {cap}), {told} of them with the reason; all {all_closed} closed "
              f"after {secs:.1f} s "
              f"(RAILYARD_RELAY_IDLE_MS={idle_ms})")
        if grew > 64:
            problems.append(f"{flood} idle sockets grew the relay by {grew:.0f} MiB: buffers before any data")
        if at_once != flood - cap:
            problems.append(f"{at_once} of {flood} sockets were closed at once, expected {flood - cap} over the "
                            f"cap of {cap}")
        # The relay explains a refusal (a reject record naming the variable, then a FIN)
        # to as many at once as it keeps refusing sockets for; the rest are reset.
        if told == 0:
            problems.append("no socket over the cap was told why (RAILYARD_RELAY_MAX_PER_PEER in a reject record)")
        if all_closed != flood or secs > idle_ms / 1000 + 5:
            problems.append(f"{all_closed} of {flood} idle sockets were closed within {secs:.1f} s "
                            f"(idle timeout {idle_ms} ms)")
        # 2) The origin resets while the onward connect is pending (SYNs dropped at h2):
        # the relay must not spin.
        port = 40090
        nft = f"table inet rytest {{\n chain in {{\n  type filter hook input priority 0;\n  tcp dport {port} drop\n }}\n}}\n"
        subprocess.run(["ip", "netns", "exec", NS[2], "nft", "-f", "-"], input=nft, text=True, check=True)
        try:
            p = subprocess.Popen(["ip", "netns", "exec", NS[0], sys.executable, "-c", PENDING_RESET, address_of(1, 0),
                                  str(RELAY_PORT), (relay_record(ids["h2"], port) + HELLO_HEADER).hex()],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if p.stdout.readline().strip() != "sent":
                fail("could not send the record")
            poll_until(lambda: f":{port}" in subprocess.run(["ip", "netns", "exec", NS[1], "ss", "-Htn", "state",
                                                            "syn-sent"], capture_output=True, text=True).stdout,
                       "the relay's onward connect to be pending", timeout=10)
            p.stdin.write("go\n")
            p.stdin.flush()
            p.stdout.readline()
            p.wait(timeout=10)
            cpu0, _ = proc_stat(relay.pid)
            w0 = time.monotonic()
            time.sleep(2.0)  # the measurement window itself, not a barrier
            cpu1, _ = proc_stat(relay.pid)
            wall = time.monotonic() - w0
            used = cpu1 - cpu0
            print(f"after the reset during a pending connect: relay used {used:.2f} s CPU in {wall:.2f} s wall")
            if used > 0.25 * wall:
                problems.append(f"the relay spun: {used:.2f} s CPU in {wall:.2f} s wall")
        finally:
            subprocess.run(["ip", "netns", "exec", NS[2], "nft", "delete", "table", "inet", "rytest"])
        if relay.poll() is not None:
            problems.append("railyardd on h1 died")
        if problems:
            fail("\n".join(problems))
        print("ok: bounded relay")
    finally:
        stop([relay] + others)


CASES = {
    "relay-churn": case_relay_churn,
    "relay-daemon-takes-over": case_relay_daemon_takes_over,
    "second-railyardd": case_second_railyardd,
    "relay-sigterm-drains": case_relay_sigterm_drains,
    "relay-hostile-records": case_relay_hostile_records,
    "relay-authenticated": case_relay_authenticated,
    "relay-bounded": case_relay_bounded,
}

if __name__ == "__main__":
    CASES[CASE]()
