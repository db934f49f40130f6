#!/usr/bin/env python3
"""Cabling trust and stability on the ring4x2 netns lane (run inside `testbed.sh run`).

railyardd serves on every host (printing its graph as JSON at every change); a
forger in h1's namespace speaks the cabling protocol (version 2, see
topology/cabling_agent.h) on h1's rails of the cable to h0. Each case checks what
h0 (and the others) print, for every graph they print:

  forge        no key: a record for h3 with a sequence 2^62 ahead, a record for h3
               from a made-up speaker that points h3's cable at the forger's
               address, hellos claiming h3's address, version-1 hellos: h0's route
               to h3 stays direct over h3's real addresses in every print, and each
               refusal is logged (naming both versions for the old one).
  forge-keyed  every railyardd has RAILYARD_CLUSTER_KEY_FILE; the forger, keyless,
               sends the same with a wrong MAC and with none: refused, logged at
               most once per 10 s per kind, and no print changes.
  names        a record whose host name is not UTF-8, and h2 named 16 x "é": every
               railyardd stays up, JSON parses, the names arrive as "bad??" and 15 x "é".
  flood        7500 records from 7500 made-up hosts in 5 s: no print of h0's graph
               loses a real rail-link, and the made-up hosts expire afterwards.
  churn        (issue 8.4) short-lived processes with a cabling agent start and stop:
               8 railyardd --wait-hosts on h1, then 3 two-rank railyard-perf jobs
               (the plugin in fabric mode) between h1 and h2: the other daemons
               never print a graph after the ring formed (no host unreachable, no
               flap), and log the shape once.

Usage: cabling_trust.py CASE RAILYARDD [RAILYARD_PERF LIBDIR]
       cabling_trust.py forger ACTION JSON   (internal: runs in h1's namespace)
"""
import hashlib
import hmac
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

PORT = 29517
MAGIC = 0x42435952
VERSION = 2
HELLO, RECORD = 1, 2
HDR = "<IHHQQQIIII32s"  # magic version kind origin speaker seq flags body_bytes age_ms reserved host_name
LINK = "<16s16sQIIII"  # ifname peer_ifname peer_host addr peer_addr speed pad
HELLO_BODY = "<16sII"   # ifname addr speed
MAC_PURPOSE = b"railyard.cabling.v2\x00"


def ip4(text):
    return struct.unpack("<I", socket.inet_aton(text))[0]  # network order as the agent stores it


def datagram(kind, origin, speaker, seq, name, body, key=None, bad_mac=False):
    flags = 1 if (key is not None or bad_mac) else 0
    h = struct.pack(HDR, MAGIC, VERSION, kind, origin, speaker, seq, flags, len(body), 0, 0, name[:31])
    d = h + body
    if key is not None:
        d += hmac.new(key, MAC_PURPOSE + d, hashlib.sha256).digest()
    elif bad_mac:
        d += os.urandom(32)
    return d


def record_body(links):
    b = struct.pack("<II", len(links), 0)
    for (ifn, pifn, peer, addr, paddr) in links:
        b += struct.pack(LINK, ifn.encode(), pifn.encode(), peer, ip4(addr), ip4(paddr), 10000, 0)
    return b


def parse(d):
    n = struct.calcsize(HDR)
    if len(d) < n:
        return None
    magic, ver, kind, origin, speaker, seq, flags, blen, age, _, name = struct.unpack(HDR, d[:n])
    if magic != MAGIC or ver != VERSION:
        return None
    rec = {"kind": kind, "origin": origin, "speaker": speaker, "seq": seq,
           "name": name.rstrip(b"\0").decode("utf-8", "replace"), "links": []}
    if kind == RECORD:
        count = struct.unpack("<I", d[n:n + 4])[0]
        for i in range(count):
            o = n + 8 + i * 56
            ifn, pifn, peer, addr, paddr, _, _ = struct.unpack(LINK, d[o:o + 56])
            rec["links"].append({"ifname": ifn.rstrip(b"\0").decode(), "peer_ifname": pifn.rstrip(b"\0").decode(),
                                 "peer_host": peer})
    return rec


# ---------------------------------------------------------------- the forger (in h1's namespace)

def forger(action, args):
    socks = []
    for ifname in args["ifnames"]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        s.bind(("0.0.0.0", PORT))
        s.settimeout(0.2)
        socks.append(s)
    out = socks[0]  # rail 0 of the cable to h0: its address is the forger's

    def send(d):
        out.sendto(d, ("255.255.255.255", PORT))

    # Learn h3's real host id and speaker from the records h0 floods to h1.
    h3 = None
    deadline = time.monotonic() + 10
    while h3 is None and time.monotonic() < deadline:
        try:
            d = socks[0].recv(65536)
        except socket.timeout:
            continue
        r = parse(d)
        if r and r["kind"] == RECORD and r["name"] == "h3" and r["links"]:
            h3 = r
    if h3 is None:
        print(json.dumps({"error": "no record of h3 heard on h1's rail to h0"}))
        return 1
    sent = 0
    me = args["forger_ip"]
    bad_mac = args.get("bad_mac", False)
    if action in ("forge", "forge-keyed"):
        # h3's links as h3 reports them, but every address the forger's.
        fake_links = [(l["ifname"], l["peer_ifname"], l["peer_host"], me, me) for l in h3["links"]]
        end = time.monotonic() + args["seconds"]
        fresh = random.getrandbits(63) | 1
        seq = 1
        while time.monotonic() < end:
            for mac in ([True, False] if bad_mac else [False]):
                # 1. h3's own speaker, 2^62: must be refused as far in the future.
                send(datagram(RECORD, h3["origin"], h3["speaker"], 1 << 62, b"h3", record_body(fake_links), bad_mac=mac))
                # 2. a made-up speaker for h3 pointing h3's cable at the forger.
                send(datagram(RECORD, h3["origin"], fresh, seq, b"h3", record_body(fake_links), bad_mac=mac))
                # 3. a hello for h3 claiming h3's real address from the forger's.
                body = struct.pack(HELLO_BODY, b"p0r0", ip4(args["h3_ip"]), 10000)
                send(datagram(HELLO, h3["origin"], fresh, seq, b"h3", body, bad_mac=mac))
                # 4. a version-1 hello (the layout before speakers and MACs).
                send(struct.pack("<IHHQQ32s", MAGIC, 1, HELLO, h3["origin"], 0, b"h3") + body)
                sent += 4
            seq += 1
            time.sleep(0.02)
    elif action == "names":
        origin = random.getrandbits(63) | 1
        for seq in range(1, 30):
            send(datagram(RECORD, origin, 7, seq, b"bad\xff\xfe", record_body([])))
            sent += 1
            time.sleep(0.05)
    elif action == "flood":
        # 7500 records from 7500 made-up hosts in 5 s, each claiming a cable to h0.
        h0 = next(l["peer_host"] for l in h3["links"])
        start = time.monotonic()
        for i in range(7500):
            origin = random.getrandbits(63) | 1
            send(datagram(RECORD, origin, 1, 1, b"fake%d" % i,
                          record_body([("p0r0", "p0r0", h0, me, args["h0_ip"])])))
            sent += 1
            target = start + (i + 1) * 5.0 / 7500
            while time.monotonic() < target:
                pass
    print(json.dumps({"sent": sent, "h3": {"origin": h3["origin"], "speaker": h3["speaker"]}}))
    return 0


# ---------------------------------------------------------------- the test

class Daemon:
    """railyardd in a host namespace, its JSON prints collected with the time each arrived."""

    def __init__(self, host, ns, railyardd, extra_env=None, args=()):
        env = dict(os.environ, RAILYARD_HOST_NAME=f"h{host}", RAILYARD_SOCKET_IFNAME="^mgmt0", RAILYARD_DEBUG="WARN")
        env.update(extra_env or {})
        self.host = host
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, railyardd, "--no-relay", *args], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.prints, self.errors = [], []
        self.lock = threading.Lock()
        threading.Thread(target=self._out, daemon=True).start()
        threading.Thread(target=self._err, daemon=True).start()

    def _out(self):
        buf = []
        for line in self.p.stdout:
            buf.append(line)
            if line == b"}\n":
                g = json.loads(b"".join(buf).decode("utf-8"))
                with self.lock:
                    self.prints.append((time.monotonic(), g))
                buf = []

    def _err(self):
        for line in self.p.stderr:
            with self.lock:
                self.errors.append((time.monotonic(), line.decode("utf-8", "replace").rstrip()))

    def snapshot(self):
        with self.lock:
            return list(self.prints), list(self.errors)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
        return self.p.returncode


def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def full_ring(g):
    return g["shape"] == "ring" and len(g["hosts"]) == 4 and all(r["hops"] > 0 for r in g["routes"])


def links_between(g, x, y):
    return {tuple(sorted([(l["a"]["name"], l["a"]["ifname"], l["a"]["address"]),
                          (l["b"]["name"], l["b"]["ifname"], l["b"]["address"])]))
            for l in g["links"] if {l["a"]["name"], l["b"]["name"]} == {x, y}}


def main():
    if sys.argv[1] == "forger":
        return forger(sys.argv[2], json.loads(sys.argv[3]))
    case, railyardd = sys.argv[1], sys.argv[2]
    tb = json.load(open(os.environ["TESTBED_JSON"]))
    ns = [h["namespace"] for h in tb["hosts"]]
    cable01 = [r for r in tb["rails"] if {r["host"], r["peer_host"]} == {0, 1}]
    cable30 = [r for r in tb["rails"] if {r["host"], r["peer_host"]} == {0, 3}]

    def side(r, h):  # (ifname, ip) of rail r on host h
        return (r["ifname"], r["ip"]) if r["host"] == h else (r["peer_ifname"], r["peer_ip"])
    forger_ifs = [side(r, 1)[0] for r in cable01]
    forger_ip = side(cable01[0], 1)[1]
    h3_ips = sorted(side(r, 3)[1] for r in cable30)
    h0_ip = side(cable01[0], 0)[1]

    env, keydir = {}, None
    if case == "churn":
        # The newcomer's record must lose by logic, not by timing: with a long dead
        # interval a loaded test machine's scheduling stalls cannot age a cable out.
        env["RAILYARD_DISCOVERY_DEAD_MS"] = "4000"
    if case == "forge-keyed":
        keydir = f"/tmp/{os.environ.get('TESTBED_PREFIX', 'ry')}-key"
        os.makedirs(keydir, exist_ok=True)
        path = os.path.join(keydir, "cluster.key")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        env["RAILYARD_CLUSTER_KEY_FILE"] = path

    daemons = []
    for i in range(4):
        args = ["--host-name", "\u00e9" * 16] if (case == "names" and i == 2) else []
        daemons.append(Daemon(i, ns[i], railyardd, env, args))
    failures = []
    try:
        names_ok = case == "names"
        # Formed: a ring with every rail-link of the lane (tb["rails"]: one per cable rail),
        # not only every host reachable: on a loaded machine the second rail of a cable
        # was heard after the first, and that print counted as a change after formation
        # (churn failed: h0, h2 and h3 each printed one graph "after the ring formed").
        rail_links = len(tb["rails"])
        def formed(d):
            return any((names_ok and len(g["hosts"]) == 4 and g["shape"] == "ring") or
                       (full_ring(g) and len(g["links"]) >= rail_links)
                       for _, g in d.snapshot()[0])
        if not wait_until(lambda: all(formed(d) for d in daemons), 20):
            for d in daemons:
                prints, errs = d.snapshot()
                failures.append(f"h{d.host}: ring not formed in 20 s ({len(prints)} prints; stderr {errs[-3:]})")
            raise StopIteration
        t_formed = time.monotonic()

        fargs = {"ifnames": forger_ifs, "forger_ip": forger_ip, "h3_ip": h3_ips[0], "h0_ip": h0_ip,
                 "seconds": 3, "bad_mac": case == "forge-keyed"}
        if case == "churn":
            starts = 0
            for k in range(8):
                # A short-lived process of this host's cabling agent (as a rank's plugin
                # starts one): knows no neighbour at first, exits after a moment.
                p = subprocess.run(["ip", "netns", "exec", ns[1], railyardd, "--no-relay", "--wait-hosts", "4",
                                    "--settle-ms", "0", "--linger-ms", str(100 + 50 * k), "--timeout-ms", "10000"],
                                   env=dict(os.environ, RAILYARD_HOST_NAME="h1", RAILYARD_SOCKET_IFNAME="^mgmt0",
                                            **env),
                                   capture_output=True, timeout=30)
                starts += 1
                if p.returncode != 0:
                    failures.append(f"churn process {k} on h1 exited {p.returncode}: {p.stderr.decode()[-300:]}")
            if len(sys.argv) > 4:
                perf, libdir = sys.argv[3], sys.argv[4]
                mgmt = [h["mgmt_ip"] for h in tb["hosts"]]
                for k in range(3):
                    root = f"{mgmt[1]}:{random.randint(30000, 39000)}"
                    ranks = [subprocess.Popen(
                        ["ip", "netns", "exec", ns[h], perf, "--rank", str(r), "--nranks", "2", "--root", root,
                         "-p", "sendrecv", "-T", "30", "-b", "1K", "-e", "64K", "-n", "2", "-c", "1"],
                        env=dict(os.environ, RAILYARD_HOST_NAME=f"h{h}", RAILYARD_SOCKET_IFNAME="^mgmt0",
                                 RAILYARD_FABRIC="on", NCCL_NET_PLUGIN="railyard", LD_LIBRARY_PATH=libdir, **env),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r, h in enumerate([1, 2])]
                    for r, p in enumerate(ranks):
                        out, err = p.communicate(timeout=60)
                        starts += 1
                        if p.returncode != 0:
                            failures.append(f"perf job {k} rank {r} exited {p.returncode}: {err.decode()[-300:]}")
            # Watch past the last one's record expiring at the others (dead interval 4 s):
            # an observation window (nothing may be printed in it), not a barrier.
            wait_until(lambda: False, 5)
        else:
            f = subprocess.run(["ip", "netns", "exec", ns[1], sys.executable, os.path.abspath(__file__),
                                "forger", case, json.dumps(fargs)], capture_output=True, timeout=60)
            if f.returncode != 0:
                failures.append(f"forger: exit {f.returncode}: {f.stdout.decode()} {f.stderr.decode()[-500:]}")
                raise StopIteration
            print("forger:", f.stdout.decode().strip())
            wait_until(lambda: False, 1.5)  # a bounded observation window after the forger stops

        for d in daemons:
            if d.p.poll() is not None:
                failures.append(f"h{d.host}: railyardd died (exit {d.p.returncode}): {d.snapshot()[1][-3:]}")
        prints0, errs0 = daemons[0].snapshot()
        after = [(t, g) for t, g in prints0 if t > t_formed]

        if case in ("forge", "forge-keyed"):
            bad = 0
            for t, g in [p for p in prints0 if full_ring(p[1])] + after:
                r3 = [r for r in g["routes"] if r["name"] == "h3"]
                addrs = sorted(d["peer_address"] for d in r3[0]["direct"]) if r3 else []
                if not r3 or r3[0]["hops"] != 1 or addrs != h3_ips:
                    bad += 1
                    if bad <= 3:
                        failures.append(f"h0 -> h3 became {r3} (expected direct over {h3_ips})")
            if bad:
                failures.append(f"{bad} of {len(prints0)} h0 prints had a wrong route to h3")
            refusals = [e for _, e in errs0 if "cabling: refused" in e]
            kinds = ["unauthenticated"] if case == "forge-keyed" else ["future-sequence", "misaddressed-hello"]
            kinds.append("protocol version 1")  # the log names both versions
            for k in kinds:
                n = sum(1 for e in refusals if k in e)
                if n == 0:
                    failures.append(f"h0 logged no '{k}' refusal; stderr: {[e for _, e in errs0][-5:]}")
                if n > 2:  # 3 s of forging: one line, at most two (10 s throttle)
                    failures.append(f"h0 logged {n} '{k}' lines in 3 s (not rate-limited)")
            # Keyed: all refused; unkeyed: the real speakers' claims stand. A print after
            # the ring formed may only add real links (a cable's second rail heard late,
            # under CI load); a link or host the testbed does not have is the forger's.
            real = {tuple(sorted([(f"h{r['host']}", r["ifname"], r["ip"]),
                                  (f"h{r['peer_host']}", r["peer_ifname"], r["peer_ip"])])) for r in tb["rails"]}
            for t, g in after:
                links = {tuple(sorted([(l["a"]["name"], l["a"]["ifname"], l["a"]["address"]),
                                       (l["b"]["name"], l["b"]["ifname"], l["b"]["address"])])) for l in g["links"]}
                hosts = {h["name"] for h in g["hosts"]} - {f"h{i}" for i in range(4)}
                if links - real or hosts:
                    failures.append(f"h0 printed a graph with the forger's claims: links {sorted(links - real)}, "
                                    f"hosts {sorted(hosts)}")
            print(f"{case}: h0 printed {len(prints0)} graphs, {len(after)} after the ring formed, "
                  f"route to h3 direct over {h3_ips} in all; refusals logged: {len(refusals)}")
        elif case == "names":
            last = prints0[-1][1] if prints0 else {}
            names = {h["name"] for g in [g for _, g in prints0] for h in g["hosts"]}
            if "bad??" not in names:
                failures.append(f"h0 never showed the forged host as 'bad??': {sorted(names)}")
            if "\u00e9" * 15 not in names:
                failures.append(f"h0 never showed h2 as 15 x e-acute: {sorted(names)}")
            print(f"names: all 4 daemons alive, h0 saw {sorted(names)}; last print {len(last.get('hosts', []))} hosts")
        elif case == "flood":
            # The lane's rail-links, not h0's first ring print: that print may lack a
            # cable's second rail (heard late under CI load), and every later print,
            # which has it, then counted as one that "lost" a link.
            def lane_links(x, y):
                return {tuple(sorted([(f"h{r['host']}", r["ifname"], r["ip"]),
                                      (f"h{r['peer_host']}", r["peer_ifname"], r["peer_ip"])]))
                        for r in tb["rails"] if {f"h{r['host']}", f"h{r['peer_host']}"} == {x, y}}
            real01, real03 = lane_links("h0", "h1"), lane_links("h0", "h3")
            lost = 0
            for _, g in after:
                now01, now03 = links_between(g, "h0", "h1"), links_between(g, "h0", "h3")
                if now01 != real01 or now03 != real03:
                    lost += 1
                    if lost == 1:
                        failures.append(f"first print that lost a link: h0-h1 {sorted(now01)} (was {sorted(real01)}), "
                                        f"h0-h3 {sorted(now03)} (was {sorted(real03)})")
            most = max((len(g["hosts"]) for _, g in after), default=4)
            if lost:
                failures.append(f"{lost} of {len(after)} h0 prints during the flood lost a real rail-link")
            if not wait_until(lambda: len(daemons[0].snapshot()[0][-1][1]["hosts"]) == 4, 5):
                failures.append("the made-up hosts did not expire within 5 s of the flood's end")
            print(f"flood: {len(after)} h0 prints during/after the flood, {lost} lost a real link; "
                  f"at most {most} hosts held; made-up hosts expired")
        elif case == "churn":
            for d in daemons:
                if d.host == 1:
                    continue
                prints, errs = d.snapshot()
                late = [g for t, g in prints if t > t_formed]
                unreach = [r["name"] for g in late for r in g["routes"] if r["hops"] == 0]
                shapes = [e for _, e in errs if "cluster shape" in e]
                if late:
                    failures.append(f"h{d.host}: {len(late)} graph print(s) after the ring formed "
                                    f"(unreachable: {sorted(set(unreach))})")
                if sum(1 for e in shapes if "cluster shape ring" in e) != 1:
                    failures.append(f"h{d.host}: shape lines {shapes}")
            print(f"churn: {starts} short-lived agents on h1; prints after formation: "
                  f"{[len([1 for t, _ in d.snapshot()[0] if t > t_formed]) for d in daemons]}")
    except StopIteration:
        pass
    finally:
        for d in daemons:
            d.stop()
        if keydir:
            for f in os.listdir(keydir):
                os.remove(os.path.join(keydir, f))
            os.rmdir(keydir)
    if failures:
        print(f"cabling trust {case}: {len(failures)} failure(s)")
        for f in failures:
            print("  " + f)
        return 1
    print(f"cabling trust {case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
